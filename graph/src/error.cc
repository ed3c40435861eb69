// Error helpers: one place builds the "FILE: line N: what" shape every message follows.
#include "halo/graph/error.h"

#include <cerrno>
#include <cstring>

#include "halo/graph/staging.h"

namespace halo {

void throw_input(const std::filesystem::path& file, std::int64_t line, const std::string& what) {
  std::string msg = file.string();
  if (line > 0) msg += ": line " + std::to_string(line);
  throw InputError(msg + ": " + what);
}

void throw_system(const std::filesystem::path& file, const std::string& what) {
  const int err = errno;
  throw SystemError(shown_path(file).string() + ": " + what + ": " + std::strerror(err));
}

}  // namespace halo
