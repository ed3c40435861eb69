// Writes gzip files fast on several cores: text is cut into blocks, each block compressed as
// an independent gzip member (RFC 1952 allows concatenated members; zlib, Python's gzip and
// pandas read them as one stream), members appended in order.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace halo {

class GzipWriter {
 public:
  // level 1 = fastest; block_bytes = text per member.
  explicit GzipWriter(const std::filesystem::path& path, int level = 1);
  ~GzipWriter();
  GzipWriter(const GzipWriter&) = delete;
  GzipWriter& operator=(const GzipWriter&) = delete;

  // Compresses the given text blocks in parallel and appends them in order.
  void write_blocks(const std::vector<std::string>& blocks);
  void close();

 private:
  std::filesystem::path path_;
  int level_;
  std::FILE* f_ = nullptr;
};

}  // namespace halo
