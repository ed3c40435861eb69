// Outputs: the checks made before work, stale-staging cleanup and the names and locks of staging
// entries (rules in staging.h). The writers that commit through them (checked writes, StagingDir,
// StagedFile, LogFile) are in staging_writers.cc. Raw POSIX calls, not iostreams: every error
// must come back with its errno.
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
#include "staging_internal.h"

namespace halo {
namespace fs = std::filesystem;
using namespace staging_internal;  // what staging_writers.cc shares (staging_internal.h)

namespace {

// "out/" -> "out": the entry itself, not its (empty) last component.
fs::path entry(const fs::path& p) { return p.has_filename() ? p : p.parent_path(); }

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

// What each output path held when this process first resolved it (its commands resolve their
// outputs before any work, so that is when the writer started), updated by each commit of its
// own: a writer that takes minutes to reach its commit still replaces only what was there at its
// start, and a process writing one path twice (the Python package) replaces its own output.
std::mutex g_seen_mutex;
std::map<std::string, PathIdentity>& seen_outputs() {
  static std::map<std::string, PathIdentity> seen;
  return seen;
}

}  // namespace

// ---- shared with staging_writers.cc ---------------------------------------------------------

namespace staging_internal {

fs::path folder_of(const fs::path& p) {
  const fs::path parent = entry(p).parent_path();
  return parent.empty() ? fs::path(".") : parent;
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

// Opens p (file or folder) and takes an exclusive flock, held until the fd is closed; -1 when p
// cannot be opened. A failed lock (NFS without lock support) is not an error: the PID check of
// clean_stale_staging still protects the entry while its writer lives.
int lock_entry(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) (void)::flock(fd, LOCK_EX | LOCK_NB);
  return fd;
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

// What occupies p now (links not followed: the resolved destination is what is renamed over).
PathIdentity identity(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return {};
  return {true, std::uint64_t(st.st_dev), std::uint64_t(st.st_ino)};
}

bool same(const PathIdentity& a, const PathIdentity& b) {
  return a.present == b.present && a.dev == b.dev && a.ino == b.ino;
}

PathIdentity first_seen(const fs::path& target) {
  const std::lock_guard<std::mutex> hold(g_seen_mutex);
  return seen_outputs().emplace(target.string(), identity(target)).first->second;
}

void record_committed(const fs::path& target) {
  const std::lock_guard<std::mutex> hold(g_seen_mutex);
  seen_outputs()[target.string()] = identity(target);
}
}  // namespace staging_internal

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

void remove_committed_dir(const fs::path& dir, const std::string& why) {
  const fs::path gone = staging_name(dir, kTmp);
  std::error_code ec;
  fs::remove_all(gone, ec);
  if (::rename(dir.c_str(), gone.c_str()) != 0) throw_system(dir, why);
  fs::remove_all(gone, ec);
  if (ec) throw SystemError(gone.string() + ": " + why + ": " + ec.message());
}

}  // namespace halo
