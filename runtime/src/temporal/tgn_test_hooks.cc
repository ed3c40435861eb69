// The self-checks runtime/tgn.h offers the tests: a batch's scores after training on the batches
// before it (leakage), and analytic against numeric gradients of a batch's loss.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "halo/gnn/rng.h"
#include "halo/gnn/temporal/sampler.h"
#include "halo/graph/dataset.h"
#include "halo/runtime/temporal/tgn.h"
#include "temporal/tgn_replicas.h"
#include "temporal/tgn_scores.h"

namespace halo {
namespace fs = std::filesystem;

std::vector<float> tgn_batch_scores(std::int64_t nodes, const std::vector<NodeId>& src,
                                    const std::vector<NodeId>& dst, const std::vector<double>& time,
                                    const TgnOptions& opt, std::int64_t batch) {
  EventStream s;
  s.nodes = nodes;
  s.events = std::int64_t(src.size());
  s.src = src.data();
  s.dst = dst.data();
  s.time = time.data();
  const TemporalCsr g = build_temporal_csr(s.nodes, s.src, s.dst, s.time, s.events);
  RecentSampler sampler(g, opt.neighbors);
  const TgnOptions o = resolved(opt);
  TgnReplicas model(s, o);
  Backend& be = cpu_backend();
  std::vector<float> ps, ns;
  for (std::int64_t b = 0; b <= batch; ++b) {
    const auto ids = event_range(b * opt.batch_size, std::min(s.events, (b + 1) * opt.batch_size));
    ps.clear();
    model.batch(be, sampler, ids, negatives(ids, opt.seed, 1, s.nodes), b < batch ? b + 1 : 0, &ps,
                &ns);
  }
  return ps;
}

namespace {

// The entries of p checked: about 7 spread over it. The static memory (nodes x D) is read only
// at the batch's nodes and their neighbours, so spread entries would all be untouched rows:
// there one entry of every row (column row mod D), so every node's row the batch reads, and
// every one it must not, is checked.
std::vector<std::int64_t> checked_entries(const Param& p) {
  std::vector<std::int64_t> out;
  if (p.name == "static_memory") {
    for (std::int64_t r = 0; r < p.value.rows(); ++r)
      out.push_back(r * p.value.cols() + r % p.value.cols());
    return out;
  }
  for (std::int64_t i = 0; i < p.value.size(); i += std::max<std::int64_t>(1, p.value.size() / 7))
    out.push_back(i);
  return out;
}

// The worst relative error of p's analytic gradient (grad, from the batch) against central
// differences of the batch's loss, over checked_entries(p).
double worst_gradient_error(TgnReplicas& model, Backend& be, RecentSampler& sampler,
                            const std::vector<std::int64_t>& ids, const std::vector<NodeId>& neg,
                            Param* p) {
  std::vector<float> ps, ns;
  double worst = 0;
  const Matrix grad = p->grad;
  for (const std::int64_t i : checked_entries(*p)) {
    float& w = p->value.data()[i];
    // h = 1e-3 keeps the float forward's rounding (~1e-7 of the loss) well under the
    // difference; smaller steps drowned gradients of 1e-4 in noise.
    const float saved = w;
    auto central = [&](float h) {
      w = saved + h;
      const double up = model.batch(be, sampler, ids, neg, -1, &ps, &ns);
      w = saved - h;
      const double down = model.batch(be, sampler, ids, neg, -1, &ps, &ns);
      w = saved;
      return (up - down) / (2.0 * double(h));
    };
    // The static memory's entries (gradients ~5e-4 on a batch of 8, the query path a small
    // part of them) take a 1e-2 step: 10x further above the float rounding, so that an error
    // in that small part shows (the loss is smooth in S away from kinks, which are skipped).
    const float h = p->name == "static_memory" ? 1e-2f : 1e-3f;
    const double numeric = central(h);
    // A row of the static memory the batch never reads: both exactly zero, nothing to compare.
    if (numeric == 0 && grad.data()[i] == 0) continue;
    // A step that crosses a ReLU kink in the merger or predictor measures the kink, not the
    // gradient; halving the step then changes the difference, and the entry is skipped.
    if (std::abs(central(h / 2) - numeric) > 0.1 * (1e-4 + std::abs(numeric))) continue;
    // Relative, with a floor of 1e-4: the memory path's gradients (GRU weights) are ~1e-3 on a
    // batch of 8; a floor of 5e-3 once let every one of them pass unchecked.
    const double err = std::abs(double(grad.data()[i]) - numeric) / (1e-4 + std::abs(numeric));
    if (std::getenv("HALO_DEBUG_GRADCHECK") && err > 1e-2)
      std::fprintf(stderr, "%s[%lld]: analytic %g numeric %g\n", p->name.c_str(), (long long)i,
                   double(grad.data()[i]), numeric);
    worst = std::max(worst, err);
  }
  return worst;
}

}  // namespace

double tgn_gradient_check(const fs::path& dataset, const TgnOptions& opt, std::int64_t batches,
                          const std::string& only) {
  const TemporalDataset d = read_temporal_dataset(dataset);
  const EventStream s = stream_of(d);
  const TemporalCsr g = build_temporal_csr(s.nodes, s.src, s.dst, s.time, s.events);
  RecentSampler sampler(g, opt.neighbors);
  const TgnOptions o = resolved(opt);
  TgnReplicas model(s, o);
  // Biases start at 0, so a node without memory or neighbours (all-zero input) sits exactly on
  // a ReLU kink, where a central difference and the subgradient disagree: move them off it.
  const PhiloxKey key = philox_key(opt.seed, kStreamInit + 99);
  for (Param* p : model.params())
    if (p->name.find(".b") != std::string::npos)
      for (std::int64_t i = 0; i < p->value.size(); ++i)
        p->value.data()[i] +=
            0.1f * (philox_uniform(key, std::uint64_t(i), std::uint32_t(p->name.size())) - 0.5f);
  Backend& be = cpu_backend();
  auto ids_of = [&](std::int64_t b) {
    return event_range(b * opt.batch_size, std::min(s.events, (b + 1) * opt.batch_size));
  };
  std::vector<float> ps, ns;
  for (std::int64_t b = 0; b < batches; ++b)  // build memory, messages and history
    model.batch(be, sampler, ids_of(b), negatives(ids_of(b), opt.seed, 1, s.nodes), b + 1, &ps,
                &ns);
  const std::vector<std::int64_t> ids = ids_of(batches);
  const std::vector<NodeId> neg = negatives(ids, opt.seed, 1, s.nodes);
  model.batch(be, sampler, ids, neg, -1, &ps, &ns);
  double worst = 0;
  for (Param* p : model.params()) {
    // time.w multiplies raw time gaps (seconds, up to 1e6 here): no finite step is small enough
    // for a central difference; its gradient is checked on small gaps in the layer tests.
    if (p->name == "time.w" || (!only.empty() && p->name != only)) continue;
    worst = std::max(worst, worst_gradient_error(model, be, sampler, ids, neg, p));
  }
  return worst;
}

}  // namespace halo
