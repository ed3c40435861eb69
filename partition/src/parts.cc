// Writing partitioned datasets (layout in parts.h); reading and verifying them is in
// parts_read.cc.
//
// write_parts finds every part's halo in one sweep (find_partition_halos, halo_plan.h), then
// writes part directories one at a time: each part's plan, its local CSR (relabel_rows) and its
// rows of features, labels and splits, so memory stays at one part's arrays plus a few
// node-sized arrays.
#include "halo/partition/parts.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <functional>
#include <optional>
#include <span>

#include "halo/graph/error.h"
#include "halo/graph/input.h"
#include "halo/graph/progress.h"
#include "halo/graph/staging.h"
#include "halo/graph/text.h"
#include "halo/partition/halo_plan.h"
#include "halo/partition/speed.h"
#include "parts_internal.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace parts_internal;  // shared with parts_read.cc (parts_internal.h)

namespace {

// Rows which[0], which[1], ... of a row-major [* x c] array, in that order: a part's owned
// rows in local order, from the dataset (which = global ids) or from gathered rows (positions).
template <class T>
std::vector<T> rows_of(const T* from, std::span<const NodeId> which, std::size_t c) {
  std::vector<T> to(which.size() * c);
  for (std::size_t i = 0; i < which.size(); ++i)
    std::copy_n(from + std::size_t(which[i]) * c, c, to.data() + i * c);
  return to;
}

// Rows of features, gathered in chunks so memory stays at one chunk, not the part's features.
void write_features(ArrayDir& part, const GraphDataset& d, std::span<const NodeId> own) {
  const std::size_t f = std::size_t(d.num_features);
  const auto n_own = std::int64_t(own.size());
  auto out = part.open("features", DType::kFloat32, std::uint64_t(n_own), f);
  // A chunk no larger than the part: a buffer of 8,192 rows for every part made K small parts
  // cost K x 47 MB of zeroed pages (Cora's 1,433 features), the most of partitioning into
  // thousands of parts.
  const std::int64_t chunk = std::min<std::int64_t>(8192, n_own);
  std::vector<float> buf(std::size_t(chunk) * f);
  for (std::int64_t b = 0; b < n_own; b += chunk) {
    const std::int64_t e = std::min(n_own, b + chunk);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = b; i < e; ++i)
      std::copy_n(d.features.data() + std::size_t(own[std::size_t(i)]) * f, f,
                  buf.data() + std::size_t(i - b) * f);
    out->write_rows(std::uint64_t(b), buf.data(), std::uint64_t(e - b));
    // own is ascending: these rows' pages are not read again for this part. Dropping them
    // keeps a window of the mapped features resident instead of all of them (every part has
    // rows on nearly every page).
    d.features.release(std::size_t(own[std::size_t(b)]) * f,
                       (std::size_t(own[std::size_t(e - 1)]) + 1) * f);
  }
  part.record("features", out->finish());
}

// Each split's train, valid and test nodes grouped by owning part, in one pass: writing K parts
// then reads every split once, not once per part (K x the split's size).
struct SplitsByPart {
  // [split][set]: the set's nodes part by part, part r's at [offsets[r], offsets[r + 1]).
  std::vector<std::array<std::vector<std::int64_t>, 3>> offsets;
  std::vector<std::array<std::vector<NodeId>, 3>> ids;
};

SplitsByPart group_splits(const GraphDataset& d, const std::vector<PartId>& owner, int k) {
  SplitsByPart g;
  g.offsets.resize(d.splits.size());
  g.ids.resize(d.splits.size());
  for (std::size_t s = 0; s < d.splits.size(); ++s) {
    const Split& sp = d.splits[s];
    const Array<NodeId>* sets[3] = {&sp.train, &sp.valid, &sp.test};
    for (std::size_t j = 0; j < 3; ++j) {
      std::vector<std::int64_t>& off = g.offsets[s][j];
      off.assign(std::size_t(k) + 1, 0);
      for (NodeId v : *sets[j]) ++off[std::size_t(owner[std::size_t(v)]) + 1];
      for (std::size_t r = 0; r < std::size_t(k); ++r) off[r + 1] += off[r];
      std::vector<std::int64_t> at(off.begin(), off.end() - 1);
      std::vector<NodeId>& ids = g.ids[s][j];
      ids.resize(sets[j]->size());
      for (NodeId v : *sets[j]) ids[std::size_t(at[std::size_t(owner[std::size_t(v)])]++)] = v;
    }
  }
  return g;
}

// Each split's train/valid/test nodes that rank r owns, as sorted local ids; returns the counts
// for the part's meta.json. by: the splits grouped by part (else each split is scanned).
json write_splits(ArrayDir& part, const GraphDataset& d, const std::vector<PartId>& owner, int r,
                  const std::vector<NodeId>& local_of, const SplitsByPart* by) {
  json splits = json::object();
  for (std::size_t si = 0; si < d.splits.size(); ++si) {
    const Split& s = d.splits[si];
    json counts = json::object();
    std::size_t j = 0;
    for (const auto& [name, ids] : {std::pair<const char*, const Array<NodeId>*>{"train", &s.train},
                                    {"valid", &s.valid},
                                    {"test", &s.test}}) {
      std::vector<NodeId> mine;
      if (by) {
        const std::vector<std::int64_t>& off = by->offsets[si][j];
        for (std::int64_t i = off[std::size_t(r)]; i < off[std::size_t(r) + 1]; ++i)
          mine.push_back(local_of[std::size_t(by->ids[si][j][std::size_t(i)])]);
      } else {
        for (NodeId v : *ids)
          if (owner[std::size_t(v)] == r) mine.push_back(local_of[std::size_t(v)]);
      }
      ++j;
      std::sort(mine.begin(), mine.end());
      counts[name] = mine.size();
      part.put("split." + s.name + "." + name, mine);
    }
    splits[s.name] = counts;
  }
  return splits;
}

}  // namespace

namespace {

// The files of part plan.rank under root, in the order every writer records them: the plan,
// the local CSR, the degrees, then whatever owned_rows writes (features, labels, splits; it
// returns the split counts). Returns the part's fingerprint.
std::string write_part_files(const fs::path& root, const GraphDataset& d, const HaloPlan& plan,
                             const Csr& local, const std::vector<std::int32_t>& degree,
                             const std::string& partition_fp,
                             const std::function<json(ArrayDir&)>& owned_rows) {
  const bool weighted = !d.graph.values.empty();
  ArrayDir part(part_dir(root, plan.rank));
  part.put("global_ids", plan.global_ids);
  part.put("offsets", local.offsets);
  part.put("indices", local.indices);
  if (weighted) part.put("edge_weights", local.values);
  part.put("degree", degree);
  part.put("send_offsets", plan.send_offsets);
  part.put("send", plan.send);
  part.put("recv_offsets", plan.recv_offsets);
  const json splits = owned_rows(part);
  json meta = {{"rank", plan.rank},
               {"k", plan.k},
               {"global_nodes", d.graph.num_nodes},
               {"owned", plan.num_owned},
               {"inner", plan.num_inner},
               {"halo", plan.num_halo()},
               {"local_edges", local.num_edges()},
               {"edge_weights", weighted},
               {"features", d.num_features},
               {"labels", labels_meta(d)},
               {"splits", splits},
               {"partition", partition_fp},
               {"dataset_fingerprint", d.fingerprint}};
  return part.write_meta(std::move(meta), kPartFormat, kVersion);
}

}  // namespace

namespace {
// write_part from the dataset; by: its splits grouped by part (write_parts), or null.
std::string write_owned_part(const fs::path& root, const GraphDataset& d,
                             const std::vector<PartId>& owner, const HaloPlan& plan,
                             const std::vector<NodeId>& local_of, const std::string& partition_fp,
                             const SplitsByPart* by) {
  const CsrView g = d.graph.view();
  const std::span<const NodeId> own = plan.owned_ids();
  const Csr local = relabel_rows(g, own, local_of.data());  // rows = owned, columns = local ids
  std::vector<std::int32_t> degree(plan.global_ids.size());
  for (std::size_t i = 0; i < degree.size(); ++i)
    degree[i] = std::int32_t(g.degree(plan.global_ids[i]));
  return write_part_files(root, d, plan, local, degree, partition_fp, [&](ArrayDir& part) {
    if (d.num_features > 0) write_features(part, d, own);
    if (d.label_cols > 0) {
      const std::size_t c = std::size_t(d.label_cols);
      part.put("labels", rows_of(d.labels.data(), own, c), c);
    }
    return write_splits(part, d, owner, plan.rank, local_of, by);
  });
}
}  // namespace

std::string write_part(const fs::path& root, const GraphDataset& d,
                       const std::vector<PartId>& owner, const HaloPlan& plan,
                       const std::vector<NodeId>& local_of, const std::string& partition_fp) {
  return write_owned_part(root, d, owner, plan, local_of, partition_fp, nullptr);
}

CsrView PartRows::view() const {
  return {std::int64_t(ids.size()), offsets.data(), indices.data(),
          values.empty() ? nullptr : values.data()};
}

std::string write_part(const fs::path& root, const GraphDataset& d, const PartRows& rows,
                       const HaloPlan& plan, const std::vector<NodeId>& local_of,
                       const std::string& partition_fp) {
  const std::span<const NodeId> own = plan.owned_ids();
  if (rows.ids.size() != own.size() || rows.halo_ids.size() != std::size_t(plan.num_halo()))
    throw SystemError("write_part: the gathered rows of part " + std::to_string(plan.rank) +
                      " do not match its plan (" + std::to_string(rows.ids.size()) + " rows, " +
                      std::to_string(rows.halo_ids.size()) + " halo degrees for " +
                      std::to_string(own.size()) + " and " + std::to_string(plan.num_halo()) + ")");
  auto position = [](const std::vector<NodeId>& sorted, NodeId v, const char* what) {
    const auto it = std::lower_bound(sorted.begin(), sorted.end(), v);
    if (it == sorted.end() || *it != v)
      throw SystemError(std::string("write_part: node ") + std::to_string(v) +
                        " of the plan has no gathered " + what);
    return NodeId(it - sorted.begin());
  };
  std::vector<NodeId> at(own.size());  // at[i]: the gathered row of local row i
  for (std::size_t i = 0; i < own.size(); ++i) at[i] = position(rows.ids, own[i], "row");
  const CsrView g = rows.view();
  const Csr local = relabel_rows(g, at, local_of.data());  // columns are global ids
  std::vector<std::int32_t> degree(plan.global_ids.size());
  for (std::size_t i = 0; i < own.size(); ++i) degree[i] = std::int32_t(g.degree(at[i]));
  for (std::size_t i = own.size(); i < degree.size(); ++i)
    degree[i] =
        rows.halo_degree[std::size_t(position(rows.halo_ids, plan.global_ids[i], "degree"))];
  return write_part_files(root, d, plan, local, degree, partition_fp, [&](ArrayDir& part) {
    // Owned rows in local order, from the gathered rows in id order.
    const auto f = std::size_t(d.num_features), c = std::size_t(d.label_cols);
    if (f > 0) part.put("features", rows_of(rows.features.data(), at, f), f);
    if (c > 0) part.put("labels", rows_of(rows.labels.data(), at, c), c);
    json splits = json::object();
    const std::size_t ns = d.splits.size();
    for (std::size_t s = 0; s < ns; ++s) {
      json counts = json::object();
      for (const auto& [name, bit] :
           {std::pair<const char*, int>{"train", 1}, {"valid", 2}, {"test", 4}}) {
        std::vector<NodeId> mine;  // local ids, ascending as i is
        for (std::size_t i = 0; i < own.size(); ++i)
          if (rows.splits[std::size_t(at[i]) * ns + s] & bit) mine.push_back(NodeId(i));
        counts[name] = mine.size();
        part.put("split." + d.splits[s].name + "." + name, mine);
      }
      splits[d.splits[s].name] = counts;
    }
    return splits;
  });
}

namespace {

// PARTS/meta.json's fields besides the arrays: quality, method and options, the dataset.
json parts_meta(const GraphDataset& d, const PartitionOptions& o, const Quality& quality,
                const Split* main_split) {
  json meta = quality_json(quality);
  meta["method"] = to_string(o.method);
  const bool metis = o.method == PartitionMethod::kMetis;
  meta["options"] = {
      {"objective", to_string(o.objective)},
      {"balance", o.balance},
      {"ptype", metis ? to_string(o.ptype) : ""},
      {"part_weights", o.part_weights},
      {"ufactor", o.ufactor},
      {"contiguous", o.contiguous},
      {"passes", o.passes},
      {"split", main_split ? main_split->name : ""},
      {"assignment_in",
       o.assignment_in.empty() ? std::string() : fs::absolute(o.assignment_in).string()}};
  meta["seed"] = o.seed ? json(*o.seed) : json(nullptr);  // null: METIS's own default, or 0
  meta["dataset"] = {{"name", d.name},
                     {"nodes", d.graph.num_nodes},
                     {"edges", d.graph.num_edges()},
                     {"directed", d.directed},
                     {"features", d.num_features}};
  meta["dataset_fingerprint"] = d.fingerprint;
  return meta;
}

}  // namespace

// Every stored edge and feature row once, the node-sized arrays (offsets, labels, splits, owner,
// local ids) and the send and receive lists, two entries per cut entry, counted as one per stored
// entry (a cut of half the edges).
std::uint64_t parts_bytes(const GraphDataset& d, int k) {
  const auto n = std::uint64_t(d.num_nodes()), m = std::uint64_t(d.graph.num_edges());
  const std::uint64_t per_edge = sizeof(NodeId) * (d.graph.values.empty() ? 2 : 3);
  return m * per_edge + n * std::uint64_t(d.num_features) * sizeof(float) +
         n * (sizeof(EdgeId) + 4 * sizeof(std::int32_t) + std::uint64_t(d.label_cols) * 4) +
         std::uint64_t(k) * (64 << 10);  // a part's meta and headers
}

std::string write_parts_owner(ArrayDir& root, const GraphDataset& d,
                              const std::vector<PartId>& owner) {
  root.put("owner", owner);
  // Input order of every node when the dataset was reordered: predictions written by a
  // distributed run come back in the order of the user's files.
  if (!d.original_ids.empty()) root.put("original_ids", d.original_ids);
  // The partition's identity, known before any part is written so that every part can carry
  // it: the assignment (and input order) plus the dataset they cut. read_part compares a part's
  // copy with PARTS/meta.json, so a part-R copied from another partition or dataset is refused.
  return root.fingerprint(d.fingerprint);
}

json write_parts_meta(ArrayDir& root, const GraphDataset& d, const PartitionOptions& o,
                      const Quality& quality, const std::vector<std::string>& part_fps,
                      const json& extra) {
  json meta = parts_meta(d, o, quality, choose_split(d, o.split));
  meta["part_fingerprints"] = part_fps;
  meta.update(extra);
  const std::string fp = root.write_meta(meta, kPartsFormat, kVersion, d.fingerprint);
  meta["fingerprint"] = fp;
  return meta;
}

json write_parts(const GraphDataset& d, const std::vector<PartId>& owner, const PartitionOptions& o,
                 const Quality& quality, const fs::path& dir, bool overwrite, const json& extra) {
  const std::int64_t n = d.graph.num_nodes;
  const int k = o.k;
  StagingDir stage(dir, kPartsFormat, overwrite);
  ArrayDir root(stage.path());
  const std::string partition_fp = write_parts_owner(root, d, owner);
  std::vector<std::string> part_fps(static_cast<std::size_t>(k));

  const PartitionHalos halos = find_partition_halos(d.graph.view(), owner, k);
  const SplitsByPart splits = group_splits(d, owner, k);
  std::vector<NodeId> local_of(std::size_t(n), -1);  // global -> local id, for the current part
  // Long on a large graph or with thousands of parts (a few ms of files and syncs each): shown
  // on a terminal once it takes more than 200 ms, by the bytes the parts are expected to hold.
  const std::uint64_t total = parts_bytes(d, k);
  Progress progress("writing parts", total);
  for (int r = 0; r < k; ++r) {  // one part in memory at a time
    const HaloPlan plan = build_halo_plan(halos, r, local_of);
    part_fps[std::size_t(r)] =
        write_owned_part(stage.path(), d, owner, plan, local_of, partition_fp, &splits);
    progress.update(std::uint64_t(double(total) * double(r + 1) / double(k)));
  }
  json meta = write_parts_meta(root, d, o, quality, part_fps, extra);
  stage.commit();
  return meta;
}

json partition_dataset(const fs::path& dataset, const fs::path& out, const PartitionOptions& o,
                       bool overwrite, const fs::path& assignment_out) {
  if (o.method == PartitionMethod::kPtScotch)  // every MPI rank reads only its slice of rows
    return partition_dataset_ptscotch(dataset, out, o, overwrite, assignment_out);
  Stopwatch total;
  // Fail before the (possibly long) partitioning: an existing output without --force, one that
  // is not a parts folder, or one that would replace or write into the dataset.
  std::vector<fs::path> inputs = {dataset};
  if (!o.assignment_in.empty()) {
    if (!fs::exists(o.assignment_in))
      throw ParamError("--assignment-in " + o.assignment_in.string() + ": no such file");
    ::close(open_input(o.assignment_in));  // a FIFO, a directory, a device: refused, named
    inputs.push_back(o.assignment_in);
  }
  resolve_dir_output(out, kPartsFormat, overwrite, inputs);
  inputs.push_back(out);
  if (!assignment_out.empty()) resolve_file_output(assignment_out, inputs);
  // A speed table is read before the dataset: a bad one fails in a moment, not after the load.
  std::optional<SpeedTable> speed;
  if (!o.speed_table.empty()) {
    speed = read_speed_table(o.speed_table);
    if (int(speed->ranks.size()) != o.k)
      throw ParamError("--part-weights auto=" + o.speed_table.string() + ": the table has " +
                       std::to_string(speed->ranks.size()) + " ranks, but -k is " +
                       std::to_string(o.k) + " (calibrate under mpirun -np " + std::to_string(o.k) +
                       ")");
  }
  const GraphDataset d = read_graph_dataset(dataset);  // validated: every id below is in range
  o.check(d.num_nodes());  // a bad -k is a bad parameter, not a short disk
  check_free_space(out, parts_bytes(d, o.k), std::to_string(o.k) + " parts of this dataset");
  const double load_s = total.seconds();
  Stopwatch clock;
  PartitionOptions used = o;  // with the METIS scheme that made the assignment, for meta.json
  SpeedSearch search;
  std::vector<PartId> owner;
  if (speed) {
    owner = partition_for_speed(d, o, *speed, &search, &used.ptype);
    used.part_weights = search.weights;  // what the parts were cut for
    used.speed_table.clear();
  } else {
    owner = partition_nodes(d, o, &used.ptype);
  }
  const double partition_s = clock.seconds();
  // The search measured its partition already (same split, its shares as targets).
  const Quality q = speed ? std::move(search.quality)
                          : measure_partition(d.graph.view(), d.directed, owner, o.k,
                                              choose_split(d, o.split), used.targets());
  json extra = {{"dataset_path", fs::absolute(dataset).string()},
                {"dataset_fingerprint", d.fingerprint},
                {"seconds", {{"load", load_s}, {"partition", partition_s}}},
                {"peak_rss_bytes", peak_rss_bytes()}};
  if (speed) {
    json parts = json::array();
    for (const PartTime& t : search.times)
      parts.push_back({{"compute_s", t.compute_s}, {"comm_s", t.comm_s}});
    extra["speed_model"] = {{"table", fs::absolute(o.speed_table).string()},
                            {"predicted", parts},
                            {"rounds", search.rounds}};
  }
  if (!assignment_out.empty()) write_assignment(assignment_out, owner);
  json meta = write_parts(d, owner, used, q, out, overwrite, extra);
  meta["seconds"]["total"] = total.seconds();
  meta["peak_rss_bytes"] = peak_rss_bytes();
  return meta;
}

void write_assignment(const fs::path& path, const std::vector<PartId>& owner) {
  StagedFile f(path);  // checked writes, renamed over path when complete (staging.h)
  std::string buf;
  buf.reserve(1 << 20);
  for (PartId p : owner) {
    buf += std::to_string(p);
    buf += '\n';
    if (buf.size() > (1 << 20) - 16) {
      f.write(buf);
      buf.clear();
    }
  }
  f.write(buf);
  f.commit();
}

}  // namespace halo