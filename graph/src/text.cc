// LineReader: a producer thread reads the file and (for gzip) inflates it into blocks of whole
// lines; the consumer parses one block while the next is being produced. Blocks are recycled
// so memory stays at a few blocks whatever the file size.
#include "halo/graph/text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

namespace halo {
namespace {

constexpr std::size_t kBlockBytes = 4 << 20;  // text per block handed to the parser
constexpr std::size_t kReadBytes = 1 << 20;   // file bytes per read()
constexpr std::size_t kQueueDepth = 2;        // blocks produced ahead of the parser

}  // namespace

struct LineReader::Impl {
  std::filesystem::path path;
  int fd = -1;
  std::uint64_t size = 0;
  bool gz = false;
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

  // Reads up to n bytes; returns 0 at end of file.
  std::size_t read_some(char* buf, std::size_t n) {
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

  std::string take_spare() {
    std::lock_guard<std::mutex> lk(m);
    if (spare.empty()) return {};
    std::string s = std::move(spare.back());
    spare.pop_back();
    s.clear();
    return s;
  }

  // Moves the bytes after the last newline of out into carry; false if out has no newline.
  static bool cut_at_last_newline(std::string& out, std::string& carry) {
    const auto pos = out.rfind('\n');
    if (pos == std::string::npos) return false;
    carry.assign(out, pos + 1, std::string::npos);
    out.resize(pos + 1);
    return true;
  }

  void produce() {
    std::vector<char> in(kReadBytes);
    std::string carry;
    z_stream zs{};
    bool z_open = false;
    bool z_end = false;  // inside a gzip member: false; after its trailer: true
    if (gz) {
      if (inflateInit2(&zs, 15 + 16) != Z_OK) throw InputError(path.string() + ": zlib init failed");
      z_open = true;
    }
    struct ZGuard {
      z_stream* zs;
      bool* open;
      ~ZGuard() {
        if (*open) inflateEnd(zs);
      }
    } guard{&zs, &z_open};

    bool eof = false;
    while (!eof) {
      std::string out = take_spare();
      out.swap(carry);  // start with the partial line left over
      carry.clear();
      out.reserve(kBlockBytes + kReadBytes);
      while (out.size() < kBlockBytes && !eof) {
        if (!gz) {
          const std::size_t old = out.size();
          out.resize(old + kReadBytes);
          const std::size_t n = read_some(out.data() + old, kReadBytes);
          out.resize(old + n);
          if (n == 0) eof = true;
          continue;
        }
        if (zs.avail_in == 0) {
          const std::size_t n = read_some(in.data(), in.size());
          if (n == 0) {
            if (!z_end)
              throw InputError(path.string() + ": truncated gzip stream: file ends after " +
                               std::to_string(read.load()) +
                               " bytes without the gzip trailer");
            eof = true;
            continue;
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
      }
      if (!eof && !cut_at_last_newline(out, carry)) {
        carry.swap(out);  // one line longer than a block: keep reading into it
        continue;
      }
      if (out.empty()) break;
      if (!push(std::move(out))) return;
    }
  }
};

LineReader::LineReader(const std::filesystem::path& path) : path_(path), impl_(new Impl) {
  impl_->path = path;
  impl_->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (impl_->fd < 0) throw_system(path, "cannot open");
  struct stat st {};
  if (fstat(impl_->fd, &st) != 0) throw_system(path, "cannot stat");
  if (S_ISDIR(st.st_mode)) throw InputError(path.string() + ": is a directory, expected a file");
  impl_->size = std::uint64_t(st.st_size);
  unsigned char magic[2] = {0, 0};
  const ssize_t n = ::pread(impl_->fd, magic, 2, 0);
  impl_->gz = n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
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
bool is_nan_text(std::string_view f) {
  return f.empty() || f == "nan" || f == "NaN" || f == "NAN" || f == "-nan";
}
template <class T>
T parse_real(const LineCursor& c, std::string_view f, const char* what, bool allow_nan) {
  if (is_nan_text(f)) {
    if (allow_nan) return std::numeric_limits<T>::quiet_NaN();
    c.bad_number(f, what, "a number");
  }
  const char* s = f.data();
  const char* e = s + f.size();
  if (*s == '+') ++s;
  T v{};
  auto [ptr, ec] = std::from_chars(s, e, v);
  if (ec != std::errc() || ptr != e) c.bad_number(f, what, "a number");
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
  std::string shown(f.substr(0, 40));
  fail(std::string("expected ") + kind + " for " + what + " in column " +
       std::to_string(fields_) + ", found '" + shown + "'");
}

std::string read_first_line(const std::filesystem::path& path) {
  LineReader r(path);
  std::string_view block;
  if (!r.next(block)) return {};
  std::string line(block.substr(0, block.find('\n')));
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

}  // namespace halo
