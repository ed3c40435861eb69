// Outputs: checks before work, checked writes, staged commits, stale-staging cleanup (rules in
// staging.h). Raw POSIX calls, not iostreams: every error must come back with its errno.
#include "halo/graph/staging.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "halo/graph/error.h"
#include "halo/graph/input.h"
#include "halo/graph/progress.h"

namespace halo {
namespace fs = std::filesystem;

namespace {

// Kills this process at a named step of a commit when HALO_TEST_KILL_AT names it, or waits
// there (up to 60 s) until a file exists when HALO_TEST_WAIT_AT is "STEP:FILE", so a test can
// commit another writer's output in between (tests only).
void kill_point(const char* step) {
  const char* at = std::getenv("HALO_TEST_KILL_AT");
  if (at && std::strcmp(at, step) == 0) ::raise(SIGKILL);
  const char* wait = std::getenv("HALO_TEST_WAIT_AT");
  const std::size_t n = std::strlen(step);
  if (!wait || std::strncmp(wait, step, n) != 0 || wait[n] != ':') return;
  for (int i = 0; i < 6000 && ::access(wait + n + 1, F_OK) != 0; ++i) ::usleep(10000);
}

bool exchange_disabled() {
  const char* v = std::getenv("HALO_TEST_NO_EXCHANGE");
  return v && *v && std::strcmp(v, "0") != 0;
}

// "out/" -> "out": the entry itself, not its (empty) last component.
fs::path entry(const fs::path& p) { return p.has_filename() ? p : p.parent_path(); }

fs::path folder_of(const fs::path& p) {
  const fs::path parent = entry(p).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

constexpr const char* kTmp = "tmp";
constexpr const char* kOld = "old";

// The longest name a staging entry gives its output: ".NAME.halo-KIND-PID" must fit NAME_MAX
// (255 bytes on every Linux file system) with a PID of up to 9 digits.
constexpr std::size_t kMaxStagedName =
    255 - std::char_traits<char>::length(".") - std::char_traits<char>::length(".halo-tmp-") - 9;

// Whether a staging entry's NAME is staged_key's shortened form ("PREFIX~" + 16 hex digits),
// which cannot be turned back into the output's name.
bool shortened_key(const std::string& key) {
  const std::size_t n = key.size();
  return n > 17 + 190 && key[n - 17] == '~' &&
         key.find_first_not_of("0123456789abcdef", n - 16) == std::string::npos;
}

// The NAME part of a staging entry for an output named `name`: the name itself, or, when it is
// too long to fit, its first bytes (cut at a UTF-8 boundary) + "~" + a 64-bit FNV-1a hash of
// the whole name, so any name the file system accepts can be staged, and two long names that
// share their first 200 bytes still get distinct entries.
std::string staged_key(const std::string& name) {
  if (name.size() <= kMaxStagedName) return name;
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  std::size_t cut = 200;
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return name.substr(0, cut) + "~" + hex;
}

// The long names this process shortened (staged_key), so that shown_path can name the output.
std::mutex g_long_names_mutex;
std::map<std::string, std::string>& long_names() {
  static std::map<std::string, std::string> names;
  return names;
}

// The output name behind a staging key of this process (the key itself unless it was shortened).
std::string full_name(const std::string& key) {
  if (!shortened_key(key)) return key;
  const std::lock_guard<std::mutex> hold(g_long_names_mutex);
  const auto it = long_names().find(key);
  return it == long_names().end() ? key : it->second;
}

fs::path staging_name(const fs::path& p, const char* kind) {
  const fs::path d = entry(p);
  if (const std::string name = d.filename().string(); name.size() > kMaxStagedName) {
    const std::lock_guard<std::mutex> hold(g_long_names_mutex);
    long_names().emplace(staged_key(name), name);
  }
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on "." + std::string temporaries.
  std::string name = ".";
  name += staged_key(d.filename().string());
  name += ".halo-";
  name += kind;
  name += "-";
  name += std::to_string(getpid());
  return d.parent_path() / name;
}

// A staging entry's parts: ".NAME.halo-KIND-PID".
struct StagingEntry {
  std::string name, kind;
  pid_t pid = 0;
};
bool parse_staging(const std::string& file, StagingEntry* out) {
  if (file.size() < 2 || file[0] != '.') return false;
  for (const char* kind : {kTmp, kOld}) {
    const std::string mark = std::string(".halo-") + kind + "-";
    const std::size_t at = file.rfind(mark);
    if (at == std::string::npos || at < 2) continue;
    const std::string digits = file.substr(at + mark.size());
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    out->name = file.substr(1, at - 1);
    out->kind = kind;
    out->pid = pid_t(std::stol(digits));
    return out->pid > 0;
  }
  return false;
}

// Opens p (file or folder) and takes an exclusive flock, held until the fd is closed; -1 when p
// cannot be opened. A failed lock (NFS without lock support) is not an error: the PID check of
// clean_stale_staging still protects the entry while its writer lives.
int lock_entry(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) (void)::flock(fd, LOCK_EX | LOCK_NB);
  return fd;
}

std::string read_small(const fs::path& p) {
  std::ifstream f(p);
  std::string s;
  std::getline(f, s);
  return s;
}

// Whether process pid runs halo (its command name starts with "halo", or it runs our own
// binary): a halo writer may be in the instant between creating its staging entry and locking
// it, or be an older halo that never locks. Unknown (no /proc) counts as halo: keep the entry.
bool is_halo_process(pid_t pid) {
  const fs::path proc = "/proc/" + std::to_string(pid);
  std::error_code ec;
  if (!fs::exists(proc / "comm", ec)) return true;
  if (read_small(proc / "comm").rfind("halo", 0) == 0) return true;
  const fs::path exe = fs::read_symlink(proc / "exe", ec);
  if (ec) return false;  // another user's process we may not inspect: not ours to keep waiting for
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return !ec && exe == self;
}

// Whether the writer of staging entry p (named with pid) is gone.
bool writer_gone(const fs::path& p, pid_t pid) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd >= 0) {
    const int rc = ::flock(fd, LOCK_EX | LOCK_NB);
    const int err = errno;
    ::close(fd);
    if (rc != 0 && err == EWOULDBLOCK) return false;  // a live writer holds it
  }
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  return !is_halo_process(pid);
}

void sync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_system(dir, "cannot open folder to sync it");
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // EINVAL: a file system that cannot sync folders (its renames are as durable as it gets).
  if (rc != 0 && err != EINVAL) {
    errno = err;
    throw_system(dir, "cannot sync folder");
  }
}

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a folder";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISREG(m)) return "a regular file";
  return "not a regular file";
}

// Follows a chain of symbolic links (each target relative to its link's folder).
fs::path follow_links(const fs::path& p) {
  fs::path cur = entry(p);
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(cur, ec))) return cur;
    const fs::path target = fs::read_symlink(cur, ec);
    if (ec) return cur;
    cur = target.is_absolute() ? target : cur.parent_path() / target;
  }
  throw ParamError(p.string() + ": too many levels of symbolic links");
}

// a strictly inside b; both absolute and canonical.
bool is_under(const fs::path& a, const fs::path& b) {
  auto ai = a.begin();
  for (auto bi = b.begin(); bi != b.end(); ++bi, ++ai) {
    if (bi->empty()) continue;  // trailing separator
    if (ai == a.end() || *ai != *bi) return false;
  }
  for (; ai != a.end(); ++ai)
    if (!ai->empty()) return true;
  return false;
}

bool empty_folder(const fs::path& d) {
  std::error_code ec;
  return fs::is_empty(d, ec) && !ec;
}

// Whether folder d is a halo folder of `format` (see resolve_dir_output); *found gets what it is.
bool folder_is(const fs::path& d, const std::string& format, std::string* found) {
  std::error_code ec;
  if (format == "ogb") {
    *found = "not an OGB raw layout";
    return fs::exists(d / "raw" / "num-node-list.csv.gz", ec);
  }
  if (!fs::exists(fs::symlink_status(d / "meta.json", ec))) {
    *found = "has no meta.json";
    return false;
  }
  nlohmann::json j;
  try {  // through the input rules: a FIFO or folder named meta.json is no halo folder's
    j = read_json_file(d / "meta.json");
  } catch (const Error&) {
  }
  const std::string have = j.is_object() && j.contains("format") && j["format"].is_string()
                               ? j["format"].get<std::string>()
                               : "";
  *found =
      have.empty() ? "its meta.json names no format" : "its meta.json says format \"" + have + "\"";
  return have == format;
}

// What occupies p now (links not followed: the resolved destination is what is renamed over).
PathIdentity identity(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return {};
  return {true, std::uint64_t(st.st_dev), std::uint64_t(st.st_ino)};
}

bool same(const PathIdentity& a, const PathIdentity& b) {
  return a.present == b.present && a.dev == b.dev && a.ino == b.ino;
}

// What each output path held when this process first resolved it (its commands resolve their
// outputs before any work, so that is when the writer started), updated by each commit of its
// own: a writer that takes minutes to reach its commit still replaces only what was there at its
// start, and a process writing one path twice (the Python package) replaces its own output.
std::mutex g_seen_mutex;
std::map<std::string, PathIdentity>& seen_outputs() {
  static std::map<std::string, PathIdentity> seen;
  return seen;
}

PathIdentity first_seen(const fs::path& target) {
  const std::lock_guard<std::mutex> hold(g_seen_mutex);
  return seen_outputs().emplace(target.string(), identity(target)).first->second;
}

void record_committed(const fs::path& target) {
  const std::lock_guard<std::mutex> hold(g_seen_mutex);
  seen_outputs()[target.string()] = identity(target);
}

// An exclusive flock on an output's folder for the few calls of a commit (look, then rename), so
// that halo writers committing into one folder take turns and the second sees the first's output.
// Without one (a file system without flock) the look and the rename are still microseconds apart.
class CommitTurn {
 public:
  explicit CommitTurn(const fs::path& dir)
      : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ >= 0)
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~CommitTurn() {
    if (fd_ >= 0) ::close(fd_);
  }
  CommitTurn(const CommitTurn&) = delete;
  CommitTurn& operator=(const CommitTurn&) = delete;

 private:
  int fd_;
};

// The refusal of a commit whose destination another writer committed after this one started.
ParamError taken(const fs::path& out, bool existed, bool force_flag) {
  if (!existed)
    return ParamError(
        out.string() +
        ": already exists: another process wrote it while this one ran; not "
        "replaced" +
        (force_flag ? " (pass --force to replace it)" : " (run again to replace it)"));
  return ParamError(out.string() +
                    ": replaced by another process while this one ran; not replaced again (run "
                    "again to replace it)");
}

// Renames from to a new entry to, never over one (RENAME_NOREPLACE; a plain rename after the
// check where the file system lacks it). False with errno EEXIST when to is taken.
bool rename_new(const fs::path& from, const fs::path& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (errno != EINVAL && errno != ENOSYS) return false;
  return ::rename(from.c_str(), to.c_str()) == 0;
}

}  // namespace

// ---- checks
// --------------------------------------------------------------------------------------

void check_not_input(const fs::path& out, const std::vector<fs::path>& inputs) {
  std::error_code ec;
  const fs::path target = follow_links(out);
  fs::path o = fs::weakly_canonical(fs::absolute(target, ec), ec);
  if (ec) return;  // nothing to compare: the write itself will report why
  for (const fs::path& in : inputs) {
    if (in.empty()) continue;
    std::error_code ie;
    const fs::path i = fs::canonical(in, ie);
    if (ie) continue;  // an input that does not exist is its reader's to report
    std::error_code ee;
    if (fs::equivalent(o, i, ee))
      throw ParamError(out.string() + ": is the input " + in.string() +
                       " of this command, which it only reads; write the output elsewhere");
    if (fs::is_directory(i, ee) && is_under(o, i))
      throw ParamError(out.string() + ": inside the input folder " + in.string() +
                       ", which this command only reads; write the output elsewhere");
    if (is_under(i, o))
      throw ParamError(out.string() + ": holds the input " + in.string() +
                       " of this command; replacing it would delete the input");
  }
}

fs::path resolve_file_output(const fs::path& out, const std::vector<fs::path>& inputs) {
  if (out.empty()) throw ParamError("output path is empty");
  fs::path target = follow_links(out);  // not const: returned by move
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw ParamError(
        out.string() + ": is " + kind_of(st.st_mode) +
        ", not a regular file; halo writes a new file and renames it into place, which would "
        "replace it: give a file path");
  check_not_input(out, inputs);
  (void)first_seen(target);
  return target;
}

fs::path resolve_stream_output(const fs::path& out, const std::vector<fs::path>& inputs) {
  if (out.empty()) throw ParamError("output path is empty");
  struct stat st {};
  if (::stat(out.c_str(), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))
    return out;  // written to in place, never replaced: /dev/stdout, a pipe
  if (::stat(out.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw ParamError(out.string() + ": is " + kind_of(st.st_mode) +
                     ", not a regular file, device or FIFO");
  return resolve_file_output(out, inputs);
}

fs::path resolve_dir_output(const fs::path& out, const std::string& format, bool overwrite,
                            const std::vector<fs::path>& inputs) {
  if (out.empty()) throw ParamError("output path is empty");
  fs::path target = follow_links(out);             // not const: returned by move
  clean_stale_staging(folder_of(target), target);  // may restore target: check after
  check_not_input(out, inputs);
  struct stat st {};
  (void)first_seen(target);
  if (::stat(target.c_str(), &st) != 0) return target;
  if (!overwrite) throw ParamError(out.string() + ": already exists (pass --force to replace it)");
  if (!S_ISDIR(st.st_mode))
    throw ParamError(
        out.string() + ": is " + kind_of(st.st_mode) + ", not a \"" + format +
        "\" folder; --force replaces only a folder halo wrote: remove it yourself if it should go");
  std::string found;
  if (!empty_folder(target) && !folder_is(target, format, &found))
    throw ParamError(out.string() + ": not a \"" + format + "\" folder (" + found +
                     "); --force replaces only a folder halo wrote of that kind: remove it "
                     "yourself if it should go");
  return target;
}

void check_free_space(const fs::path& out, std::uint64_t bytes, const std::string& what) {
  fs::path dir = folder_of(follow_links(out));
  std::error_code ec;
  while (!fs::is_directory(dir, ec) && dir.has_relative_path()) dir = dir.parent_path();
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return;  // unknown: the write itself will tell
  const std::uint64_t avail = std::uint64_t(st.f_bavail) * std::uint64_t(st.f_frsize);
  if (avail >= bytes) return;
  auto size = [](std::uint64_t b) {
    const char* unit[] = {"KiB", "MiB", "GiB", "TiB"};
    double x = double(b) / 1024;
    int i = 0;
    for (; x >= 1024 && i < 3; ++i) x /= 1024;
    char s[32];
    std::snprintf(s, sizeof s, "%.1f %s", x, unit[i]);
    return std::string(s);
  };
  // Worded as the write itself would fail (errno's text), a short disk reads the same early
  // as late; the figures say by how much.
  throw SystemError(out.string() + ": No space left on device: up to " + size(bytes) + " for " +
                    what + ", " + dir.string() + " has " + size(avail) + " free");
}

void check_output_folder(const fs::path& dir, const std::vector<fs::path>& inputs) {
  if (dir.empty()) throw ParamError("output path is empty");
  struct stat st {};
  if (::stat(follow_links(dir).c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    throw ParamError(dir.string() + ": is " + kind_of(st.st_mode) + ", not a folder");
  check_not_input(dir, inputs);
}

namespace {
// Renames the old output a dead replace set aside back to target; false when it cannot.
bool restore(const fs::path& aside, const fs::path& target, pid_t pid) {
  if (::rename(aside.c_str(), target.c_str()) != 0) return false;
  std::fprintf(
      stderr,
      "note: %s: restored from %s, set aside by a replace that was interrupted (process %d)\n",
      target.c_str(), aside.filename().c_str(), int(pid));
  return true;
}

// Removes a dead writer's staging entry: a folder child by child, with progress on a terminal
// (a dead partition's thousands of parts take seconds to remove, which should not pass in
// silence). Best effort: another cleaner may be removing it too.
void remove_stale(const fs::path& p) {
  std::error_code ec;
  if (fs::is_directory(fs::symlink_status(p, ec))) {
    std::vector<fs::path> children;
    for (const auto& c : fs::directory_iterator(p, ec)) children.push_back(c.path());
    Progress bar("removing " + p.string() + ", left by a writer that died", children.size());
    for (std::size_t i = 0; i < children.size(); ++i) {
      fs::remove_all(children[i], ec);
      bar.update(i + 1);
    }
  }
  fs::remove_all(p, ec);
}
}  // namespace

void clean_stale_staging(const fs::path& dir, const fs::path& target_hint) {
  try {
    const std::string hint =
        target_hint.empty() ? std::string() : staged_key(entry(target_hint).filename().string());
    std::error_code ec;
    std::vector<std::pair<fs::path, StagingEntry>> stale;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      StagingEntry s;
      if (!parse_staging(e.path().filename().string(), &s) || s.pid == getpid()) continue;
      if (writer_gone(e.path(), s.pid)) stale.emplace_back(e.path(), s);
    }
    for (const auto& [p, s] : stale) {
      std::error_code rc;
      fs::path target = dir / s.name;
      if (s.kind == kOld && shortened_key(s.name)) {
        // An old output of a long name: only a writer or reader of that name knows it; until
        // one comes, it waits (never removed: it may be all that is left of the output).
        if (s.name != hint) continue;
        target = dir / entry(target_hint).filename();
      }
      // A replace died between moving the old output aside and renaming the new one in.
      if (s.kind == kOld && !fs::exists(fs::symlink_status(target, rc)) &&
          restore(p, target, s.pid))
        continue;
      remove_stale(p);
    }
  } catch (const std::exception&) {  // cleaning is a courtesy: it never fails a write
  }
}

bool restore_set_aside(const fs::path& out) {
  try {
    const fs::path dir = folder_of(out), target = dir / entry(out).filename();
    std::error_code ec;
    if (fs::exists(fs::symlink_status(target, ec))) return false;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      StagingEntry s;
      if (!parse_staging(e.path().filename().string(), &s) || s.kind != kOld ||
          s.name != staged_key(target.filename().string()))
        continue;
      if (s.pid != getpid() && writer_gone(e.path(), s.pid))
        return restore(e.path(), target, s.pid);
    }
  } catch (const std::exception&) {  // as clean_stale_staging: the caller reports what is missing
  }
  return false;
}

fs::path shown_path(const fs::path& p) {
  if (p.string().find(".halo-tmp-") == std::string::npos) return p;  // the common case, cheaply
  fs::path out;
  for (const fs::path& part : p) {
    StagingEntry s;
    const bool ours = parse_staging(part.string(), &s) && s.kind == kTmp && s.pid == getpid();
    out /= ours ? fs::path(full_name(s.name)) : part;
  }
  return out;
}

// ---- writers
// -------------------------------------------------------------------------------------

void write_all(int fd, const fs::path& path, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, std::min<std::size_t>(n, std::size_t(1) << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_system(path, "write failed");
    }
    p += w;
    n -= std::size_t(w);
  }
}

void sync_fd(int fd, const fs::path& path) {
  // EINVAL / EROFS: a device or pipe, which has nothing to sync.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) throw_system(path, "sync failed");
}

void write_file(const fs::path& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_system(path, "cannot create");
  try {
    write_all(fd, path, text.data(), text.size());
    sync_fd(fd, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) throw_system(path, "close failed");
}

// ---- StagingDir
// ----------------------------------------------------------------------------------

StagingDir::StagingDir(const fs::path& dir, const std::string& format, bool overwrite,
                       const std::vector<fs::path>& inputs)
    : dir_(resolve_dir_output(dir, format, overwrite, inputs)),
      tmp_(staging_name(dir_, kTmp)),
      overwrite_(overwrite),
      before_(first_seen(dir_)) {
  std::error_code ec;
  fs::remove_all(tmp_, ec);  // a dead process's with our PID
  for (fs::path d = folder_of(dir_); !d.empty() && !fs::exists(fs::symlink_status(d, ec));
       d = d.parent_path())
    made_.push_back(d);
  fs::create_directories(folder_of(dir_), ec);
  if (ec) throw SystemError(folder_of(dir_).string() + ": cannot create folder: " + ec.message());
  if (::mkdir(tmp_.c_str(), 0755) != 0) throw_system(tmp_, "cannot create folder");
  lock_fd_ = lock_entry(tmp_);
}

StagingDir::~StagingDir() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
    // rmdir, never remove_all: a folder another writer has put something in meanwhile stays.
    for (const fs::path& d : made_)
      if (::rmdir(d.c_str()) != 0) break;
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void StagingDir::commit() {
  if (committed_) return;
  sync_dir(tmp_);  // its entries, before the rename makes them the output
  kill_point("staged");
  const fs::path parent = folder_of(dir_);
  std::error_code ec;
  const CommitTurn turn(parent);
  const PathIdentity now = identity(dir_);
  if (!now.present) {  // a new output: never replace one that appeared meanwhile
    if (!rename_new(tmp_, dir_)) {
      if (errno == EEXIST || errno == ENOTEMPTY) throw taken(dir_, false, true);
      throw_system(dir_, "cannot rename the staging folder into place");
    }
    committed_ = true;
    record_committed(dir_);
    sync_dir(parent);
    return;
  }
  // Only what was there when this writer started, and only when asked to (--force): otherwise
  // another writer committed it meanwhile, and its output stays.
  if (!overwrite_ || !same(now, before_)) throw taken(dir_, before_.present, true);
  // Replacing: one atomic swap where the file system can; tmp_ then holds the old output.
  if (!exchange_disabled()) {
    if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, dir_.c_str(), RENAME_EXCHANGE) == 0) {
      committed_ = true;
      record_committed(dir_);
      sync_dir(parent);
      kill_point("swapped");
      fs::remove_all(tmp_, ec);
      return;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
      throw_system(dir_, "cannot replace");
  }
  // Two renames: the old output waits aside (locked, so no one restores it while we live) until
  // the new one is in; if we die in between, the next writer here restores it.
  const fs::path old = staging_name(dir_, kOld);
  fs::remove_all(old, ec);
  const int old_lock = lock_entry(dir_);
  if (::rename(dir_.c_str(), old.c_str()) != 0) {
    const int err = errno;
    if (old_lock >= 0) ::close(old_lock);
    errno = err;
    throw_system(dir_, "cannot move the old output aside");
  }
  kill_point("aside");
  if (::rename(tmp_.c_str(), dir_.c_str()) != 0) {
    const int err = errno;
    (void)::rename(old.c_str(), dir_.c_str());
    if (old_lock >= 0) ::close(old_lock);
    errno = err;
    throw_system(dir_, "cannot rename the staging folder into place");
  }
  committed_ = true;
  record_committed(dir_);
  sync_dir(parent);
  kill_point("swapped");
  fs::remove_all(old, ec);
  if (old_lock >= 0) ::close(old_lock);
}

// ---- StagedFile
// ----------------------------------------------------------------------------------

StagedFile::StagedFile(const fs::path& path, const std::vector<fs::path>& inputs)
    : shown_(path),
      path_(resolve_file_output(path, inputs)),
      tmp_(staging_name(path_, kTmp)),
      before_(first_seen(path_)) {
  clean_stale_staging(folder_of(path_), path_);
  fd_ = ::open(tmp_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) throw_system(shown_, "cannot create");
  (void)::flock(fd_, LOCK_EX | LOCK_NB);
}

StagedFile::~StagedFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void StagedFile::write(const void* data, std::size_t n) { write_all(fd_, shown_, data, n); }

void StagedFile::write_at(const void* data, std::size_t n, std::uint64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w =
        ::pwrite(fd_, p, std::min<std::size_t>(n, std::size_t(1) << 30), off_t(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_system(shown_, "write failed");
    }
    p += w;
    n -= std::size_t(w);
    offset += std::uint64_t(w);
  }
}

void StagedFile::commit() {
  sync_fd(fd_, shown_);
  kill_point("staged");
  {
    const CommitTurn turn(folder_of(path_));
    const PathIdentity now = identity(path_);
    if (now.present && !same(now, before_)) throw taken(shown_, before_.present, false);
    const bool moved =
        now.present ? ::rename(tmp_.c_str(), path_.c_str()) == 0 : rename_new(tmp_, path_);
    if (!moved) {
      if (errno == EEXIST) throw taken(shown_, false, false);
      throw_system(shown_, "cannot rename the staging file into place");
    }
  }
  const int fd = fd_;
  fd_ = -1;  // renamed: nothing to remove any more
  record_committed(path_);
  if (::close(fd) != 0) throw_system(shown_, "close failed");
  sync_dir(folder_of(path_));
}

// ---- LogFile
// -------------------------------------------------------------------------------------

LogFile::~LogFile() {
  if (fd_ >= 0) ::close(fd_);
}

void LogFile::open(const fs::path& path, bool append, const std::vector<fs::path>& inputs) {
  const fs::path target = resolve_stream_output(path, inputs);
  struct stat st {};
  const bool existed = ::stat(target.c_str(), &st) == 0;
  // Non-blocking, so a FIFO nobody reads fails now (ENXIO) instead of waiting forever for a
  // reader; the writes after it block as a pipe's should.
  const int fd =
      ::open(target.c_str(),
             O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd < 0 && errno == ENXIO)
    throw ParamError(path.string() +
                     ": a FIFO that no process is reading; start its reader first, or give a file");
  if (fd < 0) throw_system(path, "cannot open log");
  (void)::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  path_ = path;
  target_ = target;
  regular_ = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  created_ = !existed;
  good_ = regular_ ? ::lseek(fd, 0, SEEK_END) : 0;
}

void LogFile::write_line(const std::string& line) {
  if (fd_ < 0) return;
  std::string rec = line;
  rec += '\n';
  // A FIFO whose reader went away: EPIPE and one line, not a silent death by SIGPIPE. The signal
  // a write raises goes to the writing thread, which blocks it for the write and takes it back.
  sigset_t pipe_signal, before;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &before);
  struct Unblock {
    const sigset_t& pipe_signal;
    const sigset_t& before;
    ~Unblock() {
      const timespec now{0, 0};
      while (sigtimedwait(&pipe_signal, nullptr, &now) > 0) {
      }
      pthread_sigmask(SIG_SETMASK, &before, nullptr);
    }
  } unblock{pipe_signal, before};
  try {
    write_all(fd_, path_, rec.data(), rec.size());
    good_ += (long long)rec.size();
  } catch (...) {
    if (regular_) {  // no half record: cut back to the last whole one, or remove what we created
      if (created_ && good_ == 0)
        (void)::unlink(target_.c_str());
      else
        (void)::ftruncate(fd_, off_t(good_));
    }
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

void LogFile::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  try {
    if (regular_) sync_fd(fd, path_);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) throw_system(path_, "close failed");
}

void remove_committed_dir(const fs::path& dir, const std::string& why) {
  const fs::path gone = staging_name(dir, kTmp);
  std::error_code ec;
  fs::remove_all(gone, ec);
  if (::rename(dir.c_str(), gone.c_str()) != 0) throw_system(dir, why);
  fs::remove_all(gone, ec);
  if (ec) throw SystemError(gone.string() + ": " + why + ": " + ec.message());
}

}  // namespace halo
