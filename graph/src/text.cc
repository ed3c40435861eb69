// LineReader: a producer thread reads the file and (for gzip) inflates it into blocks of whole
// lines; the consumer parses one block while the next is being produced. Blocks are recycled
// so memory stays at a few blocks whatever the file size, and one line is at most
// kMaxLineBytes, so a file without newlines ends with an error, not with all of memory.
#include "halo/graph/text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace halo {
namespace {

constexpr std::size_t kBlockBytes = 4 << 20;  // text per block handed to the parser
constexpr std::size_t kReadBytes = 1 << 20;   // file bytes per read()
constexpr std::size_t kQueueDepth = 2;        // blocks produced ahead of the parser

std::string hex_byte(unsigned char b) {
  static const char* kHex = "0123456789abcdef";
  return {kHex[b >> 4], kHex[b & 15]};
}

bool named_gz(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".gz";
}

}  // namespace

struct LineReader::Impl {
  std::filesystem::path path;
  int fd = -1;
  std::uint64_t size = 0;
  bool gz = false;
  std::size_t max_line = kMaxLineBytes;
  std::string head;  // the first bytes, read to sniff the gzip magic, handed out before the rest
  std::atomic<std::uint64_t> read{0};
  std::uint64_t decoded = 0;

  std::mutex m;
  std::condition_variable cv;
  std::deque<std::string> ready;
  std::vector<std::string> spare;
  bool done = false;
  bool stop = false;
  std::exception_ptr error;
  std::string current;
  std::thread worker;

  ~Impl() {
    {
      std::lock_guard<std::mutex> lk(m);
      stop = true;
    }
    cv.notify_all();
    if (worker.joinable()) worker.join();
    if (fd >= 0) ::close(fd);
  }

  // Reads up to n bytes (the sniffed head first); returns 0 at end of file.
  std::size_t read_some(char* buf, std::size_t n) {
    if (!head.empty()) {
      const std::size_t k = std::min(n, head.size());
      std::memcpy(buf, head.data(), k);
      head.erase(0, k);
      return k;
    }
    for (;;) {
      ssize_t r = ::read(fd, buf, n);
      if (r >= 0) {
        read += std::uint64_t(r);
        return std::size_t(r);
      }
      if (errno != EINTR) throw_system(path, "read failed");
    }
  }

  // Hands a block to the consumer; false when the reader is being destroyed.
  bool push(std::string&& block) {
    std::unique_lock<std::mutex> lk(m);
    cv.wait(lk, [&] { return stop || ready.size() < kQueueDepth; });
    if (stop) return false;
    ready.push_back(std::move(block));
    cv.notify_all();
    return true;
  }

  bool stopping() {
    std::lock_guard<std::mutex> lk(m);
    return stop;
  }

  std::string take_spare() {
    std::lock_guard<std::mutex> lk(m);
    if (spare.empty()) return {};
    std::string s = std::move(spare.back());
    spare.pop_back();
    s.clear();
    return s;
  }

  // Appends the next run of text (inflated when gz, through zs with input buffer in) to out;
  // false at end of input. Separate from produce: it is the only code that reads the file.
  bool fill(std::string& out, std::vector<char>& in, z_stream& zs, bool& z_end) {
    if (!gz) {
      const std::size_t old = out.size();
      out.resize(old + kReadBytes);
      const std::size_t n = read_some(out.data() + old, kReadBytes);
      out.resize(old + n);
      return n > 0;
    }
    if (zs.avail_in == 0) {
      const std::size_t n = read_some(in.data(), in.size());
      if (n == 0) {
        if (!z_end)
          throw InputError(path.string() + ": truncated gzip stream: file ends after " +
                           std::to_string(read.load()) + " bytes without the gzip trailer");
        return false;
      }
      zs.next_in = reinterpret_cast<Bytef*>(in.data());
      zs.avail_in = uInt(n);
    }
    if (z_end) {  // another gzip member follows the previous one
      if (inflateReset(&zs) != Z_OK) throw InputError(path.string() + ": zlib reset failed");
      z_end = false;
    }
    const std::size_t old = out.size();
    const std::size_t room = kReadBytes * 4;
    out.resize(old + room);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + old);
    zs.avail_out = uInt(room);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    out.resize(old + room - zs.avail_out);
    if (rc == Z_STREAM_END) {
      z_end = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const std::uint64_t at = read.load() - zs.avail_in;
      throw InputError(path.string() + ": corrupt gzip data near compressed byte " +
                       std::to_string(at) + ": " + (zs.msg ? zs.msg : "inflate error"));
    }
    return true;
  }

  // Refuses a NUL byte or an over-long line in out[old..] (line: number of out's first line)
  // and moves last_nl to the last newline there; separate from produce to keep the block loop
  // short.
  void check_appended(const std::string& out, std::size_t old, std::int64_t line,
                      std::size_t& last_nl) const {
    const char* base = out.data();
    // A search for a zero byte in raw input, not a C string (strchr would stop at it).
    // NOLINTNEXTLINE(bugprone-not-null-terminated-result)
    if (const void* z = std::memchr(base + old, '\0', out.size() - old)) {
      const std::size_t at = std::size_t(static_cast<const char*>(z) - base);
      const std::size_t from = out.rfind('\n', at);
      const std::size_t col = from == std::string::npos ? at + 1 : at - from;
      throw_input(path, line + std::count(out.begin(), out.begin() + std::ptrdiff_t(at), '\n'),
                  "binary data: byte 0x00 in column " + std::to_string(col) + ", expected text" +
                      (gz ? "" : " (a compressed file not named .gz?)"));
    }
    // Only the new bytes are searched: a long line must cost linear time, not quadratic.
    if (const void* nl = ::memrchr(base + old, '\n', out.size() - old))
      last_nl = std::size_t(static_cast<const char*>(nl) - base);
    const std::size_t open_line =
        last_nl == std::string::npos ? out.size() : out.size() - last_nl - 1;
    if (open_line > max_line)
      throw_input(
          path,
          line + (last_nl == std::string::npos ? 0 : std::count(out.begin(), out.end(), '\n')),
          "line longer than " + std::to_string(max_line >> 20) +
              " MiB, the longest halo reads: expected text with newlines");
  }

  void produce() {
    std::vector<char> in(kReadBytes);
    z_stream zs{};
    bool z_open = false;
    bool z_end = false;  // inside a gzip member: false; after its trailer: true
    if (gz) {
      if (inflateInit2(&zs, 15 + 16) != Z_OK)
        throw InputError(path.string() + ": zlib init failed");
      z_open = true;
    }
    struct ZGuard {
      z_stream* zs;
      bool* open;
      ~ZGuard() {
        if (*open) inflateEnd(zs);
      }
    } guard{&zs, &z_open};

    // A block is whole lines: it grows until it holds kBlockBytes and a newline, however long
    // the line that straddles the previous cut is (a METIS hub's adjacency line runs to
    // megabytes), up to max_line bytes in one line. Text never holds a NUL byte; refusing it
    // stops binary files (and /dev/zero) at their first block instead of parsing garbage.
    std::string carry;      // the partial line after the previous block's last newline
    std::int64_t line = 1;  // number of the first line of the block being built
    bool eof = false;
    while (!eof) {
      std::string out = take_spare();
      out.swap(carry);
      carry.clear();
      std::size_t last_nl = std::string::npos;
      while (!eof && (out.size() < kBlockBytes || last_nl == std::string::npos)) {
        if (stopping()) return;
        const std::size_t old = out.size();
        eof = !fill(out, in, zs, z_end);
        check_appended(out, old, line, last_nl);
      }
      if (!eof) {  // keep the partial last line for the next block
        carry.assign(out, last_nl + 1, std::string::npos);
        out.resize(last_nl + 1);
      }
      if (out.empty()) break;
      line += std::count(out.begin(), out.end(), '\n');
      if (!push(std::move(out))) return;
    }
  }
};

LineReader::LineReader(const std::filesystem::path& path, std::size_t max_line_bytes,
                       InputKind kind)
    : path_(path), impl_(new Impl) {
  impl_->path = path;
  impl_->max_line = max_line_bytes;
  impl_->fd = open_input(path, kind);  // a directory, or a FIFO where a file belongs, is refused
  struct stat st {};
  if (fstat(impl_->fd, &st) != 0) throw_system(path, "cannot stat");
  impl_->size = S_ISREG(st.st_mode) ? std::uint64_t(st.st_size) : 0;
  // The magic is read, not pread, so that pipes and devices are sniffed too.
  char magic[2];
  std::size_t got = 0;
  while (got < 2) {
    const std::size_t n = impl_->read_some(magic + got, 2 - got);
    if (n == 0) break;
    got += n;
  }
  impl_->head.assign(magic, got);
  impl_->gz = got == 2 && static_cast<unsigned char>(magic[0]) == 0x1f &&
              static_cast<unsigned char>(magic[1]) == 0x8b;
  // A name ending in .gz promises gzip: parsing such a file as text would echo binary bytes
  // and report nonsense lines, so a wrong or missing magic is the error itself.
  if (!impl_->gz && named_gz(path)) {
    if (got == 0) throw InputError(path.string() + ": empty file, expected gzip data");
    std::string seen = hex_byte(static_cast<unsigned char>(magic[0]));
    if (got == 2) seen += " " + hex_byte(static_cast<unsigned char>(magic[1]));
    throw InputError(path.string() + ": not a gzip file: starts with bytes " + seen +
                     ", gzip starts with 1f 8b");
  }
  Impl* impl = impl_.get();
  impl_->worker = std::thread([impl] {
    try {
      impl->produce();
    } catch (...) {
      std::lock_guard<std::mutex> lk(impl->m);
      impl->error = std::current_exception();
    }
    std::lock_guard<std::mutex> lk(impl->m);
    impl->done = true;
    impl->cv.notify_all();
  });
}

LineReader::~LineReader() = default;

bool LineReader::next(std::string_view& block) {
  Impl& s = *impl_;
  std::unique_lock<std::mutex> lk(s.m);
  if (!s.current.empty()) s.spare.push_back(std::move(s.current));
  s.current.clear();
  s.cv.wait(lk, [&] { return !s.ready.empty() || s.done; });
  if (s.ready.empty()) {
    if (s.error) std::rethrow_exception(s.error);
    return false;
  }
  s.current = std::move(s.ready.front());
  s.ready.pop_front();
  s.cv.notify_all();
  s.decoded += s.current.size();
  block = s.current;
  return true;
}

bool LineReader::compressed() const { return impl_->gz; }
std::uint64_t LineReader::file_size() const { return impl_->size; }
std::uint64_t LineReader::bytes_read() const { return impl_->read.load(); }
std::uint64_t LineReader::bytes_decoded() const { return impl_->decoded; }

// ---- LineCursor ----------------------------------------------------------------------------

const void* LineCursor::memchr_(const char* p, std::ptrdiff_t n) {
  return std::memchr(p, '\n', std::size_t(n));
}

bool LineCursor::blank() const {
  for (const char* c = line_begin_; c < line_end_; ++c)
    if (*c != ' ' && *c != '\t') return false;
  return true;
}

bool LineCursor::starts_with_any(std::string_view chars) const {
  const char* c = line_begin_;
  while (c < line_end_ && (*c == ' ' || *c == '\t')) ++c;
  return c < line_end_ && chars.find(*c) != std::string_view::npos;
}

int LineCursor::count_fields() const {
  LineCursor copy = *this;
  copy.q_ = line_begin_;
  copy.pending_ = false;
  int n = 0;
  while (!copy.at_end()) {
    copy.next_field("field");
    ++n;
  }
  return n;
}

std::string_view LineCursor::next_field(const char* what) {
  skip_blanks();
  if (q_ >= line_end_ && !pending_)
    fail(std::string("expected ") + what + " in column " + std::to_string(fields_ + 1) +
         ", found end of line (" + std::to_string(fields_) + " columns)");
  const char* start = q_;
  while (q_ < line_end_ && *q_ != ',' && *q_ != ' ' && *q_ != '\t') ++q_;
  const char* stop = q_;
  skip_blanks();
  pending_ = false;
  if (q_ < line_end_ && *q_ == ',') {
    ++q_;
    pending_ = true;  // a comma promises one more (possibly empty) field
  }
  ++fields_;
  return {start, std::size_t(stop - start)};
}

namespace {
// The spellings OGB and pandas write for a missing value.
bool is_nan_text(std::string_view f) {
  return f.empty() || f == "nan" || f == "NaN" || f == "NAN" || f == "-nan";
}

// Every real that enters from text is finite (DESIGN.md, invariant 7): from_chars also accepts
// inf, infinity and nan(...) in any case, so the value is checked, not the spelling. NaN is
// let through only where it means "missing" (allow_nan: OGB labels).
template <class T>
T parse_real(const LineCursor& c, std::string_view f, const char* what, bool allow_nan) {
  if (allow_nan && is_nan_text(f)) return std::numeric_limits<T>::quiet_NaN();
  const char* kind = allow_nan ? "a finite number or NaN" : "a finite number";
  const char* s = f.data();
  const char* e = s + f.size();
  if (s < e && *s == '+') {  // from_chars refuses the sign C and Python may write
    ++s;
    if (s < e && *s == '-') c.bad_number(f, what, kind);
  }
  T v{};
  auto [ptr, ec] = std::from_chars(s, e, v);
  if (ptr != e || (ec != std::errc() && ec != std::errc::result_out_of_range))
    c.bad_number(f, what, kind);
  if (ec == std::errc::result_out_of_range) {
    // from_chars reports underflow and overflow alike; strtod tells them apart. A value too
    // small for T rounds to zero or a denormal as any C parser does; a too large one is refused.
    const std::string copy(s, e);
    const double d = std::strtod(copy.c_str(), nullptr);
    if (!(std::fabs(d) <= 1))
      c.bad_number(
          f, what,
          std::is_same_v<T, float> ? "a number in float32 range" : "a number in float64 range");
    return static_cast<T>(d);
  }
  if (std::isnan(v) && allow_nan) return v;
  if (!std::isfinite(v)) c.bad_number(f, what, kind);
  return v;
}
}  // namespace

float LineCursor::next_float(const char* what, bool allow_nan) {
  return parse_real<float>(*this, next_field(what), what, allow_nan);
}

double LineCursor::next_double(const char* what, bool allow_nan) {
  return parse_real<double>(*this, next_field(what), what, allow_nan);
}

void LineCursor::fail(const std::string& what) const { throw_input(*file_, line_, what); }

void LineCursor::expect_end(int expected_fields) {
  if (at_end()) return;
  fail("expected " + std::to_string(expected_fields) + " columns, found " +
       std::to_string(count_fields()));
}

void LineCursor::bad_number(std::string_view f, const char* what, const char* kind) const {
  fail(std::string("expected ") + kind + " for " + what + " in column " + std::to_string(fields_) +
       ", found '" + printable(f, 40) + "'");
}

std::string read_first_line(const std::filesystem::path& path, InputKind kind) {
  LineReader r(path, kMaxLineBytes, kind);
  std::string_view block;
  if (!r.next(block)) return {};
  std::string line(block.substr(0, block.find('\n')));
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

}  // namespace halo

namespace halo {

std::string printable(std::string_view s, std::size_t max_bytes) {
  std::string out;
  std::size_t i = 0;
  const std::size_t n = std::min(s.size(), max_bytes);
  auto escape = [&](unsigned char b) { out += "\\x" + hex_byte(b); };
  while (i < n) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    if (b >= 0x20 && b < 0x7f) {
      out += char(b);
      ++i;
      continue;
    }
    // A valid UTF-8 sequence of 2-4 bytes (not a C1 control, U+0080..U+009F) is shown as is,
    // so that names in any script stay readable; every other byte is escaped.
    std::size_t len = b >= 0xc2 && b <= 0xdf   ? 2
                      : b >= 0xe0 && b <= 0xef ? 3
                      : b >= 0xf0 && b <= 0xf4 ? 4
                                               : 0;
    if (len > 0 && i + len <= n) {
      const unsigned char b1 = static_cast<unsigned char>(s[i + 1]);
      bool ok = (b1 & 0xc0) == 0x80;
      if (b == 0xc2 && b1 < 0xa0) ok = false;  // C1 control
      if (b == 0xe0 && b1 < 0xa0) ok = false;  // overlong
      if (b == 0xed && b1 > 0x9f) ok = false;  // UTF-16 surrogate
      if (b == 0xf0 && b1 < 0x90) ok = false;  // overlong
      if (b == 0xf4 && b1 > 0x8f) ok = false;  // above U+10FFFF
      for (std::size_t k = 2; ok && k < len; ++k)
        ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
      if (ok) {
        out.append(s.substr(i, len));
        i += len;
        continue;
      }
    }
    escape(b);
    ++i;
  }
  if (s.size() > max_bytes) out += "...";
  return out;
}

bool is_printable(std::string_view s) { return printable(s, s.size()) == s; }

}  // namespace halo
