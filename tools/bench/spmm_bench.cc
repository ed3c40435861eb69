// SpMM benchmark: a backend's Y = A X on a dataset's GCN operator at several widths, best of N
// runs, reported as effective bandwidth (every nonzero gathers one row of X, plus the row of Y
// written and the CSR itself), one JSON line per width. With --device cuda it also times a
// device-to-device copy of Y in the same run (the bandwidth the GPU can reach) and prints the
// ratio, for each GPU kernel in turn (HALO_CUDA_SPMM: cuSPARSE CSR ALG3, halo's own kernel,
// cuSPARSE ALG2), each on a fresh upload of the operator. Strict (HALO_CUDA_SPMM_STRICT=1): a
// cuSPARSE decline is an error, not a row timed on another kernel; and each row says which
// kernel ran ("ran": the backend's own count of the calls, e.g. the own kernel at odd widths).
//   halo_bench_spmm DATASET [--widths 40,128,256] [--repeats 5] [--device cpu|cuda]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "halo/gnn/backend.h"
#include "halo/gnn/device.h"
#include "halo/gnn/graph_op.h"
#include "halo/graph/dataset.h"
#include "halo/graph/error.h"

namespace {
using namespace halo;

struct Args {
  std::vector<std::int64_t> widths = {40, 128, 256};
  int repeats = 5;
  std::string device = "cpu";
};

// The flags after DATASET, in pairs (an unknown one is skipped with its value).
Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--widths") {
      a.widths.clear();
      std::stringstream ss(argv[i + 1]);
      for (std::string w; std::getline(ss, w, ',');) a.widths.push_back(std::stoll(w));
    } else if (flag == "--repeats") {
      a.repeats = std::stoi(argv[i + 1]);
    } else if (flag == "--device") {
      a.device = argv[i + 1];
    }
  }
  return a;
}

// One width on one kernel: the best of `repeats` SpMMs (on the GPU, also of as many copies of
// Y, the bandwidth it can reach), printed as one JSON line.
void time_width(Backend& be, const GraphOperator& op, std::int64_t n, std::int64_t f,
                const std::string& device, const std::string& kernel, int repeats) {
  const bool gpu = device == "cuda";
  const EdgeId nnz = op.fwd.view().nnz();
  const Device dv = gpu ? Device::kCuda : Device::kCpu;
  auto now = [&] {
    if (gpu) device_synchronize();
    return std::chrono::steady_clock::now();
  };
  SparseMatrix dev_a;  // a fresh upload: its plans are made with this kernel
  if (gpu) {
    ::setenv("HALO_CUDA_SPMM", kernel.c_str(), 1);
    dev_a = op.fwd.to_device(Device::kCuda);
  }
  const SparseView a = gpu ? dev_a.view() : op.fwd.view();
  Matrix x(n, f, 1.f, dv), y(n, f, 0.f, dv);
  be.spmm(a, x.view(), y.view());  // warm up: first touch of y, plans, caches
  be.take_spmm_kernel_counts();
  double best = 1e30, copy_best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = now();
    be.spmm(a, x.view(), y.view());
    best = std::min(best, std::chrono::duration<double>(now() - t0).count());
    if (gpu) {
      const auto c0 = now();
      be.copy(x.view(), y.view());
      copy_best = std::min(copy_best, std::chrono::duration<double>(now() - c0).count());
    }
  }
  std::string ran;  // the kernels that ran the timed calls, with their counts
  for (const auto& [label, calls] : be.take_spmm_kernel_counts())
    ran += (ran.empty() ? "" : ", ") + label + " x" + std::to_string(calls);
  const double bytes = double(nnz) * double(f * 4 + 8) + double(n) * double(f * 4 + 8);
  std::printf(
      "{\"device\": \"%s\", \"kernel\": \"%s\", \"width\": %lld, \"seconds\": %.6f, "
      "\"gb_per_s\": %.3f, "
      "\"nnz\": %lld",
      device.c_str(), kernel.c_str(), (long long)f, best, bytes / best / 1e9, (long long)nnz);
  if (gpu) {
    std::printf(", \"ran\": \"%s\"", ran.c_str());
    const double copy_gbs = 2.0 * double(n * f) * 4 / copy_best / 1e9;  // read + write
    std::printf(", \"copy_gb_per_s\": %.3f, \"ratio\": %.3f", copy_gbs,
                bytes / best / 1e9 / copy_gbs);
  }
  std::printf("}\n");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace halo;
  if (argc < 2) {
    std::fprintf(stderr, "usage: halo_bench_spmm DATASET [--widths 40,128,256] [--repeats 5]\n");
    return 2;
  }
  const Args args = parse_args(argc, argv);
  try {
    const GraphDataset d = read_graph_dataset(argv[1]);
    const std::int64_t n = d.num_nodes();
    std::vector<std::int32_t> degree(static_cast<std::size_t>(n));
    for (std::int64_t v = 0; v < n; ++v)
      degree[std::size_t(v)] = std::int32_t(d.graph.view().degree(NodeId(v)));
    const GraphOperator op = gcn_operator(d.graph.view(), n, degree.data());
    const bool gpu = args.device == "cuda";
    Backend& be = gpu ? cuda_backend() : cpu_backend();
    if (gpu) ::setenv("HALO_CUDA_SPMM_STRICT", "1", 1);
    const std::vector<std::string> kernels =
        gpu ? std::vector<std::string>{"alg3", "own", "alg2"} : std::vector<std::string>{"cpu"};
    for (const std::string& kernel : kernels)
      for (std::int64_t f : args.widths)
        time_width(be, op, n, f, args.device, kernel, args.repeats);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
