// The CUDA backend's temporal-GNN ops (backend.h, "Temporal GNNs") against the CPU backend's, op
// by op on the same random inputs, and the time encoder and GRU cell forward and backward on
// each backend. Row moves (gather, scatter, scatter-add: the same additions in the same order)
// bitwise; arithmetic within a few ulps (CUDA's expf/tanhf, contracted products); the reducing
// ops run twice on the GPU to check they are deterministic. Without a GPU every test here skips
// with cuda_devices()'s reason (tools/gpu-check.sh runs them where there is one).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "halo/gnn/backend.h"
#include "halo/gnn/device.h"
#include "halo/gnn/temporal/layers.h"

namespace halo {
namespace {

std::vector<float> randn(std::int64_t n, std::uint32_t seed, float sd = 1.f) {
  std::mt19937 g{seed};
  std::normal_distribution<float> d(0.f, sd);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}

Matrix host_matrix(std::int64_t rows, std::int64_t cols, std::uint32_t seed, float sd = 1.f) {
  Matrix m(rows, cols);
  m.storage() = randn(rows * cols, seed, sd);
  return m;
}

Matrix upload(const Matrix& h) {
  Matrix d(h.rows(), h.cols(), 0.f, Device::kCuda);
  d.assign(h.storage());
  return d;
}

template <class T>
DeviceArray<T> upload(const std::vector<T>& v) {
  return DeviceArray<T>(v.data(), v.size());
}

template <class T>
std::vector<T> download(const DeviceArray<T>& a) {
  std::vector<T> out(a.size());
  device_copy(out.data(), a.data(), sizeof(T) * a.size(), CopyKind::kDeviceToHost);
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& ref, double atol,
                  double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(double(got[i]) - double(ref[i])) <= atol + rtol * std::abs(double(ref[i])))) {
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs " << ref[i];
      return;
    }
}

void expect_bitwise(const std::vector<float>& got, const std::vector<float>& ref,
                    const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): bitwise on purpose
    if (std::memcmp(&got[i], &ref[i], sizeof(float)) != 0) {
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs " << ref[i];
      return;
    }
}

std::vector<NodeId> random_index(std::int64_t n, std::int64_t rows, std::uint32_t seed,
                                 bool skips) {
  std::mt19937 g{seed};
  std::uniform_int_distribution<NodeId> any(0, NodeId(rows - 1));
  std::vector<NodeId> idx(static_cast<std::size_t>(n));
  for (auto& v : idx) v = skips && g() % 5 == 0 ? -1 : any(g);
  return idx;
}

// (rows, width): tiny, odd, TGN's batch (600 queries x 100), and tall (many reduction blocks).
const std::pair<std::int64_t, std::int64_t> kShapes[] = {{1, 1}, {7, 33}, {600, 100}, {70000, 7}};

std::string shape_name(std::int64_t n, std::int64_t d) {
  return std::to_string(n) + "x" + std::to_string(d);
}

class CudaTemporalOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const CudaDevices d = cuda_devices();
    if (d.count == 0) GTEST_SKIP() << d.reason;
  }
  Backend& cpu = cpu_backend();
};

TEST_F(CudaTemporalOpsTest, TimeEncodeAndBackwardMatchCpuAndAreDeterministic) {
  Backend& gpu = cuda_backend();
  for (const auto& [n, d] : kShapes) {
    const std::string what = shape_name(n, d);
    std::vector<double> dt(static_cast<std::size_t>(n));
    std::mt19937_64 g{std::uint64_t(n + d)};
    for (auto& v : dt) v = std::ldexp(std::uniform_real_distribution<double>(0, 1)(g), 20);
    const std::vector<float> w = randn(d, 1), b = randn(d, 2);
    Matrix out(n, d), sin(n, d);
    cpu.time_encode(dt.data(), n, w.data(), b.data(), out.view(), sin.view());
    const DeviceArray<double> ddt = upload(dt);
    const DeviceArray<float> dw_ = upload(w), db_ = upload(b);
    Matrix gout(n, d, NAN, Device::kCuda), gsin(n, d, NAN, Device::kCuda);
    gpu.time_encode(ddt.data(), n, dw_.data(), db_.data(), gout.view(), gsin.view());
    expect_close(gout.to_host(), out.storage(), 1e-6, 0, "time_encode out " + what);
    expect_close(gsin.to_host(), sin.storage(), 1e-6, 0, "time_encode sin " + what);

    const Matrix dout = host_matrix(n, d, 3);
    const Matrix gdout = upload(dout);
    const std::vector<float> gw0 = randn(d, 4), gb0 = randn(d, 5);  // accumulated into
    std::vector<float> cw = gw0, cb = gb0;
    cpu.time_encode_backward(dt.data(), sin.view(), dout.view(), cw.data(), cb.data());
    std::vector<float> first_w, first_b;
    for (int run = 0; run < 2; ++run) {
      const DeviceArray<float> gw = upload(gw0), gb = upload(gb0);
      gpu.time_encode_backward(ddt.data(), gsin.view(), gdout.view(), gw.data(), gb.data());
      if (run == 0) {
        first_w = download(gw);
        first_b = download(gb);
        const double scale = 1e-6 * std::sqrt(double(n));  // sums of n terms, in double
        expect_close(first_w, cw, scale * 1e6, 1e-5, "time_encode_backward dw " + what);
        expect_close(first_b, cb, scale, 1e-5, "time_encode_backward db " + what);
      } else {
        expect_bitwise(download(gw), first_w, "time_encode_backward dw (second run) " + what);
        expect_bitwise(download(gb), first_b, "time_encode_backward db (second run) " + what);
      }
    }
  }
}

TEST_F(CudaTemporalOpsTest, GruGatesAndBackwardMatchCpu) {
  Backend& gpu = cuda_backend();
  for (const auto& [B, H] : kShapes) {
    const std::string what = shape_name(B, H);
    const Matrix a = host_matrix(B, 3 * H, 7), c = host_matrix(B, 3 * H, 8),
                 h = host_matrix(B, H, 9), dh_out = host_matrix(B, H, 10);
    Matrix rzn(B, 3 * H), h_out(B, H), da(B, 3 * H), dc(B, 3 * H), dh(B, H);
    cpu.gru_gates(a.view(), c.view(), h.view(), rzn.view(), h_out.view());
    cpu.gru_gates_backward(dh_out.view(), h.view(), c.view(), rzn.view(), da.view(), dc.view(),
                           dh.view());
    const Matrix ga = upload(a), gc = upload(c), gh = upload(h), gdh_out = upload(dh_out);
    Matrix grzn(B, 3 * H, NAN, Device::kCuda), gh_out(B, H, NAN, Device::kCuda),
        gda(B, 3 * H, NAN, Device::kCuda), gdc(B, 3 * H, NAN, Device::kCuda),
        gdh(B, H, NAN, Device::kCuda);
    gpu.gru_gates(ga.view(), gc.view(), gh.view(), grzn.view(), gh_out.view());
    // Backward from the CPU's gates, so each op is compared on its own.
    const Matrix crzn = upload(rzn);
    gpu.gru_gates_backward(gdh_out.view(), gh.view(), gc.view(), crzn.view(), gda.view(),
                           gdc.view(), gdh.view());
    expect_close(grzn.to_host(), rzn.storage(), 1e-6, 1e-5, "gru_gates rzn " + what);
    expect_close(gh_out.to_host(), h_out.storage(), 1e-6, 1e-5, "gru_gates h_out " + what);
    expect_close(gda.to_host(), da.storage(), 1e-6, 1e-5, "gru_gates_backward da " + what);
    expect_close(gdc.to_host(), dc.storage(), 1e-6, 1e-5, "gru_gates_backward dc " + what);
    expect_close(gdh.to_host(), dh.storage(), 1e-6, 1e-5, "gru_gates_backward dh " + what);
  }
}

TEST_F(CudaTemporalOpsTest, TimeProjectionAndBackwardMatchCpu) {
  Backend& gpu = cuda_backend();
  for (const auto& [n, d] : kShapes) {
    const std::string what = shape_name(n, d);
    const Matrix m = host_matrix(n, d, 11), dz = host_matrix(n, d, 12);
    const std::vector<float> delta = randn(n, 13), w = randn(d, 14, 0.1f), b = randn(d, 15, 0.1f);
    const std::vector<float> w0 = randn(d, 16), b0 = randn(d, 17);
    Matrix z(n, d), dm(n, d);
    std::vector<float> cw = w0, cb = b0;
    cpu.time_projection(m.view(), delta.data(), w.data(), b.data(), z.view());
    cpu.time_projection_backward(m.view(), delta.data(), w.data(), b.data(), dz.view(), dm.view(),
                                 cw.data(), cb.data());
    const Matrix gm = upload(m);
    Matrix gdz = upload(dz), gz(n, d, NAN, Device::kCuda);
    const DeviceArray<float> gdelta = upload(delta), gwv = upload(w), gbv = upload(b),
                             gw = upload(w0), gb = upload(b0);
    gpu.time_projection(gm.view(), gdelta.data(), gwv.data(), gbv.data(), gz.view());
    // In place: dm is dz itself (the sums must read dz before it is overwritten).
    gpu.time_projection_backward(gm.view(), gdelta.data(), gwv.data(), gbv.data(), gdz.view(),
                                 gdz.view(), gw.data(), gb.data());
    expect_close(gz.to_host(), z.storage(), 1e-6, 1e-5, "time_projection " + what);
    expect_close(gdz.to_host(), dm.storage(), 1e-6, 1e-5, "time_projection_backward dm " + what);
    const double atol = 1e-6 * double(n);  // float sums of n terms
    expect_close(download(gw), cw, atol, 1e-5, "time_projection_backward dw " + what);
    expect_close(download(gb), cb, atol, 1e-5, "time_projection_backward db " + what);
  }
}

TEST_F(CudaTemporalOpsTest, RowMovesAreBitwiseTheCpus) {
  Backend& gpu = cuda_backend();
  for (const auto& [n, d] : kShapes) {
    const std::string what = shape_name(n, d);
    // gather_rows_into: columns [2, 2 + d) of a wider batch, rows with -1 untouched.
    const Matrix src = host_matrix(40, d, 20);
    const std::vector<NodeId> gi = random_index(n, 40, 21, true);
    Matrix dst = host_matrix(n + 1, d + 5, 22);
    Matrix gdst = upload(dst);
    const Matrix gsrc = upload(src);
    const DeviceArray<NodeId> ggi = upload(gi);
    cpu.gather_rows_into(src.view(), gi.data(), n, dst.view(), 2);
    gpu.gather_rows_into(gsrc.view(), ggi.data(), n, gdst.view(), 2);
    expect_bitwise(gdst.to_host(), dst.storage(), "gather_rows_into " + what);

    // scatter_add_rows_from: a column range, repeated and skipped destinations; twice.
    const Matrix s2 = host_matrix(n, d + 4, 23);
    const std::vector<NodeId> si = random_index(n, 17, 24, true);
    const Matrix base = host_matrix(17, d, 25);
    Matrix acc = base;
    cpu.scatter_add_rows_from(s2.view(), 3, d, si.data(), n, acc.view());
    const Matrix gs2 = upload(s2);
    const DeviceArray<NodeId> gsi = upload(si);
    for (int run = 0; run < 2; ++run) {
      Matrix gacc = upload(base);
      gpu.scatter_add_rows_from(gs2.view(), 3, d, gsi.data(), n, gacc.view());
      expect_bitwise(gacc.to_host(), acc.storage(),
                     "scatter_add_rows_from " + what + (run ? " (second run)" : ""));
    }

    // scatter_rows: distinct destinations out of order, every third skipped.
    const std::int64_t rows = 2 * n + 5;
    std::vector<NodeId> ri(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      ri[std::size_t(i)] = i % 3 == 2 ? -1 : NodeId((i * 7919) % rows);
    const Matrix s3 = host_matrix(n, d, 26);
    Matrix out = host_matrix(rows, d, 27);
    Matrix gout = upload(out);
    const Matrix gs3 = upload(s3);
    const DeviceArray<NodeId> gri = upload(ri);
    cpu.scatter_rows(s3.view(), ri.data(), n, out.view());
    gpu.scatter_rows(gs3.view(), gri.data(), n, gout.view());
    expect_bitwise(gout.to_host(), out.storage(), "scatter_rows " + what);

    // scale
    Matrix x = host_matrix(n, d, 28);
    Matrix gx = upload(x);
    cpu.scale(x.view(), 1.f / 3.f);
    gpu.scale(gx.view(), 1.f / 3.f);
    expect_bitwise(gx.to_host(), x.storage(), "scale " + what);
  }
}

// TGN's message aggregation and its backward: the same float sums in the same order, bitwise.
TEST_F(CudaTemporalOpsTest, SumRowsIntoAndSpreadRowsAreBitwiseTheCpus) {
  Backend& gpu = cuda_backend();
  for (const auto& [n, d] : kShapes) {
    const std::string what = shape_name(n, d);
    std::vector<std::int32_t> first(static_cast<std::size_t>(n)), rows(first.size()),
        divisor(first.size());
    std::int32_t total = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      first[std::size_t(i)] = total;
      rows[std::size_t(i)] = std::int32_t(1 + (i * 7) % 4);
      divisor[std::size_t(i)] = std::int32_t(1 + i % 3);
      total += rows[std::size_t(i)];
    }
    const DeviceArray<std::int32_t> gfirst = upload(first), grows = upload(rows),
                                    gdiv = upload(divisor);
    const Matrix src = host_matrix(total, d, 60);
    const Matrix gsrc = upload(src);
    Matrix dst = host_matrix(n + 2, d + 3, 61);
    Matrix gdst = upload(dst);
    cpu.sum_rows_into(src.view(), first.data(), rows.data(), divisor.data(), n, dst.view(), 3);
    gpu.sum_rows_into(gsrc.view(), gfirst.data(), grows.data(), gdiv.data(), n, gdst.view(), 3);
    expect_bitwise(gdst.to_host(), dst.storage(), "sum_rows_into " + what);
    Matrix one = host_matrix(n, d, 62);
    Matrix gone = upload(one);
    cpu.sum_rows_into(src.view(), first.data(), nullptr, nullptr, n, one.view(), 0);
    gpu.sum_rows_into(gsrc.view(), gfirst.data(), nullptr, nullptr, n, gone.view(), 0);
    expect_bitwise(gone.to_host(), one.storage(), "sum_rows_into, one row each " + what);

    const Matrix g = host_matrix(n, d + 2, 63);
    const Matrix gg = upload(g);
    Matrix spread = host_matrix(total, d, 64);
    Matrix gspread = upload(spread);
    cpu.spread_rows(g.view(), 2, first.data(), rows.data(), n, spread.view());
    gpu.spread_rows(gg.view(), 2, gfirst.data(), grows.data(), n, gspread.view());
    expect_bitwise(gspread.to_host(), spread.storage(), "spread_rows " + what);
  }
}

// The gradient of every parameter, on the host.
std::vector<std::vector<float>> grads(const std::vector<Param*>& ps) {
  std::vector<std::vector<float>> out;
  out.reserve(ps.size());
  for (const Param* p : ps) out.push_back(p->grad.to_host());
  return out;
}

TEST_F(CudaTemporalOpsTest, TimeEncoderForwardAndBackwardMatchCpu) {
  Backend& gpu = cuda_backend();
  const std::int64_t d = 100;
  TimeEncoder on_cpu(d), on_gpu(d);
  on_gpu.to_device(Device::kCuda);
  std::vector<double> dt(600);
  std::mt19937_64 g{9};
  for (auto& v : dt) v = std::uniform_real_distribution<double>(0, 1e6)(g);
  Matrix out, gout;
  for (int step = 0; step < 2; ++step) {  // the second, shorter, reuses the uploaded dt's memory
    const std::int64_t n = std::int64_t(dt.size());
    on_cpu.forward(cpu, dt.data(), n, out);
    on_gpu.forward(gpu, dt.data(), n, gout);
    ASSERT_EQ(gout.device(), Device::kCuda);
    expect_close(gout.to_host(), out.storage(), 1e-6, 0, "TimeEncoder out");
    const Matrix dout = host_matrix(n, d, std::uint32_t(10 + step)), gdout = upload(dout);
    on_cpu.backward(cpu, dout.view());
    on_gpu.backward(gpu, gdout.view());
    const auto cg = grads(on_cpu.params()), gg = grads(on_gpu.params());
    expect_close(gg[0], cg[0], 1e-2, 1e-5, "TimeEncoder d(w)");  // sums of dt (up to 1e6)
    expect_close(gg[1], cg[1], 1e-4, 1e-5, "TimeEncoder d(b)");
    dt.resize(dt.size() / 2);
  }
}

TEST_F(CudaTemporalOpsTest, GruCellForwardAndBackwardMatchCpu) {
  Backend& gpu = cuda_backend();
  const std::int64_t B = 600, in = 372, H = 100;  // TGN's UCI shapes (message, memory)
  GruCell on_cpu(in, H, 5, 0), on_gpu(in, H, 5, 0);
  on_gpu.to_device(Device::kCuda);
  const Matrix x = host_matrix(B, in, 1), h = host_matrix(B, H, 2), dh_out = host_matrix(B, H, 3);
  const Matrix gx = upload(x), gh = upload(h), gdh_out = upload(dh_out);
  Matrix h_out, dx, dh, gh_out, gdx, gdh;
  on_cpu.forward(cpu, x.view(), h.view(), h_out);
  on_gpu.forward(gpu, gx.view(), gh.view(), gh_out);
  expect_close(gh_out.to_host(), h_out.storage(), 1e-5, 1e-4, "GruCell h_out");
  on_cpu.backward(cpu, dh_out.view(), dx, dh);
  on_gpu.backward(gpu, gdh_out.view(), gdx, gdh);
  expect_close(gdx.to_host(), dx.storage(), 1e-5, 1e-4, "GruCell dx");
  expect_close(gdh.to_host(), dh.storage(), 1e-5, 1e-4, "GruCell dh");
  const auto cg = grads(on_cpu.params()), gg = grads(on_gpu.params());
  const char* names[] = {"d(W)", "d(U)", "d(b_x)", "d(b_h)"};
  for (std::size_t p = 0; p < cg.size(); ++p)
    expect_close(gg[p], cg[p], 1e-3, 1e-4, std::string("GruCell ") + names[p]);
}

}  // namespace
}  // namespace halo
