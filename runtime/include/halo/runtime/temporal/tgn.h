// Memory-based temporal GNN training (TGN, Rossi et al. 2020) on a temporal dataset: node
// memory updated by a GRU from the messages of earlier batches, temporal graph attention over the
// k most recent neighbours, an MLP link predictor trained with BCE against one uniform negative
// per event, chronological split with TGN's inductive (new-node) evaluation, AP and ROC-AUC.
// `edgebank` is the memoryless floor (predict an edge iff it was seen before).
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "halo/gnn/temporal/tgn.h"
#include "halo/graph/types.h"
#include "halo/runtime/memory/memory_model.h"
#include "halo/runtime/train/trainer.h"

namespace halo {

class Communicator;

// The --model of `halo tgn train`: TGN, JODIE (TGN with the time embedding) or EdgeBank.
enum class TgnModel { kTgn, kJodie, kEdgebank };
// A node's messages between two memory updates: the latest, or their mean.
enum class TgnAggregator { kLast, kMean };
// How ranks share a run: one replicated model, or a memory per time segment.
enum class TgnParallel { kExact, kSegments };
// Which earlier events the attention sees: before each event, or before its batch.
enum class TgnNeighborsBefore { kEvent, kBatch };
// Where the node state lives on a GPU (--memory-on): decided by the memory model, or as asked.
enum class TgnMemoryChoice { kAuto, kDevice, kHost };

// Each parse takes the CLI spelling and throws ParamError naming the expected ones; each
// to_string gives the spelling back, as checkpoint keys and messages record it.
TgnModel parse_tgn_model(std::string_view s);                       // tgn | jodie | edgebank
TgnEmbedding parse_tgn_embedding(std::string_view s);               // attn | identity | time
TgnAggregator parse_tgn_aggregator(std::string_view s);             // last | mean
TgnParallel parse_tgn_parallel(std::string_view s);                 // exact | segments
TgnNeighborsBefore parse_tgn_neighbors_before(std::string_view s);  // event | batch
TgnMemoryChoice parse_tgn_memory_choice(std::string_view s);        // auto | device | host
const char* to_string(TgnModel m);
const char* to_string(TgnEmbedding e);
const char* to_string(TgnAggregator a);
const char* to_string(TgnParallel p);
const char* to_string(TgnNeighborsBefore n);
const char* to_string(TgnMemoryChoice m);
const char* to_string(TgnMemoryOn m);  // device | host

struct TgnOptions {
  TgnModel model = TgnModel::kTgn;
  // How memories become embeddings: attn (TGN's temporal graph attention over neighbours),
  // identity (the memory itself) or time (JODIE's projection: memory ⊙ (1 + w δ + b), δ the
  // standardised time since the node's memory last changed). identity and time use the memory
  // width as the embedding width.
  TgnEmbedding embedding = TgnEmbedding::kAttention;
  // A node's messages between two of its memory updates: last (the latest wins, TGN's default)
  // or mean (their average, time encodings included).
  TgnAggregator aggregator = TgnAggregator::kLast;
  // Across ranks: exact (every rank takes a slice of every batch against one replicated memory:
  // the same model as one process) or segments (DistTGL-style: rank r trains on the r-th time
  // segment of the training events with its own memory, gradients averaged; K times fewer
  // steps per epoch, at an accuracy cost the benchmarks measure).
  TgnParallel parallel = TgnParallel::kExact;
  std::int64_t memory_dim = 100, embed_dim = 100, time_dim = 100;
  // DistTGL's static node memory: a learned D-wide row per node next to the dynamic memory in
  // the attention's inputs (gnn/temporal/static_memory.h); 0 = off. --model tgn with attention
  // only. Costs nodes x D x 4 floats (value, gradient, Adam's moments).
  std::int64_t static_memory = 0;
  int neighbors = 10, heads = 2;
  // Which earlier events the attention may see: "event" (TGN's protocol: events strictly before
  // each event's own time, so earlier events of the same batch count) or "batch" (only events
  // before the batch: a batch's own events never change its predictions). The memory is
  // updated per batch either way.
  TgnNeighborsBefore neighbors_before = TgnNeighborsBefore::kEvent;
  std::int64_t batch_size = 200;
  int epochs = 10;
  float lr = 1e-4f;                     // TGN's default
  int patience = 5;                     // epochs without a better validation AP before stopping
  bool learn_time_frequencies = false;  // TGN learns them; fixed is stabler (see tgn.cc)
  std::uint64_t seed = 0;
  int threads = 0;
  // Where TGN and JODIE compute: cpu, cuda (refused without a visible GPU) or auto (cuda when a
  // GPU is visible). EdgeBank runs on the host whatever it says. Not in the checkpoint key: the
  // parameters and Adam's moments are the same floats on either device, so a run may resume on
  // the other one.
  DeviceChoice device = DeviceChoice::kCpu;
  // Where the node memory, last updates, stored messages and the events' edge features live with
  // --device cuda: device (GPU memory), host (host memory; each batch's rows cross PCIe, so a
  // stream whose node state exceeds the GPU still trains) or auto (device when the memory model
  // says it fits the GPU's free memory, host otherwise). The same floats either way (not in the
  // checkpoint key). With --device cpu the state is the host's; host then runs the same staging
  // (for tests). TGN and JODIE only.
  TgnMemoryChoice memory_on = TgnMemoryChoice::kAuto;
  // Throughput runs: train on at most this many events per epoch (0 = all) and skip evaluation.
  std::int64_t max_train_events = 0;
  // Evaluation also ranks each positive against this many uniform negatives (MRR; 0 = off).
  std::int64_t eval_negatives = 0;
  bool skip_eval = false;
  std::filesystem::path log;  // JSON lines
  // Parameters, Adam state and the run's counters after every epoch (rank 0 writes, atomically);
  // resume continues from the newest epoch there, bit for bit as an uninterrupted run.
  std::filesystem::path checkpoint;
  bool resume = false;
  // A fresh run may replace an earlier run's checkpoint in `checkpoint` (refused otherwise).
  bool force = false;
  bool quiet = false;
  // Time every Backend op of the training batches (rank 0) and print the table after the run,
  // with the training time the ops do not account for (the host's bookkeeping).
  bool profile = false;
  void check() const;  // throws ParamError
};

struct TgnSummary {
  // AP and AUC averaged over evaluation batches (TGN's protocol, which the reference figures
  // use); *_pooled: over all events at once.
  double valid_ap = 0, test_ap = 0, test_auc = 0, test_inductive_ap = 0, test_inductive_auc = 0;
  double test_ap_pooled = 0, test_inductive_ap_pooled = 0;
  double test_mrr = 0;  // with eval_negatives > 0
  int best_epoch = 0;
  double events_per_s = 0;  // training events per second (median epoch)
  double peak_rss_mb = 0;   // the largest peak resident memory over the ranks
  double peak_gpu_mb = 0;   // the largest peak GPU memory halo held over the ranks (--device cuda)
  std::string memory_on;    // where the node state lived: device | host (TGN and JODIE)
  int ranks = 1;
  nlohmann::json to_json() const;
};

// `halo tgn split DATASET -o FILE.npz`: the events, the split and the evaluation negatives every
// halo TGN run with this seed uses, for a peer implementation to train and score on exactly the
// same (tools/bench/tgn_pyg.py): src, dst (int64), t (float64), msg (float32, events x edge
// features), nodes, train_end, valid_end (int64 [1]), train_keep, inductive (uint8 per event)
// and eval_neg (int64: each event's fixed evaluation negative).
void write_tgn_split(const std::filesystem::path& dataset, const std::filesystem::path& out,
                     std::uint64_t seed);

// Trains (or, for edgebank, evaluates) on a temporal dataset with the ranks of comm (each rank
// runs this with the same arguments; one process: a LocalCommunicator); epoch lines go to out
// on rank 0.
TgnSummary train_tgn(const std::filesystem::path& dataset, Communicator& comm,
                     const TgnOptions& opt, std::ostream& out);

// The memory model's estimates for one rank of a run: its peak resident memory, and its GPU
// memory with --device cuda for either placement of the node state (--memory-on).
struct TgnMemoryPrediction {
  TgnMemoryEstimate host;
  TgnGpuEstimate gpu_device, gpu_host;
};

// `halo tgn train --dry-run`: the estimates for one of `ranks` ranks of this run, from the
// dataset's sizes and its split (reads the events; builds nothing of the model).
TgnMemoryPrediction predict_tgn_memory(const std::filesystem::path& dataset, const TgnOptions& opt,
                                       int ranks);

// For the leakage test: trains on batches 0 .. batch-1 of the stream (arrays of one time-sorted
// event list), then returns the positive scores of the events of batch `batch`.
std::vector<float> tgn_batch_scores(std::int64_t nodes, const std::vector<NodeId>& src,
                                    const std::vector<NodeId>& dst, const std::vector<double>& time,
                                    const TgnOptions& opt, std::int64_t batch);

// Self-check for the tests: trains `batches` batches of a tiny model on the dataset's first
// events, then compares the analytic gradients of the next batch's loss (memory update, time
// encoding, attention, predictor) with central differences; returns the worst relative error.
// With `only`, of the parameter of that name alone.
double tgn_gradient_check(const std::filesystem::path& dataset, const TgnOptions& opt,
                          std::int64_t batches, const std::string& only = "");

}  // namespace halo
