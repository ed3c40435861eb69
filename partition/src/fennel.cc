// Fennel (Tsourakakis et al., WSDM 2014), restreamed: nodes arrive in id order over the
// memory-mapped CSR and go to the part maximising
//     |N(v) ∩ P_i|  -  alpha * gamma * (|P_i| / (t_i * K))^(gamma - 1),
// gamma = 1.5, alpha = sqrt(K) * m / n^1.5, with t_i the target share and a hard cap of
// (1 + ufactor/1000) * t_i * n per part. Later passes re-place every node seeing all of its
// neighbours' current parts (Nishimura & Ugander's restreaming), which is what makes a
// one-pass heuristic competitive. Extra memory: the owner array, part sizes, K counters.
#include <algorithm>
#include <cmath>

#include "halo/partition/partition.h"

namespace halo {

std::vector<PartId> partition_fennel(const CsrView& g, const PartitionOptions& o) {
  const std::int64_t n = g.num_nodes;
  const int k = o.k;
  const std::vector<double> t = o.targets();
  const double m = std::max(1.0, double(g.num_edges()) / 2);
  const double gamma = 1.5;
  const double alpha = std::sqrt(double(k)) * m / std::pow(double(n), gamma);
  const double slack = 1.0 + (o.ufactor >= 0 ? o.ufactor : 30) / 1000.0;
  std::vector<double> cap(static_cast<std::size_t>(k));
  for (int p = 0; p < k; ++p)
    cap[std::size_t(p)] = std::max(1.0, std::ceil(slack * t[std::size_t(p)] * double(n)));

  std::vector<PartId> owner(std::size_t(n), -1);
  std::vector<std::int64_t> size(std::size_t(k), 0);
  std::vector<std::int64_t> count(std::size_t(k), 0);
  std::vector<PartId> touched;
  for (int pass = 0; pass < o.passes; ++pass) {
    for (std::int64_t v = 0; v < n; ++v) {
      const PartId old = owner[std::size_t(v)];
      if (old >= 0) --size[std::size_t(old)];
      touched.clear();
      for (EdgeId e = g.offsets[v]; e < g.offsets[v + 1]; ++e) {
        const PartId p = owner[std::size_t(g.indices[e])];
        if (p < 0) continue;
        if (count[std::size_t(p)]++ == 0) touched.push_back(p);
      }
      PartId best = -1;
      double best_score = 0;
      for (int p = 0; p < k; ++p) {
        if (double(size[std::size_t(p)]) + 1 > cap[std::size_t(p)]) continue;
        const double load = double(size[std::size_t(p)]) / (t[std::size_t(p)] * double(k));
        const double score =
            double(count[std::size_t(p)]) - alpha * gamma * std::pow(load, gamma - 1);
        // Ties go to the relatively emptier part, then the lower index: deterministic.
        if (best < 0 || score > best_score ||
            (score == best_score && double(size[std::size_t(p)]) / t[std::size_t(p)] <
                                        double(size[std::size_t(best)]) / t[std::size_t(best)])) {
          best = PartId(p);
          best_score = score;
        }
      }
      if (best < 0) best = old >= 0 ? old : 0;  // every part full (rounding): stay put
      for (PartId p : touched) count[std::size_t(p)] = 0;
      owner[std::size_t(v)] = best;
      ++size[std::size_t(best)];
    }
  }
  return owner;
}

}  // namespace halo
