// TGN training: the whole batch's gradients (memory update through the GRU, time encoding,
// attention over neighbours, predictor) against finite differences, and the leakage rule.
#include "halo/runtime/tgn.h"

#include <gtest/gtest.h>

#include <fstream>

#include "../test_util.h"
#include "halo/graph/formats.h"

namespace halo {
namespace {
using test::TempDir;

// The first `events` events of the bundled UCI messages, as a temporal dataset.
std::filesystem::path uci_prefix(const TempDir& t, int events) {
  std::ifstream in(test::bundled("uci-messages/graph.txt"));
  std::ofstream out(t / "uci.txt");
  std::string line;
  for (int i = 0; i < events + 2 && std::getline(in, line); ++i) out << line << "\n";  // 2 comment lines
  out.close();
  ConvertOptions o;
  o.format = Format::kKonect;
  convert(t / "uci.txt", t / "uci", o);
  return t / "uci";
}

TEST(Tgn, BatchGradientsMatchFiniteDifferences) {
  TempDir t;
  const auto ds = uci_prefix(t, 400);
  TgnOptions o;
  o.memory_dim = 6;
  o.embed_dim = 5;
  o.time_dim = 4;
  o.neighbors = 3;
  o.batch_size = 40;
  o.lr = 1e-2f;
  EXPECT_LT(tgn_gradient_check(ds, o, 4), 3e-2);
}

// A batch's predictions depend only on earlier batches: changing other events of the batch, or
// any later event, leaves every other prediction of the batch bit for bit the same; changing an
// event of the previous batch does not (so the test can tell).
TEST(Tgn, ABatchNeverSeesItsOwnEvents) {
  TgnOptions o;
  o.memory_dim = 8;
  o.embed_dim = 8;
  o.time_dim = 8;
  o.neighbors = 4;
  o.batch_size = 20;
  o.lr = 1e-2f;
  const std::int64_t nodes = 30, events = 200, batch = 5;
  std::vector<NodeId> src, dst;
  std::vector<double> time;
  for (std::int64_t e = 0; e < events; ++e) {
    src.push_back(NodeId((e * 7) % nodes));
    dst.push_back(NodeId((e * 11 + 3) % nodes));
    time.push_back(double(e / 3));  // ties inside batches
  }
  const std::vector<float> base = tgn_batch_scores(nodes, src, dst, time, o, batch);
  ASSERT_EQ(base.size(), 20u);
  // Rewire the batch's last event and every later one.
  auto s2 = src, d2 = dst;
  for (std::int64_t e = batch * 20 + 19; e < events; ++e) {
    s2[std::size_t(e)] = NodeId((e * 13 + 1) % nodes);
    d2[std::size_t(e)] = NodeId((e * 5 + 2) % nodes);
  }
  const std::vector<float> other = tgn_batch_scores(nodes, s2, d2, time, o, batch);
  for (std::size_t i = 0; i + 1 < base.size(); ++i) EXPECT_EQ(base[i], other[i]) << "event " << i << " of the batch";
  // Control: an event of the previous batch does change them.
  auto s3 = src;
  s3[std::size_t(batch * 20 - 1)] = NodeId((src[std::size_t(batch * 20 - 1)] + 1) % nodes);
  const std::vector<float> earlier = tgn_batch_scores(nodes, s3, dst, time, o, batch);
  bool changed = false;
  for (std::size_t i = 0; i < base.size(); ++i) changed = changed || base[i] != earlier[i];
  EXPECT_TRUE(changed);
}

}  // namespace
}  // namespace halo
