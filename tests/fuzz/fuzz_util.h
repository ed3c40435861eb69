// Shared by the libFuzzer targets: a scratch folder per process, the input as a file, and the
// rule every target follows: a reader may reject an input only with a halo::Error (the one-line
// messages users see); any other exception, a crash, a sanitizer report, a hang (libFuzzer's
// -timeout) or an allocation beyond -rss_limit_mb is a finding.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "halo/graph/error.h"

namespace halo::fuzz {

namespace fs = std::filesystem;

// This process's scratch folder (removed and made again at the first call).
inline const fs::path& scratch() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("halo-fuzz-" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Writes bytes to scratch()/name and returns the path.
inline fs::path write_input(const std::string& name, const std::uint8_t* data, std::size_t size) {
  const fs::path p = scratch() / name;
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  return p;
}

// Runs fn; a halo::Error is the expected way to refuse bad input.
template <class Fn>
void expect_clean(Fn&& fn) {
  try {
    fn();
  } catch (const halo::Error&) {
  }
}

}  // namespace halo::fuzz
