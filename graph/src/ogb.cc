// OGB node-property raw layout, text part: count files, edges, labels, split index files.
// Features are streamed straight to disk by the converter (convert.cc), never held in memory.
#include <algorithm>
#include <cmath>

#include "halo/graph/formats.h"
#include "halo/graph/text.h"

namespace halo {
namespace {

// Counts in a file's header are what it claims, not what it holds: reserving them outright
// would let one digit too many allocate gigabytes before the first line is checked, so
// vectors start at most this large and grow with what is actually read.
constexpr std::int64_t kMaxReserve = std::int64_t(1) << 24;

std::size_t capped(std::int64_t want) {
  return std::size_t(std::clamp<std::int64_t>(want, 0, kMaxReserve));
}

}  // namespace

std::int64_t read_count_file(const std::filesystem::path& path) {
  std::int64_t value = -1, lines = 0;
  for_each_line(path, [&](LineCursor& c) {
    if (c.blank()) return;
    if (++lines > 1)
      c.fail("expected a single number (one graph: a node-property dataset), found another line");
    value = c.next_int("a count");
    c.expect_end(1);
    if (value < 0) c.fail("negative count " + std::to_string(value));
  });
  if (value < 0) throw_input(path, 0, "empty: expected one number");
  return value;
}

EdgeList read_ogb_edges(const std::filesystem::path& path, std::int64_t n, std::int64_t e,
                        std::uint64_t* text_bytes) {
  EdgeList edges;
  edges.num_nodes = n;
  edges.src.reserve(capped(e));
  edges.dst.reserve(capped(e));
  std::int64_t count = 0;
  const std::uint64_t bytes = for_each_line(
      path,
      [&](LineCursor& c) {
        if (++count > e)
          c.fail("more edges than the " + std::to_string(e) +
                 " that num-edge-list.csv.gz declares");
        const std::int64_t u = c.next_int("source id");
        const std::int64_t v = c.next_int("destination id");
        c.expect_end(2);
        if (u < 0 || u >= n || v < 0 || v >= n)
          c.fail("node id " + std::to_string(u < 0 || u >= n ? u : v) + " out of range [0, " +
                 std::to_string(n) + ") given by num-node-list.csv.gz");
        edges.src.push_back(NodeId(u));
        edges.dst.push_back(NodeId(v));
      },
      "reading edges");
  if (text_bytes) *text_bytes += bytes;
  if (count != e)
    throw_input(path, 0,
                "has " + std::to_string(count) + " edges, num-edge-list.csv.gz declares " +
                    std::to_string(e));
  return edges;
}

std::vector<std::int32_t> read_ogb_labels(const std::filesystem::path& path, std::int64_t n,
                                          std::int64_t* cols, std::uint64_t* text_bytes) {
  std::vector<std::int32_t> labels;
  std::int64_t rows = 0;
  int width = 0;
  const std::uint64_t bytes = for_each_line(
      path,
      [&](LineCursor& c) {
        if (width == 0) {
          width = c.count_fields();
          if (width == 0) c.fail("expected at least one label column, found an empty line");
          labels.reserve(capped(n * width));
        }
        if (++rows > n)
          c.fail("more label rows than the " + std::to_string(n) +
                 " nodes of num-node-list.csv.gz");
        for (int k = 0; k < width; ++k) {
          const double v = c.next_double("a label", /*allow_nan=*/true);
          if (std::isnan(v)) {
            labels.push_back(-1);  // OGB marks unlabelled nodes with NaN
            continue;
          }
          // Below INT32_MAX: the class count (largest label + 1) must fit meta.json's int32.
          if (v < 0 || v >= INT32_MAX || v != std::floor(v))
            c.fail("expected a non-negative integer label below " + std::to_string(INT32_MAX) +
                   " or NaN, found " + std::to_string(v));
          labels.push_back(std::int32_t(v));
        }
        c.expect_end(width);
      },
      "reading labels");
  if (text_bytes) *text_bytes += bytes;
  if (rows != n)
    throw_input(path, 0,
                "has " + std::to_string(rows) + " label rows, num-node-list.csv.gz declares " +
                    std::to_string(n) + " nodes");
  *cols = width;
  return labels;
}

std::vector<NodeId> read_index_file(const std::filesystem::path& path, std::int64_t n,
                                    std::uint64_t* text_bytes) {
  std::vector<std::uint8_t> owner(std::size_t(std::max<std::int64_t>(n, 0)), 0);
  return read_index_file(path, n, owner, 1, {}, text_bytes);
}

std::vector<NodeId> read_index_file(const std::filesystem::path& path, std::int64_t n,
                                    std::vector<std::uint8_t>& owner, std::uint8_t tag,
                                    const std::vector<std::string>& tag_files,
                                    std::uint64_t* text_bytes) {
  std::vector<NodeId> ids;
  const std::uint64_t bytes = for_each_line(path, [&](LineCursor& c) {
    if (c.blank()) return;
    const std::int64_t v = c.next_int("a node id");
    c.expect_end(1);
    if (v < 0 || v >= n)
      c.fail("node id " + std::to_string(v) + " out of range [0, " + std::to_string(n) + ")");
    // A node listed twice would be trained (or scored) twice; one in two sets leaks the
    // labels the model is evaluated on into training.
    std::uint8_t& o = owner[std::size_t(v)];
    if (o == tag) c.fail("node id " + std::to_string(v) + " listed twice");
    if (o != 0)
      c.fail("node id " + std::to_string(v) + " is also in " +
             (o <= tag_files.size() ? tag_files[o - 1] : std::string("another split file")) +
             " (train, valid and test must be disjoint)");
    o = tag;
    ids.push_back(NodeId(v));
  });
  if (text_bytes) *text_bytes += bytes;
  return ids;
}

}  // namespace halo
