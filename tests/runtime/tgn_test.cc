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

}  // namespace
}  // namespace halo
