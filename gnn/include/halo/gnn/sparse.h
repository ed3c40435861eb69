// Weighted sparse operators in CSR form, shaped like the dense side (matrix.h): SparseView is
// what kernels take (pointers, shape and the name of the storage); SparseMatrix owns the arrays
// on the host or, with the CUDA backend, on the current GPU (RAII: freed with the matrix; plain
// cudaMalloc, never managed memory). Graph structure without values is CsrView / Csr
// (graph/csr.h); an operator paired with its transpose is GraphOperator (graph_op.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "halo/gnn/matrix.h"
#include "halo/graph/types.h"

namespace halo {

// A CSR operator with values, rows x cols (e.g. the normalised adjacency restricted to owned
// rows, over owned + halo columns). Its arrays are in host or device memory: which one is the
// owner's business (SparseMatrix::device()); backends take a view of their own memory.
struct SparseView {
  std::int64_t rows = 0, cols = 0;
  const EdgeId* offsets = nullptr;
  const NodeId* indices = nullptr;
  const float* values = nullptr;
  // Names the arrays a device SparseMatrix holds: unique per copy to the GPU (to_device, or a
  // copy of a device matrix), never reused; 0 for host views. A backend that caches
  // per-operator state keys it on this too: a freed operator's addresses can come back for a new
  // one of the same shape.
  std::uint64_t storage_id = 0;
  // offsets[rows]: host views only (it reads the offsets).
  EdgeId nnz() const { return rows ? offsets[rows] : 0; }
};

class SparseMatrix {
 public:
  // The shape, on either device.
  std::int64_t rows = 0, cols = 0;
  // The arrays of a host matrix: what builders fill and tests read (offsets: rows + 1 entries,
  // indices and values: nnz each, columns sorted within a row). Host matrices only: on a device
  // matrix they stay empty and view() points at its GPU copies.
  std::vector<EdgeId> offsets;
  std::vector<NodeId> indices;
  std::vector<float> values;

  SparseMatrix() = default;
  // Moves leave the source empty (0 x 0, no arrays, on the host, storage_id 0): no storage is
  // ever shared, so a view of the moved-to matrix stays valid and a storage_id names one owner.
  SparseMatrix(SparseMatrix&& o) noexcept;
  SparseMatrix& operator=(SparseMatrix&& o) noexcept;
  // Deep copy in the same memory: a copy of a device matrix is a new GPU copy with its own
  // storage_id (a plan cached for the original must never be handed the copy's arrays).
  SparseMatrix(const SparseMatrix& o);
  SparseMatrix& operator=(const SparseMatrix& o);
  // A device matrix's storage is announced as released (storage release hooks) before it goes.
  ~SparseMatrix();

  // Where the arrays live.
  Device device() const { return device_; }
  // A copy whose arrays live in d's memory (from either side). A copy to the GPU gets a fresh
  // storage_id; a copy to the host has none (0), as every host matrix. Throws SystemError when
  // d is kCuda and halo was built without CUDA or the allocation fails.
  SparseMatrix to_device(Device d) const;
  // The arrays wherever they live, with the storage_id of a device matrix (valid while this
  // matrix lives and is not moved from or assigned to).
  SparseView view() const;

 private:
  // One array in device memory (RAII) and its length, so a device matrix can be copied back.
  struct DeviceBuffer {
    struct Free {
      void operator()(void* p) const noexcept;
    };
    std::unique_ptr<void, Free> data;
    std::size_t bytes = 0;
  };
  // Copies `bytes` from src (in `from`'s memory) into a new device buffer.
  static DeviceBuffer copy_to_gpu(const void* src, std::size_t bytes, Device from);

  // Calls the storage release hooks for this matrix's device storage, if it has one.
  void announce_release() const noexcept;

  Device device_ = Device::kCpu;
  DeviceBuffer dev_offsets_, dev_indices_, dev_values_;  // device matrices only
  std::uint64_t storage_id_ = 0;                         // device matrices only (0 on the host)
};

// Registers fn to be called with a device SparseMatrix's storage_id when that storage is about
// to be freed (the matrix destroyed or assigned over), so a backend can drop what it prepared
// for the operator (the CUDA SpMM plans) with it. fn must not throw. Returns an id for
// remove_storage_release_hook. Host matrices (storage_id 0) are never announced.
int add_storage_release_hook(std::function<void(std::uint64_t)> fn);
void remove_storage_release_hook(int id);

}  // namespace halo
