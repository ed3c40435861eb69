// DistTGL's static node memory (see static_memory.h).
#include "halo/gnn/temporal/static_memory.h"

#include <algorithm>

namespace halo {

StaticMemory::StaticMemory(std::int64_t nodes, std::int64_t dim) : dim_(dim) {
  s_.name = "static_memory";
  if (dim_ == 0) return;
  for (Matrix* m : {&s_.value, &s_.grad, &s_.m, &s_.v}) *m = Matrix(nodes, dim_);
}

void StaticMemory::fill(const NodeId* node, std::int64_t n, Matrix& out, std::int64_t col) const {
  if (dim_ == 0) return;
#pragma omp parallel for schedule(static) if (n > 256)
  for (std::int64_t i = 0; i < n; ++i) std::copy_n(s_.value.row(node[i]), dim_, out.row(i) + col);
}

void StaticMemory::add_gradient(const NodeId* node, std::int64_t n, const Matrix& grad,
                                std::int64_t col) {
  // Serial: rows repeat (a node is a query and a neighbour), and a fixed order keeps the sums'
  // bits independent of the thread count. n x D additions per batch; small next to the GEMMs.
  for (std::int64_t i = 0; i < n; ++i) {
    float* g = s_.grad.row(node[i]);
    const float* d = grad.row(i) + col;
    for (std::int64_t c = 0; c < dim_; ++c) g[c] += d[c];
  }
}

}  // namespace halo
