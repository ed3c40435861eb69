// Typed errors. Bad input files and bad parameters are the user's to fix and become one line
// on stderr (see tools/halo/main.cc); system errors are the machine's. Library code throws,
// never exits.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace halo {

// Base of every error halo reports to the user as one line.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file whose content is not what was expected. The message names the file and record.
class InputError : public Error {
 public:
  using Error::Error;
};

// A parameter (command-line flag, option struct field) out of its valid range.
class ParamError : public Error {
 public:
  using Error::Error;
};

// An operating-system failure (open, write, mmap, rename) with errno's text.
class SystemError : public Error {
 public:
  using Error::Error;
};

// Throws InputError "FILE: line LINE: WHAT" (LINE <= 0 leaves the line out).
[[noreturn]] void throw_input(const std::filesystem::path& file, std::int64_t line,
                              const std::string& what);

// Throws SystemError "FILE: WHAT: strerror(errno)" using the current errno.
[[noreturn]] void throw_system(const std::filesystem::path& file, const std::string& what);

}  // namespace halo
