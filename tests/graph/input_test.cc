// graph/input.h: which files a reader opens (a FIFO or a directory where a file belongs is
// refused before any blocking open), the JSON depth limit at its boundary, and json_shown.
#include "halo/graph/input.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "../test_util.h"

namespace halo {
namespace {
using test::TempDir;
using json = nlohmann::json;
namespace fs = std::filesystem;

std::string nested(std::size_t depth, const std::string& inner = "0") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

TEST(Input, JsonNestedUpToTheLimitParsesAndOneLevelMoreIsRefused) {
  EXPECT_EQ(parse_json(nested(kMaxJsonDepth), "f.json").dump(), nested(kMaxJsonDepth));
  test::expect_input_error([] { parse_json(nested(kMaxJsonDepth + 1), "f.json"); },
                           {"f.json: invalid JSON: arrays or objects nested deeper than 64"});
  std::string objects;  // objects count as levels too
  for (int i = 0; i <= kMaxJsonDepth; ++i) objects += "{\"k\":";
  objects += "0" + std::string(kMaxJsonDepth + 1, '}');
  test::expect_input_error([&] { parse_json(objects, "f.json"); }, {"nested deeper than 64"});
}

TEST(Input, AMillionLevelsAreRefusedAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  test::expect_input_error([] { parse_json(nested(1000000), "f.json"); }, {"nested deeper"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
}

TEST(Input, JsonShownIsShortAndPrintable) {
  json wide = json::array();
  for (int i = 0; i < 100000; ++i) wide.push_back(i);
  const std::string w = json_shown(wide);
  EXPECT_EQ(w.rfind("[0,1,2,", 0), 0u) << w;
  EXPECT_LT(w.size(), 80u) << w;
  EXPECT_EQ(json_shown(json(std::string(1000, 'x'))).size(), 45u);  // "40 x..." with quotes
  EXPECT_EQ(json_shown(json("a\x1b[2J\n")), "\"a\\x1b[2J\\x0a\"");
  EXPECT_EQ(json_shown(parse_json(nested(60), "f")), "[[[[...]]]]");
  EXPECT_EQ(json_shown(json{{"a", 1}}), "{\"a\":1}");
  EXPECT_EQ(json_shown(json(2.5)), "2.5");
}

TEST(Input, AFifoOrADirectoryIsRefusedWithoutBlocking) {
  TempDir t;
  ASSERT_EQ(mkfifo((t / "fifo").c_str(), 0600), 0);  // no writer: a blocking open would hang
  test::expect_input_error([&] { open_input(t / "fifo"); },
                           {"fifo: is a FIFO (named pipe), expected a regular file"});
  test::expect_input_error([&] { read_json_file(t / "fifo"); }, {"fifo: is a FIFO"});
  fs::create_directory(t / "dir");
  for (const InputKind kind : {InputKind::kFile, InputKind::kStream})
    test::expect_input_error([&] { open_input(t / "dir", kind); }, {"dir: is a directory"});
  test::expect_input_error([&] { open_input("/dev/null"); }, {"/dev/null: is a character device"});
  const int fd = open_input("/dev/null", InputKind::kStream);  // a stream may be a device
  EXPECT_GE(fd, 0);
  EXPECT_EQ(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);  // reads block as usual
  close(fd);
  test::write_text(t / "f.json", "{\"a\": [1, 2]}");
  EXPECT_EQ(read_json_file(t / "f.json").dump(), "{\"a\":[1,2]}");
  EXPECT_THROW(open_input(t / "missing"), SystemError);
}

}  // namespace
}  // namespace halo
