// open_input and the JSON helpers of input.h. Every reader opens its files here, so the rule
// "a file inside a folder is a regular file" is enforced once, before the open that would block
// on a FIFO, and every JSON file halo reads is depth-limited while it is parsed.
#include "halo/graph/input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "halo/graph/error.h"
#include "halo/graph/text.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// "a FIFO (named pipe)" etc.; empty for a regular file.
std::string kind_of(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// A stream input may be anything readable in order; a directory never is.
bool allowed(mode_t mode, InputKind kind) {
  if (S_ISREG(mode)) return true;
  return kind == InputKind::kStream && !S_ISDIR(mode) && !S_ISSOCK(mode);
}

[[noreturn]] void refuse(const fs::path& path, mode_t mode, InputKind kind) {
  throw_input(path, 0,
              "is " + kind_of(mode) + ", expected a regular file" +
                  (kind == InputKind::kStream ? ", a pipe or a device" : ""));
}

}  // namespace

int open_input(const fs::path& path, InputKind kind) {
  // A FIFO is opened blocking only where one is welcome (kStream: the user names a pipe and
  // feeds it); everything else is opened O_NONBLOCK, which never waits for a writer, and its
  // type is checked on the descriptor, so a file swapped for a FIFO after a stat still cannot
  // block the open.
  struct stat st {};
  const bool fifo_stream =
      kind == InputKind::kStream && ::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (fifo_stream ? 0 : O_NONBLOCK));
  if (fd < 0) throw_system(path, "cannot open");
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    throw_system(path, "cannot stat");
  }
  if (!allowed(st.st_mode, kind)) {
    ::close(fd);
    refuse(path, st.st_mode, kind);
  }
  // Reads block as usual from here on (a regular file's reads never wait anyway).
  if (!fifo_stream) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

std::string read_input_file(const fs::path& path, std::size_t max_bytes) {
  const int fd = open_input(path, InputKind::kFile);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_system(path, "cannot stat");
  if (std::uint64_t(st.st_size) > max_bytes)
    throw_input(path, 0,
                std::to_string(st.st_size) + " bytes, more than the " +
                    std::to_string(max_bytes >> 20) + " MiB halo reads in such a file");
  std::string text(std::size_t(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t r = ::read(fd, text.data() + got, text.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw_system(path, "read failed");
    if (r == 0) break;  // shrunk while being read: parse what is there
    got += std::size_t(r);
  }
  text.resize(got);
  return text;
}

namespace {
// Thrown out of nlohmann's parser callback: unwinds the parse, then becomes an InputError.
struct TooDeep {};
}  // namespace

json parse_json(const std::string& text, const fs::path& file) {
  // The callback sees every value's depth before it is stored; nlohmann's parser itself is
  // iterative, so rejecting here bounds every later recursion over the tree.
  const json::parser_callback_t limit = [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw TooDeep{};
    return true;
  };
  try {
    return json::parse(text, limit);
  } catch (const TooDeep&) {
    throw_input(file, 0,
                "invalid JSON: arrays or objects nested deeper than " +
                    std::to_string(kMaxJsonDepth) + " levels");
  } catch (const json::exception& e) {
    throw_input(file, 0, std::string("invalid JSON: ") + e.what());
  }
}

json read_json_file(const fs::path& path) { return parse_json(read_input_file(path), path); }

namespace {
void shown_into(const json& v, std::string& out, std::size_t max_bytes, int levels) {
  if (out.size() > max_bytes) return;
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    const std::size_t room = max_bytes - std::min(max_bytes, out.size());
    out += "\"" + printable(s, std::max<std::size_t>(room, 8)) + "\"";
  } else if (v.is_array() || v.is_object()) {
    const bool arr = v.is_array();
    out += arr ? "[" : "{";
    if (levels == 0 && !v.empty()) {
      out += "...";
    } else {
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (out.size() > max_bytes) {
          out += "...";
          break;
        }
        if (!first) out += ",";
        first = false;
        if (!arr) out += "\"" + printable(it.key(), 20) + "\":";
        shown_into(*it, out, max_bytes, levels - 1);
      }
    }
    out += arr ? "]" : "}";
  } else {
    out += v.dump();  // a number, a boolean or null: short
  }
}
}  // namespace

std::string json_shown(const json& v, std::size_t max_bytes) {
  std::string out;
  shown_into(v, out, max_bytes, 3);
  return out;
}

}  // namespace halo
