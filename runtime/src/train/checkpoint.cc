// Checkpoint folders and the parameter state both trainers store (checkpoint.h). The arrays are
// copied as they are, so a resume continues bit for bit.
#include "halo/runtime/train/checkpoint.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/input.h"
#include "halo/graph/staging.h"

namespace halo {
namespace fs = std::filesystem;

void check_outside_checkpoint(const fs::path& out, const std::string& flag,
                              const fs::path& checkpoint) {
  if (out.empty() || checkpoint.empty()) return;
  std::error_code ec;
  fs::path o = fs::weakly_canonical(fs::absolute(out, ec), ec);
  fs::path c = fs::weakly_canonical(fs::absolute(checkpoint, ec), ec);
  if (!c.has_filename()) c = c.parent_path();
  const auto [ci, oi] = std::mismatch(c.begin(), c.end(), o.begin(), o.end());
  if (ci == c.end() && oi != o.end() && !oi->empty())
    throw ParamError(flag + " " + out.string() + ": inside the checkpoint folder " +
                     checkpoint.string() + ", which holds checkpoints only; write it elsewhere");
}

fs::path epoch_dir(const fs::path& dir, int epoch) {
  return dir / ("epoch-" + std::to_string(epoch));
}

std::vector<int> committed_epochs(const fs::path& dir) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("epoch-", 0) != 0 || !fs::exists(e.path() / "meta.json")) continue;
    try {
      out.push_back(std::stoi(n.substr(6)));
    } catch (const std::logic_error&) {
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void remove_epochs_before(const fs::path& dir, int epoch) {
  for (int e : committed_epochs(dir))
    if (e < epoch) remove_committed_dir(epoch_dir(dir, e), "cannot remove an old checkpoint epoch");
}

bool epoch_may_be_of(const fs::path& dir, const nlohmann::json& key) {
  nlohmann::json meta;
  try {
    meta = read_json_file(dir / "meta.json");
  } catch (const Error&) {
  }
  return !meta.is_object() || !meta.contains("key") || meta.at("key") == key;
}

void remove_epochs_but(const fs::path& dir, int epoch) {
  for (int e : committed_epochs(dir))
    if (e != epoch)
      remove_committed_dir(epoch_dir(dir, e), "cannot remove a superseded checkpoint epoch");
}

namespace {

// What one rank sees in a checkpoint folder: the newest committed epoch of halo checkpoints
// (DIR/epoch-E of TGN, DIR/run-R/rank-r/epoch-E of the full-graph trainer; -1 when there are
// none), and the first entry that is neither those, a lock nor a staging entry.
struct FolderContents {
  int newest = -1;
  bool full_graph = false, tgn = false;  // which trainer's layout it holds (run-R/, epoch-E/)
  std::string foreign;
};

bool is_epoch_name(const std::string& n) {
  return n.rfind("epoch-", 0) == 0 && n.size() > 6 && n.size() <= 15 &&
         n.find_first_not_of("0123456789", 6) == std::string::npos;
}

bool is_halo_entry(const std::string& n) {
  // Locks, and what staged writers and removals leave (".NAME.halo-tmp-PID"), cleaned by them.
  return n.rfind(".halo-lock-rank-", 0) == 0 ||
         (n[0] == '.' &&
          (n.find(".halo-tmp-") != std::string::npos || n.find(".halo-old-") != std::string::npos));
}

// Whether entry e is a folder (not a link to one: --force removes what it finds, and must never
// follow a link out of the checkpoint folder).
bool real_folder(const fs::directory_entry& e) {
  std::error_code ec;
  return e.is_directory(ec) && !e.is_symlink(ec);
}

// The first entry of an epoch folder that halo did not write there (meta.json and .bin arrays
// only), as a path under `shown`; empty when there is none. By name: a meta.json that is not a
// regular file is its reader's to name ("is a FIFO"), not a foreign file. By name: a meta.json that
// is not a regular file is its reader's to name ("is a FIFO"), not a foreign file.
std::string foreign_in_epoch(const fs::path& epoch, const fs::path& shown) {
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(epoch, ec)) {
    const std::string n = f.path().filename().string();
    const bool array = n.size() > 4 && n.compare(n.size() - 4, 4, ".bin") == 0;
    if (is_halo_entry(n) || n == "meta.json" || array) continue;
    return (shown / n).string();
  }
  return {};
}

// The newest committed epoch of a rank folder (its epoch-E folders), or -1; *foreign gets the
// first entry that is not one (or lies inside one).
int newest_in_rank(const fs::path& rank, const fs::path& shown, std::string* foreign) {
  int newest = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(rank, ec)) {
    const std::string n = e.path().filename().string();
    if (is_halo_entry(n)) continue;
    if (!is_epoch_name(n) || !real_folder(e)) {
      if (foreign->empty()) *foreign = (shown / n).string();
      continue;
    }
    if (foreign->empty()) *foreign = foreign_in_epoch(e.path(), shown / n);
    if (fs::exists(e.path() / "meta.json", ec)) newest = std::max(newest, std::stoi(n.substr(6)));
  }
  return newest;
}

// The newest committed epoch under a run-R folder (any rank-r), or 0 for an emptied one (still an
// earlier run's); *foreign gets the first entry that does not belong there.
int newest_in_run(const fs::path& run, std::string* foreign) {
  int newest = 0;
  std::error_code ec;
  for (const auto& r : fs::directory_iterator(run, ec)) {
    const std::string n = r.path().filename().string();
    if (is_halo_entry(n)) continue;
    const fs::path shown = run.filename() / n;
    if (n.rfind("rank-", 0) != 0 || n.size() == 5 ||
        n.find_first_not_of("0123456789", 5) != std::string::npos || !real_folder(r)) {
      if (foreign->empty()) *foreign = shown.string();
      continue;
    }
    newest = std::max(newest, newest_in_rank(r.path(), shown, foreign));
  }
  return newest;
}

FolderContents look_into(const fs::path& dir) {
  FolderContents c;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (is_halo_entry(n)) continue;
    const bool folder = real_folder(e);
    if (folder && is_epoch_name(n)) {
      c.tgn = true;
      if (c.foreign.empty()) c.foreign = foreign_in_epoch(e.path(), n);
      if (fs::exists(e.path() / "meta.json", ec))
        c.newest = std::max(c.newest, std::stoi(n.substr(6)));
      else
        c.newest = std::max(c.newest, 0);
    } else if (folder && n.rfind("run-", 0) == 0 && n.size() > 4 &&
               n.find_first_not_of("0123456789", 4) == std::string::npos) {
      c.full_graph = true;
      c.newest = std::max(c.newest, newest_in_run(e.path(), &c.foreign));
    } else if (c.foreign.empty()) {
      c.foreign = n;
    }
  }
  return c;
}

// Removes the halo checkpoints in dir (--force), each renamed to a staging name before it goes so
// nothing is ever half removed under its own name. Ranks sharing a file system race to remove the
// same entries: one that is gone already is someone else's success.
void clear_checkpoints(const fs::path& dir) {
  std::vector<fs::path> gone;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (!is_halo_entry(n) && (is_epoch_name(n) || n.rfind("run-", 0) == 0))
      gone.push_back(e.path());
  }
  for (const fs::path& p : gone) {
    std::error_code rc;
    if (!fs::exists(fs::symlink_status(p, rc))) continue;
    try {
      remove_committed_dir(p, "--force: cannot remove the earlier run's checkpoint");
    } catch (const SystemError&) {
      if (fs::exists(fs::symlink_status(p, rc))) throw;
    }
  }
}

}  // namespace

CheckpointClaim::CheckpointClaim(Communicator& comm, const fs::path& dir, bool resume, bool force,
                                 bool every_rank)
    : dir_(dir) {
  try {
    claim(comm, resume, force, every_rank);
  } catch (...) {
    release();
    throw;
  }
}

bool CheckpointClaim::lock(int rank) {
  std::error_code ec;
  created_ = !fs::exists(fs::symlink_status(dir_, ec));
  fs::create_directories(dir_, ec);
  if (ec) throw SystemError(dir_.string() + ": cannot create folder: " + ec.message());
  lock_ = dir_ / (".halo-lock-rank-" + std::to_string(rank));
  for (int tries = 0; tries < 8; ++tries) {
    const int fd = ::open(lock_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) throw_system(lock_, "cannot create the checkpoint folder's lock");
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      return false;
    }
    // The holder before us may have removed the file after we opened it: a lock on a removed
    // file holds nothing, so take the one now at the path.
    struct stat held {
    }, now{};
    if (::fstat(fd, &held) == 0 && ::stat(lock_.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev) {
      fd_ = fd;
      const std::string who = std::to_string(getpid()) + "\n";
      (void)::ftruncate(fd_, 0);
      (void)::pwrite(fd_, who.data(), who.size(), 0);
      return true;
    }
    ::close(fd);
  }
  throw SystemError(lock_.string() + ": the checkpoint folder's lock kept being replaced");
}

void CheckpointClaim::clear(Communicator& comm, bool mine) {
  std::string failure;
  std::int64_t cleared = 0;
  try {
    if (mine) clear_checkpoints(dir_);
  } catch (const Error& e) {
    failure = e.what();
    cleared = 1;
  }
  comm.allreduce(&cleared, 1, ReduceOp::kMax);  // no rank writes before every rank has cleared
  if (cleared)
    throw SystemError(failure.empty() ? dir_.string() + ": another rank could not clear it"
                                      : failure);
}

void CheckpointClaim::claim(Communicator& comm, bool resume, bool force, bool every_rank) {
  const fs::path& dir = dir_;
  const bool mine = every_rank || comm.rank() == 0;
  // What this rank found: [another training holds it, something foreign, newest epoch + 1].
  // [4]: the other trainer's layout (run-R/ for TGN, epoch-E/ for the full-graph trainer).
  std::int64_t seen[4] = {0, 0, 0, 0};
  FolderContents c;
  std::string failure;  // a system error on this rank (cannot create the folder or the lock)
  if (mine) {
    try {
      seen[0] = lock(comm.rank()) ? 0 : 1;
      if (fd_ >= 0) {
        c = look_into(dir);
        seen[1] = c.foreign.empty() ? 0 : 1;
        seen[2] = c.newest + 1;
        seen[3] = (every_rank ? c.tgn : c.full_graph) ? 1 : 0;
      }
    } catch (const Error& e) {
      failure = e.what();
    }
  }
  std::int64_t failed = failure.empty() ? 0 : 1;
  comm.allreduce(&failed, 1, ReduceOp::kMax);
  if (failed) {
    if (!failure.empty()) throw SystemError(failure);
    throw SystemError(dir.string() + ": another rank could not take the checkpoint folder");
  }
  comm.allreduce(seen, 4, ReduceOp::kMax);
  if (seen[0])
    throw ParamError(dir.string() +
                     ": another halo training is using this checkpoint folder; wait for it to "
                     "end, or choose another folder");
  if (seen[1])
    throw ParamError(dir.string() + ": holds " +
                     (c.foreign.empty() ? std::string("files (on another rank's machine)")
                                        : "'" + c.foreign + "'") +
                     ", which is not a halo checkpoint; give an empty or new folder");
  // The other trainer's checkpoint can be replaced, never resumed: say so rather than advise
  // --resume, which would then find no checkpoint of its own.
  const std::string other = every_rank ? "halo tgn train" : "halo train";
  if (seen[3] && (resume || !force))
    throw ParamError(dir.string() + ": holds a checkpoint of " + other + " (epoch " +
                     std::to_string(seen[2] - 1) + "), which this command cannot resume; " +
                     "pass --force (without --resume) to replace it, or choose another folder");
  if (resume || seen[2] == 0) return;
  if (!force)
    throw ParamError(dir.string() + ": holds the checkpoint of an earlier run (epoch " +
                     std::to_string(seen[2] - 1) +
                     "); pass --resume to continue it or --force to replace it, or choose "
                     "another folder");
  clear(comm, mine);
}

CheckpointClaim::~CheckpointClaim() { release(); }

void CheckpointClaim::release() {
  if (fd_ >= 0) {
    ::unlink(lock_.c_str());  // before the unlock: the next holder then locks a file at the path
    ::close(fd_);
    fd_ = -1;
  }
  if (created_) ::rmdir(dir_.c_str());  // only if empty: nothing was written
  created_ = false;
}

void put_adam_state(ArrayDir& a, const std::vector<Param*>& params) {
  for (Param* p : params) {
    a.put(p->name + ".value", p->value.to_host());
    a.put(p->name + ".m", p->m.to_host());
    a.put(p->name + ".v", p->v.to_host());
  }
}

std::vector<float> read_adam_state(const fs::path& dir, const nlohmann::json& meta,
                                   const std::vector<Param*>& params) {
  std::vector<float> out;
  out.reserve(adam_state_size(params));
  for (Param* p : params)
    for (const char* part : {".value", ".m", ".v"}) {
      const Array<float> a =
          map_listed<float>(dir, meta, p->name + part, {}, std::uint64_t(p->value.size()), 1);
      out.insert(out.end(), a.begin(), a.end());
    }
  return out;
}

std::vector<float> adam_state_values(const std::vector<Param*>& params) {
  std::vector<float> out;
  out.reserve(adam_state_size(params));
  for (Param* p : params)
    for (const Matrix* m : {&p->value, &p->m, &p->v}) {
      const std::vector<float> h = m->to_host();
      out.insert(out.end(), h.begin(), h.end());
    }
  return out;
}

std::size_t adam_state_size(const std::vector<Param*>& params) {
  std::size_t n = 0;
  for (Param* p : params) n += 3 * std::size_t(p->value.size());
  return n;
}

const float* set_adam_state(const std::vector<Param*>& params, const float* at) {
  for (Param* p : params)
    for (Matrix* m : {&p->value, &p->m, &p->v}) {
      m->assign(std::vector<float>(at, at + m->size()));
      at += m->size();
    }
  return at;
}

}  // namespace halo
