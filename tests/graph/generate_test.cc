// The synthetic generator: deterministic, learnable-looking (homophilous, skewed degrees), and
// its OGB text output converts back to the same graph as its native output.
#include "halo/graph/generate.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <nlohmann/json.hpp>

#include "../test_util.h"
#include "halo/graph/dataset.h"
#include "halo/graph/formats.h"

namespace halo {
namespace {
using test::TempDir;

GenerateOptions opts() {
  GenerateOptions o;
  o.nodes = 3000;
  o.avg_degree = 12;
  o.features = 8;
  o.classes = 5;
  o.seed = 42;
  return o;
}

TEST(Generate, SameSeedSameBytesWhateverTheThreadCount) {
  TempDir t;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  generate(t / "a", opts());
  omp_set_num_threads(std::max(2, threads));
  generate(t / "b", opts());
  omp_set_num_threads(threads);
  EXPECT_EQ(read_dataset_meta(t / "a")["fingerprint"], read_dataset_meta(t / "b")["fingerprint"]);
  GenerateOptions other = opts();
  other.seed = 43;
  generate(t / "c", other);
  EXPECT_NE(read_dataset_meta(t / "a")["fingerprint"], read_dataset_meta(t / "c")["fingerprint"]);
}

TEST(Generate, HomophilySkewAndSplit) {
  TempDir t;
  GenerateOptions o = opts();
  o.nodes = 20000;
  generate(t / "g", o);
  const GraphDataset d = read_graph_dataset(t / "g");
  const CsrView g = d.graph.view();
  std::int64_t same = 0;
  for (NodeId u = 0; u < g.num_nodes; ++u)
    for (const NodeId* v = g.begin(u); v != g.end(u); ++v) same += d.labels[std::size_t(u)] == d.labels[std::size_t(*v)];
  const double h = double(same) / double(g.num_edges());
  // Edges stay in class with p = 0.8, plus 1/5 of the other 0.2 by chance: ~0.84.
  EXPECT_NEAR(h, 0.8 + 0.2 / 5, 0.03);
  const DegreeStats s = degree_stats(g);
  EXPECT_NEAR(s.mean, 12, 0.6);  // a few duplicate draws merge
  EXPECT_GT(double(s.max), 8 * s.mean) << "degrees should be skewed";
  const Split* sp = d.split("random");
  ASSERT_NE(sp, nullptr);
  EXPECT_NEAR(double(sp->train.size()) / 20000, 0.5, 0.02);
  EXPECT_NEAR(double(sp->valid.size()) / 20000, 0.25, 0.02);
  EXPECT_EQ(sp->train.size() + sp->valid.size() + sp->test.size(), 20000u);
  // Features carry the class: same-class rows are closer on average than different-class rows.
  auto dist = [&](NodeId a, NodeId b) {
    double s2 = 0;
    for (int k = 0; k < 8; ++k) {
      const double x = d.features[std::size_t(a) * 8 + k] - d.features[std::size_t(b) * 8 + k];
      s2 += x * x;
    }
    return s2;
  };
  double same_d = 0, diff_d = 0;
  int ns = 0, nd = 0;
  for (NodeId u = 0; u + 1 < 4000; ++u) {
    if (d.labels[std::size_t(u)] == d.labels[std::size_t(u) + 1]) same_d += dist(u, u + 1), ++ns;
    else diff_d += dist(u, u + 1), ++nd;
  }
  EXPECT_LT(same_d / ns, diff_d / nd);
}

TEST(Generate, OgbOutputConvertsToTheNativeGraph) {
  TempDir t;
  GenerateOptions o = opts();
  generate(t / "native", o);
  o.format = "ogb";
  generate(t / "ogb", o);
  EXPECT_TRUE(std::filesystem::exists(t / "ogb/raw/edge.csv.gz"));
  EXPECT_EQ(read_count_file(t / "ogb/raw/num-edge-list.csv.gz"), 18000);
  convert(t / "ogb", t / "conv", {});
  const GraphDataset a = read_graph_dataset(t / "native");
  const GraphDataset b = read_graph_dataset(t / "conv");
  ASSERT_EQ(a.graph.num_edges(), b.graph.num_edges());
  EXPECT_TRUE(std::equal(a.graph.indices.begin(), a.graph.indices.end(), b.graph.indices.begin()));
  EXPECT_TRUE(std::equal(a.labels.begin(), a.labels.end(), b.labels.begin()));
  EXPECT_TRUE(std::equal(a.split("random")->test.begin(), a.split("random")->test.end(),
                         b.split("random")->test.begin()));
  ASSERT_EQ(a.features.size(), b.features.size());
  for (std::size_t i = 0; i < a.features.size(); ++i)
    ASSERT_NEAR(a.features[i], b.features[i], 6e-6) << i;  // text keeps 5 decimals
}

TEST(Generate, ExactEdgeCountAndBadParameters) {
  TempDir t;
  GenerateOptions o = opts();
  o.edges = 1234;
  o.format = "ogb";
  generate(t / "e", o);
  EXPECT_EQ(read_count_file(t / "e/raw/num-edge-list.csv.gz"), 1234);
  GenerateOptions bad = opts();
  bad.classes = 0;
  EXPECT_THROW(generate(t / "x", bad), ParamError);
  bad = opts();
  bad.format = "csv";
  EXPECT_THROW(generate(t / "x", bad), ParamError);
  EXPECT_FALSE(std::filesystem::exists(t / "x"));
}

}  // namespace
}  // namespace halo
