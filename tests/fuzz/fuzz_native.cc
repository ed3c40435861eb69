// libFuzzer target: native datasets and part folders, as `halo info`, `partition` and `train`
// open them. A small generated dataset and its 2-part partition are made once; each input picks
// a folder (dataset or part-0) and one of its files, and either replaces the file's bytes, or
// patches its payload and then fixes its checksums — in the array header, in meta.json and the
// fingerprint — as a corruption that checksums cannot see would (an index of -1, offsets that
// decrease, split ids out of range): the structure checks must catch those.
// Mode 3 nests: one of meta.json's fields becomes arrays and objects nested up to ~260,000
// deep (a few input bytes say how deep), which no byte-level mutation reaches: every reader
// must refuse it in one line, not overflow its stack (issue 35, class 1).
//   byte 0: bit 0 dataset / part-0; bits 1-2 mode: 0 replace, 1 patch + fix checksums,
//           2 patch the 64-byte header only, 3 nest a meta.json field
//   byte 1: which file (sorted names, meta.json included; mode 3: which top-level field)
//   rest:   the new bytes (replace), or (u16 offset, u8 value) triples (patches), or
//           (mode 3) u16 depth / 4, then bits choosing '[' or '{"k":' per level (cycled),
//           and a last byte whose bit 0 leaves the nest unclosed
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "fuzz_util.h"
#include "halo/graph/array_file.h"
#include "halo/graph/dataset.h"
#include "halo/graph/generate.h"
#include "halo/graph/summary.h"
#include "halo/partition/partition.h"
#include "halo/partition/parts.h"

namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

// The pristine dataset and parts, made once per process.
const fs::path& base() {
  static const fs::path dir = [] {
    const fs::path d = halo::fuzz::scratch() / "base";
    halo::GenerateOptions g;
    g.nodes = 120;
    g.avg_degree = 4;
    g.features = 3;
    g.classes = 3;
    g.seed = 1;
    halo::generate(d / "dataset", g);
    halo::PartitionOptions p;
    p.k = 2;
    p.method = halo::PartitionMethod::kRandom;
    halo::partition_dataset(d / "dataset", d / "parts", p, false);
    return d;
  }();
  return dir;
}

std::vector<char> read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void write_all(const fs::path& p, const std::vector<char>& b) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(b.data(), std::streamsize(b.size()));
}

// Recomputes an array file's payload checksum into its header and into the folder's meta.json
// (and the folder's fingerprint, as ArrayDir::write_meta computes it).
void fix_checksums(const fs::path& folder, const fs::path& file, std::vector<char>& bytes) {
  if (bytes.size() < halo::kArrayHeaderBytes) return;
  const uLong crc =
      crc32(0L, reinterpret_cast<const Bytef*>(bytes.data() + halo::kArrayHeaderBytes),
            uInt(bytes.size() - halo::kArrayHeaderBytes));
  const std::uint64_t c = crc;
  std::memcpy(bytes.data() + 32, &c, 8);
  json meta = json::parse(read_all(folder / "meta.json"), nullptr, false);
  if (!meta.is_object() || !meta.contains("arrays")) return;
  uLong fp = crc32(0L, Z_NULL, 0);
  for (auto& [name, entry] : meta["arrays"].items()) {
    if (entry.value("file", "") == file.filename().string()) entry["crc32"] = std::uint32_t(crc);
    const std::string key = name + ":" + std::to_string(entry.value("crc32", 0u));
    fp = crc32(fp, reinterpret_cast<const Bytef*>(key.data()), uInt(key.size()));
  }
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08lx", fp);
  meta["fingerprint"] = hex;
  const std::string text = meta.dump();
  write_all(folder / "meta.json", std::vector<char>(text.begin(), text.end()));
}

// Arrays and objects nested as rest says (see the header): depth (rest[0] | rest[1] << 8) * 4,
// each level '[' or '{"k":' by the bits of rest[2..n-1), closed unless rest[n-1] is odd.
std::string nest(const std::uint8_t* rest, std::size_t n) {
  const std::size_t depth = (std::size_t(rest[0]) | std::size_t(rest[1]) << 8) * 4;
  const std::uint8_t* bits = rest + 2;
  const std::size_t nbits = n > 3 ? (n - 3) * 8 : 0;
  std::string open, close;
  for (std::size_t i = 0; i < depth; ++i) {
    const bool object = nbits > 0 && (bits[(i % nbits) / 8] >> (i % 8) & 1);
    open += object ? "{\"k\":" : "[";
    close += object ? '}' : ']';
  }
  if (n > 2 && (rest[n - 1] & 1)) return open;
  std::reverse(close.begin(), close.end());
  return open + "0" + close;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  // The work copy is made once; each input then restores only what the previous one changed.
  const fs::path work = halo::fuzz::scratch() / "work";
  static std::vector<fs::path> touched;
  if (!fs::exists(work)) fs::copy(base(), work, fs::copy_options::recursive);
  for (const fs::path& rel : touched)
    fs::copy_file(base() / rel, work / rel, fs::copy_options::overwrite_existing);
  touched.clear();
  const bool part = data[0] & 1;
  const int mode = (data[0] >> 1) & 3;
  const fs::path folder = part ? work / "parts" / "part-0" : work / "dataset";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(folder))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  const fs::path file = files[data[1] % files.size()];
  std::vector<char> bytes = read_all(file);
  const std::uint8_t* rest = data + 2;
  const std::size_t n = size - 2;
  if (mode == 3) {
    // meta.json is rewritten below.
  } else if (mode == 0) {
    bytes.assign(reinterpret_cast<const char*>(rest), reinterpret_cast<const char*>(rest) + n);
  } else {
    const std::size_t from = mode == 2 ? 0 : halo::kArrayHeaderBytes;
    const std::size_t span =
        mode == 2 ? halo::kArrayHeaderBytes : bytes.size() - std::min(bytes.size(), from);
    for (std::size_t i = 0; i + 3 <= n && span > 0; i += 3) {
      const std::size_t at = from + (std::size_t(rest[i]) | std::size_t(rest[i + 1]) << 8) % span;
      if (at < bytes.size()) bytes[at] = char(rest[i + 2]);
    }
  }
  const fs::path rel_folder = fs::relative(folder, work);
  touched = {rel_folder / file.filename(), rel_folder / "meta.json"};
  if (mode == 3) {
    if (n < 2) return 0;
    const fs::path meta_path = folder / "meta.json";
    const std::vector<char> text = read_all(meta_path);
    const std::string nested = nest(rest, n);
    std::string out(text.begin(), text.end());
    // The value of the chosen top-level key ("key": VALUE, or "key": VALUE}) is replaced.
    std::vector<std::size_t> keys;  // offsets just after each top-level "key":
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const char c = out[i];
      if (in_string) {
        if (c == '\\')
          ++i;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        --depth;
      } else if (c == ':' && depth == 1) {
        keys.push_back(i + 1);
      }
    }
    if (keys.empty()) return 0;
    const std::size_t at = keys[data[1] % keys.size()];
    std::size_t end = at;  // the value's end: the next ',' or '}' at depth 1
    depth = 1;
    in_string = false;
    for (; end < out.size(); ++end) {
      const char c = out[end];
      if (in_string) {
        if (c == '\\')
          ++end;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        break;
      } else if (c == ',' && depth == 1) {
        break;
      }
    }
    out.replace(at, end - at, nested);
    write_all(meta_path, std::vector<char>(out.begin(), out.end()));
  } else {
    write_all(file, bytes);
  }
  if (mode == 1 && file.extension() == ".bin") {
    fix_checksums(folder, file, bytes);
    write_all(file, bytes);
  }
  halo::fuzz::expect_clean([&] {
    if (part) {
      (void)halo::read_parts_meta(work / "parts");
      (void)halo::read_part(work / "parts", 0);
    } else {
      (void)halo::read_graph_dataset(work / "dataset");
      (void)halo::summarize_dataset(work / "dataset");
    }
  });
  return 0;
}
