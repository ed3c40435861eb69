// SparseMatrix storage on the host or the GPU.
#include "halo/gnn/sparse.h"

#include <atomic>
#include <map>
#include <mutex>
#include <utility>

#include "halo/gnn/device.h"

namespace halo {
namespace {

// The `bytes` at src (device memory) as a host vector of T: a device matrix copied back.
template <class T>
std::vector<T> download(const void* src, std::size_t bytes) {
  std::vector<T> out(bytes / sizeof(T));
  device_copy(out.data(), src, bytes, CopyKind::kDeviceToHost);
  return out;
}

struct ReleaseHooks {
  std::recursive_mutex mu;  // a hook may free device memory, which never comes back here
  std::map<int, std::function<void(std::uint64_t)>> hooks;
  int next = 1;
};
ReleaseHooks& release_hooks() {
  static ReleaseHooks* h = new ReleaseHooks;  // never destroyed: matrices may outlive statics
  return *h;
}

}  // namespace

int add_storage_release_hook(std::function<void(std::uint64_t)> fn) {
  ReleaseHooks& h = release_hooks();
  std::lock_guard<std::recursive_mutex> lock(h.mu);
  h.hooks[h.next] = std::move(fn);
  return h.next++;
}

void remove_storage_release_hook(int id) {
  ReleaseHooks& h = release_hooks();
  std::lock_guard<std::recursive_mutex> lock(h.mu);
  h.hooks.erase(id);
}

void SparseMatrix::announce_release() const noexcept {
  if (storage_id_ == 0) return;
  ReleaseHooks& h = release_hooks();
  std::lock_guard<std::recursive_mutex> lock(h.mu);
  for (auto& [id, fn] : h.hooks) fn(storage_id_);
}

SparseMatrix::~SparseMatrix() { announce_release(); }

void SparseMatrix::DeviceBuffer::Free::operator()(void* p) const noexcept { device_free(p); }

SparseMatrix::DeviceBuffer SparseMatrix::copy_to_gpu(const void* src, std::size_t bytes,
                                                     Device from) {
  DeviceBuffer b;
  b.data.reset(device_alloc(bytes));
  b.bytes = bytes;
  device_copy(b.data.get(), src, bytes,
              from == Device::kCpu ? CopyKind::kHostToDevice : CopyKind::kDeviceToDevice);
  return b;
}

SparseMatrix::SparseMatrix(SparseMatrix&& o) noexcept { *this = std::move(o); }

SparseMatrix& SparseMatrix::operator=(SparseMatrix&& o) noexcept {
  if (this == &o) return *this;
  announce_release();  // this matrix's storage goes now
  rows = std::exchange(o.rows, 0);
  cols = std::exchange(o.cols, 0);
  offsets = std::move(o.offsets);
  o.offsets.clear();
  indices = std::move(o.indices);
  o.indices.clear();
  values = std::move(o.values);
  o.values.clear();
  device_ = std::exchange(o.device_, Device::kCpu);
  dev_offsets_ = std::exchange(o.dev_offsets_, DeviceBuffer{});
  dev_indices_ = std::exchange(o.dev_indices_, DeviceBuffer{});
  dev_values_ = std::exchange(o.dev_values_, DeviceBuffer{});
  storage_id_ = std::exchange(o.storage_id_, 0);
  return *this;
}

SparseMatrix::SparseMatrix(const SparseMatrix& o) : SparseMatrix(o.to_device(o.device_)) {}

SparseMatrix& SparseMatrix::operator=(const SparseMatrix& o) {
  if (this != &o) *this = o.to_device(o.device_);
  return *this;
}

SparseMatrix SparseMatrix::to_device(Device d) const {
  SparseMatrix out;
  out.rows = rows;
  out.cols = cols;
  out.device_ = d;
  if (d == Device::kCpu) {
    if (device_ == Device::kCpu) {
      out.offsets = offsets;
      out.indices = indices;
      out.values = values;
    } else {
      out.offsets = download<EdgeId>(dev_offsets_.data.get(), dev_offsets_.bytes);
      out.indices = download<NodeId>(dev_indices_.data.get(), dev_indices_.bytes);
      out.values = download<float>(dev_values_.data.get(), dev_values_.bytes);
    }
    return out;
  }
  if (device_ == Device::kCpu) {
    out.dev_offsets_ = copy_to_gpu(offsets.data(), sizeof(EdgeId) * offsets.size(), device_);
    out.dev_indices_ = copy_to_gpu(indices.data(), sizeof(NodeId) * indices.size(), device_);
    out.dev_values_ = copy_to_gpu(values.data(), sizeof(float) * values.size(), device_);
  } else {
    out.dev_offsets_ = copy_to_gpu(dev_offsets_.data.get(), dev_offsets_.bytes, device_);
    out.dev_indices_ = copy_to_gpu(dev_indices_.data.get(), dev_indices_.bytes, device_);
    out.dev_values_ = copy_to_gpu(dev_values_.data.get(), dev_values_.bytes, device_);
  }
  // Numbered after the copies, from 1, as each new device storage is: the SpMM plan cache
  // (spmm_cuda.cu) keys on it, since cudaMalloc may hand a freed operator's addresses to this one.
  static std::atomic<std::uint64_t> next_id{1};
  out.storage_id_ = next_id.fetch_add(1, std::memory_order_relaxed);
  return out;
}

SparseView SparseMatrix::view() const {
  if (device_ == Device::kCpu)
    return {rows, cols, offsets.data(), indices.data(), values.data(), 0};
  return {rows,
          cols,
          static_cast<const EdgeId*>(dev_offsets_.data.get()),
          static_cast<const NodeId*>(dev_indices_.data.get()),
          static_cast<const float*>(dev_values_.data.get()),
          storage_id_};
}

}  // namespace halo
