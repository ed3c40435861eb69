// StagingDir: write under ".NAME.halo-tmp-PID", rename when done.
#include "halo/graph/staging.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "halo/graph/error.h"

namespace halo {
namespace fs = std::filesystem;

namespace {
fs::path staging_name(const fs::path& dir, const char* suffix) {
  fs::path d = dir;
  if (!d.has_filename()) d = d.parent_path();  // "out/" -> "out"
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on "." + std::string temporaries.
  std::string name = ".";
  name += d.filename().string();
  name += ".halo-";
  name += suffix;
  name += "-";
  name += std::to_string(getpid());
  return d.parent_path() / name;
}
}  // namespace

StagingDir::StagingDir(const fs::path& dir, bool overwrite)
    : dir_(dir), tmp_(staging_name(dir, "tmp")) {
  if (dir_.empty()) throw ParamError("output path is empty");
  if (fs::exists(dir_) && !overwrite)
    throw ParamError(dir_.string() + ": already exists (pass --force to replace it)");
  std::error_code ec;
  fs::remove_all(tmp_, ec);
  fs::create_directories(tmp_, ec);
  if (ec) throw SystemError(tmp_.string() + ": cannot create directory: " + ec.message());
}

StagingDir::~StagingDir() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
}

void StagingDir::commit() {
  std::error_code ec;
  fs::path old;
  if (fs::exists(dir_)) {  // replacing: move the old one aside first, remove it after
    old = staging_name(dir_, "old");
    fs::remove_all(old, ec);
    fs::rename(dir_, old, ec);
    if (ec) throw SystemError(dir_.string() + ": cannot replace: " + ec.message());
  }
  fs::rename(tmp_, dir_, ec);
  if (ec) throw SystemError(dir_.string() + ": cannot rename the staging directory: " + ec.message());
  committed_ = true;
  if (!old.empty()) fs::remove_all(old, ec);
}

fs::path epoch_dir(const fs::path& dir, int epoch) { return dir / ("epoch-" + std::to_string(epoch)); }

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
    if (e < epoch) fs::remove_all(epoch_dir(dir, e));
}

}  // namespace halo
