// Reading partitioned datasets (layout in parts.h): PARTS/meta.json and part-R/meta.json checked
// field by field, each part's arrays mapped and validated, and verify_parts' cross-checks of the
// parts against each other. Writing them is in parts.cc.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "halo/graph/error.h"
#include "halo/graph/input.h"
#include "halo/graph/text.h"
#include "halo/partition/parts.h"
#include "parts_internal.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace parts_internal;

const Split* Part::split(const std::string& name) const {
  for (const auto& s : splits)
    if (s.name == name) return &s;
  return nullptr;
}

HaloPlanView Part::halo_plan() const {
  return {k, num_owned, num_halo, send_offsets.data(), send.data(), recv_offsets.data()};
}

// ---- reading -----------------------------------------------------------------------------

namespace {

constexpr std::int64_t kMaxCount = std::int64_t(1) << 62;
constexpr std::int64_t kMaxParts = 1 << 20;

// Every field of PARTS/meta.json that the readers, `halo info` and the trainer take, checked
// once here, so that a hand-edited or foreign meta.json is an InputError naming it.
void check_parts_meta(const json& meta, const fs::path& p) {
  const std::int64_t k = meta_int(meta, "k", p, 1, kMaxParts);
  const json& ds = meta_object(meta, "dataset", p);
  meta_int(ds, "nodes", p, 0, kMaxNodes);
  meta_int(ds, "edges", p, 0, kMaxCount, 0);
  meta_int(ds, "features", p, 0, INT32_MAX, 0);
  // The names `halo info` and the trainer show as they are: text only (as a dataset's).
  for (const auto& [where, name] :
       {std::pair<std::string, std::string>{"dataset.name", meta_string(ds, "name", p, "")},
        {"method", meta_string(meta, "method", p, "")}})
    if (!is_printable(name))
      throw_input(p, 0,
                  "\"" + where + "\": control bytes in \"" + printable(name, 40) +
                      "\" (expected printable text)");
  meta_bool(ds, "directed", p, false);
  meta_string(meta, "dataset_path", p, "");
  meta_string(meta_object(meta, "options", p), "split", p, "");
  meta_string(meta, "fingerprint", p);
  const std::string older = " (written by an older halo: run halo partition again)";
  if (!meta.contains("dataset_fingerprint") || !meta.contains("part_fingerprints"))
    throw_input(p, 0, "no dataset or part fingerprints" + older);
  meta_string(meta, "dataset_fingerprint", p);
  const json& fps = meta["part_fingerprints"];
  if (!fps.is_array() || std::int64_t(fps.size()) != k ||
      !std::all_of(fps.begin(), fps.end(), [](const json& f) { return f.is_string(); }))
    throw_input(p, 0,
                "\"part_fingerprints\": expected " + std::to_string(k) + " strings, one per part");
  const std::string fp =
      arrays_fingerprint(meta["arrays"], meta["dataset_fingerprint"].get<std::string>());
  if (meta["fingerprint"] != fp)
    throw_input(p, 0,
                "\"fingerprint\" " + json_shown(meta["fingerprint"]) +
                    " disagrees with its arrays and dataset (" + fp +
                    "): meta.json edited by hand?");
}

// The fields of part-R/meta.json, checked against PARTS/meta.json: sizes within the
// partition's, and the partition and dataset the part was cut from.
void check_part_meta(const json& meta, const json& root, int rank, const fs::path& p,
                     const fs::path& rootp) {
  const std::int64_t k = root["k"].get<std::int64_t>();
  const std::int64_t n = root["dataset"]["nodes"].get<std::int64_t>();
  if (meta_int(meta, "rank", p, 0, kMaxParts) != rank || meta_int(meta, "k", p, 1, kMaxParts) != k)
    throw_input(p, 0,
                "part " + std::to_string(meta["rank"].get<std::int64_t>()) + " of " +
                    std::to_string(meta["k"].get<std::int64_t>()) + ", expected part " +
                    std::to_string(rank) + " of " + std::to_string(k) +
                    " (a part folder moved or copied from another partition?)");
  if (!meta.contains("partition") || !meta.contains("dataset_fingerprint"))
    throw_input(
        p, 0,
        "no partition or dataset fingerprint (written by an older halo: run halo partition again)");
  const std::string part_of = meta_string(meta, "partition", p);
  const std::string part_ds = meta_string(meta, "dataset_fingerprint", p);
  const std::string root_of = root["fingerprint"].get<std::string>();
  const std::string root_ds = root["dataset_fingerprint"].get<std::string>();
  if (part_of != root_of || part_ds != root_ds)
    throw_input(p, 0,
                "belongs to partition " + part_of + " of dataset " + part_ds + ", but " +
                    rootp.string() + " is partition " + root_of + " of dataset " + root_ds +
                    " (a part copied from another partition?)");
  const std::string fp = meta_string(meta, "fingerprint", p);
  const std::string recorded = root["part_fingerprints"][std::size_t(rank)].get<std::string>();
  if (fp != arrays_fingerprint(meta["arrays"]) || fp != recorded)
    throw_input(p, 0,
                "arrays with fingerprint " + arrays_fingerprint(meta["arrays"]) + ", but " +
                    rootp.string() + " records " + recorded + " for part " + std::to_string(rank) +
                    " (a part replaced or edited after partitioning?)");
  if (meta_int(meta, "global_nodes", p, 0, kMaxNodes) != n)
    throw_input(p, 0,
                "\"global_nodes\": expected " + std::to_string(n) + " as in " + rootp.string());
  const std::int64_t owned = meta_int(meta, "owned", p, 0, n);
  meta_int(meta, "inner", p, 0, owned);
  meta_int(meta, "halo", p, 0, n - owned);
  meta_int(meta, "local_edges", p, 0, kMaxCount);
  meta_bool(meta, "edge_weights", p, false);
  if (meta_int(meta, "features", p, 0, INT32_MAX, 0) !=
      root["dataset"].value("features", std::int64_t(0)))
    throw_input(p, 0,
                "\"features\": expected " + json_shown(root["dataset"].value("features", json(0))) +
                    " as in " + rootp.string());
  check_labels_meta(meta_object(meta, "labels", p), p);
  for (const auto& [name, counts] : meta_object(meta, "splits", p).items()) {
    if (!counts.is_object())
      throw_input(p, 0, "\"splits." + name + "\": expected {\"train\", \"valid\", \"test\"}");
    for (const char* set : {"train", "valid", "test"}) meta_int(counts, set, p, 0, owned);
  }
}

// Peer q's block [offsets[q], offsets[q+1]) of a list; offsets have passed check_offsets.
std::pair<std::int64_t, std::int64_t> block(const Array<EdgeId>& offsets, std::int64_t q) {
  return {offsets[std::size_t(q)], offsets[std::size_t(q) + 1]};
}

}  // namespace

json read_parts_meta(const fs::path& dir) {
  json meta = read_meta(dir, kPartsFormat, kVersion);
  check_parts_meta(meta, dir / "meta.json");
  return meta;
}

bool is_parts_dir(const fs::path& dir) {
  const fs::path p = dir / "meta.json";
  if (!fs::exists(p)) return false;
  // A meta.json that is no regular file (a FIFO, a directory) is refused here, naming it;
  // one that is not JSON is no partition's.
  const std::string text = read_input_file(p);
  try {
    const json j = parse_json(text, p);
    return j.is_object() && j.contains("format") && j["format"] == kPartsFormat;
  } catch (const InputError&) {
    return false;
  }
}

Array<PartId> read_owner(const fs::path& dir, const ReadOptions& opt) {
  const json meta = read_parts_meta(dir);
  Array<PartId> owner =
      map_listed<PartId>(dir, meta, "owner", opt, meta["dataset"]["nodes"].get<std::uint64_t>(), 1);
  check_ids(dir / "owner.bin", owner, meta["k"].get<std::int64_t>());  // part ids in [0, k)
  return owner;
}

Array<NodeId> read_original_ids(const fs::path& dir, const ReadOptions& opt) {
  const json meta = read_parts_meta(dir);
  const auto n = meta["dataset"]["nodes"].get<std::int64_t>();
  Array<NodeId> ids =
      map_listed<NodeId>(dir, meta, "original_ids", opt, std::uint64_t(n), 1, /*required=*/false);
  std::vector<std::uint64_t> seen;  // n distinct ids in [0, n): a permutation
  check_ids(dir / "original_ids.bin", ids, n, &seen);
  return ids;
}

void validate_part(const Part& p, const fs::path& pd) {
  const std::int64_t owned = p.num_owned, all = p.num_owned + p.num_halo, k = p.k;
  // Local rows: distinct global ids, inner rows then boundary rows then each peer's halo rows,
  // every run in increasing global id (the order the peers' send lists follow).
  std::vector<std::uint64_t> seen;
  check_ids(pd / "global_ids.bin", p.global_ids, p.global_nodes, &seen);
  check_offsets(pd / "recv_offsets.bin", p.recv_offsets, p.num_halo);
  check_offsets(pd / "send_offsets.bin", p.send_offsets, std::int64_t(p.send.size()));
  for (const auto* offsets : {&p.send_offsets, &p.recv_offsets})
    if (const auto [b, e] = block(*offsets, p.rank); b != e)
      throw_input(pd / (offsets == &p.send_offsets ? "send_offsets.bin" : "recv_offsets.bin"), 0,
                  "entry " + std::to_string(p.rank) + ": " + std::to_string(e - b) +
                      " rows exchanged with itself (part " + std::to_string(p.rank) +
                      "), expected none");
  std::vector<std::int64_t> runs = {0, p.num_inner, owned};
  for (std::int64_t q = 1; q <= k; ++q) runs.push_back(owned + p.recv_offsets[std::size_t(q)]);
  for (std::size_t r = 0; r + 1 < runs.size(); ++r)
    check_increasing(pd / "global_ids.bin", p.global_ids.data(), runs[r], runs[r + 1],
                     r == 0   ? "inner rows"
                     : r == 1 ? "boundary rows"
                              : "halo rows from part " + std::to_string(r - 2));
  // Local CSR over [owned | halo]; every owned row holds all its global neighbours, so its
  // degree is its row length (the GCN normalisation divides by the degree).
  check_offsets(pd / "offsets.bin", p.graph.offsets, std::int64_t(p.graph.indices.size()));
  check_csr_columns(pd / "indices.bin", p.graph.view(), all);
  if (!p.graph.values.empty()) check_finite(pd / "edge_weights.bin", p.graph.values);
  const CsrView g = p.graph.view();
  for (std::int64_t i = 0; i < all; ++i) {
    const std::int64_t want = i < owned ? g.degree(NodeId(i)) : -1;
    const std::int32_t d = p.degree[std::size_t(i)];
    if (d < 0 || d >= p.global_nodes || (i < owned && d != want))
      throw_input(pd / "degree.bin", 0,
                  "entry " + std::to_string(i) + ": degree " + std::to_string(d) + ", expected " +
                      (i < owned ? std::to_string(want) + " (the row's length in offsets.bin)"
                                 : "a degree in [0, " + std::to_string(p.global_nodes) + ")"));
  }
  // Send lists: owned rows, each peer's in increasing global id (the peer's receive order).
  check_ids(pd / "send.bin", p.send, owned);
  for (std::int64_t q = 0; q < k; ++q) {
    const auto [b, e] = block(p.send_offsets, q);
    for (std::int64_t i = b + 1; i < e; ++i)
      if (p.global_ids[std::size_t(p.send[std::size_t(i)])] <=
          p.global_ids[std::size_t(p.send[std::size_t(i - 1)])])
        throw_input(pd / "send.bin", 0,
                    "entry " + std::to_string(i) + ": rows sent to part " + std::to_string(q) +
                        " not in increasing global id (expected the peer's receive order)");
  }
  check_finite(pd / "features.bin", p.features);
  check_labels(pd / "labels.bin", p.labels, p.label_kind, p.label_cols, p.num_classes);
  check_splits(pd, p.splits, owned);
}

Part read_part(const fs::path& dir, int rank, const ReadOptions& opt) {
  const json root = read_parts_meta(dir);
  const int k = root["k"].get<int>();
  if (rank < 0 || rank >= k)
    throw ParamError(dir.string() + " has " + std::to_string(k) + " parts; there is no part " +
                     std::to_string(rank));
  const fs::path pd = part_dir(dir, rank);
  const json meta = read_meta(pd, kPartFormat, kVersion);
  const fs::path metap = pd / "meta.json";
  check_part_meta(meta, root, rank, metap, dir / "meta.json");  // every field below is checked
  try {
    Part p;
    p.rank = rank;
    p.k = k;
    p.fingerprint = meta["fingerprint"].get<std::string>();
    p.partition = meta["partition"].get<std::string>();
    p.dataset_fingerprint = meta["dataset_fingerprint"].get<std::string>();
    p.global_nodes = meta.at("global_nodes").get<std::int64_t>();
    p.num_owned = meta.at("owned").get<std::int64_t>();
    p.num_inner = meta.at("inner").get<std::int64_t>();
    p.num_halo = meta.at("halo").get<std::int64_t>();
    const auto rows = std::uint64_t(p.num_owned), all = std::uint64_t(p.num_owned + p.num_halo);
    p.global_ids = map_listed<NodeId>(pd, meta, "global_ids", opt, all, 1);
    p.graph.num_nodes = p.num_owned;
    p.graph.offsets = map_listed<EdgeId>(pd, meta, "offsets", opt, rows + 1, 1);
    const auto nnz = std::uint64_t(meta.at("local_edges").get<std::int64_t>());
    p.graph.indices = map_listed<NodeId>(pd, meta, "indices", opt, nnz, 1);
    if (meta.value("edge_weights", false))
      p.graph.values = map_listed<float>(pd, meta, "edge_weights", opt, nnz, 1);
    p.degree = map_listed<std::int32_t>(pd, meta, "degree", opt, all, 1);
    p.send_offsets = map_listed<EdgeId>(pd, meta, "send_offsets", opt, std::uint64_t(k) + 1, 1);
    p.recv_offsets = map_listed<EdgeId>(pd, meta, "recv_offsets", opt, std::uint64_t(k) + 1, 1);
    p.send = map_listed<NodeId>(pd, meta, "send", opt, kAnyShape, 1);
    p.num_features = meta.value("features", std::int64_t(0));
    if (p.num_features > 0)
      p.features =
          map_listed<float>(pd, meta, "features", opt, rows, std::uint64_t(p.num_features));
    const json& lab = meta.at("labels");
    p.label_cols = lab.value("columns", std::int64_t(0));
    p.num_classes = lab.value("classes", std::int64_t(0));
    p.label_kind = label_kind_from_name(lab.value("kind", "none"));
    if (p.label_cols > 0)
      p.labels =
          map_listed<std::int32_t>(pd, meta, "labels", opt, rows, std::uint64_t(p.label_cols));
    for (const auto& [name, c] : meta.at("splits").items()) {
      Split s;
      s.name = name;
      s.train = map_listed<NodeId>(pd, meta, "split." + name + ".train", opt,
                                   c.at("train").get<std::uint64_t>(), 1);
      s.valid = map_listed<NodeId>(pd, meta, "split." + name + ".valid", opt,
                                   c.at("valid").get<std::uint64_t>(), 1);
      s.test = map_listed<NodeId>(pd, meta, "split." + name + ".test", opt,
                                  c.at("test").get<std::uint64_t>(), 1);
      p.splits.push_back(std::move(s));
    }
    validate_part(p, pd);
    return p;
  } catch (const json::exception& e) {
    throw_input(metap, 0, std::string("malformed: ") + e.what());
  }
}

void verify_parts(const fs::path& dir) {
  const json meta = read_parts_meta(dir);
  const int k = meta["k"].get<int>();
  const Array<PartId> owner = read_owner(dir);
  read_original_ids(dir);
  // What each part sends to each peer and receives from it: counts and a hash of the global
  // ids, so that r's send list to q must be q's receive list from r, element for element,
  // while only one part is mapped at a time.
  struct Lists {
    std::int64_t rows = 0;
    std::uint64_t hash = 0;
  };
  std::vector<Lists> sent(std::size_t(k) * std::size_t(k)), received(sent.size());
  auto hash_of = [](const std::vector<NodeId>& ids) {  // FNV-1a over the ids
    std::uint64_t h = 1469598103934665603ull;
    for (NodeId v : ids) h = (h ^ std::uint64_t(std::uint32_t(v))) * 1099511628211ull;
    return h;
  };
  std::int64_t covered = 0;
  for (int r = 0; r < k; ++r) {
    const Part p = read_part(dir, r);  // one part mapped at a time
    const fs::path gids = part_dir(dir, r) / "global_ids.bin";
    for (std::int64_t i = 0; i < p.num_owned + p.num_halo; ++i) {
      const NodeId v = p.global_ids[std::size_t(i)];
      std::int64_t q = r;
      if (i >= p.num_owned)
        q = std::upper_bound(p.recv_offsets.begin(), p.recv_offsets.end(), i - p.num_owned) -
            p.recv_offsets.begin() - 1;
      if (owner[std::size_t(v)] != q)
        throw_input(gids, 0,
                    "entry " + std::to_string(i) + ": node " + std::to_string(v) +
                        " is owned by part " + std::to_string(owner[std::size_t(v)]) +
                        " in owner.bin, expected part " + std::to_string(q));
    }
    covered += p.num_owned;
    for (int q = 0; q < k; ++q) {
      std::vector<NodeId> ids;
      for (auto [b, e] = block(p.send_offsets, q); b < e; ++b)
        ids.push_back(p.global_ids[std::size_t(p.send[std::size_t(b)])]);
      sent[std::size_t(r) * std::size_t(k) + std::size_t(q)] = {std::int64_t(ids.size()),
                                                                hash_of(ids)};
      ids.clear();
      for (auto [b, e] = block(p.recv_offsets, q); b < e; ++b)
        ids.push_back(p.global_ids[std::size_t(p.num_owned + b)]);
      received[std::size_t(r) * std::size_t(k) + std::size_t(q)] = {std::int64_t(ids.size()),
                                                                    hash_of(ids)};
    }
  }
  if (covered != std::int64_t(owner.size()))
    throw_input(dir / "meta.json", 0,
                "the parts own " + std::to_string(covered) + " nodes, expected " +
                    std::to_string(owner.size()));
  for (int r = 0; r < k; ++r)
    for (int q = 0; q < k; ++q) {
      const Lists& s = sent[std::size_t(r) * std::size_t(k) + std::size_t(q)];
      const Lists& g = received[std::size_t(q) * std::size_t(k) + std::size_t(r)];
      if (s.rows != g.rows || s.hash != g.hash)
        throw_input(part_dir(dir, r) / "send.bin", 0,
                    "part " + std::to_string(r) + " sends " + std::to_string(s.rows) +
                        " rows to part " + std::to_string(q) + ", which receives " +
                        std::to_string(g.rows) + (s.rows == g.rows ? " other rows" : " rows") +
                        " from it");
    }
}

}  // namespace halo
