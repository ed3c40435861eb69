// Parts sized by measured speed: the speed table `halo train --calibrate` writes (one entry per
// rank of the job that will train on the parts), the model of a part's epoch time it feeds, and
// the search for part weights under that model (`halo partition --part-weights auto=TABLE`).
//
// The model (docs/PARTITIONING.md, "Parts sized by measured speed"): part i, trained by rank i,
// spends per training epoch
//   compute_i = row_s_i * N_i + nonzero_s_i * E_i
//   comm_i    = sum over peers j of (recv_ij + send_ij) * halo_row_bytes / 2 / link_ij
// with N_i its owned rows, E_i its stored nonzeros, recv_ij / send_ij the rows it receives from
// and sends to part j, halo_row_bytes what one halo row moves in an epoch (forward rows plus
// backward gradients, every exchanged layer) and link_ij the bytes per second measured between
// ranks i and j in each direction at once. The epoch takes the slowest part's compute + comm
// (the gradient all-reduce waits for it); overlap of rows in flight with inner rows' work is not
// counted, so the model errs on the side of the exchange.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "halo/partition/partition.h"
#include "halo/partition/quality.h"

namespace halo {

// One rank's measured speed.
struct RankSpeed {
  std::string host;                      // where it was measured (informational)
  int threads = 1;                       // OpenMP threads it ran with
  double row_s = 0;                      // seconds per owned row per training epoch
  double nonzero_s = 0;                  // seconds per stored nonzero per training epoch
  std::vector<double> link_bytes_per_s;  // to each rank, both directions at once (own entry 0)
};

// A rank's entry of the table, as the table file holds it.
nlohmann::json to_json(const RankSpeed& r);

struct SpeedTable {
  nlohmann::json model;       // the model and widths it was measured for (recorded, not read)
  double halo_row_bytes = 0;  // bytes one halo row moves per training epoch, both directions
  std::vector<RankSpeed> ranks;
  // The table as `halo train --calibrate` writes it (format "halo-speed-table", version 1).
  nlohmann::json to_json() const;
};

// Reads a speed table; InputError "FILE: WHAT" naming the field on anything malformed (wrong
// format, a missing or non-positive figure, a link row of the wrong length).
SpeedTable read_speed_table(const std::filesystem::path& file);
// The table, checked as read_speed_table checks a file; InputError naming `source`.
SpeedTable speed_table_from_json(const nlohmann::json& j, const std::string& source);

// A part's predicted seconds per training epoch, by the model above.
struct PartTime {
  double compute_s = 0, comm_s = 0;
  double total() const { return compute_s + comm_s; }
};

// Every part's predicted time for the partition q measured (q.k == table.ranks.size()).
std::vector<PartTime> predict_part_times(const Quality& q, const SpeedTable& table);

// What the search found: the weights it settled on, every round's figures.
struct SpeedSearch {
  std::vector<double> weights;  // the chosen partition's target shares (sum 1)
  Quality quality;              // its measure (with these weights as targets)
  std::vector<PartTime> times;  // its predicted part times
  nlohmann::json rounds;        // [{weights, predicted_s: [...], epoch_s}] in search order
};

// Partitions d by options (method, balance, seed...; part_weights are set by the search) so that
// the slowest part is as fast as the model predicts it can be: starts from shares proportional to
// each rank's speed on an average row, then reweights each part by the mean predicted time over
// its own and partitions again, `rounds` times, keeping the partition with the lowest predicted
// epoch. Deterministic. ParamError when table has another number of ranks than options.k.
std::vector<PartId> partition_for_speed(const GraphDataset& d, const PartitionOptions& options,
                                        const SpeedTable& table, SpeedSearch* found,
                                        MetisPtype* scheme = nullptr, int rounds = 4);

}  // namespace halo
