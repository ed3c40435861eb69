// Helpers shared by the tests: scratch directories, small files (plain or gzip), paths to the
// bundled and shared datasets, an expectation that an InputError names what it should, and
// one that an option enum is spelled as it should.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "halo/graph/error.h"

namespace halo::test {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "t";
    for (char& c : name)
      if (c == '/') c = '_';
    // A per-process count keeps two live TempDirs of one test apart (a helper that makes its
    // own while the test's is in use must not wipe it).
    static std::atomic<int> made{0};
    path_ = fs::temp_directory_path() /
            ("halo-test-" + std::to_string(getpid()) + "-" + std::to_string(made++) + "-" + name);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& s) const { return path_ / s; }

 private:
  fs::path path_;
};

inline void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  f << text;
}

inline void write_gz(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  gzFile f = gzopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  if (!text.empty()) gzwrite(f, text.data(), unsigned(text.size()));
  gzclose(f);
}

inline std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// What a shell command did: its exit code (128 + N when a signal N ended it, as a shell says),
// its wall time, and its output.
struct Run {
  int code = -1;
  double seconds = 0;
  std::string out, err;  // err stays empty when the two streams go to one file
};

// Runs `cmd` through /bin/sh with its output redirected as `redirect` says.
inline Run shell_redirected(const std::string& cmd, const std::string& redirect) {
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(("{ " + cmd + "; }" + redirect).c_str());
  Run r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Runs `cmd` with stdout and stderr captured apart in dir (the capture files are removed).
inline Run shell(const std::string& cmd, const fs::path& dir) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  Run r = shell_redirected(cmd, " >" + out.string() + " 2>" + err.string());
  r.out = read_bytes(out);
  r.err = read_bytes(err);
  fs::remove(out);
  fs::remove(err);
  return r;
}

// Runs `cmd` with stdout and stderr together in out_file (kept), and in Run::out.
inline Run shell_merged(const std::string& cmd, const fs::path& out_file) {
  Run r = shell_redirected(cmd, " >" + out_file.string() + " 2>&1");
  r.out = read_bytes(out_file);
  return r;
}

// Paths compiled in by CMake, each overridable by the environment variable of the same name —
// so test binaries built here also run from another checkout (tools/gpu-check.sh on a GPU
// machine).
inline std::string configured(const char* name, const char* compiled) {
  const char* v = std::getenv(name);
  return v && *v ? v : compiled;
}
inline fs::path source_dir() { return configured("HALO_SOURCE_DIR", HALO_SOURCE_DIR); }
inline fs::path bundled(const std::string& rel) { return source_dir() / "datasets" / rel; }
inline fs::path test_data(const std::string& rel) {
  return fs::path(configured("HALO_TEST_DATA_DIR", HALO_TEST_DATA_DIR)) / rel;
}

// d(loss)/d(value) by central differences with step h; value is restored.
template <class Loss>
double central_difference(float& value, float h, Loss&& loss) {
  const float saved = value;
  value = saved + h;
  const double up = loss();
  value = saved - h;
  const double down = loss();
  value = saved;
  return (up - down) / (2.0 * double(h));
}

// Runs fn, expecting an InputError whose message contains every one of parts.
template <class Fn>
void expect_input_error(Fn&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
  }
}

// The message of the ParamError that fn throws (a failure, and "", when it throws none).
template <class Fn>
std::string param_error(Fn&& fn) {
  try {
    fn();
  } catch (const ParamError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ParamError";
  return "";
}

// For each {value, spelling}: parse(spelling) is value and name(value) is spelling. The pairs are
// written out in the test, not read from the code's table, so a swapped entry there fails here.
template <class E, class Parse, class Name>
void expect_spellings(std::initializer_list<std::pair<E, const char*>> pairs, Parse&& parse,
                      Name&& name) {
  for (const auto& [value, spelling] : pairs) {
    EXPECT_EQ(parse(spelling), value) << "parsing '" << spelling << "'";
    EXPECT_EQ(std::string(name(value)), std::string(spelling))
        << "naming the value of " << spelling;
  }
}

}  // namespace halo::test
