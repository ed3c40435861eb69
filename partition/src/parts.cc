// Writing and reading partitioned datasets (layout in parts.h).
//
// Two sweeps over the parts. The first finds every part's halo rows grouped by owning peer
// (sorted by global id) — these lists define both sides of every exchange, so a send list is by
// construction the peer's receive list. The second builds each part's local CSR and gathers
// its rows of features, labels and splits, writing part directories one at a time so memory
// stays at one part's CSR plus a few node-sized arrays.
#include "halo/partition/parts.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "halo/graph/error.h"
#include "halo/graph/progress.h"
#include "halo/graph/staging.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
constexpr const char* kPartsFormat = "halo-parts";
constexpr const char* kPartFormat = "halo-part";
constexpr int kVersion = 1;

fs::path part_dir(const fs::path& dir, int r) { return dir / ("part-" + std::to_string(r)); }
}  // namespace

const Split* Part::split(const std::string& name) const {
  for (const auto& s : splits)
    if (s.name == name) return &s;
  return nullptr;
}

json write_parts(const GraphDataset& d, const std::vector<PartId>& owner, const PartitionOptions& o,
                 const Quality& quality, const fs::path& dir, bool overwrite, const json& extra) {
  const CsrView g = d.graph.view();
  const std::int64_t n = g.num_nodes;
  const int k = o.k;
  StagingDir stage(dir, overwrite);
  ArrayDir root(stage.path());
  root.put("owner", owner);
  // Input order of every node when the dataset was reordered: predictions written by a
  // distributed run come back in the order of the user's files.
  if (!d.original_ids.empty()) root.put("original_ids", d.original_ids);

  // Members of each part: inner nodes first, then boundary, each in global id order.
  std::vector<std::uint8_t> boundary(std::size_t(n), 0);
#pragma omp parallel for schedule(dynamic, 4096)
  for (std::int64_t u = 0; u < n; ++u)
    for (EdgeId e = g.offsets[u]; e < g.offsets[u + 1]; ++e)
      if (owner[std::size_t(g.indices[e])] != owner[std::size_t(u)]) {
        boundary[std::size_t(u)] = 1;
        break;
      }
  std::vector<std::vector<NodeId>> members(static_cast<std::size_t>(k));
  std::vector<std::int64_t> inner(std::size_t(k), 0);
  for (int pass = 0; pass < 2; ++pass)
    for (std::int64_t v = 0; v < n; ++v)
      if (boundary[std::size_t(v)] == pass) {
        members[std::size_t(owner[std::size_t(v)])].push_back(NodeId(v));
        inner[std::size_t(owner[std::size_t(v)])] += pass == 0;
      }

  // Sweep 1: halo[r][q] = nodes of q that part r's rows reference, sorted by global id.
  using Lists = std::vector<std::vector<NodeId>>;
  std::vector<Lists> halo(static_cast<std::size_t>(k), Lists(static_cast<std::size_t>(k)));
  {
    std::vector<PartId> seen(std::size_t(n), -1);
    for (int r = 0; r < k; ++r) {
      for (std::size_t i = std::size_t(inner[std::size_t(r)]); i < members[std::size_t(r)].size(); ++i) {
        const NodeId u = members[std::size_t(r)][i];
        for (EdgeId e = g.offsets[u]; e < g.offsets[u + 1]; ++e) {
          const NodeId w = g.indices[e];
          const PartId q = owner[std::size_t(w)];
          if (q != r && seen[std::size_t(w)] != r) {
            seen[std::size_t(w)] = PartId(r);
            halo[std::size_t(r)][std::size_t(q)].push_back(w);
          }
        }
      }
      for (auto& h : halo[std::size_t(r)]) std::sort(h.begin(), h.end());
    }
  }

  const Split* main_split = choose_split(d, o.split);  // named in the root meta
  std::vector<NodeId> local(std::size_t(n), -1);  // global -> local id, valid for the current part
  Progress progress(n > 1000000 ? "writing parts" : "", std::uint64_t(k));
  for (int r = 0; r < k; ++r) {
    const auto& own = members[std::size_t(r)];
    const std::int64_t n_own = std::int64_t(own.size());
    std::vector<NodeId> gids(own.begin(), own.end());
    std::vector<EdgeId> recv_off(std::size_t(k) + 1, 0);
    for (int q = 0; q < k; ++q) {
      recv_off[std::size_t(q) + 1] = recv_off[std::size_t(q)] + EdgeId(halo[std::size_t(r)][std::size_t(q)].size());
      gids.insert(gids.end(), halo[std::size_t(r)][std::size_t(q)].begin(), halo[std::size_t(r)][std::size_t(q)].end());
    }
    for (std::size_t i = 0; i < gids.size(); ++i) local[std::size_t(gids[i])] = NodeId(i);

    // Local CSR: rows = owned nodes in local order, columns = local ids, sorted.
    std::vector<EdgeId> offsets(std::size_t(n_own) + 1, 0);
    for (std::int64_t i = 0; i < n_own; ++i)
      offsets[std::size_t(i) + 1] = offsets[std::size_t(i)] + g.degree(own[std::size_t(i)]);
    std::vector<NodeId> indices(std::size_t(offsets.back()));
    std::vector<float> values(g.values ? indices.size() : 0);
#pragma omp parallel
    {
      std::vector<std::pair<NodeId, float>> row;
#pragma omp for schedule(dynamic, 1024)
      for (std::int64_t i = 0; i < n_own; ++i) {
        const NodeId u = own[std::size_t(i)];
        row.clear();
        for (EdgeId e = g.offsets[u]; e < g.offsets[u + 1]; ++e)
          row.emplace_back(local[std::size_t(g.indices[e])], g.values ? g.values[e] : 0.f);
        std::sort(row.begin(), row.end());
        const EdgeId b = offsets[std::size_t(i)];
        for (std::size_t j = 0; j < row.size(); ++j) {
          indices[std::size_t(b) + j] = row[j].first;
          if (g.values) values[std::size_t(b) + j] = row[j].second;
        }
      }
    }
    std::vector<std::int32_t> degree(gids.size());
    for (std::size_t i = 0; i < gids.size(); ++i) degree[i] = std::int32_t(g.degree(gids[i]));

    // Send lists: what each peer q receives from r, in q's order, as r's local ids.
    std::vector<EdgeId> send_off(std::size_t(k) + 1, 0);
    std::vector<NodeId> send;
    for (int q = 0; q < k; ++q) {
      for (NodeId w : halo[std::size_t(q)][std::size_t(r)]) send.push_back(local[std::size_t(w)]);
      send_off[std::size_t(q) + 1] = EdgeId(send.size());
    }

    ArrayDir part(part_dir(stage.path(), r));
    part.put("global_ids", gids);
    part.put("offsets", offsets);
    part.put("indices", indices);
    if (g.values) part.put("edge_weights", values);
    part.put("degree", degree);
    part.put("send_offsets", send_off);
    part.put("send", send);
    part.put("recv_offsets", recv_off);
    if (d.num_features > 0) {
      const std::size_t f = std::size_t(d.num_features);
      auto out = part.open("features", DType::kFloat32, std::uint64_t(n_own), f);
      constexpr std::int64_t kChunk = 8192;
      std::vector<float> buf(std::size_t(kChunk) * f);
      for (std::int64_t b = 0; b < n_own; b += kChunk) {
        const std::int64_t e = std::min(n_own, b + kChunk);
#pragma omp parallel for schedule(static)
        for (std::int64_t i = b; i < e; ++i)
          std::copy_n(d.features.data() + std::size_t(own[std::size_t(i)]) * f, f, buf.data() + std::size_t(i - b) * f);
        out->write_rows(std::uint64_t(b), buf.data(), std::uint64_t(e - b));
      }
      part.record("features", out->finish());
    }
    if (d.label_cols > 0) {
      const std::size_t c = std::size_t(d.label_cols);
      std::vector<std::int32_t> lab(std::size_t(n_own) * c);
      for (std::int64_t i = 0; i < n_own; ++i)
        std::copy_n(d.labels.data() + std::size_t(own[std::size_t(i)]) * c, c, lab.data() + std::size_t(i) * c);
      part.put("labels", lab, c);
    }
    json splits = json::object();
    for (const auto& s : d.splits) {
      json counts = json::object();
      for (const auto& [name, ids] : {std::pair<const char*, const Array<NodeId>*>{"train", &s.train},
                                      {"valid", &s.valid}, {"test", &s.test}}) {
        std::vector<NodeId> mine;
        for (NodeId v : *ids)
          if (owner[std::size_t(v)] == r) mine.push_back(local[std::size_t(v)]);
        std::sort(mine.begin(), mine.end());
        counts[name] = mine.size();
        part.put("split." + s.name + "." + name, mine);
      }
      splits[s.name] = counts;
    }
    json meta = {{"rank", r},
                 {"k", k},
                 {"global_nodes", n},
                 {"owned", n_own},
                 {"inner", inner[std::size_t(r)]},
                 {"halo", std::int64_t(gids.size()) - n_own},
                 {"local_edges", offsets.back()},
                 {"edge_weights", g.values != nullptr},
                 {"features", d.num_features},
                 {"labels", {{"kind", label_kind_name(d.label_kind)}, {"columns", d.label_cols}, {"classes", d.num_classes}}},
                 {"splits", splits}};
    part.write_meta(std::move(meta), kPartFormat, kVersion);
    progress.update(std::uint64_t(r + 1));
  }

  json meta = quality_json(quality);
  meta["method"] = o.method;
  meta["options"] = {{"objective", o.objective},   {"balance", o.balance},
                     {"ptype", o.method == "metis" ? o.metis_ptype() : ""},
                     {"part_weights", o.part_weights}, {"ufactor", o.ufactor},
                     {"contiguous", o.contiguous}, {"passes", o.passes},
                     {"split", main_split ? main_split->name : ""}};
  meta["seed"] = o.seed;
  meta["dataset"] = {{"name", d.name}, {"nodes", n}, {"edges", g.num_edges()}, {"directed", d.directed},
                     {"features", d.num_features}};
  meta.update(extra);
  const std::string fp = root.write_meta(meta, kPartsFormat, kVersion);
  meta["fingerprint"] = fp;
  stage.commit();
  return meta;
}

json partition_dataset(const fs::path& dataset, const fs::path& out, const PartitionOptions& o,
                       bool overwrite, const fs::path& assignment_out) {
  Stopwatch total;
  if (fs::exists(out) && !overwrite)  // fail before the (possibly long) partitioning
    throw ParamError(out.string() + ": already exists (pass --force to replace it)");
  const json dmeta = read_dataset_meta(dataset);
  const GraphDataset d = read_graph_dataset(dataset);
  const double load_s = total.seconds();
  Stopwatch clock;
  const std::vector<PartId> owner = partition_nodes(d, o);
  const double partition_s = clock.seconds();
  const Quality q = measure_partition(d.graph.view(), d.directed, owner, o.k, choose_split(d, o.split), o.targets());
  json extra = {{"dataset_path", fs::absolute(dataset).string()},
                {"dataset_fingerprint", dmeta.value("fingerprint", "")},
                {"seconds", {{"load", load_s}, {"partition", partition_s}}},
                {"peak_rss_bytes", peak_rss_bytes()}};
  if (!assignment_out.empty()) write_assignment(assignment_out, owner);
  json meta = write_parts(d, owner, o, q, out, overwrite, extra);
  meta["seconds"]["total"] = total.seconds();
  meta["peak_rss_bytes"] = peak_rss_bytes();
  return meta;
}

json read_parts_meta(const fs::path& dir) { return read_meta(dir, kPartsFormat, kVersion); }

bool is_parts_dir(const fs::path& dir) {
  std::ifstream f(dir / "meta.json");
  if (!f) return false;
  try {
    return json::parse(f).value("format", "") == kPartsFormat;
  } catch (const json::exception&) {
    return false;
  }
}

Array<PartId> read_owner(const fs::path& dir, const ReadOptions& opt) {
  const json meta = read_parts_meta(dir);
  return map_listed<PartId>(dir, meta, "owner", opt, meta.at("dataset").at("nodes").get<std::uint64_t>(), 1);
}

Array<NodeId> read_original_ids(const fs::path& dir, const ReadOptions& opt) {
  const json meta = read_parts_meta(dir);
  return map_listed<NodeId>(dir, meta, "original_ids", opt, meta.at("dataset").at("nodes").get<std::uint64_t>(), 1,
                            /*required=*/false);
}

Part read_part(const fs::path& dir, int rank, const ReadOptions& opt) {
  const json root = read_parts_meta(dir);
  const int k = root.at("k").get<int>();
  if (rank < 0 || rank >= k)
    throw ParamError(dir.string() + " has " + std::to_string(k) + " parts; there is no part " + std::to_string(rank));
  const fs::path pd = part_dir(dir, rank);
  const json meta = read_meta(pd, kPartFormat, kVersion);
  const fs::path metap = pd / "meta.json";
  try {
    Part p;
    p.rank = rank;
    p.k = k;
    if (meta.at("rank").get<int>() != rank || meta.at("k").get<int>() != k)
      throw_input(metap, 0, "belongs to another partition (rank/k disagree with its directory)");
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
    p.send = map_listed<NodeId>(pd, meta, "send", opt, std::uint64_t(p.send_offsets[std::size_t(k)]), 1);
    if (p.recv_offsets[std::size_t(k)] != p.num_halo)
      throw_input(pd / "recv_offsets.bin", 0, "receive blocks do not add up to the halo size");
    p.num_features = meta.value("features", std::int64_t(0));
    if (p.num_features > 0)
      p.features = map_listed<float>(pd, meta, "features", opt, rows, std::uint64_t(p.num_features));
    const json& lab = meta.at("labels");
    p.label_cols = lab.value("columns", std::int64_t(0));
    p.num_classes = lab.value("classes", std::int64_t(0));
    p.label_kind = label_kind_from_name(lab.value("kind", "none"));
    if (p.label_cols > 0)
      p.labels = map_listed<std::int32_t>(pd, meta, "labels", opt, rows, std::uint64_t(p.label_cols));
    for (const auto& [name, c] : meta.at("splits").items()) {
      Split s;
      s.name = name;
      s.train = map_listed<NodeId>(pd, meta, "split." + name + ".train", opt, c.at("train").get<std::uint64_t>(), 1);
      s.valid = map_listed<NodeId>(pd, meta, "split." + name + ".valid", opt, c.at("valid").get<std::uint64_t>(), 1);
      s.test = map_listed<NodeId>(pd, meta, "split." + name + ".test", opt, c.at("test").get<std::uint64_t>(), 1);
      p.splits.push_back(std::move(s));
    }
    return p;
  } catch (const json::exception& e) {
    throw_input(metap, 0, std::string("malformed: ") + e.what());
  }
}

void write_assignment(const fs::path& path, const std::vector<PartId>& owner) {
  const fs::path tmp = path.string() + ".halo-tmp-" + std::to_string(getpid());
  {
    std::ofstream f(tmp);
    if (!f) throw_system(tmp, "cannot create");
    std::string buf;
    buf.reserve(1 << 20);
    for (PartId p : owner) {
      buf += std::to_string(p);
      buf += '\n';
      if (buf.size() > (1 << 20) - 16) {
        f << buf;
        buf.clear();
      }
    }
    f << buf;
    f.close();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw_system(tmp, "write failed");
    }
  }
  fs::rename(tmp, path);
}

}  // namespace halo
