// What the writer (parts.cc) and the reader (parts_read.cc) of partitioned datasets share: the
// format of a part's meta.json and where part R lives. Private to partition/src.
#pragma once

#include <filesystem>
#include <string>

namespace halo::parts_internal {

constexpr const char* kPartFormat = "halo-part";
constexpr int kVersion = 1;

// PARTS/part-R: the folder of part r.
inline std::filesystem::path part_dir(const std::filesystem::path& dir, int r) {
  return dir / ("part-" + std::to_string(r));
}

}  // namespace halo::parts_internal
