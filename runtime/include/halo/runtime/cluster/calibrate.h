// `halo train ... --calibrate TABLE`: every rank of the job measures, on its own node, what an
// epoch of the model costs it per owned row and per stored nonzero, and how fast it moves bytes
// to every other rank; rank 0 writes the speed table that `halo partition --part-weights
// auto=TABLE` sizes the parts with (partition/speed.h has the model the figures feed).
#pragma once

#include <cstddef>
#include <cstdint>

#include "halo/partition/speed.h"
#include "halo/runtime/comm/comm.h"
#include "halo/runtime/train/trainer.h"

namespace halo {

struct CalibrateOptions {
  // Owned rows of the synthetic graphs the model is timed on (a quarter as many halo rows come
  // with them); large enough that an epoch spans many CPU-quota periods of a throttled node.
  std::int64_t rows = 32768;
  int epochs = 4;  // timed training steps per graph, after one untimed first step
  // Bytes sent to each peer per link measurement (HALO_CALIBRATE_LINK_MB): a typical halo's
  // order of magnitude, so that per-message latency is under 1% of the time at 10 Gbit/s.
  std::size_t link_bytes = std::size_t(16) << 20;
  int link_repeats = 5;  // the fastest is kept
};

// Collective over comm: times the training step (forward and backward, as the trainer runs it:
// dropout, batch norm, the exchange's widths, the static first layer) of opt's model with `in`
// inputs and `out` outputs on two synthetic graphs of degrees around `degree` (the dataset's
// mean), fits seconds = row_s * rows + nonzero_s * nonzeros, counts the bytes one halo row moves
// per epoch, and measures every link: the ranks pair up round by round (every pair once, the
// pairs of a round together) and swap link_bytes both ways. Returns the whole table on rank 0
// (links made symmetric: the faster of the two measurements of each pair), an empty one elsewhere.
// CPU backend only; ParamError otherwise.
SpeedTable calibrate_speed(Communicator& comm, const TrainOptions& opt, std::int64_t in,
                           std::int64_t out, double degree, const CalibrateOptions& c = {});

}  // namespace halo
