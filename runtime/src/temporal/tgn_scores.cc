// Link-prediction evaluation for the TGN trainer (see tgn_scores.h).
#include "temporal/tgn_scores.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "halo/gnn/metrics.h"
#include "halo/gnn/rng.h"

namespace halo {

NodeId negative(std::uint64_t seed, std::uint64_t stream, std::int64_t event, std::int64_t nodes) {
  std::uint32_t c[4] = {std::uint32_t(event), std::uint32_t(std::uint64_t(event) >> 32), 0x6e65u,
                        0};
  philox4x32(philox_key(seed, kStreamDropout + (1ull << 39) + stream), c);
  return NodeId(((std::uint64_t(c[0]) << 32) | c[1]) % std::uint64_t(nodes));
}

std::vector<NodeId> negatives(const std::vector<std::int64_t>& ids, std::uint64_t seed,
                              std::uint64_t first, std::int64_t nodes, std::int64_t per_event) {
  std::vector<NodeId> out;
  out.reserve(ids.size() * std::size_t(per_event));
  for (std::int64_t e : ids)
    for (std::int64_t j = 0; j < per_event; ++j)
      out.push_back(negative(seed, first + std::uint64_t(j), e, nodes));
  return out;
}

std::vector<std::int64_t> event_range(std::int64_t first, std::int64_t last) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(std::max<std::int64_t>(0, last - first)));
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

namespace {

// A metric averaged over consecutive groups of `batch` events (2 * batch scores).
template <class Metric>
double batch_mean(std::int64_t batch, const std::vector<float>& sc,
                  const std::vector<std::int32_t>& lab, Metric metric) {
  const std::int64_t n = std::int64_t(sc.size()), step = 2 * batch;
  double sum = 0;
  std::int64_t count = 0;
  for (std::int64_t b = 0; b < n; b += step, ++count)
    sum += metric(sc.data() + b, lab.data() + b, std::min(step, n - b));
  return count ? sum / double(count) : 0.0;
}

double ap_of(const float* sc, const std::int32_t* lab, std::int64_t n) {
  return average_precision(sc, lab, n);
}
double auc_of(const float* sc, const std::int32_t* lab, std::int64_t n) {
  return rocauc(sc, lab, n, 1);
}

}  // namespace

void Scores::add(float pos, float neg, bool inductive) {
  s.insert(s.end(), {pos, neg});
  y.insert(y.end(), {1, 0});
  if (inductive) {
    si.insert(si.end(), {pos, neg});
    yi.insert(yi.end(), {1, 0});
  }
}

double Scores::ap() const { return batch_mean(batch, s, y, ap_of); }
double Scores::auc() const { return batch_mean(batch, s, y, auc_of); }
double Scores::ap_ind() const { return batch_mean(batch, si, yi, ap_of); }
double Scores::auc_ind() const { return batch_mean(batch, si, yi, auc_of); }
double Scores::ap_pooled() const { return ap_of(s.data(), y.data(), std::int64_t(s.size())); }
double Scores::ap_ind_pooled() const {
  return ap_of(si.data(), yi.data(), std::int64_t(si.size()));
}

void edgebank(const EventStream& s, std::int64_t begin, std::int64_t end, std::int64_t batch,
              std::uint64_t neg_seed, const std::vector<std::uint8_t>& inductive,
              std::unordered_set<std::uint64_t>& seen, Scores& out) {
  auto key = [](NodeId a, NodeId b) {
    return (std::uint64_t(std::uint32_t(a)) << 32) | std::uint32_t(b);
  };
  for (std::int64_t b0 = begin; b0 < end; b0 += batch) {
    const std::int64_t b1 = std::min(end, b0 + batch);
    for (std::int64_t e = b0; e < b1; ++e) {
      const NodeId n = negative(neg_seed, 0, e, s.nodes);
      out.add(seen.count(key(s.src[e], s.dst[e])) ? 1.f : 0.f,
              seen.count(key(s.src[e], n)) ? 1.f : 0.f, inductive[std::size_t(e)] != 0);
    }
    for (std::int64_t e = b0; e < b1; ++e) seen.insert(key(s.src[e], s.dst[e]));
  }
}

std::vector<Scored> all_scored(Communicator& comm, std::vector<Scored> mine, std::int64_t total) {
  if (comm.size() == 1) return mine;
  const std::vector<char> bytes =
      comm.gather(mine.data(), mine.size() * sizeof(Scored), 0, nullptr);
  std::vector<Scored> all(static_cast<std::size_t>(total));
  if (comm.rank() == 0) {
    if (bytes.size() != all.size() * sizeof(Scored))
      throw std::logic_error("tgn: ranks scored different events");
    std::memcpy(all.data(), bytes.data(), bytes.size());
    std::sort(all.begin(), all.end(),
              [](const Scored& a, const Scored& b) { return a.event < b.event; });
  }
  comm.broadcast(all.data(), all.size() * sizeof(Scored), 0);
  return all;
}

}  // namespace halo
