// Native datasets: round trip, checksums, truncation, atomic commit.
#include "halo/graph/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "../test_util.h"
#include "halo/graph/array_file.h"

namespace halo {
namespace {
using test::TempDir;
namespace fs = std::filesystem;

GraphDataset small() {
  GraphDataset d;
  d.name = "small";
  EdgeList el;
  el.num_nodes = 5;
  el.src = {0, 1, 2, 3};
  el.dst = {1, 2, 3, 4};
  el.weight = {1.5f, 2.5f, 3.5f, 4.5f};
  d.graph = build_csr(std::move(el));
  d.num_features = 3;
  d.features = Array<float>(std::vector<float>(15));
  for (std::size_t i = 0; i < 15; ++i) d.features[i] = float(i) * 0.5f;
  d.label_cols = 1;
  d.label_kind = LabelKind::kMulticlass;
  d.num_classes = 3;
  d.labels = Array<std::int32_t>(std::vector<std::int32_t>{0, 1, 2, -1, 1});
  d.ncon = 2;
  d.node_weights = Array<std::int32_t>(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  Split s;
  s.name = "a";
  s.train = Array<NodeId>(std::vector<NodeId>{0, 1});
  s.valid = Array<NodeId>(std::vector<NodeId>{2});
  s.test = Array<NodeId>(std::vector<NodeId>{3, 4});
  d.splits.push_back(s);
  return d;
}

template <class T>
std::vector<T> vec(const Array<T>& a) {
  return {a.begin(), a.end()};
}

TEST(Dataset, RoundTripsEveryArray) {
  TempDir t;
  const GraphDataset d = small();
  write_graph_dataset(d, t / "ds");
  EXPECT_EQ(dataset_kind(t / "ds"), "graph");
  const GraphDataset r = read_graph_dataset(t / "ds");
  EXPECT_EQ(r.name, "small");
  EXPECT_EQ(r.num_nodes(), 5);
  EXPECT_EQ(vec(r.graph.offsets), vec(d.graph.offsets));
  EXPECT_EQ(vec(r.graph.indices), vec(d.graph.indices));
  EXPECT_EQ(vec(r.graph.values), vec(d.graph.values));
  EXPECT_EQ(vec(r.features), vec(d.features));
  EXPECT_EQ(vec(r.labels), vec(d.labels));
  EXPECT_EQ(vec(r.node_weights), vec(d.node_weights));
  EXPECT_EQ(r.ncon, 2);
  EXPECT_EQ(r.label_kind, LabelKind::kMulticlass);
  EXPECT_EQ(r.num_classes, 3);
  ASSERT_NE(r.split("a"), nullptr);
  EXPECT_EQ(vec(r.split("a")->test), (std::vector<NodeId>{3, 4}));
}

// An undirected dataset must store every edge both ways with one weight: the streaming check
// (a keyed hash of the entries both ways) passes exactly the symmetric graphs, and on failure
// the exact search names the first entry without its reverse. -0 and +0 are one weight.
TEST(Dataset, ValidationFindsTheFirstEdgeWithoutItsReverse) {
  GraphDataset d = small();
  EXPECT_NO_THROW(validate_graph_dataset(d, "small"));
  const std::vector<EdgeId> offsets(d.graph.offsets.begin(), d.graph.offsets.end());
  std::vector<NodeId> indices(d.graph.indices.begin(), d.graph.indices.end());
  std::vector<float> weights(d.graph.values.begin(), d.graph.values.end());
  auto with = [&](const std::vector<NodeId>& idx, const std::vector<float>& w) {
    GraphDataset e = small();
    e.graph.offsets = Array<EdgeId>(std::vector<EdgeId>(offsets));
    e.graph.indices = Array<NodeId>(std::vector<NodeId>(idx));
    e.graph.values = Array<float>(std::vector<float>(w));
    return e;
  };
  // Row 2 holds {1, 3}: the weight of 2 -> 3 changed, then a zero weight signed both ways.
  std::vector<float> other = weights;
  other[std::size_t(offsets[2] + 1)] = 9.f;
  test::expect_input_error([&] { validate_graph_dataset(with(indices, other), "w"); },
                           {"indices.bin", "(row 2): edge 2 -> 3 has a reverse of another weight"});
  std::vector<float> zeros = weights;
  zeros[std::size_t(offsets[2] + 1)] = 0.f;  // 2 -> 3
  zeros[std::size_t(offsets[3])] = -0.f;     // 3 -> 2
  EXPECT_NO_THROW(validate_graph_dataset(with(indices, zeros), "z"));
  // 2 -> 3 becomes 2 -> 4: rows stay sorted, but 4 -> 2 and 3 -> 2's partner are missing.
  std::vector<NodeId> oneway = indices;
  oneway[std::size_t(offsets[2] + 1)] = 4;
  test::expect_input_error([&] { validate_graph_dataset(with(oneway, weights), "o"); },
                           {"(row 2): edge 2 -> 4 has no reverse", "undirected"});
  // Directed datasets need no reverse.
  GraphDataset directed = with(oneway, weights);
  directed.directed = true;
  EXPECT_NO_THROW(validate_graph_dataset(directed, "d"));
}

TEST(Dataset, ArraysAreMemoryMappedAndAligned) {
  TempDir t;
  write_graph_dataset(small(), t / "ds");
  const GraphDataset r = read_graph_dataset(t / "ds");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(r.features.data()) % 64, 0u);
}

// Pages of this process that are resident now (/proc/self/statm, second field).
long resident_pages() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident;
}

// Array::release lets a sweep keep a window of a mapped file resident: the pages go, the
// contents stay (read again from the file), and storage in memory is never touched.
TEST(Dataset, ReleasingAMappedRangeDropsItsPagesButKeepsItsContents) {
  TempDir t;
  std::vector<std::int32_t> v(std::size_t(8) << 20);  // 32 MiB
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::int32_t(i * 2654435761u);
  write_array(t / "a.bin", v.data(), v.size());
  const Array<std::int32_t> a = map_array<std::int32_t>(t / "a.bin");
  std::int64_t sum = 0;
  for (std::int32_t x : a) sum += x;  // every page resident
  const long before = resident_pages();
  a.release(0, a.size());
  const long page_kib = sysconf(_SC_PAGESIZE) / 1024;
  EXPECT_GT((before - resident_pages()) * page_kib, 24 << 10) << "32 MiB mapped, released";
  std::int64_t again = 0;
  for (std::int32_t x : a) again += x;
  EXPECT_EQ(again, sum);
  const Array<std::int32_t> owned(std::vector<std::int32_t>(v.begin(), v.begin() + 4096));
  owned.release(0, owned.size());  // in memory: a no-op, never a zeroing
  EXPECT_TRUE(std::equal(owned.begin(), owned.end(), v.begin()));
}

TEST(Dataset, ChecksumMismatchIsReported) {
  TempDir t;
  write_graph_dataset(small(), t / "ds");
  const fs::path f = t / "ds" / "features.bin";
  std::string bytes = test::read_bytes(f);
  bytes[bytes.size() - 3] ^= 0x10;  // flip one bit of the payload
  test::write_text(f, bytes);
  test::expect_input_error([&] { read_graph_dataset(t / "ds"); },
                           {"features.bin", "checksum mismatch"});
  // Skipping verification maps it anyway (for trusted, huge datasets).
  EXPECT_NO_THROW(read_graph_dataset(t / "ds", {.verify_checksums = false}));
}

TEST(Dataset, TruncatedArrayIsReported) {
  TempDir t;
  write_graph_dataset(small(), t / "ds");
  const fs::path f = t / "ds" / "indices.bin";
  const std::string bytes = test::read_bytes(f);
  test::write_text(f, bytes.substr(0, bytes.size() - 4));
  test::expect_input_error([&] { read_graph_dataset(t / "ds"); },
                           {"indices.bin", "truncated", "expected"});
}

TEST(Dataset, NotADatasetIsReported) {
  TempDir t;
  test::expect_input_error([&] { read_graph_dataset(t / "nothing"); },
                           {"nothing", "not a directory"});
  fs::create_directories(t / "empty");
  test::expect_input_error([&] { read_graph_dataset(t / "empty"); }, {"meta.json", "missing"});
  test::write_text(t / "bad" / "meta.json", "{\"format\": 3");
  test::expect_input_error([&] { read_graph_dataset(t / "bad"); }, {"meta.json", "invalid JSON"});
}

TEST(Dataset, WriterLeavesNothingBehindWhenNotCommitted) {
  TempDir t;
  {
    DatasetWriter w(t / "ds", false);
    std::vector<float> x(10, 1.f);
    w.put("x", x.data(), 10);
    EXPECT_TRUE(fs::exists(w.staging_dir()));
  }  // destroyed without commit, as when an exception unwinds a conversion
  EXPECT_FALSE(fs::exists(t / "ds"));
  EXPECT_TRUE(fs::is_empty(t.path()));
}

// Issue 35, classes 3 and 4: what a reader refuses is never written, and nothing is left: a
// name or a split name with control bytes, labels out of range, a feature that is not finite.
TEST(Dataset, WriterRefusesWhatReadersRefuse) {
  TempDir t;
  auto refused = [&](GraphDataset d, auto expect) {
    expect(d);
    EXPECT_TRUE(fs::is_empty(t.path())) << "left behind in " << t.path();
  };
  refused(small(), [&](GraphDataset d) {
    d.name = "a\x1b[2Jb";
    try {
      write_graph_dataset(d, t / "ds");
      ADD_FAILURE() << "a name with ESC was written";
    } catch (const ParamError& e) {
      EXPECT_NE(std::string(e.what()).find("\"name\": control bytes in \"a\\x1b[2Jb\""),
                std::string::npos)
          << e.what();
    }
  });
  refused(small(), [&](GraphDataset d) {
    d.splits[0].name = std::string("x\0y", 3);
    EXPECT_THROW(write_graph_dataset(d, t / "ds"), ParamError);
  });
  refused(small(), [&](GraphDataset d) {
    d.labels[2] = 5;  // 3 classes
    test::expect_input_error([&] { write_graph_dataset(d, t / "ds"); },
                             {"labels.bin: entry 2 (row 2): label 5 out of range [-1, 3)"});
  });
  refused(small(), [&](GraphDataset d) {
    d.features[4] = std::numeric_limits<float>::quiet_NaN();
    test::expect_input_error([&] { write_graph_dataset(d, t / "ds"); },
                             {"features.bin: entry 4: value nan, expected a finite number"});
  });
}

TEST(Dataset, ExistingOutputNeedsOverwrite) {
  TempDir t;
  write_graph_dataset(small(), t / "ds");
  EXPECT_THROW(write_graph_dataset(small(), t / "ds"), ParamError);
  GraphDataset other = small();
  other.name = "replaced";
  write_graph_dataset(other, t / "ds", /*overwrite=*/true);
  EXPECT_EQ(read_graph_dataset(t / "ds").name, "replaced");
  // Only the dataset remains: no staging or old copies.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(t.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(Dataset, TemporalRoundTrip) {
  TempDir t;
  TemporalDataset d;
  d.name = "ev";
  d.num_nodes = 4;
  d.src = Array<NodeId>(std::vector<NodeId>{0, 1, 2});
  d.dst = Array<NodeId>(std::vector<NodeId>{1, 2, 3});
  d.time = Array<double>(std::vector<double>{1.0, 2.5, 2.5});
  d.edge_feature_dim = 2;
  d.edge_features = Array<float>(std::vector<float>{1, 2, 3, 4, 5, 6});
  write_temporal_dataset(d, t / "ev");
  EXPECT_EQ(dataset_kind(t / "ev"), "temporal");
  const TemporalDataset r = read_temporal_dataset(t / "ev");
  EXPECT_EQ(r.num_events(), 3);
  EXPECT_EQ(vec(r.time), vec(d.time));
  EXPECT_EQ(vec(r.edge_features), vec(d.edge_features));
  EXPECT_TRUE(r.weight.empty());
  EXPECT_THROW(read_graph_dataset(t / "ev"), InputError);
}

}  // namespace
}  // namespace halo
