// Outputs: the writers (rules in staging.h): checked writes, the staged folder and file that a
// commit renames into place, and the log written in place. The checks, names and locks they use
// are in staging.cc (shared through staging_internal.h). Raw POSIX calls, not iostreams: every
// error must come back with its errno.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "halo/graph/error.h"
#include "halo/graph/staging.h"
#include "staging_internal.h"

namespace halo {
namespace fs = std::filesystem;
using namespace staging_internal;

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

}  // namespace halo
