// The synthetic generator: deterministic, learnable-looking (homophilous, skewed degrees), and
// its OGB text output converts back to the same graph as its native output. With locality:
// deterministic too, the plain graph unchanged when it is off, the shares of edges inside
// neighbourhoods, communities and classes as the model says, communities nested in classes.
#include "halo/graph/generate.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

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

// The CSR is built in passes over the regenerated edge stream, as many as batch_entries makes:
// the bytes must not depend on how many (rows cut across batches; the hub, of degree > 500,
// alone in its batch).
TEST(Generate, SameBytesWhateverTheBatchSize) {
  TempDir t;
  generate(t / "one", opts());
  for (std::int64_t batch : {300, 4000}) {
    GenerateOptions o = opts();
    o.batch_entries = batch;
    generate(t / "b", o);
    const GraphDataset a = read_graph_dataset(t / "one");
    const GraphDataset b = read_graph_dataset(t / "b");
    EXPECT_TRUE(std::equal(a.graph.offsets.begin(), a.graph.offsets.end(), b.graph.offsets.begin(),
                           b.graph.offsets.end()))
        << batch;
    EXPECT_EQ(read_dataset_meta(t / "one")["fingerprint"],
              read_dataset_meta(t / "b")["fingerprint"])
        << batch;
    std::filesystem::remove_all(t / "b");
  }
}

// The disk is checked before anything is drawn: a graph that cannot fit fails at once, leaving
// nothing behind.
TEST(Generate, ShortDiskFailsFirstNamingTheFigures) {
  TempDir t;
  GenerateOptions o = opts();
  o.nodes = 2000000000;
  o.edges = std::int64_t(1) << 34;  // 128 GiB of CSR, 32 TB of features: no disk has it
  o.features = 4096;
  try {
    generate(t / "huge", o);
    FAIL() << "expected a SystemError";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("No space left on device: up to"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("free"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::is_empty(t.path()));
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
    for (const NodeId* v = g.begin(u); v != g.end(u); ++v)
      same += d.labels[std::size_t(u)] == d.labels[std::size_t(*v)];
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
    if (d.labels[std::size_t(u)] == d.labels[std::size_t(u) + 1])
      same_d += dist(u, u + 1), ++ns;
    else
      diff_d += dist(u, u + 1), ++nd;
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

// 24,000 nodes, 4 classes in communities of 2,000: Q = 3 communities per class, neighbourhoods
// of M = 2 classes, so R = 3 * 2 = 6 neighbourhoods of ~4,000 nodes.
GenerateOptions local_opts(double locality) {
  GenerateOptions o = opts();
  o.nodes = 24000;
  o.classes = 4;
  o.locality = locality;
  o.community_size = 2000;
  o.neighbourhood_classes = 2;
  return o;
}

TEST(GenerateLocality, SameSeedSameBytesWhateverTheThreadCount) {
  TempDir t;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  generate(t / "a", local_opts(0.9));
  omp_set_num_threads(std::max(2, threads));
  generate(t / "b", local_opts(0.9));
  omp_set_num_threads(threads);
  const auto fa = read_dataset_meta(t / "a")["fingerprint"];
  EXPECT_EQ(fa, read_dataset_meta(t / "b")["fingerprint"]);
  GenerateOptions other = local_opts(0.9);
  other.seed = 43;
  generate(t / "c", other);
  EXPECT_NE(fa, read_dataset_meta(t / "c")["fingerprint"]);
  generate(t / "d", local_opts(0));
  EXPECT_NE(fa, read_dataset_meta(t / "d")["fingerprint"]);
  EXPECT_EQ(read_dataset_meta(t / "a")["source"]["neighbourhoods"], 6);
}

TEST(GenerateLocality, OffIsThePlainGraphBitForBit) {
  TempDir t;
  // Pinned before the locality knob existed (`halo generate --nodes 3000 --avg-degree 12
  // --features 8 --classes 5 --seed 42`): benchmarks and other tests rely on these bytes.
  generate(t / "plain", opts());
  const nlohmann::json meta = read_dataset_meta(t / "plain");
  EXPECT_EQ(meta["fingerprint"], "4d6b7c19");
  EXPECT_FALSE(meta["source"].contains("locality"));
  GenerateOptions off = opts();  // the other locality options do nothing while it is off
  off.community_size = 7;
  off.neighbourhood_classes = 2;
  generate(t / "off", off);
  EXPECT_EQ(read_dataset_meta(t / "off")["fingerprint"], "4d6b7c19");
  EXPECT_EQ(generated_neighbourhoods(off), 0);
  EXPECT_EQ(generated_place(off, 17).community, 0);
}

// Shares of stored entries whose two ends share a neighbourhood, a community, a class.
struct Shares {
  double hood = 0, community = 0, cls = 0;
};

Shares shares(const GraphDataset& d, const GenerateOptions& o) {
  std::vector<GeneratedPlace> at(std::size_t(o.nodes));
  for (std::int64_t v = 0; v < o.nodes; ++v) at[std::size_t(v)] = generated_place(o, v);
  const CsrView g = d.graph.view();
  std::int64_t hood = 0, community = 0, cls = 0;
  for (NodeId u = 0; u < g.num_nodes; ++u)
    for (const NodeId* v = g.begin(u); v != g.end(u); ++v) {
      const GeneratedPlace &a = at[std::size_t(u)], &b = at[std::size_t(*v)];
      hood += a.neighbourhood == b.neighbourhood;
      community += a.community == b.community;
      cls += a.cls == b.cls;
    }
  const double e = double(g.num_edges());
  return {double(hood) / e, double(community) / e, double(cls) / e};
}

TEST(GenerateLocality, SharesFollowTheModel) {
  TempDir t;
  for (const double p : {0.5, 0.9}) {
    GenerateOptions o = local_opts(p);
    o.overwrite = true;
    ASSERT_EQ(generated_neighbourhoods(o), 6);
    generate(t / "g", o);
    const GraphDataset d = read_graph_dataset(t / "g");
    const Shares s = shares(d, o);
    const double h = o.homophily, q = 3, r = 6, c = 4;
    // Local draws stay in the neighbourhood (same class: in the community); the others land
    // there by chance: a same-class one in 1 of the Q communities of the class, another in 1
    // of R neighbourhoods. Duplicates, more common among local draws, pull the shares down a
    // little.
    EXPECT_NEAR(s.hood, p + (1 - p) * (h / q + (1 - h) / r), 0.02) << p;
    EXPECT_NEAR(s.community, h * p + (1 - p) * (h / q + (1 - h) / (q * c)), 0.02) << p;
    // Homophily keeps its meaning: cross-class local draws avoid the source's class.
    EXPECT_NEAR(s.cls, h + (1 - h) * (1 - p) / c, 0.02) << p;
    // Degrees stay skewed and the edge count near the request (few duplicate draws).
    const DegreeStats deg = degree_stats(d.graph.view());
    EXPECT_NEAR(deg.mean, 12, 0.8) << p;
    EXPECT_GT(double(deg.max), 8 * deg.mean) << p;
  }
}

TEST(GenerateLocality, CommunitiesNestInClassesAndNeighbourhoods) {
  TempDir t;
  const GenerateOptions o = local_opts(0.9);
  generate(t / "g", o);
  const GraphDataset d = read_graph_dataset(t / "g");
  std::map<std::int64_t, std::pair<std::int32_t, std::int64_t>> of;  // community -> class, hood
  std::map<std::int64_t, std::set<std::int32_t>> classes_in_hood;
  for (std::int64_t v = 0; v < o.nodes; ++v) {
    const GeneratedPlace p = generated_place(o, v);
    ASSERT_EQ(p.cls, d.labels[std::size_t(v)]) << v;  // the label is the class
    const auto it = of.try_emplace(p.community, p.cls, p.neighbourhood).first;
    ASSERT_EQ(it->second.first, p.cls) << "community " << p.community << " spans two classes";
    ASSERT_EQ(it->second.second, p.neighbourhood) << "community " << p.community << " spans two";
    classes_in_hood[p.neighbourhood].insert(p.cls);
  }
  EXPECT_EQ(of.size(), 12u);  // 4 classes x 3
  ASSERT_EQ(classes_in_hood.size(), 6u);
  for (const auto& [hood, cs] : classes_in_hood) EXPECT_EQ(cs.size(), 2u) << hood;
}

TEST(GenerateLocality, BadParameters) {
  TempDir t;
  for (const double p : {-0.1, 1.5, std::nan("")}) {
    GenerateOptions bad = local_opts(p);
    EXPECT_THROW(generate(t / "x", bad), ParamError) << p;
  }
  GenerateOptions bad = local_opts(0.5);
  bad.community_size = 0;
  EXPECT_THROW(generate(t / "x", bad), ParamError);
  bad = local_opts(0.5);
  bad.neighbourhood_classes = 0;
  EXPECT_THROW(generate(t / "x", bad), ParamError);
  EXPECT_THROW(generated_place(local_opts(0.5), 24000), ParamError);
  EXPECT_FALSE(std::filesystem::exists(t / "x"));
}

}  // namespace
}  // namespace halo
