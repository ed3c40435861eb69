// Bad datasets and partitions as `halo` meets them (issue 15): arrays that pass their checksums
// but break the format's promises (checksums and fingerprints recomputed after the edit, as a
// tool or an attacker would), a part of another partition, and malformed meta.json files. Every
// command must stop within seconds with exit 1 and one line naming the file and the problem,
// leave no output or staging folder behind, and never crash.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "../test_util.h"
#include "halo/graph/array_file.h"
#include "halo/graph/dataset.h"

namespace halo {
namespace {
using test::TempDir;
using json = nlohmann::json;
namespace fs = std::filesystem;

using Result = test::Run;
using test::shell;

std::string halo() { return test::configured("HALO_BINARY", HALO_BINARY); }

Result run(const std::string& args, const fs::path& dir) { return shell(halo() + " " + args, dir); }

int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

// Exit `code` (1: bad data, 2: bad parameter), one line "error: ..." holding every one of parts,
// in seconds.
void expect_bad_input(const Result& r, const std::string& what,
                      const std::vector<std::string>& parts, int code = 1) {
  EXPECT_EQ(r.code, code) << what << ": " << r.err;
  EXPECT_EQ(lines(r.err), 1) << what << ": " << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << what << ": " << r.err;
  for (const auto& p : parts)
    EXPECT_NE(r.err.find(p), std::string::npos) << what << ": '" << p << "' not in: " << r.err;
  EXPECT_LT(r.seconds, 10.0) << what;
}

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}
void write_json(const fs::path& p, const json& j) { test::write_text(p, j.dump(2) + "\n"); }

// Records a rewritten array's checksum in its meta.json and every fingerprint that covers it
// (for a part, also PARTS/meta.json's record of the part), as a consistent edit would.
void reseal(const fs::path& dir, const std::string& name, std::uint32_t crc) {
  json meta = read_json(dir / "meta.json");
  meta["arrays"][name]["crc32"] = crc;
  const std::string from =
      meta["format"] == "halo-parts" ? meta["dataset_fingerprint"].get<std::string>() : "";
  meta["fingerprint"] = arrays_fingerprint(meta["arrays"], from);
  write_json(dir / "meta.json", meta);
  if (meta["format"] == "halo-part") {
    json root = read_json(dir.parent_path() / "meta.json");
    root["part_fingerprints"][meta["rank"].get<std::size_t>()] = meta["fingerprint"];
    write_json(dir.parent_path() / "meta.json", root);
  }
}

// The contents of dir/name.bin, without any check.
template <class T>
std::vector<T> load(const fs::path& dir, const std::string& name) {
  const Array<T> a = map_array<T>(dir / (name + ".bin"));
  return {a.begin(), a.end()};
}

// Sets entry i of dir/name.bin to value and reseals the checksums.
template <class T>
void set_entry(const fs::path& dir, const std::string& name, std::size_t i, T value) {
  ArrayInfo info;
  std::vector<T> v;
  {
    const Array<T> a = map_array<T>(dir / (name + ".bin"), &info);
    v.assign(a.begin(), a.end());
  }
  ASSERT_LT(i, v.size()) << name;
  v[i] = value;
  reseal(dir, name, write_array(dir / (name + ".bin"), v.data(), info.rows, info.cols).crc32);
}

// Cora converted (plain and relabelled by RCM) and partitioned once for the whole suite; each
// test corrupts its own copy.
class BadDataset : public ::testing::Test {
 public:
  static fs::path dir() {
    return fs::temp_directory_path() / ("halo-bad-" + std::to_string(getpid()));
  }
  static fs::path data(const std::string& name) { return dir() / name; }
  static void SetUpTestSuite() {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);  // mpirun refuses root without these
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    fs::create_directories(dir());
    const std::string d = dir().string(), cora = test::bundled("cora").string();
    for (const std::string& step : {"convert " + cora + " -o " + d + "/cora",
                                    "convert " + cora + " -o " + d + "/rcm --reorder rcm",
                                    "partition " + d + "/cora -k 2 -o " + d + "/p2",
                                    "partition " + d + "/cora -k 1 -o " + d + "/p1",
                                    "partition " + d + "/rcm -k 2 -o " + d + "/q2"}) {
      const Result r = run(step, dir());
      ASSERT_EQ(r.code, 0) << step << ": " << r.err;
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir()); }
};

// A copy of fixture `name` as t/name.
fs::path copy_of(const std::string& name, const TempDir& t) {
  fs::copy(BadDataset::data(name), t / name, fs::copy_options::recursive);
  return t / name;
}

// Nothing in t but the corrupted inputs: no part folder, no staging folder.
void expect_nothing_written(const TempDir& t, const std::vector<std::string>& inputs) {
  for (const auto& e : fs::directory_iterator(t.path()))
    EXPECT_NE(std::find(inputs.begin(), inputs.end(), e.path().filename().string()), inputs.end())
        << "left behind: " << e.path();
}

// Runs info, partition and train on a corrupted dataset: each must refuse it the same way.
void expect_every_command_refuses(const fs::path& ds, const TempDir& t, const std::string& what,
                                  const std::vector<std::string>& parts) {
  expect_bad_input(run("info " + ds.string(), t.path()), what + " / info", parts);
  expect_bad_input(run("partition " + ds.string() + " -k 2 -o " + (t / "out").string(), t.path()),
                   what + " / partition", parts);
  expect_nothing_written(t, {ds.filename().string()});
  expect_bad_input(run("train " + ds.string() + " --epochs 1 -q", t.path()), what + " / train",
                   parts);
}

struct Corruption {
  std::string array;
  std::size_t index;
  double value;
  std::vector<std::string> expect;  // in the message, after the file name
};

// Sets one entry of dataset ds (of dtype T) and checks every command.
template <class T>
void check_case(const Corruption& c, const TempDir& t) {
  const fs::path ds = copy_of("cora", t);
  set_entry<T>(ds, c.array, c.index, T(c.value));
  const std::string what =
      c.array + "[" + std::to_string(c.index) + "] = " + std::to_string(c.value);
  std::vector<std::string> parts = c.expect;
  parts.push_back((ds / (c.array + ".bin")).string() + ": ");
  expect_every_command_refuses(ds, t, what, parts);
  fs::remove_all(ds);
}

// Entries of Cora's CSR that make a row unsorted, a self-loop, or an edge without its reverse
// when changed, found from the data so that each edit breaks exactly one promise.
struct CsrEdits {
  std::size_t duplicate_at = 0;  // indices[e] := indices[e - 1]
  NodeId duplicate_value = 0;
  std::size_t loop_at =
      0;  // indices[e] := its row (first entry of a row whose columns are all above it)
  NodeId loop_value = 0;
  std::size_t oneway_at = 0;  // indices[e] := indices[e] + 1, a column that is free in the row
  NodeId oneway_value = 0;
};
CsrEdits find_edits(const fs::path& ds) {
  const auto off = load<EdgeId>(ds, "offsets");
  const auto idx = load<NodeId>(ds, "indices");
  const auto n = NodeId(off.size() - 1);
  CsrEdits c;
  auto has = [&](NodeId u, NodeId v) {
    return std::binary_search(idx.begin() + off[std::size_t(u)],
                              idx.begin() + off[std::size_t(u) + 1], v);
  };
  bool dup = false, loop = false, oneway = false;
  for (NodeId u = 0; u < n; ++u) {
    const auto b = std::size_t(off[std::size_t(u)]), e = std::size_t(off[std::size_t(u) + 1]);
    if (!dup && e - b >= 2)
      c = {b + 1, idx[b], c.loop_at, c.loop_value, c.oneway_at, c.oneway_value}, dup = true;
    if (!loop && e > b && idx[b] > u) c.loop_at = b, c.loop_value = u, loop = true;
    for (std::size_t i = b; !oneway && i < e; ++i) {
      const NodeId v = idx[i] + 1;
      if (v < n && v != u && (i + 1 == e || v < idx[i + 1]) && !has(v, u))
        c.oneway_at = i, c.oneway_value = v, oneway = true;
    }
  }
  EXPECT_TRUE(dup && loop && oneway);
  return c;
}

TEST_F(BadDataset, ChecksumConsistentBadIndicesAndOffsetsStopEveryCommand) {
  TempDir t;
  const CsrEdits e = find_edits(data("cora"));
  const double big = std::numeric_limits<std::int32_t>::max();
  for (const Corruption& c : std::vector<Corruption>{
           {"indices", 5, -1, {"entry 5 (row", "column -1 out of range [0, 2708)"}},
           {"indices", 5, 2708, {"column 2708 out of range [0, 2708)"}},
           {"indices", 5, big, {"column 2147483647 out of range"}},
           {"indices",
            e.duplicate_at,
            double(e.duplicate_value),
            {"not above the previous one", "without duplicates"}},
           {"indices", e.loop_at, double(e.loop_value), {"self-loop"}},
           {"indices", e.oneway_at, double(e.oneway_value), {"has no reverse", "undirected"}}})
    check_case<NodeId>(c, t);
  for (const Corruption& c :
       std::vector<Corruption>{{"offsets", 0, 1, {"entry 0: first offset 1, expected 0"}},
                               {"offsets", 3, 99999, {"entry 4: offset", "must not decrease"}},
                               {"offsets",
                                2708,
                                20000,
                                {"entry 2708: last offset 20000, expected the index count 10556"}}})
    check_case<EdgeId>(c, t);
}

TEST_F(BadDataset, ChecksumConsistentBadLabelsSplitsAndFeaturesStopEveryCommand) {
  TempDir t;
  const auto train = load<NodeId>(data("cora"), "split.public.train");
  for (const Corruption& c : std::vector<Corruption>{
           {"split.public.train", 0, 5000, {"entry 0: id 5000 out of range [0, 2708)"}},
           {"split.public.train",
            1,
            double(train[0]),
            {"entry 1: id " + std::to_string(train[0]) + " repeated"}},
           {"split.public.valid", 0, double(train[0]), {"also in the train set"}},
           {"split.public.test",
            3,
            double(train[5]),
            {"entry 3", "also in the train or valid set"}},
           {"labels", 7, 7, {"entry 7 (row 7): label 7 out of range [-1, 7)"}},
           {"labels", 0, -2, {"label -2 out of range"}}})
    check_case<std::int32_t>(c, t);
  check_case<float>(
      {"features", 1433 * 2 + 5, std::nan(""), {"entry 2871: value nan, expected a finite number"}},
      t);
  check_case<float>({"features", 0, INFINITY, {"expected a finite number"}}, t);
}

TEST_F(BadDataset, ReorderedIdsMustBeAPermutation) {
  TempDir t;
  const fs::path ds = copy_of("rcm", t);
  const auto ids = load<NodeId>(ds, "original_ids");
  set_entry<NodeId>(ds, "original_ids", 9, ids[4]);
  expect_every_command_refuses(ds, t, "original_ids",
                               {"rcm/original_ids.bin: entry 9: id", "repeated"});
  set_entry<NodeId>(ds, "original_ids", 9, 2708);
  expect_every_command_refuses(ds, t, "original_ids",
                               {"rcm/original_ids.bin: entry 9: id 2708 out of range"});
}

// Part-1 of a 2-part partition, corrupted array by array: `halo info` and the per-rank memory
// prediction read every part; a 1-part partition trains on one process; one case under mpirun.
TEST_F(BadDataset, ChecksumConsistentBadPartsAreRefused) {
  TempDir t;
  const json meta = read_json(data("p2") / "part-1" / "meta.json");
  const std::int64_t owned = meta["owned"], all = owned + meta["halo"].get<std::int64_t>();
  const auto recv = load<EdgeId>(data("p2") / "part-1", "recv_offsets");
  const auto degree = load<std::int32_t>(data("p2") / "part-1", "degree");
  struct Case {
    std::string array;
    std::size_t index;
    std::int64_t value;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"indices", 0, all,
       "part-1/indices.bin: entry 0 (row 0): column " + std::to_string(all) + " out of range"},
      {"global_ids", 2, 2708, "part-1/global_ids.bin: entry 2: id 2708 out of range [0, 2708)"},
      {"global_ids", 1, -1, "part-1/global_ids.bin: entry 1: id -1 out of range"},
      {"send", 0, owned, "part-1/send.bin: entry 0: id " + std::to_string(owned) + " out of range"},
      {"send_offsets", 1, 1 << 20, "part-1/send_offsets.bin: entry 2: offset"},
      {"recv_offsets", 1, recv[1] + 5, "part-1/recv_offsets.bin: entry 2: offset"},
      {"recv_offsets", 2, recv[2] + 1, "part-1/recv_offsets.bin: entry 2: last offset"},
      {"degree", 0, degree[0] + 1, "part-1/degree.bin: entry 0: degree"},
      {"labels", 0, 9, "part-1/labels.bin: entry 0 (row 0): label 9 out of range"},
      {"split.public.train", 0, owned,
       "part-1/split.public.train.bin: entry 0: id " + std::to_string(owned)}};
  for (const Case& c : cases) {
    const fs::path p = copy_of("p2", t);
    if (c.array.find("offsets") != std::string::npos)
      set_entry<EdgeId>(p / "part-1", c.array, c.index, c.value);
    else
      set_entry<std::int32_t>(p / "part-1", c.array, c.index, std::int32_t(c.value));
    expect_bad_input(run("info " + p.string(), t.path()), c.array + " / info", {c.expect});
    expect_bad_input(run("train " + p.string() + " --dry-run", t.path()), c.array + " / dry run",
                     {c.expect});
    fs::remove_all(p);
  }
  {
    const fs::path p = copy_of("p1", t);
    set_entry<std::int32_t>(p / "part-0", "indices", 3, -7);
    expect_bad_input(run("train " + p.string() + " --epochs 1 -q", t.path()), "p1 / train",
                     {"part-0/indices.bin: entry 3 (row", "column -7 out of range"});
    fs::remove_all(p);
  }
  const fs::path p = copy_of("p2", t);
  set_entry<std::int32_t>(p / "part-1", "send", 0, std::int32_t(owned + 3));
  const Result r = shell(test::configured("HALO_MPIEXEC", HALO_MPIEXEC) +
                             " --oversubscribe --bind-to none -np 2 " + halo() + " train " +
                             p.string() + " --epochs 1 -q --threads 1",
                         t.path());
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("error: rank 1 of 2"), std::string::npos) << r.err;
  EXPECT_NE(
      r.err.find("part-1/send.bin: entry 0: id " + std::to_string(owned + 3) + " out of range"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("accuracy"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, 20.0);
}

// A part-1 copied from the partition of a relabelled Cora: every rank checks its own part's
// fingerprints against PARTS/meta.json before training, and `halo info` checks all parts.
TEST_F(BadDataset, PartOfAnotherPartitionIsRefused) {
  TempDir t;
  const fs::path p = copy_of("p2", t);
  fs::remove_all(p / "part-1");
  fs::copy(data("q2") / "part-1", p / "part-1", fs::copy_options::recursive);
  const json root = read_json(p / "meta.json"), other = read_json(data("q2") / "meta.json");
  const std::string here = root["fingerprint"], there = other["fingerprint"];
  ASSERT_NE(here, there);
  const std::string named =
      (p / "part-1" / "meta.json").string() + ": belongs to partition " + there + " of dataset " +
      other["dataset_fingerprint"].get<std::string>() + ", but " + (p / "meta.json").string() +
      " is partition " + here + " of dataset " + root["dataset_fingerprint"].get<std::string>();
  expect_bad_input(run("info " + p.string(), t.path()), "foreign part / info", {named});
  expect_bad_input(run("train " + p.string() + " --dry-run", t.path()), "foreign part / dry run",
                   {named});
  const Result r = shell(test::configured("HALO_MPIEXEC", HALO_MPIEXEC) +
                             " --oversubscribe --bind-to none -np 2 " + halo() + " train " +
                             p.string() + " --epochs 5 --threads 1",
                         t.path());
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("error: rank 1 of 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("accuracy"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, 20.0);

  // The foreign part's meta.json edited to claim this partition: its arrays are still not the
  // ones PARTS/meta.json recorded for part 1.
  json m = read_json(p / "part-1" / "meta.json");
  m["partition"] = here;
  m["dataset_fingerprint"] = root["dataset_fingerprint"];
  write_json(p / "part-1" / "meta.json", m);
  expect_bad_input(run("info " + p.string(), t.path()), "relabelled foreign part",
                   {"part-1/meta.json: arrays with fingerprint", "records", "for part 1"});
}

TEST_F(BadDataset, InfoVerifiesEveryPart) {
  TempDir t;
  const fs::path p = copy_of("p2", t);
  fs::rename(p / "part-1", t / "aside");
  expect_bad_input(run("info " + p.string(), t.path()), "missing part",
                   {(p / "part-1").string() + ": missing"});
  fs::rename(t / "aside", p / "part-1");
  std::string bytes = test::read_bytes(p / "part-1" / "features.bin");
  bytes[bytes.size() / 2] ^= 4;
  test::write_text(p / "part-1" / "features.bin", bytes);
  expect_bad_input(run("info " + p.string(), t.path()), "corrupted part",
                   {(p / "part-1" / "features.bin").string() + ": checksum mismatch"});
  fs::remove_all(p);
  const fs::path q = copy_of("p2", t);
  set_entry<std::int32_t>(q, "owner", 11, 2);
  expect_bad_input(run("info " + q.string(), t.path()), "owner",
                   {"p2/owner.bin: entry 11: id 2 out of range [0, 2)"});
  const auto owner = load<std::int32_t>(data("p2"), "owner");
  set_entry<std::int32_t>(q, "owner", 11,
                          1 - owner[11]);  // in range, but not where the parts put node 11
  // The partition's fingerprint covers the assignment: every part now belongs to another one.
  expect_bad_input(run("info " + q.string(), t.path()), "owner",
                   {(q / "part-0" / "meta.json").string() + ": belongs to partition ",
                    "a part copied from another partition?"});
}

// A partition where a dataset is expected (a parameter error naming the path) and the reverse
// (an InputError naming meta.json).
TEST_F(BadDataset, PartitionAndDatasetAreNotMistakenForEachOther) {
  TempDir t;
  const fs::path p = data("p2");
  const std::string is_parts =
      p.string() + " is a partition (halo partition's output); this command reads a dataset";
  for (const std::string& cmd : {"partition " + p.string() + " -k 2 -o " + (t / "out").string(),
                                 "export " + p.string() + " -o " + (t / "out.graph").string(),
                                 "reorder " + p.string() + " -o " + (t / "out").string(),
                                 "tgn train " + p.string() + " --epochs 1"})
    expect_bad_input(run(cmd, t.path()), cmd, {is_parts}, 2);
  expect_nothing_written(t, {});
  const fs::path q = copy_of("p2", t);
  fs::remove_all(q / "part-1");
  fs::copy(data("cora"), q / "part-1", fs::copy_options::recursive);
  expect_bad_input(run("info " + q.string(), t.path()), "dataset as a part",
                   {(q / "part-1" / "meta.json").string() +
                    ": not a halo-part (\"format\" is \"halo-dataset\")"});
}

// meta.json that is not JSON, has fields of the wrong type, negative or absurd sizes, or lists
// a file outside its directory; an array header whose shape overflows. Never a crash, a huge
// allocation or "internal".
TEST_F(BadDataset, MalformedMetaJsonIsAnInputError) {
  TempDir t;
  const json good = read_json(data("cora") / "meta.json");
  struct Edit {
    std::string what;
    std::function<void(json&)> edit;
    std::string expect;
  };
  const std::vector<Edit> edits = {
      {"nodes as text", [](json& j) { j["nodes"] = "x"; },
       "\"nodes\": expected an integer in [0, 2147483647], found \"x\""},
      {"negative nodes", [](json& j) { j["nodes"] = -5; }, "\"nodes\": expected an integer"},
      {"absurd nodes", [](json& j) { j["nodes"] = 1ll << 40; }, "\"nodes\": expected an integer"},
      {"absurd features", [](json& j) { j["features"] = 1000000000000ll; },
       "\"features\": expected an integer"},
      {"features beyond the file", [](json& j) { j["features"] = 100000; },
       "features.bin: expected shape 2708x100000"},
      {"edges beyond the file", [](json& j) { j["edges"] = 1ll << 61; },
       "indices.bin: expected shape 2305843009213693952x1, found 10556x1"},
      {"labels not an object", [](json& j) { j["labels"] = 3; },
       "\"labels\": expected an object, found 3"},
      {"classes negative", [](json& j) { j["labels"]["classes"] = -1; },
       "\"classes\": expected an integer"},
      {"split counts as text", [](json& j) { j["splits"]["public"]["train"] = "many"; },
       "\"train\": expected an integer"},
      {"split not an object", [](json& j) { j["splits"]["public"] = 5; },
       "\"splits.public\": expected"},
      {"file outside", [](json& j) { j["arrays"]["offsets"]["file"] = "../p2/owner.bin"; },
       "\"arrays.offsets\": expected"},
      {"crc as text", [](json& j) { j["arrays"]["offsets"]["crc32"] = "abc"; },
       "\"crc32\": expected an integer"},
      {"version as text", [](json& j) { j["version"] = "1"; },
       "halo-dataset version \"1\", this halo reads version 1"},
      {"format as a number", [](json& j) { j["format"] = 5; },
       "not a halo-dataset (\"format\" is 5)"},
      {"kind unknown", [](json& j) { j["kind"] = "hypergraph"; },
       "\"kind\": expected \"graph\" or \"temporal\""},
      {"directed as a number", [](json& j) { j["directed"] = 0; },
       "\"directed\": expected true or false"},
      {"fingerprint edited", [](json& j) { j["fingerprint"] = "00000000"; },
       "\"fingerprint\" \"00000000\" disagrees"},
  };
  const fs::path ds = copy_of("cora", t);
  for (const Edit& e : edits) {
    json j = good;
    e.edit(j);
    write_json(ds / "meta.json", j);
    expect_bad_input(run("info " + ds.string(), t.path()), e.what, {e.expect});
    expect_bad_input(run("train " + ds.string() + " --epochs 1 -q", t.path()), e.what + " / train",
                     {e.expect});
  }
  test::write_text(ds / "meta.json", "{\"format\": \"halo-dataset\", ");
  expect_bad_input(run("info " + ds.string(), t.path()), "not JSON",
                   {(ds / "meta.json").string() + ": invalid JSON"});
  write_json(ds / "meta.json", good);

  // An array header claiming 2^62 x 4 int64 elements: the byte count wraps to 0 in 64 bits.
  std::string bytes = test::read_bytes(ds / "offsets.bin");
  const std::uint64_t rows = 1ull << 62, cols = 4, payload = 0;
  std::memcpy(bytes.data() + 16, &rows, 8);
  std::memcpy(bytes.data() + 24, &cols, 8);
  std::memcpy(bytes.data() + 40, &payload, 8);
  test::write_text(ds / "offsets.bin", bytes.substr(0, 64));
  expect_bad_input(
      run("info " + ds.string(), t.path()), "wrapping header",
      {"offsets.bin: header shape 4611686018427387904x4 disagrees with its payload size 0"});

  const fs::path p = copy_of("p2", t);
  const json root = read_json(p / "meta.json"), part = read_json(p / "part-0" / "meta.json");
  const std::vector<std::pair<std::function<void(json&)>, std::string>> parts_edits = {
      {[](json& j) { j["k"] = "two"; },
       "\"k\": expected an integer in [1, 1048576], found \"two\""},
      {[](json& j) { j["k"] = 0; }, "\"k\": expected an integer in [1"},
      {[](json& j) { j["dataset"]["nodes"] = -1; }, "\"nodes\": expected an integer"},
      {[](json& j) { j["options"] = "none"; }, "\"options\": expected an object"},
      {[](json& j) { j.erase("part_fingerprints"); },
       "written by an older halo: run halo partition again"},
  };
  for (const auto& [edit, expect] : parts_edits) {
    json j = root;
    edit(j);
    write_json(p / "meta.json", j);
    expect_bad_input(run("info " + p.string(), t.path()), expect,
                     {(p / "meta.json").string(), expect});
    expect_bad_input(run("train " + p.string() + " --dry-run", t.path()), expect, {expect});
  }
  write_json(p / "meta.json", root);
  for (const auto& [edit, expect] : std::vector<std::pair<std::function<void(json&)>, std::string>>{
           {[](json& j) { j["owned"] = -3; },
            "\"owned\": expected an integer in [0, 2708], found -3"},
           {[](json& j) { j["halo"] = 1ll << 50; }, "\"halo\": expected an integer"},
           {[](json& j) { j["rank"] = 1; }, "part 1 of 2, expected part 0 of 2"},
           {[](json& j) { j["labels"]["kind"] = 7; }, "\"kind\": expected a string"}}) {
    json j = part;
    edit(j);
    write_json(p / "part-0" / "meta.json", j);
    expect_bad_input(run("info " + p.string(), t.path()), expect,
                     {(p / "part-0" / "meta.json").string(), expect});
  }
}

}  // namespace
}  // namespace halo
