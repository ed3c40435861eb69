// DistTGL's static node memory (see static_memory.h).
#include "halo/gnn/temporal/static_memory.h"

namespace halo {

StaticMemory::StaticMemory(std::int64_t nodes, std::int64_t dim) : dim_(dim) {
  s_.name = "static_memory";
  if (dim_ == 0) return;
  for (Matrix* m : {&s_.value, &s_.grad, &s_.m, &s_.v}) *m = Matrix(nodes, dim_);
}

void StaticMemory::fill(Backend& be, const NodeId* node, std::int64_t n, const MatrixView& out,
                        std::int64_t col) const {
  if (dim_ == 0) return;
  be.gather_rows_into(s_.value.view(), node, n, out, col);
}

void StaticMemory::fill(const NodeId* node, std::int64_t n, Matrix& out, std::int64_t col) const {
  fill(cpu_backend(), node, n, out.view(), col);
}

void StaticMemory::add_gradient(Backend& be, const NodeId* node, std::int64_t n,
                                const MatrixView& grad, std::int64_t col) {
  // Rows repeat (a node is a query and a neighbour): added in order i, so the sums' bits do not
  // depend on the thread count or the device.
  if (dim_ == 0) return;
  be.scatter_add_rows_from(grad, col, dim_, node, n, s_.grad.view());
}

void StaticMemory::add_gradient(const NodeId* node, std::int64_t n, const Matrix& grad,
                                std::int64_t col) {
  add_gradient(cpu_backend(), node, n, grad.view(), col);
}

}  // namespace halo
