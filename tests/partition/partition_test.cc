// The partitioner against its invariants (every method, several K), against Debian's gpmetis
// on the same file, and against the acceptance figures: METIS vs random volume, Fennel vs
// random cut, part weights.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "../test_util.h"
#include "halo/graph/algorithms.h"
#include "halo/graph/formats.h"
#include "halo/graph/generate.h"
#include "halo/graph/npz.h"
#include "halo/partition/parts.h"
#include "halo/partition/reorder.h"

namespace halo {
namespace {
using test::TempDir;
namespace fs = std::filesystem;
using json = nlohmann::json;

// Converted once per test binary: Cora, 4elt and a generated SBM graph.
class Graphs : public ::testing::Environment {
 public:
  static fs::path dir() {
    return fs::temp_directory_path() / ("halo-partition-test-" + std::to_string(getpid()));
  }
  void SetUp() override {
    fs::create_directories(dir());
    convert(test::bundled("cora"), dir() / "cora", {.overwrite = true});
    convert(test::bundled("metis/4elt.graph"), dir() / "4elt", {.overwrite = true});
    GenerateOptions g;
    g.nodes = 5000;
    g.avg_degree = 10;
    g.features = 4;
    g.classes = 8;
    g.seed = 3;
    g.overwrite = true;
    generate(dir() / "sbm", g);
    write_weighted_grid(dir() / "grid-w.graph", 30);
    convert(dir() / "grid-w.graph", dir() / "grid-w", {.overwrite = true});
  }
  // A side x side grid with edge weights 1..5 (METIS format 001): a weighted graph.
  static void write_weighted_grid(const fs::path& path, int side) {
    std::ofstream f(path);
    const int n = side * side;
    f << n << " " << 2 * side * (side - 1) << " 001\n";
    auto weight = [](int u, int v) { return 1 + (std::min(u, v) * 7 + std::max(u, v)) % 5; };
    for (int u = 0; u < n; ++u) {
      const int r = u / side, c = u % side;
      for (int v : {u - side, u - 1, u + 1, u + side})
        if (v >= 0 && v < n && (v / side == r || v % side == c))
          f << " " << v + 1 << " " << weight(u, v);
      f << "\n";
    }
  }
  void TearDown() override { fs::remove_all(dir()); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new Graphs);

fs::path dataset(const std::string& name) { return Graphs::dir() / name; }

// Edge cut and communication volume recomputed naively with sets.
std::pair<std::int64_t, std::int64_t> naive_quality(const CsrView& g,
                                                    const std::vector<PartId>& owner) {
  std::set<std::pair<NodeId, NodeId>> cut;
  std::int64_t vol = 0;
  for (NodeId u = 0; u < g.num_nodes; ++u) {
    std::set<PartId> others;
    for (const NodeId* v = g.begin(u); v != g.end(u); ++v)
      if (owner[std::size_t(*v)] != owner[std::size_t(u)]) {
        cut.insert({std::min(u, *v), std::max(u, *v)});
        others.insert(owner[std::size_t(*v)]);
      }
    vol += std::int64_t(others.size());
  }
  return {std::int64_t(cut.size()), vol};
}

// Checks every invariant of a written partition against its dataset.
void check_invariants(const GraphDataset& d, const fs::path& parts, int k) {
  const CsrView g = d.graph.view();
  const auto meta = read_parts_meta(parts);
  const Array<PartId> owner_arr = read_owner(parts);
  const std::vector<PartId> owner(owner_arr.begin(), owner_arr.end());
  ASSERT_EQ(meta["k"], k);
  std::vector<int> seen(std::size_t(g.num_nodes), 0);
  std::set<std::pair<NodeId, NodeId>> edges;
  std::vector<Part> all;
  all.reserve(std::size_t(k));
  for (int r = 0; r < k; ++r) all.push_back(read_part(parts, r));
  for (int r = 0; r < k; ++r) {
    const Part& p = all[std::size_t(r)];
    ASSERT_GT(p.num_owned, 0) << "part " << r << " empty";
    std::set<NodeId> expected_halo;
    for (std::int64_t i = 0; i < p.num_owned; ++i) {
      const NodeId u = p.global_ids[std::size_t(i)];
      ASSERT_EQ(owner[std::size_t(u)], r);
      ++seen[std::size_t(u)];
      ASSERT_EQ(p.degree[std::size_t(i)], g.degree(u));
      for (const NodeId* w = g.begin(u); w != g.end(u); ++w)
        if (owner[std::size_t(*w)] != r) expected_halo.insert(*w);
      // local row == global row, through global_ids
      const CsrView lg = p.graph.view();
      std::vector<NodeId> row;
      for (const NodeId* c = lg.begin(NodeId(i)); c != lg.end(NodeId(i)); ++c) {
        if (c != lg.begin(NodeId(i))) {
          ASSERT_LT(c[-1], *c) << "row not sorted";
        }
        row.push_back(p.global_ids[std::size_t(*c)]);
        ASSERT_TRUE(edges.insert({u, row.back()}).second) << "edge stored twice";
        if (i < p.num_inner) {
          ASSERT_LT(*c, p.num_owned) << "inner row references the halo";
        }
      }
      std::sort(row.begin(), row.end());
      ASSERT_EQ(row, std::vector<NodeId>(g.begin(u), g.end(u)));
      if (d.num_features > 0) {
        ASSERT_EQ(p.features[std::size_t(i) * std::size_t(p.num_features)],
                  d.features[std::size_t(u) * std::size_t(d.num_features)]);
      }
      if (d.label_cols > 0) {
        ASSERT_EQ(p.labels[std::size_t(i)], d.labels[std::size_t(u)]);
      }
    }
    // Halo rows are exactly the cut neighbours, grouped by owner, sorted within a group.
    std::set<NodeId> halo;
    for (int q = 0; q < k; ++q)
      for (EdgeId h = p.recv_offsets[std::size_t(q)]; h < p.recv_offsets[std::size_t(q) + 1]; ++h) {
        const NodeId w = p.global_ids[std::size_t(p.num_owned + h)];
        ASSERT_EQ(owner[std::size_t(w)], q);
        if (h > p.recv_offsets[std::size_t(q)]) {
          ASSERT_LT(p.global_ids[std::size_t(p.num_owned + h - 1)], w);
        }
        halo.insert(w);
        ASSERT_EQ(p.degree[std::size_t(p.num_owned + h)], g.degree(w));
      }
    ASSERT_EQ(halo, expected_halo) << "part " << r;
    ASSERT_EQ(std::int64_t(halo.size()), p.num_halo);
    // Splits: local ids of exactly the owned split nodes.
    for (const auto& s : d.splits) {
      std::set<NodeId> want, got;
      for (NodeId v : s.train)
        if (owner[std::size_t(v)] == r) want.insert(v);
      for (NodeId l : p.split(s.name)->train) got.insert(p.global_ids[std::size_t(l)]);
      ASSERT_EQ(got, want);
    }
  }
  // Send lists are the peers' receive lists, element for element.
  for (int r = 0; r < k; ++r)
    for (int q = 0; q < k; ++q) {
      const Part& a = all[std::size_t(r)];
      const Part& b = all[std::size_t(q)];
      const EdgeId sb = a.send_offsets[std::size_t(q)], se = a.send_offsets[std::size_t(q) + 1];
      const EdgeId rb = b.recv_offsets[std::size_t(r)], re = b.recv_offsets[std::size_t(r) + 1];
      ASSERT_EQ(se - sb, re - rb) << r << "->" << q;
      for (EdgeId i = 0; i < se - sb; ++i) {
        const NodeId local = a.send[std::size_t(sb + i)];
        ASSERT_LT(local, a.num_owned);
        ASSERT_EQ(a.global_ids[std::size_t(local)],
                  b.global_ids[std::size_t(b.num_owned + rb + i)]);
      }
      ASSERT_EQ(meta["parts"][std::size_t(r)]["send"][std::size_t(q)], se - sb);
    }
  for (std::int64_t v = 0; v < g.num_nodes; ++v) ASSERT_EQ(seen[std::size_t(v)], 1) << "node " << v;
  ASSERT_EQ(std::int64_t(edges.size()), g.num_edges()) << "union of local edges != global edges";
  const auto [cut, vol] = naive_quality(g, owner);
  EXPECT_EQ(meta["edge_cut"], cut);
  EXPECT_EQ(meta["comm_volume"], vol);
  std::int64_t halo_total = 0;
  for (const auto& p : meta["parts"]) halo_total += p["halo"].get<std::int64_t>();
  EXPECT_EQ(halo_total, vol);  // symmetric graphs: rows received = volume
}

struct Case {
  std::string graph, method;
  int k;
};

class Invariants : public ::testing::TestWithParam<Case> {};

TEST_P(Invariants, Hold) {
  const Case c = GetParam();
  TempDir t;
  PartitionOptions o;
  o.k = c.k;
  o.method = parse_partition_method(c.method);
  partition_dataset(dataset(c.graph), t / "parts", o, false);
  check_invariants(read_graph_dataset(dataset(c.graph)), t / "parts", c.k);
}

INSTANTIATE_TEST_SUITE_P(All, Invariants,
                         ::testing::Values(Case{"cora", "metis", 1}, Case{"cora", "metis", 2},
                                           Case{"cora", "metis", 4}, Case{"cora", "fennel", 3},
                                           Case{"cora", "random", 4}, Case{"cora", "contiguous", 7},
                                           Case{"sbm", "metis", 8}, Case{"sbm", "fennel", 5},
                                           Case{"sbm", "random", 2}, Case{"4elt", "metis", 4},
                                           Case{"sbm", "lp-metis", 4}, Case{"4elt", "lp-metis", 3},
                                           Case{"cora", "lp-metis", 1}),
                         [](const auto& tp) {
                           std::string method = tp.param.method;  // test names: [A-Za-z0-9_]
                           std::replace(method.begin(), method.end(), '-', '_');
                           return tp.param.graph + "_" + method + "_" + std::to_string(tp.param.k);
                         });

TEST(Partition, SameSeedSamePartition) {
  TempDir t;
  PartitionOptions o;
  o.k = 4;
  for (const std::string m : {"metis", "random", "fennel", "lp-metis"}) {
    o.method = parse_partition_method(m);
    o.seed = 7;
    partition_dataset(dataset("sbm"), t / (m + "a"), o, false);
    partition_dataset(dataset("sbm"), t / (m + "b"), o, false);
    EXPECT_EQ(read_parts_meta(t / (m + "a"))["fingerprint"],
              read_parts_meta(t / (m + "b"))["fingerprint"])
        << m;
  }
  o.method = PartitionMethod::kRandom;
  o.seed = 8;
  partition_dataset(dataset("sbm"), t / "randomc", o, false);
  EXPECT_NE(read_parts_meta(t / "randoma")["edge_cut"], read_parts_meta(t / "randomc")["edge_cut"]);
}

std::int64_t cut_of(const CsrView& g, const std::vector<PartId>& owner) {
  return naive_quality(g, owner).first;
}

// gpmetis on name's graph (written under t) into k parts, with flags (-seed=S, -ptype=...); its
// assignment.
std::vector<PartId> gpmetis(const TempDir& t, const std::string& name, const GraphDataset& d, int k,
                            const std::string& flags) {
  const fs::path graph = t / (name + ".graph");
  if (!fs::exists(graph)) write_metis(graph, d.graph.view(), nullptr, 0);
  const std::string cmd =
      "gpmetis " + flags + " " + graph.string() + " " + std::to_string(k) + " > /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(t / (name + ".graph.part." + std::to_string(k)));
  std::vector<PartId> theirs;
  for (PartId p; f >> p;) theirs.push_back(p);
  EXPECT_EQ(std::int64_t(theirs.size()), d.num_nodes()) << cmd;
  return theirs;
}

// Same library, same input file, same options (seed 0 on both sides): gpmetis and halo must
// agree exactly, with either scheme.
TEST(Partition, AgreesWithGpmetis) {
  if (std::system("command -v gpmetis >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "gpmetis not installed";
  TempDir t;
  for (const std::string name : {"cora", "4elt"}) {
    const GraphDataset d = read_graph_dataset(dataset(name));
    for (int k : {2, 4, 8})
      for (const MetisPtype ptype : {MetisPtype::kKway, MetisPtype::kRb}) {
        PartitionOptions o;
        o.k = k;
        o.ptype = ptype;
        o.seed = 0;
        const std::vector<PartId> theirs =
            gpmetis(t, name, d, k, "-seed=0 -ptype=" + std::string(to_string(ptype)));
        const std::vector<PartId> ours = partition_nodes(d, o);
        const std::int64_t a = cut_of(d.graph.view(), ours), b = cut_of(d.graph.view(), theirs);
        // Identical calls into the same METIS give the identical assignment; 2% is the bound the
        // issue allows should a METIS build ever differ (e.g. another idx_t width).
        EXPECT_EQ(ours, theirs) << name << " k=" << k << " " << to_string(ptype);
        EXPECT_LE(std::abs(double(a - b)), 0.02 * double(b))
            << name << " k=" << k << " " << to_string(ptype) << ": " << a << " vs " << b;
      }
  }
}

// The default options are gpmetis's defaults (k-way, and METIS's own seed: no -seed): the same
// assignment, so never a larger cut. --ptype best is exactly the lower-cut one of the two schemes
// (k-way on a tie).
TEST(Partition, DefaultIsGpmetisDefaultAndBestIsTheLowerCutOfBothSchemes) {
  if (std::system("command -v gpmetis >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "gpmetis not installed";
  TempDir t;
  int rb_chosen = 0;
  for (const std::string name : {"cora", "4elt", "sbm"}) {
    const GraphDataset d = read_graph_dataset(dataset(name));
    for (int k : {2, 4, 8}) {
      PartitionOptions o;
      o.k = k;
      MetisPtype scheme = MetisPtype::kAuto;
      const std::vector<PartId> ours = partition_nodes(d, o, &scheme);
      EXPECT_EQ(scheme, MetisPtype::kKway) << name << " k=" << k;
      EXPECT_EQ(ours, gpmetis(t, name, d, k, "")) << name << " k=" << k;
      std::int64_t by[2] = {};
      std::vector<PartId> of[2];
      for (const MetisPtype p : {MetisPtype::kKway, MetisPtype::kRb}) {
        o.ptype = p;
        of[p == MetisPtype::kRb] = partition_nodes(d, o);
        by[p == MetisPtype::kRb] = cut_of(d.graph.view(), of[p == MetisPtype::kRb]);
      }
      o.ptype = MetisPtype::kBest;
      const std::vector<PartId> best = partition_nodes(d, o, &scheme);
      const bool rb = by[1] < by[0];
      EXPECT_EQ(scheme, rb ? MetisPtype::kRb : MetisPtype::kKway) << name << " k=" << k;
      EXPECT_EQ(best, of[rb]) << name << " k=" << k;
      EXPECT_EQ(cut_of(d.graph.view(), best), std::min(by[0], by[1])) << name << " k=" << k;
      rb_chosen += rb;
    }
  }
  // Each scheme wins somewhere on these graphs, or trying both would be pointless.
  EXPECT_GT(rb_chosen, 0);
  EXPECT_LT(rb_chosen, 9);
  // best is refused with the volume objective, as rb is: METIS minimises volume only k-way.
  PartitionOptions vol;
  vol.objective = MetisObjective::kVol;
  vol.ptype = MetisPtype::kBest;
  EXPECT_THROW(vol.check(100), ParamError);
}

// Whether the Python --method kaminpar runs has KaMinPar (HALO_PYTHON, else python3).
bool kaminpar_installed() {
  const std::string cmd = kaminpar_python() + " -c 'import kaminpar, numpy' > /dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// --method kaminpar: every node in a part, balanced within KaMinPar's 3%, a cut within 1.25x
// METIS's on these small graphs (the products-sized comparison is in docs/BENCHMARKS.md) and far
// below random's, the same assignment for the same seed on one thread, and parts written like
// any method's.
// `halo partition` without --seed hands METIS its own default seed: its assignment is plain
// gpmetis's on the graph `halo export` writes (Cora K = 4: seed 0 cut 337 where gpmetis cuts
// 325), and meta.json records no seed; --seed 0 is gpmetis -seed=0. The two assignments differ,
// so the comparison tells the default from seed 0.
TEST(Partition, WithoutSeedTheCommandCutsAsPlainGpmetis) {
  if (std::system("command -v gpmetis >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "gpmetis not installed";
  TempDir t;
  const std::string halo = test::configured("HALO_BINARY", HALO_BINARY);
  const std::string graph = (t / "cora.graph").string();
  ASSERT_EQ(std::system((halo + " export " + dataset("cora").string() + " -o " + graph +
                         " > /dev/null 2>&1")
                            .c_str()),
            0);
  auto read_assignment = [](const fs::path& p) {
    std::ifstream f(p);
    std::vector<PartId> a;
    for (PartId x; f >> x;) a.push_back(x);
    return a;
  };
  std::vector<PartId> ours[2], theirs[2];
  for (int seeded = 0; seeded < 2; ++seeded) {
    const std::string out = (t / ("p" + std::to_string(seeded))).string();
    const std::string cmd = halo + " partition " + dataset("cora").string() + " -k 4 -o " + out +
                            (seeded ? " --seed 0" : "") + " --assignment-out " + out +
                            ".part > /dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    ours[seeded] = read_assignment(out + ".part");
    const nlohmann::json meta = read_parts_meta(out);
    EXPECT_EQ(meta["seed"], seeded ? nlohmann::json(0) : nlohmann::json(nullptr));
    const std::string g = "gpmetis " + std::string(seeded ? "-seed=0 " : "") + graph + " 4";
    ASSERT_EQ(std::system((g + " > /dev/null").c_str()), 0) << g;
    theirs[seeded] = read_assignment(graph + ".part.4");
    EXPECT_EQ(std::int64_t(ours[seeded].size()), 2708);
    EXPECT_EQ(ours[seeded], theirs[seeded]) << g;
  }
  EXPECT_NE(ours[0], ours[1]);
}

TEST(Partition, KaminparGivesBalancedLowCutPartsWhenInstalled) {
  if (!kaminpar_installed())
    GTEST_SKIP() << "KaMinPar's Python package is not in " << kaminpar_python()
                 << " (pip install kaminpar numpy; make test puts it in build/py)";
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  for (const std::string name : {"cora", "4elt", "sbm"}) {
    const GraphDataset d = read_graph_dataset(dataset(name));
    const std::int64_t n = d.num_nodes();
    for (int k : {2, 8}) {
      PartitionOptions o;
      o.k = k;
      const std::int64_t metis = cut_of(d.graph.view(), partition_nodes(d, o));
      o.method = PartitionMethod::kRandom;
      const std::int64_t random = cut_of(d.graph.view(), partition_nodes(d, o));
      o.method = PartitionMethod::kKaminpar;
      const std::vector<PartId> owner = partition_nodes(d, o);
      ASSERT_EQ(std::int64_t(owner.size()), n);
      std::vector<std::int64_t> size(std::size_t(k), 0);
      for (PartId p : owner) ++size[std::size_t(p)];
      for (int p = 0; p < k; ++p) {
        EXPECT_GT(size[std::size_t(p)], 0) << name << " k=" << k << " part " << p;
        EXPECT_LE(double(size[std::size_t(p)]), 1.03 * double(n) / k + 1) << name << " k=" << k;
      }
      const std::int64_t cut = cut_of(d.graph.view(), owner);
      EXPECT_LE(double(cut), 1.25 * double(metis)) << name << " k=" << k;
      EXPECT_LE(double(cut), 0.3 * double(random)) << name << " k=" << k;
      EXPECT_EQ(partition_nodes(d, o), owner) << name << " k=" << k << ": not deterministic";
    }
  }
  omp_set_num_threads(threads);
  TempDir t;
  PartitionOptions o;
  o.k = 4;
  o.method = PartitionMethod::kKaminpar;
  const json meta = partition_dataset(dataset("cora"), t / "p", o, false);
  EXPECT_EQ(meta["method"], "kaminpar");
  EXPECT_EQ(read_part(t / "p", 3).num_owned + read_part(t / "p", 0).num_owned +
                read_part(t / "p", 1).num_owned + read_part(t / "p", 2).num_owned,
            2708);
}

// Without the package, or without a working interpreter, --method kaminpar says how to get it
// in one line; a KaMinPar that fails is named with its last error line. (Stand-in interpreters:
// scripts that hide the package from a real python3, or fail.)
TEST(PartitionErrors, KaminparMissingOrFailingSaysSoInOneLine) {
  TempDir t;
  const GraphDataset d = read_graph_dataset(dataset("cora"));
  PartitionOptions o;
  o.k = 2;
  o.method = PartitionMethod::kKaminpar;
  auto with_python = [&](const std::string& script) {
    test::write_text(t / "python", "#!/bin/sh\n" + script + "\n");
    fs::permissions(t / "python", fs::perms::owner_all);
    setenv("HALO_PYTHON", (t / "python").c_str(), 1);
  };
  auto message = [&]() -> std::string {
    try {
      partition_nodes(d, o);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  const char* saved = std::getenv("HALO_PYTHON");
  const std::string before = saved ? saved : "";
  with_python(
      "exec python3 -c 'import sys; sys.modules[\"kaminpar\"] = None; sys.argv = sys.argv[1:]; "
      "exec(open(sys.argv[0]).read())' \"$@\"");
  std::string m = message();
  EXPECT_NE(m.find("--method kaminpar needs KaMinPar's Python package (missing Python package: "
                   "kaminpar in "),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("pip install kaminpar"), std::string::npos) << m;
  EXPECT_THROW(partition_nodes(d, o), ParamError);
  with_python("echo 'RuntimeError: boom' >&2; exit 1");
  m = message();
  EXPECT_NE(m.find("--method kaminpar: KaMinPar failed (exit 1): RuntimeError: boom"),
            std::string::npos)
      << m;
  setenv("HALO_PYTHON", (t / "no-such-python").c_str(), 1);
  m = message();
  EXPECT_NE(m.find("--method kaminpar: cannot run " + (t / "no-such-python").string()),
            std::string::npos)
      << m;
  for (const std::string& line : {m}) EXPECT_EQ(line.find('\n'), std::string::npos);
  if (saved)
    setenv("HALO_PYTHON", before.c_str(), 1);
  else
    unsetenv("HALO_PYTHON");
  // Only node balance: KaMinPar's package takes no other weights.
  o.balance = "nodes,edges";
  EXPECT_THROW(o.check(d.num_nodes()), ParamError);
}

// lp-metis on graphs with communities cuts within 1.15x METIS's (the target at products size,
// where it measures 0.91x; docs/BENCHMARKS.md), balanced within METIS's 3%; it refuses the
// balance options it cannot honour.
TEST(Partition, LpMetisCutsCloseToMetisOnCommunityGraphs) {
  for (const std::string name : {"cora", "sbm"}) {
    const GraphDataset d = read_graph_dataset(dataset(name));
    const std::int64_t n = d.num_nodes();
    for (int k : {2, 4, 8}) {
      PartitionOptions o;
      o.k = k;
      const std::int64_t metis = cut_of(d.graph.view(), partition_nodes(d, o));
      o.method = PartitionMethod::kLpMetis;
      const std::vector<PartId> owner = partition_nodes(d, o);
      EXPECT_LE(double(cut_of(d.graph.view(), owner)), 1.15 * double(metis)) << name << " k=" << k;
      std::vector<std::int64_t> size(std::size_t(k), 0);
      for (PartId p : owner) ++size[std::size_t(p)];
      for (int p = 0; p < k; ++p)
        EXPECT_LE(double(size[std::size_t(p)]), std::ceil(1.03 * double(n) / k)) << name;
    }
  }
  PartitionOptions o;
  o.method = PartitionMethod::kLpMetis;
  o.part_weights = {2, 1};
  EXPECT_THROW(o.check(100), ParamError);
}

TEST(Partition, MetisVolumeIsAThirdOfRandomOrLess) {
  for (const std::string name : {"cora", "4elt"}) {
    const GraphDataset d = read_graph_dataset(dataset(name));
    for (int k : {2, 4, 8}) {
      PartitionOptions o;
      o.k = k;
      const auto metis =
          measure_partition(d.graph.view(), false, partition_nodes(d, o), k, nullptr, {});
      o.method = PartitionMethod::kRandom;
      const auto random =
          measure_partition(d.graph.view(), false, partition_nodes(d, o), k, nullptr, {});
      EXPECT_LE(3 * metis.comm_volume, random.comm_volume) << name << " k=" << k;
    }
  }
}

TEST(Partition, FennelCutsAtMostSixTenthsOfRandom) {
  for (const std::string name : {"cora", "4elt", "sbm"}) {
    const GraphDataset d = read_graph_dataset(dataset(name));
    for (int k : {2, 8}) {
      PartitionOptions o;
      o.k = k;
      o.method = PartitionMethod::kFennel;
      const auto fennel =
          measure_partition(d.graph.view(), false, partition_nodes(d, o), k, nullptr, {});
      o.method = PartitionMethod::kRandom;
      const auto random =
          measure_partition(d.graph.view(), false, partition_nodes(d, o), k, nullptr, {});
      EXPECT_LE(double(fennel.edge_cut), 0.6 * double(random.edge_cut)) << name << " k=" << k;
      EXPECT_LE(fennel.node_balance, 1.031) << name << " k=" << k;
    }
  }
}

// The generator's locality knob gives METIS something to find: the same 20,000-node graph
// with 90% of the draws inside neighbourhoods of ~1,000 nodes (5 per part) is cut far less, and
// its halo (the rows a rank copies) is small against the rows it owns, as on real graphs.
TEST(Partition, GeneratedLocalityShrinksTheCutAndTheHalo) {
  TempDir t;
  GenerateOptions g;
  g.nodes = 20000;
  g.avg_degree = 12;
  g.features = 0;
  g.classes = 8;
  g.seed = 5;
  generate(t / "plain", g);
  g.locality = 0.9;
  g.community_size = 500;
  g.neighbourhood_classes = 2;
  generate(t / "local", g);
  PartitionOptions o;
  o.k = 4;
  auto quality = [&](const std::string& name) {
    const GraphDataset d = read_graph_dataset(t / name);
    return measure_partition(d.graph.view(), false, partition_nodes(d, o), o.k, nullptr, {});
  };
  const Quality plain = quality("plain"), local = quality("local");
  EXPECT_LE(double(local.edge_cut), 0.3 * double(plain.edge_cut))
      << local.edge_cut << " vs " << plain.edge_cut;
  for (const PartStats& p : local.parts) EXPECT_LE(double(p.halo), 0.5 * double(p.nodes));
  for (const PartStats& p : plain.parts) EXPECT_GT(double(p.halo), 0.5 * double(p.nodes));
}

TEST(Partition, PartWeightsAreHonouredByEveryMethod) {
  const GraphDataset d = read_graph_dataset(dataset("4elt"));
  for (const std::string m : {"metis", "fennel", "random", "contiguous"}) {
    PartitionOptions o;
    o.k = 3;
    o.method = parse_partition_method(m);
    o.part_weights = {2, 1, 1};
    const auto q =
        measure_partition(d.graph.view(), false, partition_nodes(d, o), 3, nullptr, o.targets());
    const double want[3] = {0.5, 0.25, 0.25};
    // METIS's ufactor 30 allows 3% above target; random draws add sampling noise (n = 15606).
    const double tol = m == "random" ? 0.02 : 0.03;
    for (int p = 0; p < 3; ++p) {
      EXPECT_LE(q.parts[std::size_t(p)].share, want[p] * (1 + tol)) << m << " part " << p;
      EXPECT_GE(q.parts[std::size_t(p)].share, want[p] * (1 - 3 * tol)) << m << " part " << p;
      EXPECT_DOUBLE_EQ(q.parts[std::size_t(p)].target, want[p]);
    }
  }
}

TEST(Partition, MultiConstraintBalancesTrainingNodes) {
  const GraphDataset d = read_graph_dataset(dataset("cora"));
  PartitionOptions o;
  o.k = 4;
  const Split* s = d.split("public");
  const auto plain = measure_partition(d.graph.view(), false, partition_nodes(d, o), 4, s, {});
  o.balance = "nodes,train";
  const auto both = measure_partition(d.graph.view(), false, partition_nodes(d, o), 4, s, {});
  EXPECT_LE(both.train_balance, 1.06);
  EXPECT_LE(both.node_balance, 1.04);
  EXPECT_LT(both.train_balance, plain.train_balance);
  o.balance = "nodes,edges";
  const auto edges = measure_partition(d.graph.view(), false, partition_nodes(d, o), 4, s, {});
  EXPECT_LE(edges.edge_balance, 1.05);
}

TEST(Partition, VolumeObjectiveAndContiguousParts) {
  const GraphDataset d = read_graph_dataset(dataset("4elt"));
  PartitionOptions o;
  o.k = 8;
  o.objective = MetisObjective::kVol;
  const auto owner = partition_nodes(d, o);
  const auto q = measure_partition(d.graph.view(), false, owner, 8, nullptr, {});
  const auto [cut, vol] = naive_quality(d.graph.view(), owner);
  EXPECT_EQ(q.comm_volume, vol);
  EXPECT_LE(q.node_balance, 1.031);
  // Every part induces a connected subgraph with --contiguous.
  o.objective = MetisObjective::kCut;
  o.contiguous = true;
  const auto contig = partition_nodes(d, o);
  for (PartId p = 0; p < 8; ++p) {
    EdgeList el;
    el.num_nodes = d.num_nodes();
    const CsrView g = d.graph.view();
    std::int64_t members = 0;
    for (NodeId u = 0; u < g.num_nodes; ++u) {
      if (contig[std::size_t(u)] != p) continue;
      ++members;
      for (const NodeId* v = g.begin(u); v != g.end(u); ++v)
        if (contig[std::size_t(*v)] == p) {
          el.src.push_back(u);
          el.dst.push_back(*v);
        }
    }
    std::int64_t comps = 0;
    connected_components(build_csr(std::move(el)).view(), false, &comps);
    EXPECT_EQ(comps - (d.num_nodes() - members), 1) << "part " << p;  // other nodes are isolated
  }
  // Cora has 78 components: contiguity is impossible and said so.
  const GraphDataset cora = read_graph_dataset(dataset("cora"));
  o.k = 4;
  EXPECT_THROW(partition_nodes(cora, o), ParamError);
}

TEST(Partition, AssignmentFileIsOnePartPerLine) {
  TempDir t;
  PartitionOptions o;
  o.k = 3;
  partition_dataset(dataset("cora"), t / "p", o, false, t / "cora.part.3");
  std::ifstream f(t / "cora.part.3");
  std::vector<PartId> a;
  for (PartId p; f >> p;) a.push_back(p);
  const Array<PartId> owner = read_owner(t / "p");
  EXPECT_EQ(a, std::vector<PartId>(owner.begin(), owner.end()));
}

// ---- bad input and parameters -------------------------------------------------------------

TEST(PartitionErrors, BadParametersAreOneLineAndWriteNothing) {
  TempDir t;
  auto expect_param = [&](const PartitionOptions& o, const std::string& part) {
    try {
      partition_dataset(dataset("cora"), t / "out", o, false, t / "a.part");
      ADD_FAILURE() << "expected ParamError containing " << part;
    } catch (const ParamError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(t / "out"));
    EXPECT_FALSE(fs::exists(t / "a.part"));
  };
  PartitionOptions o;
  o.k = 0;
  expect_param(o, "-k must be at least 1");
  o.k = 3000;
  expect_param(o, "exceeds the 2708 nodes");
  o.k = 2;
  try {  // the CLI parses --method before any options exist
    parse_partition_method("spectral");
    ADD_FAILURE() << "expected ParamError for --method spectral";
  } catch (const ParamError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown --method 'spectral'"), std::string::npos)
        << e.what();
  }
  o.balance = "nodes,colour";
  expect_param(o, "unknown --balance key 'colour'");
  o.balance = "nodes";
  o.part_weights = {1, 2, 3};
  expect_param(o, "--part-weights has 3 values");
  o.part_weights = {};
  o.balance = "weights";
  expect_param(o, "no vertex weights");
  o.balance = "nodes";
  // Values METIS cannot take are refused with their range before METIS sees them (0 made METIS
  // reject the input; 1e-300 underflowed to a zero share; a seed was cut to 32 bits).
  o.ufactor = 0;
  expect_param(o, "--ufactor must be in [1, 100000], found 0");
  o.ufactor = -1;  // the library's "METIS's default"
  o.part_weights = {1e-300, 1};
  expect_param(o, "--part-weights: every value must be in [1e-06, 1e+06]");
  o.part_weights = {};
  o.seed = std::uint64_t(1) << 31;
  expect_param(o, "--seed must be in [0, 2147483647] with --method metis");
}

TEST(PartitionErrors, EmptyPartIsNamed) {
  TempDir t;
  PartitionOptions o;
  o.k = 3;
  o.method = PartitionMethod::kContiguous;
  o.part_weights = {1, 1, 1e-6};
  try {
    partition_dataset(dataset("cora"), t / "out", o, false);
    ADD_FAILURE() << "expected an error";
  } catch (const ParamError& e) {
    EXPECT_NE(std::string(e.what()).find("part 2 is empty"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(t / "out"));
}

TEST(PartitionErrors, CorruptDatasetIsReported) {
  TempDir t;
  fs::copy(dataset("4elt"), t / "g", fs::copy_options::recursive);
  std::string bytes = test::read_bytes(t / "g/indices.bin");
  bytes[500] ^= 4;
  test::write_text(t / "g/indices.bin", bytes);
  PartitionOptions o;
  test::expect_input_error([&] { partition_dataset(t / "g", t / "out", o, false); },
                           {"indices.bin", "checksum mismatch"});
  EXPECT_FALSE(fs::exists(t / "out"));
}

// --assignment-in: an assignment computed elsewhere (here METIS's own, as gpmetis's .part.K text
// and as int64 and int32 .npy files) writes the same parts as partitioning does; bad files are
// refused in one line naming the file and the line or element, before anything is written.
TEST(PartitionErrors, AnAssignmentFromAFileWritesTheSamePartsAndBadOnesAreRefused) {
  TempDir t;
  const GraphDataset d = read_graph_dataset(dataset("cora"));
  const std::int64_t n = d.num_nodes();
  PartitionOptions o;
  o.k = 4;
  const std::vector<PartId> metis = partition_nodes(d, o);
  const json made = partition_dataset(dataset("cora"), t / "made", o, false, t / "a.part.4");
  std::vector<std::int64_t> wide(metis.begin(), metis.end());
  write_npy(t / "a64.npy", wide.data(), std::uint64_t(n), 0);
  // An int32 .npy by hand (write_npy writes int64 and float32 only): version 1, (n, 1), C order.
  auto npy32 = [&](const fs::path& f, const std::vector<std::int32_t>& v,
                   const std::string& shape) {
    std::string h = "{'descr': '<i4', 'fortran_order': False, 'shape': " + shape + ", }";
    h.resize(((h.size() + 11 + 63) / 64) * 64 - 11, ' ');
    h += '\n';
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes += char(h.size() & 0xff);
    bytes += char(h.size() >> 8);
    bytes += h;
    bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    test::write_text(f, bytes);
  };
  const std::vector<std::int32_t> narrow(metis.begin(), metis.end());
  npy32(t / "a32.npy", narrow, "(" + std::to_string(n) + ", 1)");
  PartitionOptions in;
  in.k = 4;
  in.method = PartitionMethod::kAssignment;
  for (const char* f : {"a.part.4", "a64.npy", "a32.npy"}) {
    in.assignment_in = t / f;
    EXPECT_EQ(partition_nodes(d, in), metis) << f;
  }
  in.assignment_in = t / "a.part.4";
  const json read = partition_dataset(dataset("cora"), t / "read", in, false);
  EXPECT_EQ(test::read_bytes(t / "read/owner.bin"), test::read_bytes(t / "made/owner.bin"));
  for (int r = 0; r < 4; ++r) {
    const std::string part = "part-" + std::to_string(r);
    for (const char* a : {"global_ids.bin", "send.bin", "recv.bin", "features.bin"})
      EXPECT_EQ(test::read_bytes(t / "read" / part / a), test::read_bytes(t / "made" / part / a))
          << part << "/" << a;
  }
  EXPECT_EQ(read["edge_cut"], made["edge_cut"]);
  EXPECT_EQ(read["method"], "assignment");
  EXPECT_EQ(read["options"]["assignment_in"], fs::absolute(t / "a.part.4").string());

  // Bad files: each an InputError naming the file and the record.
  auto text = [&](const std::string& name, const std::vector<std::string>& lines) {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    test::write_text(t / name, s);
    return t / name;
  };
  std::vector<std::string> ids;
  ids.reserve(metis.size());
  for (PartId p : metis) ids.push_back(std::to_string(p));
  auto refused = [&](const fs::path& f, std::initializer_list<std::string> parts) {
    in.assignment_in = f;
    test::expect_input_error([&] { partition_nodes(d, in); }, parts);
    EXPECT_THROW(partition_dataset(dataset("cora"), t / "out", in, false), InputError) << f;
    EXPECT_FALSE(fs::exists(t / "out")) << f;
  };
  std::vector<std::string> v = ids;
  v.pop_back();
  refused(text("short", v), {(t / "short").string() + ": has 2707 part ids, expected one per "
                                                      "node of the dataset (2708)"});
  v = ids;
  v.push_back("0");
  refused(text("long", v), {(t / "long").string() + ": line 2709: more part ids than"});
  v = ids;
  v[4] = "4";
  refused(text("range", v), {(t / "range").string() + ": line 5: part 4 is outside [0, 4)"});
  v[4] = "x";
  refused(text("word", v), {(t / "word").string() + ": line 5:", "part id"});
  v[4] = "1 2";
  refused(text("two", v), {(t / "two").string() + ": line 5:"});
  v = ids;
  for (auto& x : v)
    if (x == "3") x = "0";
  refused(text("empty", v), {(t / "empty").string() + ": part 3 has no node"});
  std::vector<float> floats(std::size_t(n), 0.f);
  write_npy(t / "f.npy", floats.data(), std::uint64_t(n), 0);
  refused(t / "f.npy", {(t / "f.npy").string() + ": dtype '<f4', expected little-endian int32"});
  write_npy(t / "s.npy", wide.data(), std::uint64_t(n - 1), 0);
  refused(t / "s.npy", {(t / "s.npy").string() + ": shape (2707,), expected (2708,)"});
  std::vector<std::int32_t> bad32 = narrow;
  bad32[7] = 9;
  npy32(t / "e.npy", bad32, "(" + std::to_string(n) + ",)");
  refused(t / "e.npy", {(t / "e.npy").string() + ": element 7: part 9 is outside [0, 4)"});
  std::string cut = test::read_bytes(t / "a32.npy");
  test::write_text(t / "cut.npy", cut.substr(0, cut.size() - 10));
  refused(t / "cut.npy", {(t / "cut.npy").string() + ": truncated"});
  test::write_text(t / "junk.npy", "0\n1\n");
  refused(t / "junk.npy", {(t / "junk.npy").string() + ": not a NumPy .npy file"});
  // The method and the file go together; a missing file is refused before any work.
  PartitionOptions lone;
  lone.assignment_in = t / "a.part.4";
  EXPECT_THROW(lone.check(n), ParamError);
  in.assignment_in = t / "missing";
  EXPECT_THROW(partition_dataset(dataset("cora"), t / "out", in, false), ParamError);
}

TEST(PartitionErrors, CorruptPartIsReported) {
  TempDir t;
  PartitionOptions o;
  o.k = 2;
  partition_dataset(dataset("cora"), t / "p", o, false);
  std::string bytes = test::read_bytes(t / "p/part-1/send.bin");
  bytes[bytes.size() - 1] ^= 1;
  test::write_text(t / "p/part-1/send.bin", bytes);
  EXPECT_NO_THROW(read_part(t / "p", 0));
  test::expect_input_error([&] { read_part(t / "p", 1); },
                           {"part-1/send.bin", "checksum mismatch"});
  EXPECT_THROW(read_part(t / "p", 2), ParamError);
}

// Locality orders: a permutation that carries every node's row, label and edges with it, and on
// a generated SBM (whose ids are random) numbering METIS parts contiguously puts most edges
// inside one window of ids where the generator's order put about 1/parts of them.
TEST(Reorder, MetisOrderIsAPermutationThatRaisesLocality) {
  const GraphDataset d = read_graph_dataset(dataset("sbm"));
  const std::int64_t n = d.num_nodes(), block = 625;  // 8 windows, one per SBM class
  const std::vector<NodeId> order = locality_order(d, LocalityMethod::kMetis, block);
  ASSERT_EQ(std::int64_t(order.size()), n);
  std::vector<NodeId> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t u = 0; u < n; ++u) ASSERT_EQ(sorted[std::size_t(u)], NodeId(u));
  const double before = window_locality(d.graph.view(), block);
  GraphDataset r = read_graph_dataset(dataset("sbm"));
  reorder_dataset(r, order);
  const double after = window_locality(r.graph.view(), block);
  EXPECT_LT(before, 0.25);
  EXPECT_GT(after, 0.6) << "before " << before;
  ASSERT_EQ(r.graph.num_edges(), d.graph.num_edges());
  // Node u of the result is node original_ids[u] of the input: features, labels and edges agree.
  std::set<std::pair<NodeId, NodeId>> edges;
  for (NodeId u = 0; u < NodeId(n); ++u)
    for (const NodeId* v = d.graph.view().begin(u); v != d.graph.view().end(u); ++v)
      edges.insert({u, *v});
  for (NodeId u = 0; u < NodeId(n); ++u) {
    const NodeId ou = r.original_ids[std::size_t(u)];
    ASSERT_EQ(r.labels[std::size_t(u)], d.labels[std::size_t(ou)]);
    for (std::int64_t c = 0; c < d.num_features; ++c)
      ASSERT_EQ(r.features[std::size_t(u * d.num_features + c)],
                d.features[std::size_t(std::int64_t(ou) * d.num_features + c)]);
    for (const NodeId* v = r.graph.view().begin(u); v != r.graph.view().end(u); ++v)
      ASSERT_TRUE(edges.count({ou, r.original_ids[std::size_t(*v)]})) << u << " " << *v;
  }
}

TEST(Reorder, RejectsUnknownMethodsAndBadBlocks) {
  const GraphDataset d = read_graph_dataset(dataset("cora"));
  EXPECT_THROW(parse_locality_method("random"), ParamError);
  EXPECT_THROW(locality_order(d, LocalityMethod::kMetis, 0), ParamError);
  EXPECT_EQ(locality_order(d, LocalityMethod::kRcm, 100).size(), std::size_t(d.num_nodes()));
  const std::vector<NodeId> one =
      locality_order(d, LocalityMethod::kMetis, 1 << 20);  // one window: the identity
  for (std::size_t u = 0; u < one.size(); ++u) ASSERT_EQ(one[u], NodeId(u));
}

// ---- --method ptscotch: the halo command under mpirun, P = 1, 2, 4 ----------------------------

// `halo partition ... --method ptscotch` on P ranks (P = 1: the plain command, an MPI
// singleton) of `threads` OpenMP threads each, stdout and stderr together.
test::Run ptscotch(const std::string& graph, int ranks, const std::string& args,
                   const fs::path& out_file, int threads = 1) {
  // mpirun refuses root without these; the container may lack cross-memory attach.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
  setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
  const std::string launch = ranks == 1 ? ""
                                        : test::configured("HALO_MPIEXEC", HALO_MPIEXEC) +
                                              " --oversubscribe --bind-to none -np " +
                                              std::to_string(ranks) + " ";
  return test::shell_merged(launch + test::configured("HALO_BINARY", HALO_BINARY) + " partition " +
                                dataset(graph).string() + " --method ptscotch " + args,
                            out_file);
}

struct ScotchCase {
  std::string graph;
  int ranks, k;
};

class PtScotch : public ::testing::TestWithParam<ScotchCase> {};

// Every invariant the other methods keep, meta naming the method and P, and a cut near METIS's:
// measured (seed 0, PT-Scotch 7.0.3 int32; ptscotch at P = 1 / 2 / 4 vs METIS k-way): Cora K = 4:
// 358 / 351 / 349 vs 337, 4elt K = 4: 356 / 382 / 399 vs 349, SBM K = 8: within 1.01x -- at most
// 1.14x. PT-Scotch's result moves with the seed (Cora K = 2: 191 or 230 vs 192), so 1.25x leaves
// room for other seeds and releases without letting a broken mapping (random: 10x) through.
TEST_P(PtScotch, InvariantsAndCut) {
  if (!ptscotch_available()) GTEST_SKIP() << "built without PT-Scotch";
  const ScotchCase c = GetParam();
  TempDir t;
  const test::Run r =
      ptscotch(c.graph, c.ranks, "-k " + std::to_string(c.k) + " -o " + (t / "parts").string(),
               t / "out.txt");
  ASSERT_EQ(r.code, 0) << r.out;
  const GraphDataset d = read_graph_dataset(dataset(c.graph));
  check_invariants(d, t / "parts", c.k);
  verify_parts(t / "parts");
  const json meta = read_parts_meta(t / "parts");
  EXPECT_EQ(meta["method"], "ptscotch");
  EXPECT_EQ(meta["ranks"], c.ranks);
  EXPECT_EQ(meta["peak_rss_bytes_per_rank"].size(), std::size_t(c.ranks));
  PartitionOptions o;
  o.k = c.k;
  const std::int64_t metis = cut_of(d.graph.view(), partition_nodes(d, o));
  EXPECT_LE(double(meta["edge_cut"].get<std::int64_t>()), 1.25 * double(metis));
  // The ranks wrote the parts from rows shuffled to them: the same parts, byte for byte (the
  // fingerprints), as the one-process writer makes of the same assignment.
  const Array<PartId> got = read_owner(t / "parts");
  const std::vector<PartId> owner(got.begin(), got.end());
  const Quality q = measure_partition(d.graph.view(), d.directed, owner, o.k,
                                      choose_split(d, o.split), o.targets());
  const json serial = write_parts(d, owner, o, q, t / "serial", false, json::object());
  EXPECT_EQ(meta["part_fingerprints"], serial["part_fingerprints"]);
  EXPECT_EQ(meta["edge_cut"], serial["edge_cut"]);
  EXPECT_EQ(meta["comm_volume"], serial["comm_volume"]);
}

INSTANTIATE_TEST_SUITE_P(Ranks, PtScotch,
                         ::testing::Values(ScotchCase{"cora", 1, 4}, ScotchCase{"cora", 2, 4},
                                           ScotchCase{"cora", 4, 4}, ScotchCase{"4elt", 2, 4},
                                           ScotchCase{"4elt", 4, 4}, ScotchCase{"sbm", 1, 8},
                                           ScotchCase{"sbm", 4, 8}, ScotchCase{"grid-w", 2, 4},
                                           ScotchCase{"sbm", 2, 5}, ScotchCase{"cora", 4, 2}),
                         [](const auto& tp) {
                           std::string g = tp.param.graph;
                           std::replace(g.begin(), g.end(), '-', '_');
                           return g + "_P" + std::to_string(tp.param.ranks) + "_K" +
                                  std::to_string(tp.param.k);
                         });

// The same seed and P give the same owner array (P = 4; P = 1 and 2 take the same path).
TEST(PtScotchRun, SameSeedSameOwner) {
  if (!ptscotch_available()) GTEST_SKIP() << "built without PT-Scotch";
  TempDir t;
  for (int ranks : {4}) {
    const std::string a = (t / ("a" + std::to_string(ranks))).string();
    const std::string b = (t / ("b" + std::to_string(ranks))).string();
    ASSERT_EQ(ptscotch("sbm", ranks, "-k 5 --seed 9 -o " + a, t / "out.txt").code, 0);
    ASSERT_EQ(ptscotch("sbm", ranks, "-k 5 --seed 9 -o " + b, t / "out.txt").code, 0);
    const Array<PartId> x = read_owner(a), y = read_owner(b);
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << "P = " << ranks;
  }
}

// PT-Scotch's threads call MPI at once (Debian builds it with SCOTCH_PTHREAD_MPI): the ranks
// ask for MPI_THREAD_MULTIPLE and run OMP_NUM_THREADS of them, the same owner every time. (At
// MPI_THREAD_SERIALIZED they raced in Open MPI: a rare SIGSEGV at P = 2.)
TEST(PtScotchRun, RanksRunScotchThreadsUnderThreadMultiple) {
  if (!ptscotch_available()) GTEST_SKIP() << "built without PT-Scotch";
  TempDir t;
  const GraphDataset d = read_graph_dataset(dataset("sbm"));
  std::vector<std::vector<PartId>> owners;
  for (const char* name : {"a", "b"}) {
    const fs::path out = t / name;
    const test::Run r = ptscotch("sbm", 2, "-k 5 --seed 4 -o " + out.string(), t / "out.txt", 2);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(read_parts_meta(out)["threads_per_rank"], 2);
    check_invariants(d, out, 5);
    const Array<PartId> got = read_owner(out);
    owners.emplace_back(got.begin(), got.end());
  }
  EXPECT_EQ(owners[0], owners[1]);
}

// The lines starting "error:" in a run's output (mpirun adds its own banner).
std::vector<std::string> error_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("error:", 0) == 0) lines.push_back(line);
  return lines;
}

// Bad input on some or all ranks: one error line, a non-zero exit, and nothing left beside the
// output (no PARTS, no staging folder).
TEST(PtScotchRun, BadInputOneLineNoOutput) {
  if (!ptscotch_available()) GTEST_SKIP() << "built without PT-Scotch";
  TempDir t;
  // A column out of range in Cora's last row: only the last rank's slice holds it.
  fs::copy(dataset("cora"), t / "bad");
  const fs::path indices = t / "bad" / "indices.bin";
  const auto size = fs::file_size(indices);
  {
    std::fstream f(indices, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(size - sizeof(NodeId)));
    const NodeId big = 1 << 30;
    f.write(reinterpret_cast<const char*>(&big), sizeof big);
  }
  fs::create_symlink(t / "bad", dataset("bad-cora"));
  struct Bad {
    std::string graph;
    int ranks;
    std::string args, says;
  };
  for (const Bad& b :
       {Bad{"cora", 2, "-k 5000", "exceeds the 2708 nodes"}, Bad{"missing", 4, "-k 4", "missing"},
        Bad{"bad-cora", 4, "-k 4", "indices.bin: entry"}}) {
    const fs::path out = t / "out" / "parts";
    const test::Run r = ptscotch(b.graph, b.ranks, b.args + " -o " + out.string(), t / "log.txt");
    EXPECT_NE(r.code, 0) << r.out;
    const auto lines = error_lines(r.out);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    EXPECT_NE(lines[0].find(b.says), std::string::npos) << lines[0];
    EXPECT_FALSE(fs::exists(t / "out") && !fs::is_empty(t / "out")) << b.graph;
  }
  fs::remove(dataset("bad-cora"));
}

// A graph of more stored edges than the int32 PT-Scotch indexes is refused from its meta.json,
// before anything is mapped: exit 2 (a parameter: another build takes it), one line naming the
// count and the build that lifts the limit, no output.
TEST(PtScotchRun, MoreEdgesThanItIndexesIsRefusedFirst) {
  if (!ptscotch_available()) GTEST_SKIP() << "built without PT-Scotch";
  if (ptscotch_max_edges() > std::int64_t(INT32_MAX))
    GTEST_SKIP() << "the int64 PT-Scotch indexes every graph halo holds";
  TempDir t;
  fs::copy(dataset("cora"), t / "big");  // says it stores 2^31 edges; its files are Cora's
  json meta = json::parse(std::ifstream(t / "big" / "meta.json"));
  meta["edges"] = ptscotch_max_edges() + 1;
  std::ofstream(t / "big" / "meta.json") << meta.dump();
  fs::create_symlink(t / "big", dataset("big-cora"));
  const fs::path out = t / "out" / "parts";
  const test::Run r = ptscotch("big-cora", 2, "-k 2 -o " + out.string(), t / "log.txt");
  fs::remove(dataset("big-cora"));
  EXPECT_EQ(r.code, 2) << r.out;
  const auto lines = error_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_NE(lines[0].find("2147483648 stored edges"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("HALO_PTSCOTCH_INT=64"), std::string::npos) << lines[0];
  EXPECT_FALSE(fs::exists(t / "out") && !fs::is_empty(t / "out"));
}

// The spellings --method, --objective and --ptype accept (halo partition, halo reorder), and the
// exact line for one they do not. The assignment method has a name but no spelling: it is chosen
// by --assignment FILE.
TEST(OptionSpellings, PartitionAndReorderOptions) {
  test::expect_spellings<PartitionMethod>({{PartitionMethod::kMetis, "metis"},
                                           {PartitionMethod::kFennel, "fennel"},
                                           {PartitionMethod::kRandom, "random"},
                                           {PartitionMethod::kContiguous, "contiguous"},
                                           {PartitionMethod::kKaminpar, "kaminpar"},
                                           {PartitionMethod::kLpMetis, "lp-metis"},
                                           {PartitionMethod::kPtScotch, "ptscotch"}},
                                          parse_partition_method,
                                          [](PartitionMethod m) { return to_string(m); });
  EXPECT_STREQ(to_string(PartitionMethod::kAssignment), "assignment");
  EXPECT_EQ(test::param_error([] { parse_partition_method("assignment"); }),
            "unknown --method 'assignment' (expected metis, fennel, random, contiguous, kaminpar, "
            "lp-metis or ptscotch)");
  test::expect_spellings<MetisObjective>(
      {{MetisObjective::kCut, "cut"}, {MetisObjective::kVol, "vol"}}, parse_metis_objective,
      [](MetisObjective o) { return to_string(o); });
  EXPECT_EQ(test::param_error([] { parse_metis_objective("edges"); }),
            "unknown --objective 'edges' (expected cut or vol)");
  test::expect_spellings<MetisPtype>({{MetisPtype::kAuto, "auto"},
                                      {MetisPtype::kKway, "kway"},
                                      {MetisPtype::kRb, "rb"},
                                      {MetisPtype::kBest, "best"}},
                                     parse_metis_ptype, [](MetisPtype p) { return to_string(p); });
  EXPECT_EQ(test::param_error([] { parse_metis_ptype(""); }),
            "unknown --ptype '' (expected auto, kway, rb or best)");
  test::expect_spellings<LocalityMethod>(
      {{LocalityMethod::kMetis, "metis"}, {LocalityMethod::kRcm, "rcm"}}, parse_locality_method,
      [](LocalityMethod m) { return to_string(m); });
  EXPECT_EQ(test::param_error([] { parse_locality_method("random"); }),
            "unknown --method 'random' (expected metis or rcm)");
}

}  // namespace
}  // namespace halo
