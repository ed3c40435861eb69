// Per-rank peak host memory of `halo train` (CPU backend, FP32, no --profile), predicted from the
// shape of the rank's part and the model without training: the sum of every allocation that is
// live at the peak (the first training epoch onward), each term derived from the code that makes
// it, plus one measured constant for the process itself. Mapped part files count by the bytes
// training touches: a touched file page is resident and counts in RSS like heap memory.
//
//   N = owned rows, H = halo rows, A = N + H, E = local stored nonzeros, S = send-list rows,
//   F = features, W = hidden width, C = output width (classes, or tasks), L = layers.
//
// For a GCN with an exact f32 exchange, dropout, no batch norm, no input dropout (the term by term
// derivation is in memory_model.cc and docs/BENCHMARKS.md "Per-rank memory model"):
//   bytes = 4 N F                               features.bin, mapped and read
//         + 8 N + 4 E + 4 A + 4 N + 4 N + 4 R + 4 S   offsets, indices, degrees, global ids,
//                                               labels, split rows R, send lists (mapped)
//         + 16 (E + N) + 8 (N + A)              the operator and its transpose (8 (E + N) + 8 N
//                                               on a whole undirected graph: its own transpose)
//         + 4 A W (L - 1) + 4 N F [F < W] + 4 N C
//                                               kept: one A x W slab per hidden layer, A X of a
//                                               first layer that widens, the logits
//         + 4 A W + 4 A C + 4 N C               gradients between layers, the last layer's
//                                               slab, d(logits)
//         + 4 S (w_fwd + w_bwd) + growth        send and receive buffers at their widest (K > 1),
//                                               plus a buffer's old block while it grows
//         + 24 P (+ 4 P if K > 1) + 8 T         weights, Adam, best model (P parameters), the
//                                               loss's per-row vector (T training rows)
//         + 12 MiB (+ 9 MiB under mpirun)       the process itself (measured)
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "halo/gnn/temporal/tgn.h"
#include "halo/runtime/train/trainer.h"

namespace halo {

// What one rank holds: its part (PARTS/part-r), or the whole dataset for one process.
struct RankShape {
  std::int64_t owned = 0;       // N: rows this rank owns
  std::int64_t halo = 0;        // H: rows of other parts its rows read
  std::int64_t nnz = 0;         // E: stored nonzeros of its local CSR (owned rows, no self-loops)
  std::int64_t send_rows = 0;   // S: entries of its send lists (rows the peers need)
  std::int64_t features = 0;    // F
  std::int64_t label_cols = 1;  // 1, or the tasks of a multi-label dataset
  // Local ids in the chosen split's files (train, and train + valid + test): the rows the loss
  // and the metrics read.
  std::int64_t train_rows = 0, split_rows = 0;
  int ranks = 1;                  // K of the job; 1 = no exchange, no gradient all-reduce
  int rank = 0;                   // rank 0 also gathers predictions
  bool part = true;               // a PARTS part (mapped degrees and global ids) or a dataset
  bool directed = false;          // arcs one way: GCN's operator is not its own transpose
  std::int64_t global_nodes = 0;  // of the whole graph (rank 0's prediction buffers)
  // The largest split row set of the whole graph (rank 0 gathers multi-label scores of it).
  std::int64_t global_split_rows = 0;
};

// What the options make the trainer allocate.
struct ModelShape {
  bool sage = false;  // GraphSAGE-mean (else GCN)
  bool gat = false;   // GAT (then heads, out_heads and residual count)
  int heads = 1, out_heads = 1;
  bool residual = false;
  int layers = 2;            // L
  std::int64_t hidden = 16;  // W
  std::int64_t out = 0;      // C: classes, or tasks (multi-label)
  bool multilabel = false;
  float dropout = 0.5f;
  bool input_dropout = false, batch_norm = false, norm_features = false;
  bool halo_bf16 = false;       // --halo-dtype bf16
  int halo_staleness = 0;       // --halo-staleness
  bool halo_smoothing = false;  // --halo-smoothing above 0
  bool predictions = false;     // --predictions-out
};

// Bytes per term; total() is the predicted peak resident set of the rank.
struct MemoryEstimate {
  std::int64_t features = 0;  // input features: mapped rows (+ a row-normalised copy)
  std::int64_t graph =
      0;  // the part's other mapped arrays (CSR, degrees, ids, labels, splits, send lists)
  std::int64_t op = 0;           // the normalised operator and its transpose
  std::int64_t activations = 0;  // what forward keeps: saved slabs, A X, dropout masks, logits
  std::int64_t gradients = 0;    // gradient slabs between layers, the last layer's slab, d(logits)
  std::int64_t exchange = 0;     // halo exchange payload buffers
  std::int64_t weights =
      0;  // parameters, their gradients and Adam moments, all-reduce buffer, best model
  std::int64_t transient =
      0;  // the largest short-lived buffer live at the peak (loss, reductions, metrics)
  std::int64_t predictions = 0;  // --predictions-out buffers (rank 0 gathers the graph)
  std::int64_t overhead = 0;     // the process: code, libraries, runtimes (measured constant)
  std::int64_t total() const;
  // (name, bytes) in the order above, for printing.
  std::vector<std::pair<std::string, std::int64_t>> terms() const;
};

// The measured constant parts of `overhead` (see memory_model.cc for how they were measured).
std::int64_t process_overhead_bytes(int ranks);

// Predicted peak RSS of one rank of `halo train` on the CPU in FP32: the allocations live at the
// peak, term by term. Pure; throws ParamError on negative sizes or layers < 1.
MemoryEstimate estimate_rank_memory(const RankShape& rank, const ModelShape& model);

// The model the trainer builds for these options, with `out` outputs (classes, or the tasks of a
// multi-label dataset). Pure; the options' own checks are TrainOptions::check's.
ModelShape model_shape(const TrainOptions& opt, bool multilabel, std::int64_t out);

// estimate_rank_memory's total, sets *largest to its largest term; when the sizes are so large
// that its int64 arithmetic could overflow, a float lower bound of the weights and slabs alone.
double predicted_rank_bytes(const RankShape& rank, const ModelShape& model, std::string* largest);

// Refuses, before anything large is allocated, a run whose predicted peak (the memory model's,
// CPU backend) exceeds twice what this process can get: clearly impossible, not a close call
// (the model is exact to a few percent, and the kernel may still reclaim caches). A close call
// trains and, if it fails, fails with the message of the trainer's bad_alloc handler. Throws
// ParamError naming `source` or the model's width; HALO_MEMORY_CHECK=0 skips the check (to let
// the kernel decide, as the OOM tests do).
void refuse_impossible_memory(const RankShape& rank, const ModelShape& model,
                              const std::string& source);

// What this process may still allocate before the machine or its memory cgroup runs out.
struct AvailableMemory {
  std::int64_t bytes = 0;  // 0: unknown (neither /proc/meminfo nor a cgroup limit readable)
  std::string source;      // "MemAvailable" or "its memory cgroup's limit", for messages
};

// The smallest of the machine's MemAvailable, what this process's memory cgroup limit (the
// smallest on its path, v1 or v2) leaves above the cgroup's usage less its page cache, and what
// its address-space limit (RLIMIT_AS, ulimit -v) leaves above its mapped size. Reads a few /proc
// and /sys files; never throws.
AvailableMemory available_memory();

// The most threads a --threads flag (or OMP_NUM_THREADS) may ask for: above the hardware threads
// of the largest single machines (384-512 on today's two-socket servers, so oversubscribing them
// stays possible), and far below the count at which libgomp's team start, which keeps per-thread
// start data on the calling thread's stack, overflows an 8 MiB stack (~100,000: a SIGSEGV).
constexpr int kMaxThreads = 4096;

// The bounds of the count flags of `halo train` and `halo tgn train`, shared by the command line
// and the options' checks: far above any published run (hundreds of epochs, 10 runs, TGB's 999
// negatives), low enough that a typo is refused rather than an allocation or a run of years.
constexpr int kMaxEpochs = 1000000;                 // --epochs, --patience, --*-every
constexpr int kMaxRuns = 10000;                     // --runs
constexpr std::int64_t kMaxBatchSize = 1 << 24;     // tgn --batch-size (events)
constexpr std::int64_t kMaxTgnWidth = 65536;        // tgn --memory-dim, --embed-dim, --time-dim
constexpr int kMaxTgnNeighbors = 4096;              // tgn --neighbors
constexpr std::int64_t kMaxEvalNegatives = 100000;  // tgn --eval-negatives
// --lr in (0, 1e30]: a rate sizes nothing, and one too large makes the loss non-finite, which
// training detects and reports (BadTraining drives that with 1e10 and 1e30).
constexpr double kMaxLearningRate = 1e30;
constexpr double kMaxWeightDecay = 1000;  // --weight-decay in [0, kMaxWeightDecay]

// Throws ParamError naming `flag` unless threads is in [0, kMaxThreads] (0: OpenMP's default,
// which OMP_NUM_THREADS sets and must then be in [1, kMaxThreads] too) and this process can start
// that many threads now (ulimit -u and -v, a cgroup's pids.max): it starts them once, with the
// stack size OpenMP will give them, and joins them, so that libgomp never fails mid-run with its
// own raw lines. A count verified once is not started again.
void check_threads(int threads, const std::string& flag);

struct TgnOptions;

// What sizes a `halo tgn train` run's memory besides its options: the stream and its split.
struct TgnStreamShape {
  std::int64_t nodes = 0, events = 0, edge_dim = 0;
  std::int64_t train_events = 0;  // training events used (held-out nodes' events left out)
  std::int64_t valid_events = 0, test_events = 0;
  std::int64_t other_event_bytes = 0;  // per event, the dataset's other arrays (weight, labels)
};

// The peak resident memory of one rank of `halo tgn train` on the CPU, by the allocation each
// term stands for, each derived from the code that allocates it (memory_model.cc names them)
// plus one measured constant for the process; docs/BENCHMARKS.md "TGN memory model" has the
// derivation and the measurements. Batch buffers are sized for the widest batch (every slot of
// every query holding a neighbour, all distinct up to the node count), so a stream whose batches
// reach fewer distinct neighbours lands below the prediction.
struct TgnMemoryEstimate {
  // The events, times, edge features and the dataset's other per-event arrays (mapped, read).
  std::int64_t stream = 0;
  // The two temporal indexes (training events, every event) and their samplers' pointers, the
  // split's per-event and per-node flags and the training event list.
  std::int64_t indexes = 0;
  // Per node: the memory row and its last update, the stored messages (memory of both ends, edge
  // features, time, count, flag; every message's time with --aggregator mean), the model's
  // per-node row maps.
  std::int64_t node_state = 0;
  // Parameters (GRU, attention, link predictor, time encoding and projection), each with its
  // gradient and Adam's two moments (4 floats each, every parameter), and the all-reduce buffer.
  std::int64_t weights = 0;
  // One batch's buffers at their widest, kept between batches: forward ones at the larger of a
  // training and an evaluation batch (2 + --eval-negatives queries per event), backward ones at
  // a training batch.
  std::int64_t batch = 0;
  // Evaluation's scores: every validation and test event's scores, labels and record.
  std::int64_t evaluation = 0;
  std::int64_t overhead = 0;  // the process: code, libraries, thread stacks (measured)
  std::int64_t total() const;
  // "weights", "node state", "batch buffers", "stream", "indexes" or "evaluation": the largest
  // term the options or the dataset size.
  const char* largest() const;
  // (name, bytes) in the order above, for printing.
  std::vector<std::pair<std::string, std::int64_t>> terms() const;
};

// The shape of a stream of `nodes` nodes and `events` events with `edge_dim` features each,
// split as chronological_split does by time quantiles (70% / 85%), with every training event
// used: for estimates made before the split is computed.
TgnStreamShape tgn_stream_shape(std::int64_t nodes, std::int64_t events, std::int64_t edge_dim);

// The estimate for one of `ranks` ranks (an exact-parallel rank embeds its slice of each batch,
// a segmented one whole batches). Pure; sizes in double beyond int64 (clamped).
TgnMemoryEstimate estimate_tgn_memory(const TgnStreamShape& stream, const TgnOptions& opt,
                                      int ranks);

// The line that names what a TGN run of this estimate cannot hold: the flags that size its
// largest term, the bytes, and what to lower ("--memory-dim 65536 ...: the model's weights need
// about 619 GiB").
std::string tgn_memory_message(const TgnMemoryEstimate& est, const TgnOptions& opt,
                               std::int64_t nodes, const std::string& dataset);

// Refuses, before the model is built, a TGN run whose estimate exceeds twice what the process
// can get (available_memory), as refuse_impossible_memory does for halo train: ParamError naming
// the largest allocation and the flags behind it. HALO_MEMORY_CHECK=0 skips it.
void refuse_impossible_tgn_memory(const TgnStreamShape& stream, const TgnOptions& opt, int ranks,
                                  const std::string& dataset);

// The GPU memory of one rank of `halo tgn train --device cuda`, by term: halo's own allocations,
// as peak_gpu_mb counts them (the CUDA context and the libraries' workspaces are not included,
// which is why a placement must fit within 90% of the free memory). Each term is derived from
// the code that allocates it (memory_model.cc names the members).
struct TgnGpuEstimate {
  std::int64_t weights = 0;     // parameters with gradients and Adam's moments; static memory
  std::int64_t node_state = 0;  // memory rows and message tables (--memory-on device)
  std::int64_t stream = 0;      // the events' edge features (--memory-on device)
  std::int64_t batch = 0;       // one batch's buffers at their widest (an upper bound)
  std::int64_t staged = 0;      // one batch's staged rows of the node state (--memory-on host)
  std::int64_t total() const;
  // (name, bytes) in the order above, for printing.
  std::vector<std::pair<std::string, std::int64_t>> terms() const;
};

// The estimate for one of `ranks` ranks with the node state in `memory`. Pure.
TgnGpuEstimate estimate_tgn_gpu_memory(const TgnStreamShape& stream, const TgnOptions& opt,
                                       int ranks, TgnMemoryOn memory);

// Where --memory-on puts the node state of a run on a GPU with `free_bytes` free, shared by
// `sharing` ranks: device when asked, or for auto when its estimate fits (90% of the free bytes
// over the sharing ranks), host otherwise. ParamError, one line naming the bytes and what to
// change, when the asked placement (for auto: either) does not fit. free_bytes 0 (unknown):
// every placement fits. HALO_MEMORY_CHECK=0 skips the refusal (auto then keeps device).
TgnMemoryOn choose_tgn_memory(const TgnStreamShape& stream, const TgnOptions& opt, int ranks,
                              std::size_t free_bytes, int sharing, const std::string& dataset);

// Every rank of a `halo train PATH` job and the model its options make.
struct JobShape {
  std::vector<RankShape> ranks;  // one per part of a PARTS folder; one for a dataset
  ModelShape model;
};

// The shapes `halo train PATH` with these options would train on (PATH: a PARTS folder or a
// native dataset), read from the files' headers and meta.json only (no checksum, no payload
// touched, no MPI). Throws what the trainer would for a missing split, labels or features, or
// bad options.
JobShape job_shape(const std::filesystem::path& path, const TrainOptions& opt);

}  // namespace halo
