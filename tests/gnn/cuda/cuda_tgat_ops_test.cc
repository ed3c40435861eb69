// The CUDA backend's temporal-attention ops against the CPU's, on the same inputs: the head
// reshuffles, column copies and row masks bitwise; the attention core, its backward and the whole
// TemporalAttention layer (both key/value forms, with and without per-slot columns, a query
// without neighbours, one and two heads) within atol + rtol |cpu| (the dots' summation order,
// expf and fused multiply-adds differ), and bitwise across two GPU runs (deterministic). Without
// a GPU every test here skips with cuda_devices()'s reason.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "../temporal/tgat_case.h"
#include "halo/gnn/backend.h"
#include "halo/gnn/device.h"
#include "halo/gnn/temporal/layers.h"

namespace halo {
namespace {

class CudaTgatOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const CudaDevices d = cuda_devices();
    if (d.count == 0) GTEST_SKIP() << d.reason;
  }
  Backend& cpu = cpu_backend();
};

Matrix upload(const Matrix& h) {
  Matrix d(h.rows(), h.cols(), 0.f, Device::kCuda);
  d.assign(h.storage());
  return d;
}

// int32s in device memory (one element at least, so an empty list still has an address).
DeviceArray<std::int32_t> upload_ints(const std::vector<std::int32_t>& v) {
  std::vector<std::int32_t> padded = v;
  if (padded.empty()) padded.push_back(0);
  return DeviceArray<std::int32_t>(padded.data(), padded.size());
}

void expect_close(const Matrix& gpu, const Matrix& cpu, double atol, double rtol,
                  const std::string& what) {
  const std::vector<float> got = gpu.to_host(), ref = cpu.to_host();
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(double(got[i]) - double(ref[i])) <= atol + rtol * std::abs(double(ref[i])))) {
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs " << ref[i];
      return;
    }
}

void expect_bitwise(const Matrix& a, const Matrix& b, const std::string& what) {
  const std::vector<float> x = a.to_host(), y = b.to_host();
  ASSERT_EQ(x.size(), y.size()) << what;
  // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): bitwise on purpose
  EXPECT_EQ(std::memcmp(x.data(), y.data(), sizeof(float) * x.size()), 0) << what;
}

TEST_F(CudaTgatOpsTest, ReshufflesCopiesAndMasksAreTheCpusBitwise) {
  Backend& gpu = cuda_backend();
  std::mt19937 g{21};
  for (int heads : {1, 2, 3})
    for (std::int64_t w : {1, 7, 33}) {
      const std::string what = "heads=" + std::to_string(heads) + " w=" + std::to_string(w);
      const std::int64_t n = 37;
      const Matrix x = test::random_host(n, heads * w, g);
      const Matrix dx = upload(x);
      Matrix split(heads * n, w), dsplit(heads * n, w, 0.f, Device::kCuda);
      cpu.split_heads(x.view(), heads, split.view());
      gpu.split_heads(dx.view(), heads, dsplit.view());
      expect_bitwise(dsplit, split, what + " split_heads");
      for (bool accumulate : {false, true}) {
        Matrix out = test::random_host(n, heads * w, g);
        Matrix dout = upload(out);
        cpu.merge_heads(split.view(), heads, out.view(), accumulate);
        gpu.merge_heads(dsplit.view(), heads, dout.view(), accumulate);
        expect_bitwise(dout, out, what + " merge_heads " + std::to_string(accumulate));
      }
    }
  const Matrix src = test::random_host(301, 9, g);
  const Matrix dsrc = upload(src);
  for (bool accumulate : {false, true}) {
    Matrix dst = test::random_host(301, 12, g);
    Matrix ddst = upload(dst);
    cpu.copy_columns(src.view(), 2, dst.view(), 4, 6, accumulate);
    gpu.copy_columns(dsrc.view(), 2, ddst.view(), 4, 6, accumulate);
    expect_bitwise(ddst, dst, "copy_columns " + std::to_string(accumulate));
  }
  std::vector<std::int32_t> keep(301);
  for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = std::int32_t(i % 3 != 1);
  const DeviceArray<std::int32_t> dkeep = upload_ints(keep);
  Matrix m = src, dm = upload(src);
  cpu.mask_rows(m.view(), keep.data());
  gpu.mask_rows(dm.view(), dkeep.data());
  expect_bitwise(dm, m, "mask_rows");
}

struct Shape {
  std::int64_t B;
  int heads;
  std::int64_t dhd, ds, U;
  int k;
};
const Shape kShapes[] = {{4, 1, 3, 0, 3, 2},       {6, 2, 5, 4, 4, 3},
                         {3, 2, 1, 1, 2, 1},       {9, 1, 33, 7, 5, 4},
                         {200, 2, 50, 0, 150, 10}, {200, 2, 50, 40, 150, 10},
                         {50, 2, 70, 65, 40, 20}};

TEST_F(CudaTgatOpsTest, AttendAndItsBackwardMatchTheCpuAndAreDeterministic) {
  Backend& gpu = cuda_backend();
  for (const Shape& s : kShapes) {
    const std::string what = "B=" + std::to_string(s.B) + " heads=" + std::to_string(s.heads) +
                             " dhd=" + std::to_string(s.dhd) + " ds=" + std::to_string(s.ds);
    const test::TgatCase c(s.B, s.heads, s.dhd, s.ds, s.U, s.k, 31);
    Matrix alpha(c.B * c.heads, c.k), ctx(c.B, c.dq), sbar(c.heads * c.B, c.ds);
    cpu.tgat_attend(c.host_view(), c.bv.data(), alpha.view(), ctx.view(), sbar.view());
    Matrix dQ(c.B, c.dq), dK(c.S, c.dq), dV(c.S, c.dq), dP(c.heads * c.B, c.ds),
        dslots(c.B * c.k, c.ds), dbk(1, c.dq, 0.5f);
    cpu.tgat_attend_backward(c.host_view(), alpha.view(), c.dctx.view(), c.dsbar.view(), dQ.view(),
                             dK.view(), dV.view(), dP.view(), dslots.view(), dbk.data());

    const Matrix gQ = upload(c.Q), gP = upload(c.P), gKn = upload(c.Kn), gVn = upload(c.Vn),
                 gslots = upload(c.slots), gbk = upload(c.bk), gbv = upload(c.bv),
                 gdctx = upload(c.dctx), gdsbar = upload(c.dsbar);
    const DeviceArray<std::int32_t> grow = upload_ints(c.row), gnode = upload_ints(c.node);
    const TgatView v = c.view(gQ, gP, gKn, gVn, gslots, grow.data(), gnode.data(), gbk.data());
    std::vector<Matrix> runs;
    for (int run = 0; run < 2; ++run) {
      Matrix a(c.B * c.heads, c.k, NAN, Device::kCuda), cx(c.B, c.dq, NAN, Device::kCuda),
          sb(c.heads * c.B, c.ds, NAN, Device::kCuda);
      gpu.tgat_attend(v, gbv.data(), a.view(), cx.view(), sb.view());
      Matrix q(c.B, c.dq, NAN, Device::kCuda), kk(c.S, c.dq, NAN, Device::kCuda),
          vv(c.S, c.dq, NAN, Device::kCuda), p(c.heads * c.B, c.ds, NAN, Device::kCuda),
          sl(c.B * c.k, c.ds, NAN, Device::kCuda), bk(1, c.dq, 0.5f, Device::kCuda);
      // The backward from the CPU's alpha, so its comparison does not compound the forward's.
      const Matrix calpha = upload(alpha);
      gpu.tgat_attend_backward(v, calpha.view(), gdctx.view(), gdsbar.view(), q.view(), kk.view(),
                               vv.view(), p.view(), sl.view(), bk.data());
      for (Matrix* m : {&a, &cx, &sb, &q, &kk, &vv, &p, &sl, &bk}) runs.push_back(std::move(*m));
    }
    const Matrix* want[] = {&alpha, &ctx, &sbar, &dQ, &dK, &dV, &dP, &dslots, &dbk};
    const char* names[] = {"alpha", "ctx", "sbar", "dQ", "dK", "dV", "dP", "dslots", "dbk"};
    for (std::size_t i = 0; i < 9; ++i) {
      expect_close(runs[i], *want[i], 1e-5, 1e-4, what + " " + names[i]);
      expect_bitwise(runs[9 + i], runs[i], what + " " + names[i] + " (second run)");
    }
  }
}

// The layer on both backends from the same initialisation: outputs, input gradients and every
// parameter gradient (accumulated over two steps, so += is exercised).
void compare_layer(bool whole, std::int64_t ds, int heads) {
  const std::int64_t B = 40, dh = 12, dq = 16, dn = 10, dout = 9, U = 25;
  const int k = 5;
  const std::string what = std::string(whole ? "whole" : "factored") + " ds=" + std::to_string(ds) +
                           " heads=" + std::to_string(heads);
  TemporalAttention on_cpu(dh, dq, dn + ds, dout, heads, 3, 0),
      on_gpu(dh, dq, dn + ds, dout, heads, 3, 0);
  std::mt19937 g{41};
  for (Param* p : on_cpu.params())
    if (p->name.find(".b") != std::string::npos)
      p->value = test::random_host(1, p->value.cols(), g, 0.1f);
  const auto pc = on_cpu.params(), pg = on_gpu.params();
  for (std::size_t i = 0; i < pc.size(); ++i) pg[i]->value = pc[i]->value;
  on_gpu.to_device(Device::kCuda);
  const Matrix q = test::random_host(B, dq, g), h = test::random_host(B, dh, g),
               G = test::random_host(B, dout, g);
  // Query 0 fills its slots, the last none, the others two thirds; nodes repeat.
  std::uniform_int_distribution<std::int32_t> pick(0, std::int32_t(U - 1));
  std::vector<std::int32_t> node(std::size_t(B * k));
  for (std::int64_t r = 0; r < B * k; ++r)
    node[std::size_t(r)] = r / k == B - 1 || (r / k != 0 && r % 3 == 2) ? -1 : pick(g);
  const Matrix nodes = test::random_host(U, dn, g), slots = test::random_host(B * k, ds, g);
  Matrix kv(B * k, dn + ds);  // the same keys and values, whole
  std::vector<std::uint8_t> valid(std::size_t(B * k));
  for (std::int64_t r = 0; r < B * k; ++r) {
    valid[std::size_t(r)] = node[std::size_t(r)] >= 0;
    if (node[std::size_t(r)] < 0) continue;
    for (std::int64_t c = 0; c < dn; ++c) kv.at(r, c) = nodes.at(node[std::size_t(r)], c);
    for (std::int64_t c = 0; c < ds; ++c) kv.at(r, dn + c) = slots.at(r, c);
  }
  const Matrix gq = upload(q), gh = upload(h), gG = upload(G), gnodes = upload(nodes),
               gslots = upload(slots), gkv = upload(kv);
  Matrix z, dq_, dn_, dsl, dh_, gz, gdq, gdn, gdsl, gdh;
  on_cpu.zero_grad();
  on_gpu.zero_grad();
  for (int step = 0; step < 2; ++step) {
    if (whole) {
      on_cpu.forward(cpu_backend(), q.view(), kv.view(), valid.data(), k, h.view(), z);
      on_gpu.forward(cuda_backend(), gq.view(), gkv.view(), valid.data(), k, gh.view(), gz);
      on_cpu.backward(cpu_backend(), G.view(), dq_, dn_, dh_);
      on_gpu.backward(cuda_backend(), gG.view(), gdq, gdn, gdh);
    } else {
      KeyValueInput in, gin;
      in.nodes = nodes.view();
      in.node = node.data();
      in.slots = slots.view();
      gin.nodes = gnodes.view();
      gin.node = node.data();
      gin.slots = gslots.view();
      on_cpu.forward(cpu_backend(), q.view(), in, k, h.view(), z);
      on_gpu.forward(cuda_backend(), gq.view(), gin, k, gh.view(), gz);
      on_cpu.backward(cpu_backend(), G.view(), dq_, dn_, dsl, dh_);
      on_gpu.backward(cuda_backend(), gG.view(), gdq, gdn, gdsl, gdh);
      expect_close(gdsl, dsl, 1e-5, 1e-4, what + " dslots");
    }
  }
  EXPECT_EQ(gz.device(), Device::kCuda) << what;
  expect_close(gz, z, 1e-5, 1e-4, what + " z");
  expect_close(gdq, dq_, 1e-5, 1e-4, what + " dq");
  expect_close(gdn, dn_, 1e-5, 1e-4, what + (whole ? " dkv" : " dnodes"));
  expect_close(gdh, dh_, 1e-5, 1e-4, what + " dh");
  for (std::size_t i = 0; i < pc.size(); ++i)
    expect_close(pg[i]->grad, pc[i]->grad, 1e-4, 1e-4, what + " " + pc[i]->name);
  // The query without neighbours gets no attention output: z is the merger of [0 ‖ h] alone,
  // on the GPU as on the CPU (checked above); its query gradient is 0 exactly.
  const std::vector<float> d = gdq.to_host();
  for (std::int64_t c = 0; c < dq; ++c) EXPECT_EQ(d[std::size_t((B - 1) * dq + c)], 0.f) << what;
}

TEST_F(CudaTgatOpsTest, TemporalAttentionMatchesTheCpuFactoredWithSlotColumns) {
  for (int heads : {1, 2}) compare_layer(false, 6, heads);
}

TEST_F(CudaTgatOpsTest, TemporalAttentionMatchesTheCpuFactoredWithoutSlotColumns) {
  for (int heads : {1, 2}) compare_layer(false, 0, heads);
}

TEST_F(CudaTgatOpsTest, TemporalAttentionMatchesTheCpuOnWholeKeyValues) {
  for (int heads : {1, 2}) compare_layer(true, 6, heads);
}

}  // namespace
}  // namespace halo
