// libFuzzer target: the OGB CSV readers (edges, labels, split indices, counts), plain and gzip.
// Byte 0 picks the reader (bits 0-1) and how the rest reaches it (bits 2-3): as a .csv file, as
// text gzip-compressed into a .csv.gz, or as raw bytes in a .csv.gz (the decoder's own input).
// Bytes 1-2 give the node count and edge count the reader is told to expect.
#include <zlib.h>

#include <vector>

#include "fuzz_util.h"
#include "halo/graph/formats.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const int reader = data[0] & 3, route = (data[0] >> 2) & 3;
  const std::int64_t n = data[1], e = data[2];
  const std::uint8_t* text = data + 3;
  const std::size_t len = size - 3;
  std::filesystem::path path;
  if (route == 1) {  // well-formed gzip of the text
    std::vector<std::uint8_t> z(compressBound(uLong(len)) + 32);
    z_stream s{};
    deflateInit2(&s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    s.next_in = const_cast<Bytef*>(text);
    s.avail_in = uInt(len);
    s.next_out = z.data();
    s.avail_out = uInt(z.size());
    deflate(&s, Z_FINISH);
    z.resize(s.total_out);
    deflateEnd(&s);
    path = halo::fuzz::write_input("input.csv.gz", z.data(), z.size());
  } else {
    path = halo::fuzz::write_input(route == 2 ? "input.csv.gz" : "input.csv", text, len);
  }
  halo::fuzz::expect_clean([&] {
    std::int64_t cols = 0;
    switch (reader) {
      case 0:
        (void)halo::read_ogb_edges(path, n, e);
        break;
      case 1:
        (void)halo::read_ogb_labels(path, n, &cols);
        break;
      case 2:
        (void)halo::read_index_file(path, n);
        break;
      default:
        (void)halo::read_count_file(path);
        break;
    }
  });
  return 0;
}
