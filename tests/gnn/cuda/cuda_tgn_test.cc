// The whole TGN model (gnn/temporal/tgn.h) on the CUDA backend against the CPU backend: the same
// stream, parameters and batches through score (forward, loss, backward) and commit, with the
// attention and JODIE embeddings, the "last" and "mean" aggregators, with and without the static
// memory. Losses and every parameter's gradient agree within 1e-4 relative (of the largest
// element of that gradient), scores within 1e-4; the parameters are kept equal by copying the
// CPU's Adam step to the GPU model, while the node state evolves on each device (so a batch also
// checks the previous commit). Without a GPU every test here skips with cuda_devices()'s reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "halo/gnn/backend.h"
#include "halo/gnn/device.h"
#include "halo/gnn/op_profile.h"
#include "halo/gnn/temporal/sampler.h"
#include "halo/gnn/temporal/tgn.h"

namespace halo {
namespace {

// 240 events over 50 nodes, 3 edge features each; some nodes busy, others rare.
struct Stream {
  std::vector<NodeId> src, dst;
  std::vector<double> time;
  std::vector<float> feat;
  EventStream s;
  Stream() {
    std::mt19937 g{7};
    std::normal_distribution<float> f(0.f, 1.f);
    for (std::int64_t e = 0; e < 240; ++e) {
      src.push_back(NodeId(e % 3 == 0 ? e % 5 : (e * 7) % 50));
      dst.push_back(NodeId((e * 11 + 3) % 50));
      time.push_back(double(e - e % 2) * 1.5);  // pairs of events at one time
      for (int c = 0; c < 3; ++c) feat.push_back(f(g));
    }
    s.nodes = 50;
    s.events = 240;
    s.de = 3;
    s.src = src.data();
    s.dst = dst.data();
    s.time = time.data();
    s.efeat = feat.data();
  }
};

void expect_close(const std::vector<float>& got, const std::vector<float>& ref, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  if (rtol == 0) {  // the same bits
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!(got[i] == ref[i])) {
        ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs " << ref[i];
        return;
      }
    return;
  }
  double scale = 0;
  for (float r : ref) scale = std::max(scale, std::abs(double(r)));
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(double(got[i]) - double(ref[i])) <= rtol * scale + 1e-12)) {
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs " << ref[i] << " (largest "
                    << scale << ")";
      return;
    }
}

// Five training batches and one evaluation batch (3 negatives per event) on the CPU model and
// a second one computing on `device` with its node state in `memory`: losses, scores and
// gradients within rtol (rtol 0: the same bits), the node state after the last commit too.
void compare(const TgnConfig& c, Device device, TgnMemoryOn memory, double rtol,
             const std::string& name) {
  const Stream st;
  const TemporalCsr g = build_temporal_csr(st.s.nodes, st.s.src, st.s.dst, st.s.time, 240);
  RecentSampler cpu_sampler(g, 4), gpu_sampler(g, 4);
  Tgn cpu_model(st.s, c), gpu_model(st.s, c);
  gpu_model.to_device(device, memory);
  Backend& cpu = cpu_backend();
  Backend& gpu = device == Device::kCuda ? cuda_backend() : cpu_backend();
  const std::vector<Param*> cp = cpu_model.params(), gp = gpu_model.params();
  ASSERT_EQ(cp.size(), gp.size());
  for (std::int64_t b = 0; b < 6; ++b) {
    const bool train = b < 5;
    const std::int64_t negatives = train ? 1 : 3;
    std::vector<std::int64_t> ids;
    for (std::int64_t e = b * 40; e < b * 40 + 40; ++e) ids.push_back(e);
    std::vector<NodeId> neg;
    for (std::int64_t e : ids)
      for (std::int64_t j = 0; j < negatives; ++j) neg.push_back(NodeId((e * 13 + 5 * j) % 50));
    const std::string what = name + " batch " + std::to_string(b);
    std::vector<float> cpos, cneg, gpos, gneg;
    // The slice: the last 30 events (10 before it only become messages).
    const double closs = cpu_model.score(cpu, cpu_sampler, ids, {10, 30}, neg, train, &cpos, &cneg);
    const double gloss = gpu_model.score(gpu, gpu_sampler, ids, {10, 30}, neg, train, &gpos, &gneg);
    if (rtol == 0)
      EXPECT_EQ(gloss, closs) << what;
    else
      EXPECT_NEAR(gloss, closs, rtol * std::abs(closs)) << what;
    expect_close(gpos, cpos, rtol, what + " positive scores");
    expect_close(gneg, cneg, rtol, what + " negative scores");
    if (train)
      for (std::size_t i = 0; i < cp.size(); ++i) {
        expect_close(gp[i]->grad.to_host(), cp[i]->grad.to_host(), rtol,
                     what + " gradient of " + cp[i]->name);
        AdamStep a;
        a.lr = 1e-2f;
        a.step = b + 1;
        Param& p = *cp[i];
        cpu.adam(p.value.data(), p.grad.data(), p.m.data(), p.v.data(), p.value.size(), a);
        copy_floats(device, gp[i]->value.data(), Device::kCpu, p.value.data(), p.value.size());
      }
    cpu_model.commit(ids);
    gpu_model.commit(ids);
  }
  expect_close(gpu_model.memory().rows.to_host(), cpu_model.memory().rows.to_host(), rtol,
               name + " memory after the last commit");
  expect_close(gpu_model.messages().other.to_host(), cpu_model.messages().other.to_host(), rtol,
               name + " stored messages after the last commit");
  expect_close(gpu_model.messages().edge.to_host(), cpu_model.messages().edge.to_host(), rtol,
               name + " stored edge features after the last commit");
}

class CudaTgnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const CudaDevices d = cuda_devices();
    if (d.count == 0) GTEST_SKIP() << d.reason;
  }
  void compare(const TgnConfig& c, const std::string& name,
               TgnMemoryOn memory = TgnMemoryOn::kDevice) {
    halo::compare(c, Device::kCuda, memory, 1e-4, name);
  }
};

TgnConfig small(TgnEmbedding embedding, bool mean, std::int64_t static_dim) {
  TgnConfig c;
  c.memory_dim = 12;
  c.embed_dim = 10;
  c.time_dim = 8;
  c.heads = 2;
  c.embedding = embedding;
  c.mean_messages = mean;
  c.static_dim = static_dim;
  c.seed = 3;
  return c;
}

TEST_F(CudaTgnTest, AttentionBatchesMatchCpu) {
  compare(small(TgnEmbedding::kAttention, false, 0), "attention, last");
  compare(small(TgnEmbedding::kAttention, true, 0), "attention, mean");
}

TEST_F(CudaTgnTest, AttentionWithStaticMemoryMatchesCpu) {
  compare(small(TgnEmbedding::kAttention, false, 6), "attention + static, last");
  TgnConfig before_batch = small(TgnEmbedding::kAttention, true, 6);
  before_batch.neighbors_before_batch = true;
  compare(before_batch, "attention + static, mean, neighbours before the batch");
}

TEST_F(CudaTgnTest, JodieAndIdentityBatchesMatchCpu) {
  compare(small(TgnEmbedding::kTime, false, 0), "jodie, last");
  compare(small(TgnEmbedding::kTime, true, 0), "jodie, mean");
  compare(small(TgnEmbedding::kIdentity, true, 0), "identity, mean");
}

// --memory-on host on a GPU: the node state in host memory, each batch's rows staged.
TEST_F(CudaTgnTest, HostMemoryBatchesMatchCpu) {
  compare(small(TgnEmbedding::kAttention, false, 0), "host memory: attention, last",
          TgnMemoryOn::kHost);
  compare(small(TgnEmbedding::kAttention, true, 6), "host memory: attention + static, mean",
          TgnMemoryOn::kHost);
  compare(small(TgnEmbedding::kTime, true, 0), "host memory: jodie, mean", TgnMemoryOn::kHost);
}

// The staging of --memory-on host on the CPU, against the tables read in place: only the rows'
// places differ, so every loss, score, gradient and the node state are the same bits. Runs
// everywhere; the GPU's own staging copies are HostMemoryBatchesMatchCpu's.
TEST(TgnHostMemory, StagedRowsGiveTheResidentTablesBits) {
  const auto host = TgnMemoryOn::kHost;
  compare(small(TgnEmbedding::kAttention, false, 0), Device::kCpu, host, 0, "attention, last");
  compare(small(TgnEmbedding::kAttention, true, 0), Device::kCpu, host, 0, "attention, mean");
  compare(small(TgnEmbedding::kAttention, false, 6), Device::kCpu, host, 0, "with static memory");
  TgnConfig before_batch = small(TgnEmbedding::kAttention, true, 0);
  before_batch.neighbors_before_batch = true;
  compare(before_batch, Device::kCpu, host, 0, "neighbours before the batch");
  compare(small(TgnEmbedding::kTime, true, 0), Device::kCpu, host, 0, "jodie, mean");
  compare(small(TgnEmbedding::kIdentity, false, 0), Device::kCpu, host, 0, "identity, last");
}

}  // namespace
}  // namespace halo

namespace halo {
namespace {

// One training batch and its commit run as Backend ops only: their calls, op by op, as
// --profile counts them (the model's launch budget on a GPU; tgn.h states the uploads). The
// attention model with the "last" aggregator and edge features, a batch whose pending nodes
// have messages; on the CPU, so it runs everywhere.
TEST(TgnOps, ATrainingBatchIsTheseOps) {
  const Stream st;
  const TemporalCsr g = build_temporal_csr(st.s.nodes, st.s.src, st.s.dst, st.s.time, 240);
  RecentSampler sampler(g, 4);
  Tgn model(st.s, small(TgnEmbedding::kAttention, false, 0));
  Backend& be = cpu_backend();
  auto run = [&](std::int64_t b, OpProfile* profile) {
    std::vector<std::int64_t> ids;
    std::vector<NodeId> neg;
    for (std::int64_t e = b * 40; e < b * 40 + 40; ++e) {
      ids.push_back(e);
      neg.push_back(NodeId((e * 13) % 50));
    }
    std::vector<float> pos, negs;
    std::unique_ptr<ProfileScope> scope;
    if (profile) scope = std::make_unique<ProfileScope>(*profile);
    model.score(be, sampler, ids, {0, 40}, neg, true, &pos, &negs);
    model.commit(ids);
  };
  run(0, nullptr);  // the second batch's pending nodes have messages
  OpProfile profile;
  run(1, &profile);
  std::map<std::string, std::int64_t> calls;
  std::int64_t total = 0;
  for (const auto& [op, e] : profile.totals()) {
    calls[op] = e.calls;
    total += e.calls;
  }
  // The model's own: 14 row gathers, 13 column copies, 3 message sums, 1 spread, 4 row writes
  // (commit), 1 scatter-add (the memory gradients); the rest are the layers' and the MLP's.
  EXPECT_EQ(calls, (std::map<std::string, std::int64_t>{{"add", 8},
                                                        {"add_bias", 8},
                                                        {"column_sums", 8},
                                                        {"copy", 6},
                                                        {"copy_columns", 13},
                                                        {"fill", 2},
                                                        {"gather_rows", 1},
                                                        {"gather_rows_into", 14},
                                                        {"gemm", 42},
                                                        {"gru_gates", 1},
                                                        {"gru_gates_backward", 1},
                                                        {"mask_rows", 2},
                                                        {"merge_heads", 4},
                                                        {"relu", 2},
                                                        {"relu_backward", 2},
                                                        {"scatter_add_rows", 2},
                                                        {"scatter_add_rows_from", 1},
                                                        {"scatter_rows", 4},
                                                        {"split_heads", 4},
                                                        {"spread_rows", 1},
                                                        {"sum_rows_into", 3},
                                                        {"tgat_attend", 1},
                                                        {"tgat_attend_backward", 1},
                                                        {"time_encode", 1},
                                                        {"time_encode_backward", 1}}));
  EXPECT_EQ(total, 133);
}

}  // namespace
}  // namespace halo
