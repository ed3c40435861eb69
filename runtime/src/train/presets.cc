// The trainer's options: their checks, the default split and the device choice (trainer.h), the
// outputs' check, the preset table and the HALO_INJECT_FAULT parser (presets.h).
#include "halo/runtime/train/presets.h"

#include <cstdint>
#include <stdexcept>

#include "halo/graph/dataset.h"
#include "halo/graph/enum_names.h"
#include "halo/graph/error.h"
#include "halo/graph/staging.h"
#include "halo/runtime/memory/memory_model.h"
#include "halo/runtime/train/checkpoint.h"
#include "halo/runtime/train/trainer.h"

namespace halo {

std::string default_split(const std::vector<Split>& splits, const std::string& partitioned_for) {
  for (const Split& s : splits)
    if (s.name == "public") return "public";
  if (!partitioned_for.empty()) return partitioned_for;
  return splits.empty() ? "" : splits[0].name;
}

ParamError missing_split(const std::string& where, const std::string& name,
                         const std::vector<Split>& splits) {
  if (splits.empty())
    return ParamError(where + ": " + (name.empty() ? "" : "no split named '" + name + "': ") +
                      "the dataset has no split (train, valid and test node sets) to train and "
                      "evaluate on; write it with one: halo convert from a format with one, or "
                      "in Python write_dataset / from_pyg / from_dgl with splits={'NAME': "
                      "{'train': ..., 'valid': ..., 'test': ...}}");
  std::string names;
  for (const Split& s : splits) names += (names.empty() ? "" : ", ") + s.name;
  return ParamError(where + ": no split named '" + name + "' (it has " + names + ")");
}

// Refuses before any work (staging.h): a run must not end hours later on a --predictions-out it
// cannot write. Rank 0 writes the log and predictions; every rank writes its checkpoint folder.
void check_train_outputs(const TrainOptions& opt, const std::filesystem::path& input, bool lead) {
  if (lead && !opt.log.empty()) resolve_stream_output(opt.log, {input});
  if (lead && !opt.predictions_out.empty()) resolve_file_output(opt.predictions_out, {input});
  if (!opt.checkpoint.empty()) check_output_folder(opt.checkpoint, {input});
  check_outside_checkpoint(opt.log, "--log", opt.checkpoint);
  check_outside_checkpoint(opt.predictions_out, "--predictions-out", opt.checkpoint);
}

namespace {
constexpr EnumName<DeviceChoice> kDeviceChoices[] = {
    {DeviceChoice::kCpu, "cpu"}, {DeviceChoice::kCuda, "cuda"}, {DeviceChoice::kAuto, "auto"}};
}  // namespace

// Worded as a range check without the value, unlike the other enums' "unknown --flag 'x'": kept
// as users and scripts have seen it.
DeviceChoice parse_device_choice(std::string_view s) {
  if (const auto* e = find_enum(kDeviceChoices, s)) return e->value;
  throw ParamError("--device must be " + enum_choices(kDeviceChoices));
}

const char* to_string(DeviceChoice d) { return enum_name(kDeviceChoices, d); }

void TrainOptions::check() const {
  model.check();
  const auto in = [](std::int64_t v, std::int64_t lo, std::int64_t hi, const char* flag) {
    if (v < lo || v > hi)
      throw ParamError(std::string(flag) + " must be in [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "], found " + std::to_string(v));
  };
  static_assert(kMaxLearningRate == 1e30 && kMaxWeightDecay == 1000, "the messages name them");
  // lr is a float, and float(1e30) is slightly above 1e30: compare in float.
  if (!(lr > 0 && lr <= float(kMaxLearningRate))) throw ParamError("--lr must be in (0, 1e+30]");
  if (!(weight_decay >= 0 && weight_decay <= kMaxWeightDecay))
    throw ParamError("--weight-decay must be in [0, 1000]");
  in(epochs, 1, kMaxEpochs, "--epochs");
  in(runs, 1, kMaxRuns, "--runs");
  in(eval_every, 1, kMaxEpochs, "--eval-every");
  in(checkpoint_every, 1, kMaxEpochs, "--checkpoint-every");
  check_threads(threads, "--threads");
  if (resume && checkpoint.empty()) throw ParamError("--resume needs --checkpoint DIR");
  if (force && checkpoint.empty()) throw ParamError("--force needs --checkpoint DIR");
  if (force && resume)
    throw ParamError(
        "--force starts a new run over an earlier one, --resume continues it: not both");
  if (halo_staleness != 0 && halo_staleness != 1)
    throw ParamError("--halo-staleness must be 0 or 1");
  if (!(halo_smoothing >= 0.f && halo_smoothing < 1.f))
    throw ParamError("--halo-smoothing must be in [0, 1)");
  if (bf16_kernel != Bf16Kernel::kAuto && matmul_precision != MatmulPrecision::kBf16)
    throw ParamError(std::string("--bf16-kernel ") + to_string(bf16_kernel) +
                     " needs --matmul-precision bf16");
  if (bf16_kernel != Bf16Kernel::kAuto && device == DeviceChoice::kCuda)
    throw ParamError(
        "--bf16-kernel chooses the CPU's bf16 kernel; --device cuda computes bf16 on tensor "
        "cores");
  if (halo_smoothing > 0.f && halo_staleness == 0)
    throw ParamError("--halo-smoothing smooths stale halo rows: it needs --halo-staleness 1");
}

TrainOptions::Fault parse_fault(const std::string& spec) {
  TrainOptions::Fault f;
  const auto bad = [&] {
    return ParamError("HALO_INJECT_FAULT='" + spec +
                      "': expected RANK:EPOCH[:throw|kill|hang|alloc]");
  };
  const std::size_t a = spec.find(':');
  if (a == std::string::npos) throw bad();
  const std::size_t b = spec.find(':', a + 1);
  try {
    std::size_t used = 0;
    f.rank = std::stoi(spec.substr(0, a), &used);
    if (used != a) throw bad();
    const std::string e =
        spec.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
    f.epoch = std::stoi(e, &used);
    if (used != e.size()) throw bad();
  } catch (const std::logic_error&) {
    throw bad();
  }
  if (b != std::string::npos) {
    const std::string mode = spec.substr(b + 1);
    if (mode == "kill")
      f.mode = FaultMode::kKill;
    else if (mode == "hang")
      f.mode = FaultMode::kHang;
    else if (mode == "alloc")
      f.mode = FaultMode::kAlloc;
    else if (mode != "throw")
      throw bad();
  }
  if (f.rank < 0 || f.epoch < 1) throw bad();
  return f;
}

namespace {
// A published configuration; every field is set on apply, so presets never leak into each other.
struct Preset {
  const char* name;
  ModelKind kind;
  int layers;
  std::int64_t hidden;
  float dropout;
  bool input_dropout, batch_norm;
  float weight_decay;
  bool decay_first_layer_only, norm_features;
  int epochs;
  const char* split;  // "" = the dataset's default
  float lr = 0.01f;
  // GAT: hidden heads, output heads, attention dropout, residual.
  int heads = 1, out_heads = 1;
  float attn_dropout = 0.f;
  bool residual = false;
};
constexpr Preset kPresets[] = {
    // Kipf & Welling, ICLR 2017: 2 x 16, dropout also on the input, L2 on the first layer only.
    {"planetoid-gcn", ModelKind::kGcn, 2, 16, 0.5f, true, false, 5e-4f, true, true, 200, "public"},
    // Velickovic et al., ICLR 2018 (Cora): 8 heads x 8 hidden, 1 output head, dropout 0.6 on
    // every layer's input and on the attention, lr 0.005, L2 5e-4 on every parameter. The paper
    // stops at 100 epochs without a better validation; halo keeps the best-validation epoch of
    // a fixed budget instead.
    {"planetoid-gat", ModelKind::kGat, 2, 8, 0.6f, true, false, 5e-4f, false, true, 500, "public",
     0.005f, 8, 1, 0.6f, false},
    // OGB's reference GCNs.
    {"ogbn-arxiv-gcn", ModelKind::kGcn, 3, 256, 0.5f, false, true, 0.f, false, false, 500, ""},
    // DGL's ogbn-arxiv GAT example's shape: 3 layers of 3 heads x 250, residual, output heads
    // averaged (without its batch norm, label reuse and edge dropout).
    {"ogbn-arxiv-gat", ModelKind::kGat, 3, 250, 0.5f, false, false, 0.f, false, false, 500, "",
     0.005f, 3, 3, 0.f, true},
    {"ogbn-products-gcn", ModelKind::kGcn, 3, 256, 0.5f, false, false, 0.f, false, false, 300, ""},
    {"ogbn-proteins-gcn", ModelKind::kGcn, 3, 256, 0.f, false, false, 0.f, false, false, 1000, ""},
};
}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> out;
  for (const Preset& p : kPresets) out.push_back(p.name);
  return out;
}

void apply_preset(const std::string& name, TrainOptions& o) {
  for (const Preset& p : kPresets) {
    if (name != p.name) continue;
    o.model.kind = p.kind;
    o.model.layers = p.layers;
    o.model.hidden = p.hidden;
    o.model.dropout = p.dropout;
    o.model.input_dropout = p.input_dropout;
    o.model.batch_norm = p.batch_norm;
    o.lr = p.lr;
    o.model.heads = p.heads;
    o.model.out_heads = p.out_heads;
    o.model.attn_dropout = p.attn_dropout;
    o.model.residual = p.residual;
    o.weight_decay = p.weight_decay;
    o.decay_first_layer_only = p.decay_first_layer_only;
    o.norm_features = p.norm_features;
    o.epochs = p.epochs;
    o.split = p.split;
    return;
  }
  std::string known;
  for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw ParamError("unknown --preset '" + name + "' (known: " + known + ")");
}

}  // namespace halo
