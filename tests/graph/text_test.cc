// LineReader / LineCursor: blocks of whole lines from plain and gzip files, field parsing,
// and errors that name the file and line.
#include "halo/graph/text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../test_util.h"

namespace halo {
namespace {
using test::TempDir;

std::vector<std::string> all_lines(const std::filesystem::path& p) {
  std::vector<std::string> out;
  for_each_line(p, [&](LineCursor& c) { out.emplace_back(c.text()); });
  return out;
}

TEST(LineReader, PlainAndGzipGiveTheSameLines) {
  TempDir t;
  const std::string text = "a,b\nc d\r\n\nlast";
  test::write_text(t / "x.txt", text);
  test::write_gz(t / "x.gz", text);
  const std::vector<std::string> want = {"a,b", "c d", "", "last"};
  EXPECT_EQ(all_lines(t / "x.txt"), want);
  EXPECT_EQ(all_lines(t / "x.gz"), want);
  LineReader r(t / "x.gz");
  EXPECT_TRUE(r.compressed());
}

TEST(LineReader, LinesSpanningBlocksStayWhole) {
  TempDir t;
  // ~12 MiB of text crosses several 4 MiB blocks; one 5 MiB line is longer than a block.
  std::string text;
  for (int i = 0; i < 600000; ++i) text += std::to_string(i) + ",line\n";
  text += std::string(5 << 20, 'x') + "\n";
  text += "end\n";
  test::write_gz(t / "big.gz", text);
  std::int64_t lines = 0, last_line_no = 0;
  std::uint64_t bytes = for_each_line(t / "big.gz", [&](LineCursor& c) {
    ++lines;
    last_line_no = c.line();
    if (lines <= 600000) {
      ASSERT_EQ(c.next_int("id"), lines - 1);
    } else if (lines == 600001) {
      ASSERT_EQ(c.text().size(), std::size_t(5 << 20));
    } else {
      ASSERT_EQ(c.text(), "end");
    }
  });
  EXPECT_EQ(lines, 600002);
  EXPECT_EQ(last_line_no, 600002);
  EXPECT_EQ(bytes, text.size());
}

TEST(LineReader, ConcatenatedGzipMembersReadAsOneStream) {
  TempDir t;
  test::write_gz(t / "a.gz", "1\n2\n");
  test::write_gz(t / "b.gz", "3\n");
  test::write_text(t / "ab.gz", test::read_bytes(t / "a.gz") + test::read_bytes(t / "b.gz"));
  EXPECT_EQ(all_lines(t / "ab.gz"), (std::vector<std::string>{"1", "2", "3"}));
}

TEST(LineReader, TruncatedGzipIsAnInputError) {
  TempDir t;
  std::string text;
  for (int i = 0; i < 10000; ++i) text += std::to_string(i * 7919) + "\n";
  test::write_gz(t / "full.gz", text);
  const std::string gz = test::read_bytes(t / "full.gz");
  test::write_text(t / "cut.gz", gz.substr(0, gz.size() / 2));
  test::expect_input_error([&] { all_lines(t / "cut.gz"); }, {"cut.gz", "truncated gzip"});
  // Losing only the 8-byte trailer is caught too.
  test::write_text(t / "notrailer.gz", gz.substr(0, gz.size() - 8));
  test::expect_input_error([&] { all_lines(t / "notrailer.gz"); }, {"notrailer.gz", "truncated"});
}

TEST(LineReader, CorruptGzipIsAnInputError) {
  TempDir t;
  std::string text;
  for (int i = 0; i < 10000; ++i) text += std::to_string(i) + ",1.5\n";
  test::write_gz(t / "ok.gz", text);
  std::string gz = test::read_bytes(t / "ok.gz");
  for (std::size_t i = 40; i < 60; ++i) gz[i] = char(~gz[i]);
  test::write_text(t / "bad.gz", gz);
  test::expect_input_error([&] { all_lines(t / "bad.gz"); }, {"bad.gz", "corrupt gzip"});
}

TEST(LineReader, MissingFileIsASystemError) {
  EXPECT_THROW(LineReader("/nonexistent/halo/file.csv"), SystemError);
}

TEST(LineCursor, ParsesIntsFloatsAndSeparators) {
  const std::filesystem::path f = "mem.csv";
  const std::string block = "1,-2, 3\t4\n+5 6.25,-1e-3\nnan,,x\n";
  LineCursor c(f, block, 1);
  ASSERT_TRUE(c.next_line());
  EXPECT_EQ(c.count_fields(), 4);
  EXPECT_EQ(c.next_int("a"), 1);
  EXPECT_EQ(c.next_int("b"), -2);
  EXPECT_EQ(c.next_int("c"), 3);
  EXPECT_EQ(c.next_int("d"), 4);
  EXPECT_TRUE(c.at_end());
  ASSERT_TRUE(c.next_line());
  EXPECT_EQ(c.next_int("e"), 5);
  EXPECT_FLOAT_EQ(c.next_float("f"), 6.25f);
  EXPECT_FLOAT_EQ(c.next_float("g"), -1e-3f);
  ASSERT_TRUE(c.next_line());
  EXPECT_EQ(c.count_fields(), 3);
  EXPECT_TRUE(std::isnan(c.next_float("h", true)));
  EXPECT_TRUE(std::isnan(c.next_float("i", true)));  // empty field between commas
  EXPECT_EQ(c.next_field("j"), "x");
  EXPECT_FALSE(c.next_line());
}

TEST(LineCursor, TrailingCommaPromisesAnEmptyField) {
  const std::filesystem::path f = "mem.csv";
  LineCursor c(f, "1,\n", 1);
  ASSERT_TRUE(c.next_line());
  EXPECT_EQ(c.count_fields(), 2);
  c.next_int("a");
  EXPECT_FALSE(c.at_end());
  EXPECT_EQ(c.next_field("b"), "");
  EXPECT_TRUE(c.at_end());
}

TEST(LineCursor, ErrorsNameFileLineAndWhatWasExpected) {
  const std::filesystem::path f = "data/edge.csv";
  LineCursor c(f, "1,2\n3,x\n4,5,6\n7\n", 10);
  ASSERT_TRUE(c.next_line());
  ASSERT_TRUE(c.next_line());
  c.next_int("source id");
  test::expect_input_error([&] { c.next_int("destination id"); },
                           {"data/edge.csv: line 11", "integer", "destination id", "'x'"});
  ASSERT_TRUE(c.next_line());
  c.next_int("a");
  c.next_int("b");
  test::expect_input_error([&] { c.expect_end(2); }, {"line 12", "expected 2 columns, found 3"});
  ASSERT_TRUE(c.next_line());
  c.next_int("a");
  test::expect_input_error([&] { c.next_int("destination id"); },
                           {"line 13", "destination id", "end of line"});
}

TEST(LineCursor, RejectsOverlongAndNonNumericIntegers) {
  const std::filesystem::path f = "m";
  LineCursor c(f, "1234567890123456789012\n1.5\n-\n", 1);
  c.next_line();
  EXPECT_THROW(c.next_int("id"), InputError);
  c.next_line();
  EXPECT_THROW(c.next_int("id"), InputError);
  c.next_line();
  EXPECT_THROW(c.next_int("id"), InputError);
}

}  // namespace
}  // namespace halo
