// A directory built under a temporary name next to its destination and renamed into place when
// complete, so readers never see half-written output. Destroyed uncommitted (an error was
// thrown), it removes everything written under it.
#pragma once

#include <filesystem>

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

}  // namespace halo
