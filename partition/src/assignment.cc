// An assignment computed elsewhere (ParMETIS, KaHIP, KaMinPar, a user's own): gpmetis's .part.K
// text, or a 1-D int32/int64 NumPy .npy, validated before any part is written.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "halo/graph/error.h"
#include "halo/graph/input.h"
#include "halo/graph/text.h"
#include "halo/partition/partition.h"

namespace halo {
namespace fs = std::filesystem;

namespace {

// The one-line error every problem of the file gives.
[[noreturn]] void bad(const fs::path& file, const std::string& what) {
  throw InputError(file.string() + ": " + what);
}

// Checks one id (record: what names its place in the file).
PartId checked_part(std::int64_t p, int k, const fs::path& file, const std::string& record) {
  if (p < 0 || p >= k)
    bad(file, record + ": part " + std::to_string(p) + " is outside [0, " + std::to_string(k) +
                  ") for -k " + std::to_string(k));
  return PartId(p);
}

std::string count_mismatch(std::int64_t found, std::int64_t n) {
  return "has " + std::to_string(found) + " part ids, expected one per node of the dataset (" +
         std::to_string(n) + ")";
}

std::vector<PartId> read_text(const fs::path& file, std::int64_t n, int k) {
  std::vector<PartId> owner;
  owner.reserve(std::size_t(n));
  for_each_line(file, [&](LineCursor& c) {
    if (c.blank()) c.fail("expected a part id, found an empty line");
    const std::int64_t p = c.next_int("the part id");
    c.expect_end(1);
    if (std::int64_t(owner.size()) == n)
      c.fail("more part ids than the dataset's " + std::to_string(n) + " nodes");
    owner.push_back(checked_part(p, k, file, "line " + std::to_string(c.line())));
  });
  if (std::int64_t(owner.size()) != n) bad(file, count_mismatch(std::int64_t(owner.size()), n));
  return owner;
}

// The value of 'key': in a .npy header dict (text up to the next ',' or '}' outside parens).
std::string npy_field(const std::string& header, const std::string& key, const fs::path& file) {
  const std::size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) bad(file, "the .npy header has no '" + key + "'");
  std::size_t p = header.find(':', at);
  if (p == std::string::npos) bad(file, "the .npy header's '" + key + "' has no value");
  ++p;
  int depth = 0;
  std::size_t e = p;
  for (; e < header.size(); ++e) {
    if (header[e] == '(') ++depth;
    if (header[e] == ')') --depth;
    if (depth == 0 && (header[e] == ',' || header[e] == '}')) break;
  }
  std::string v = header.substr(p, e - p);
  const std::size_t b = v.find_first_not_of(" \t'\"");
  const std::size_t l = v.find_last_not_of(" \t'\"");
  return b == std::string::npos ? std::string() : v.substr(b, l - b + 1);
}

std::vector<PartId> read_npy(const fs::path& file, std::int64_t n, int k) {
  // A regular file only: a FIFO is refused by open_input before the blocking open below.
  ::close(open_input(file));
  std::ifstream in(file, std::ios::binary);
  if (!in) throw SystemError(file.string() + ": cannot open: " + std::strerror(errno));
  char magic[8] = {};
  in.read(magic, 8);
  if (in.gcount() != 8 || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    bad(file, "not a NumPy .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  if (major < 1 || major > 3) bad(file, "unknown .npy format version " + std::to_string(major));
  unsigned char len[4] = {};
  in.read(reinterpret_cast<char*>(len), major == 1 ? 2 : 4);
  const std::size_t header_len =
      major == 1 ? std::size_t(len[0] | len[1] << 8)
                 : std::size_t(len[0] | len[1] << 8 | len[2] << 16 | std::size_t(len[3]) << 24);
  if (!in || header_len > (1u << 20)) bad(file, "truncated or oversized .npy header");
  std::string header(header_len, '\0');
  in.read(header.data(), std::streamsize(header_len));
  if (std::size_t(in.gcount()) != header_len) bad(file, "truncated .npy header");
  const std::string descr = npy_field(header, "descr", file);
  std::size_t width = 0;
  if (descr == "<i4" || descr == "|i4" || (descr == "=i4"))
    width = 4;
  else if (descr == "<i8" || descr == "|i8" || descr == "=i8")
    width = 8;
  else
    bad(file, "dtype '" + descr + "', expected little-endian int32 or int64 part ids");
  // fortran_order does not matter: (n,) and (n, 1) lay their elements out the same either way.
  std::string shape = npy_field(header, "shape", file);
  // (N,) or (N, 1): one id per node.
  shape.erase(std::remove_if(shape.begin(), shape.end(), [](char ch) { return ch == ' '; }),
              shape.end());
  const std::string expect = "(" + std::to_string(n) + ",)";
  if (shape != expect && shape != "(" + std::to_string(n) + ",1)")
    bad(file, "shape " + shape + ", expected " + expect + ": one part id per node of the dataset");
  std::vector<PartId> owner(static_cast<std::size_t>(n));
  std::vector<char> buf(std::size_t(1) << 20);
  std::int64_t done = 0;
  while (done < n) {
    const std::int64_t take = std::min<std::int64_t>(n - done, std::int64_t(buf.size() / width));
    in.read(buf.data(), std::streamsize(std::size_t(take) * width));
    if (std::size_t(in.gcount()) != std::size_t(take) * width)
      bad(file, "truncated: the data ends before element " + std::to_string(done) + " of " +
                    std::to_string(n));
    for (std::int64_t i = 0; i < take; ++i) {
      std::int64_t v = 0;
      if (width == 4) {
        std::int32_t x = 0;
        std::memcpy(&x, buf.data() + std::size_t(i) * 4, 4);
        v = x;
      } else {
        std::memcpy(&v, buf.data() + std::size_t(i) * 8, 8);
      }
      owner[std::size_t(done + i)] =
          checked_part(v, k, file, "element " + std::to_string(done + i));
    }
    done += take;
  }
  if (in.peek() != std::char_traits<char>::eof())
    bad(file, "has data after its " + std::to_string(n) + " elements");
  return owner;
}

}  // namespace

std::vector<PartId> read_assignment(const fs::path& file, std::int64_t n, int k) {
  if (fs::is_directory(file)) bad(file, "is a directory, expected an assignment file");
  std::vector<PartId> owner =
      file.extension() == ".npy" ? read_npy(file, n, k) : read_text(file, n, k);
  std::vector<std::int64_t> count(std::size_t(k), 0);
  for (PartId p : owner) ++count[std::size_t(p)];
  for (int p = 0; p < k; ++p)
    if (count[std::size_t(p)] == 0)
      bad(file, "part " + std::to_string(p) + " has no node; every part of -k " +
                    std::to_string(k) + " needs at least one");
  return owner;
}

}  // namespace halo
