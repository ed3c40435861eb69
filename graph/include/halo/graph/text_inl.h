// Template bodies for text.h.
#pragma once

#include "halo/graph/progress.h"

namespace halo {

template <class Fn>
std::uint64_t for_each_line(const std::filesystem::path& path, Fn&& fn, const char* progress_label,
                            InputKind kind) {
  LineReader reader(path, kMaxLineBytes, kind);
  Progress progress(progress_label, reader.file_size());
  std::string_view block;
  std::int64_t line = 1;
  while (reader.next(block)) {
    LineCursor cur(path, block, line);
    while (cur.next_line()) fn(cur);
    line = cur.line() + 1;
    progress.update(reader.bytes_read());
  }
  return reader.bytes_decoded();
}

}  // namespace halo
