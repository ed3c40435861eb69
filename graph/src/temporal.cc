// Temporal event lists (KONECT, SNAP, JODIE). Events end up sorted by time with ties in file
// order, because every temporal model consumes them chronologically.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "halo/graph/formats.h"
#include "halo/graph/text.h"

namespace halo {
namespace {

struct RawEvents {
  std::vector<NodeId> src, dst;
  std::vector<double> time;
  std::vector<float> weight;
  std::vector<float> features;
  std::vector<std::int32_t> labels;
  std::int64_t feature_dim = 0;
  std::int64_t max_id = -1, max_id_line = 0;  // the largest node id and where it appears
  std::int64_t shown_max = -1;                // that id as the file writes it

  void saw(const LineCursor& c, std::int64_t node, std::int64_t as_written) {
    if (node > max_id) {
      max_id = node;
      shown_max = as_written;
      max_id_line = c.line();
    }
  }
};

NodeId checked_id(LineCursor& c, std::int64_t v, std::int64_t base, const char* what) {
  if (v - base < 0 || v - base >= kMaxNodes)
    c.fail(std::string(what) + " " + std::to_string(v) + " out of range (ids start at " +
           std::to_string(base) + ")");
  return NodeId(v - base);
}

double checked_time(LineCursor& c) {
  const double t = c.next_double("timestamp");
  if (!std::isfinite(t)) c.fail("timestamp is not finite");
  return t;
}

// Sorts events by time, stable, and packs them into a dataset.
TemporalDataset finish(RawEvents&& r, const std::filesystem::path& path, std::int64_t users,
                       bool allow_sparse_ids) {
  const std::size_t e = r.src.size();
  if (e == 0) throw_input(path, 0, "no events found");
  TemporalDataset d;
  d.name = printable(path.stem().string(), 255);  // shown as is: text only
  std::int64_t max_id = -1;
  for (std::size_t i = 0; i < e; ++i) max_id = std::max<std::int64_t>({max_id, r.src[i], r.dst[i]});
  // The largest id sizes every per-node table of the models (TGN's memory): a stray id must
  // not make one nobody meant.
  if (!allow_sparse_ids)
    check_id_density(path, r.max_id_line, r.shown_max, max_id + 1,
                     count_distinct_ids(r.src, r.dst, max_id + 1),
                     "pass --allow-sparse-ids to keep the ids");
  d.num_nodes = max_id + 1;
  d.num_users = users;
  if (!std::is_sorted(r.time.begin(), r.time.end())) {
    std::vector<std::size_t> order(e);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return r.time[a] < r.time[b]; });
    auto apply = [&](auto& v, std::size_t width) {
      if (v.empty()) return;
      std::remove_reference_t<decltype(v)> out(v.size());
      for (std::size_t i = 0; i < e; ++i)
        std::copy_n(v.begin() + std::ptrdiff_t(order[i] * width), width,
                    out.begin() + std::ptrdiff_t(i * width));
      v.swap(out);
    };
    apply(r.src, 1);
    apply(r.dst, 1);
    apply(r.time, 1);
    apply(r.weight, 1);
    apply(r.labels, 1);
    apply(r.features, std::size_t(r.feature_dim));
  }
  d.src = Array<NodeId>(std::move(r.src));
  d.dst = Array<NodeId>(std::move(r.dst));
  d.time = Array<double>(std::move(r.time));
  if (!r.weight.empty()) d.weight = Array<float>(std::move(r.weight));
  if (!r.labels.empty()) d.labels = Array<std::int32_t>(std::move(r.labels));
  d.edge_feature_dim = r.feature_dim;
  if (r.feature_dim > 0) d.edge_features = Array<float>(std::move(r.features));
  return d;
}

}  // namespace

TemporalDataset read_konect(const std::filesystem::path& path, bool allow_sparse_ids) {
  RawEvents r;
  for_each_line(
      path,
      [&](LineCursor& c) {
        if (c.blank() || c.starts_with_any("%#")) return;
        const std::int64_t u = c.next_int("source id");
        r.src.push_back(checked_id(c, u, 1, "source id"));
        r.saw(c, r.src.back(), u);
        const std::int64_t v = c.next_int("destination id");
        r.dst.push_back(checked_id(c, v, 1, "destination id"));
        r.saw(c, r.dst.back(), v);
        r.weight.push_back(c.next_float("weight"));
        r.time.push_back(checked_time(c));
        c.expect_end(4);
      },
      "reading KONECT events", InputKind::kStream);  // named on the command line
  return finish(std::move(r), path, 0, allow_sparse_ids);
}

TemporalDataset read_snap(const std::filesystem::path& path, bool allow_sparse_ids) {
  RawEvents r;
  for_each_line(
      path,
      [&](LineCursor& c) {
        if (c.blank() || c.starts_with_any("%#")) return;
        const std::int64_t u = c.next_int("source id");
        r.src.push_back(checked_id(c, u, 0, "source id"));
        r.saw(c, r.src.back(), u);
        const std::int64_t v = c.next_int("destination id");
        r.dst.push_back(checked_id(c, v, 0, "destination id"));
        r.saw(c, r.dst.back(), v);
        r.time.push_back(checked_time(c));
        c.expect_end(3);
      },
      "reading SNAP events", InputKind::kStream);  // named on the command line
  return finish(std::move(r), path, 0, allow_sparse_ids);
}

TemporalDataset read_jodie(const std::filesystem::path& path, bool allow_sparse_ids) {
  RawEvents r;
  std::vector<std::int64_t> items;
  std::int64_t max_user = -1, max_item = -1, max_user_line = 0, max_item_line = 0;
  int columns = 0;
  for_each_line(
      path,
      [&](LineCursor& c) {
        if (c.line() == 1) {  // header: user_id,item_id,timestamp,state_label,features...
          if (c.text().substr(0, 7) != "user_id")
            c.fail("expected the JODIE header \"user_id,item_id,timestamp,state_label,...\"");
          return;
        }
        if (c.blank()) return;
        if (columns == 0) {
          columns = c.count_fields();
          if (columns < 4)
            c.fail("expected at least 4 columns (user_id,item_id,timestamp,state_label), found " +
                   std::to_string(columns));
          r.feature_dim = columns - 4;
        }
        const std::int64_t u = c.next_int("user id");
        const std::int64_t i = c.next_int("item id");
        if (u < 0 || u >= kMaxNodes) c.fail("user id " + std::to_string(u) + " out of range");
        if (i < 0 || i >= kMaxNodes) c.fail("item id " + std::to_string(i) + " out of range");
        if (u > max_user) {
          max_user = u;
          max_user_line = c.line();
        }
        if (i > max_item) {
          max_item = i;
          max_item_line = c.line();
        }
        r.src.push_back(NodeId(u));
        items.push_back(i);
        r.time.push_back(checked_time(c));
        const std::int64_t label = c.next_int("state label");
        if (label < 0 || label > INT32_MAX)
          c.fail("state label " + std::to_string(label) + " out of range");
        r.labels.push_back(std::int32_t(label));
        for (std::int64_t k = 0; k < r.feature_dim; ++k)
          r.features.push_back(c.next_float("feature"));
        c.expect_end(columns);
      },
      "reading JODIE events", InputKind::kStream);  // named on the command line
  // Items follow users in one id space, as TGN's preprocessing does.
  const std::int64_t users = max_user + 1;
  for (std::int64_t i : items) {
    if (users + i >= kMaxNodes) throw_input(path, 0, "user + item ids exceed the int32 id space");
    r.dst.push_back(NodeId(users + i));
  }
  // Node ids run users then items: the larger raw id is the likelier stray one.
  r.max_id_line = max_item > max_user ? max_item_line : max_user_line;
  r.shown_max = std::max(max_user, max_item);
  return finish(std::move(r), path, users, allow_sparse_ids);
}

}  // namespace halo
