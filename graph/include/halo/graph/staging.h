// A directory built under a temporary name next to its destination and renamed into place when
// complete, so readers never see half-written output. Destroyed uncommitted (an error was
// thrown), it removes everything written under it.
#pragma once

#include <filesystem>
#include <vector>

namespace halo {

class StagingDir {
 public:
  // Throws ParamError when dir exists and !overwrite; creates the staging directory.
  StagingDir(const std::filesystem::path& dir, bool overwrite);
  ~StagingDir();
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;

  const std::filesystem::path& path() const { return tmp_; }
  const std::filesystem::path& destination() const { return dir_; }
  // Renames the staging directory to the destination (replacing it when overwrite).
  void commit();

 private:
  std::filesystem::path dir_, tmp_;
  bool committed_ = false;
};

// Checkpoint directories hold one staged subdirectory per epoch, dir/epoch-E.
std::filesystem::path epoch_dir(const std::filesystem::path& dir, int epoch);
// The epochs committed in dir (their meta.json exists), ascending; none if dir does not exist.
std::vector<int> committed_epochs(const std::filesystem::path& dir);
// Removes every epoch directory older than `epoch`.
void remove_epochs_before(const std::filesystem::path& dir, int epoch);

}  // namespace halo
