// Every output halo writes goes through here, so every writer follows the same rules:
//
// - Checked: every write, fsync and close is checked and becomes a SystemError naming the file;
//   files are fsynced before the rename that commits them, and their folder after it.
// - Staged: a file or folder is built under ".NAME.halo-tmp-PID" beside its destination and
//   renamed into place when complete, so readers never see half-written output. A replaced
//   folder is swapped in atomically (renameat2 RENAME_EXCHANGE); where the file system cannot,
//   the old one is renamed aside to ".NAME.halo-old-PID" first and removed last, so at every
//   instant either the old or the new output is there, or the old one waits aside to be restored.
// - Refusing: an output never replaces something that is not a regular file (or, for a folder,
//   a halo folder of its kind), and never an input of the same command (ParamError).
//   A symbolic link is followed: its target is the output and gets every check a plain path
//   gets. A link is how users put outputs on another disk (or say /dev/stdout); replacing the
//   link would silently cut it, and writing through it unchecked could clobber an input.
// - Self-cleaning: staging entries whose writer died (SIGKILL, lost node) are removed by the
//   next writer in the same folder, and an old output a dead replace left aside is restored (by
//   that writer, or by the next reader of the output).
//   A writer holds an flock on its staging entry for its lifetime, which the kernel drops when
//   it dies; an unlocked entry (written by an older halo, or in the instant before its lock) is
//   stale when its PID is gone or now belongs to a process that is not halo.
//
// Test hooks (environment): HALO_TEST_KILL_AT=staged|aside|swapped kills the process with
// SIGKILL at that step of a commit; HALO_TEST_WAIT_AT=staged:FILE holds it there until FILE
// exists (a second writer commits meanwhile); HALO_TEST_NO_EXCHANGE=1 forces the two-rename
// replace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace halo {

// ---- checks made before any work --------------------------------------------------------------

// Throws ParamError naming `out` when writing it would replace or write into one of `inputs`:
// the same file or folder, anything inside an input folder, or a folder that holds an input.
void check_not_input(const std::filesystem::path& out,
                     const std::vector<std::filesystem::path>& inputs);

// A file written whole and renamed into place: `out` must be absent or a regular file (links
// followed) and no input. Returns the path to write (the final target of a symlink chain).
std::filesystem::path resolve_file_output(const std::filesystem::path& out,
                                          const std::vector<std::filesystem::path>& inputs = {});

// A stream written in place (a log): as resolve_file_output, but a character device, FIFO or
// socket is allowed too (--log /dev/stdout) and written to, never replaced.
std::filesystem::path resolve_stream_output(const std::filesystem::path& out,
                                            const std::vector<std::filesystem::path>& inputs = {});

// A folder output: absent or, with overwrite, an empty folder or a folder whose meta.json
// "format" is `format` ("ogb": a folder with raw/num-node-list.csv.gz), and no input.
// ParamError otherwise ("already exists (pass --force ...)" without overwrite). Restores or
// cleans what dead writers left beside it first. Returns the path to write (links followed).
std::filesystem::path resolve_dir_output(const std::filesystem::path& out,
                                         const std::string& format, bool overwrite,
                                         const std::vector<std::filesystem::path>& inputs = {});

// Throws SystemError ("OUT: No space left on device: ...") when the file system that will hold
// `out` (its nearest existing folder) has less than `bytes` free, naming both figures and what
// needs them: checked before a long write, so a short disk fails in a second, not after an hour.
void check_free_space(const std::filesystem::path& out, std::uint64_t bytes,
                      const std::string& what);

// A folder written into, never replaced (a checkpoint root): absent or a folder, and no input.
void check_output_folder(const std::filesystem::path& dir,
                         const std::vector<std::filesystem::path>& inputs = {});

// Removes the staging entries in `dir` whose writer is gone and restores ".NAME.halo-old-PID"
// to NAME when NAME is missing (a replace died between its renames). An output whose name is too
// long for its staging entry to hold is restored only when it is `target` (its writer knows it);
// until then its old copy is kept. Never throws.
void clean_stale_staging(const std::filesystem::path& dir,
                         const std::filesystem::path& target = {});
// A reader's half of that promise: when folder or file `out` is missing and a dead replace left
// it aside, renames it back (with a note on stderr) and returns true. Touches nothing else, so a
// reader never removes anything. Never throws.
bool restore_set_aside(const std::filesystem::path& out);

// The path users know for p: each component that is this process's staging entry
// (".NAME.halo-tmp-PID") shown as NAME, so that a failed write inside a staged folder names the
// output it was building ("out/part-0/x.bin", not "out/.P.halo-tmp-7/part-0/x.bin", which is gone
// by the time the message is read). throw_system shows every path this way.
std::filesystem::path shown_path(const std::filesystem::path& p);

// ---- writers ------------------------------------------------------------------------------------

// Writes all n bytes to fd (retrying short writes and EINTR); SystemError "PATH: write failed:
// ...".
void write_all(int fd, const std::filesystem::path& path, const void* data, std::size_t n);
// fsync(fd); SystemError naming path on failure.
void sync_fd(int fd, const std::filesystem::path& path);
// Creates (or truncates) path, writes text, fsyncs and closes it, every step checked. For files
// inside a staging folder, which the folder's rename commits.
void write_file(const std::filesystem::path& path, std::string_view text);

// What occupied an output's path when its writer started: a commit replaces only that, so two
// writers of one output cannot both succeed (the second finds the first's output).
struct PathIdentity {
  bool present = false;
  std::uint64_t dev = 0, ino = 0;
};

// A folder built under ".NAME.halo-tmp-PID" next to its destination and renamed into place by
// commit(). Destroyed uncommitted (an error was thrown), it removes everything written under it,
// and the parent folders it created when they are still empty.
class StagingDir {
 public:
  // Checks dir with resolve_dir_output(dir, format, overwrite, inputs), then creates the staging
  // folder (and dir's parents).
  StagingDir(const std::filesystem::path& dir, const std::string& format, bool overwrite,
             const std::vector<std::filesystem::path>& inputs = {});
  ~StagingDir();
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;

  const std::filesystem::path& path() const { return tmp_; }
  const std::filesystem::path& destination() const { return dir_; }
  // Fsyncs the staging folder and renames it to the destination (an atomic swap when replacing),
  // then fsyncs the parent folder. Every file written inside must already be closed and synced.
  // ParamError when another writer committed the destination meanwhile: "already exists" (pass
  // --force) for a new output, "replaced by another process" for a replaced one; the staged
  // folder is then removed and the other writer's output stays.
  void commit();

 private:
  std::filesystem::path dir_, tmp_;
  std::vector<std::filesystem::path> made_;  // parent folders created for it, deepest first
  int lock_fd_ = -1;
  bool overwrite_ = false, committed_ = false;
  PathIdentity before_;  // the destination when this writer started
};

// A file written whole under ".NAME.halo-tmp-PID" beside its destination and renamed over it by
// commit() (atomic for files). Destroyed uncommitted, it removes the staging file.
class StagedFile {
 public:
  // Checks path with resolve_file_output(path, inputs) and creates the staging file.
  explicit StagedFile(const std::filesystem::path& path,
                      const std::vector<std::filesystem::path>& inputs = {});
  ~StagedFile();
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;

  // Appends n bytes; SystemError naming the destination on failure.
  void write(const void* data, std::size_t n);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Writes n bytes at byte offset (the file grows as needed); SystemError as write.
  void write_at(const void* data, std::size_t n, std::uint64_t offset);
  // Fsyncs and closes the file, renames it over the destination and fsyncs the folder.
  // ParamError, and nothing renamed, when another writer committed the destination meanwhile.
  void commit();

 private:
  std::filesystem::path shown_, path_, tmp_;
  int fd_ = -1;
  PathIdentity before_;  // the destination when this writer started
};

// A log of JSON lines, written in place as the run goes: a log is a stream that users read while
// the job runs (tail -f, plot-log) and a killed run's records are what its user needs, so it is
// not staged. Each record lands whole: one write, cut back to the last whole record when a write
// fails, so a reader never sees half a record. Default-constructed: closed, false.
class LogFile {
 public:
  LogFile() = default;
  ~LogFile();
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  // Opens path (resolve_stream_output) for appending (resume) or truncated; SystemError or
  // ParamError naming it.
  void open(const std::filesystem::path& path, bool append,
            const std::vector<std::filesystem::path>& inputs = {});
  explicit operator bool() const { return fd_ >= 0; }
  // Writes line + '\n' in one write; on failure removes what this record wrote (and the file,
  // if this run created it and wrote nothing else) and throws SystemError naming the file.
  void write_line(const std::string& line);
  // Fsyncs (regular files) and closes, checked. A closed log ignores close().
  void close();

 private:
  std::filesystem::path path_, target_;  // as given (messages), and written (links followed)
  int fd_ = -1;
  bool regular_ = false, created_ = false;
  long long good_ = 0;  // size after the last whole record (regular files)
};

// Removes a committed folder without ever leaving it half removed under its own name: it is
// renamed to a staging name first (a stale one the next writer cleans), then removed. Throws
// SystemError "DIR: WHY ..." when it cannot be.
void remove_committed_dir(const std::filesystem::path& dir, const std::string& why);

}  // namespace halo
