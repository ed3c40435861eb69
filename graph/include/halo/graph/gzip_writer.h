// Writes gzip files fast on several cores: text is cut into blocks, each block compressed as
// an independent gzip member (RFC 1952 allows concatenated members; zlib, Python's gzip and
// pandas read them as one stream), members appended in order.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace halo {

class GzipWriter {
 public:
  // Creates path (inside a staging folder, whose rename commits it); level 1 = fastest.
  explicit GzipWriter(const std::filesystem::path& path, int level = 1);
  ~GzipWriter();
  GzipWriter(const GzipWriter&) = delete;
  GzipWriter& operator=(const GzipWriter&) = delete;

  // Compresses the given text blocks in parallel and appends them in order; SystemError naming
  // the file when a write fails.
  void write_blocks(const std::vector<std::string>& blocks);
  // Ends the stream, fsyncs and closes the file, every step checked.
  void close();

 private:
  std::filesystem::path path_;
  int level_;
  int fd_ = -1;
  bool wrote_ = false;  // an empty file is not valid gzip: close() then writes an empty member
};

}  // namespace halo
