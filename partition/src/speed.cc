// The speed table, the epoch-time model and the weight search of speed.h.
#include "halo/partition/speed.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "halo/graph/error.h"
#include "halo/graph/input.h"

namespace halo {

namespace {

constexpr const char* kFormat = "halo-speed-table";
constexpr int kVersion = 1;

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw InputError(source + ": " + what);
}

// j[key] as a positive finite number, else InputError naming the field.
double positive(const nlohmann::json& j, const std::string& key, const std::string& where,
                const std::string& source, bool zero_ok = false) {
  if (!j.contains(key) || !j[key].is_number())
    bad(source, where + "\"" + key + "\": expected a number");
  const double v = j[key].get<double>();
  if (!std::isfinite(v) || v < 0 || (!zero_ok && v == 0))
    bad(source, where + "\"" + key + "\": expected a positive number, found " + json_shown(j[key]));
  return v;
}

}  // namespace

nlohmann::json to_json(const RankSpeed& r) {
  return {{"host", r.host},
          {"threads", r.threads},
          {"row_s", r.row_s},
          {"nonzero_s", r.nonzero_s},
          {"link_bytes_per_s", r.link_bytes_per_s}};
}

nlohmann::json SpeedTable::to_json() const {
  nlohmann::json rs = nlohmann::json::array();
  for (const RankSpeed& r : ranks) rs.push_back(halo::to_json(r));
  return {{"format", kFormat},
          {"version", kVersion},
          {"model", model},
          {"halo_row_bytes", halo_row_bytes},
          {"ranks", rs}};
}

SpeedTable speed_table_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object() || j.value("format", std::string()) != kFormat)
    bad(source, std::string("expected a speed table (\"format\": \"") + kFormat +
                    "\", written by halo train --calibrate)");
  if (!j.contains("version") || !j["version"].is_number_integer() ||
      j["version"].get<int>() != kVersion)
    bad(source, "\"version\": expected " + std::to_string(kVersion));
  SpeedTable t;
  t.model = j.value("model", nlohmann::json::object());
  t.halo_row_bytes = positive(j, "halo_row_bytes", "", source, /*zero_ok=*/true);
  if (!j.contains("ranks") || !j["ranks"].is_array() || j["ranks"].empty())
    bad(source, "\"ranks\": expected a non-empty array");
  const std::size_t k = j["ranks"].size();
  for (std::size_t r = 0; r < k; ++r) {
    const nlohmann::json& e = j["ranks"][r];
    const std::string where = "rank " + std::to_string(r) + ": ";
    if (!e.is_object()) bad(source, where + "expected an object");
    RankSpeed s;
    s.host = e.value("host", std::string());
    s.threads = e.value("threads", 1);
    s.row_s = positive(e, "row_s", where, source);
    s.nonzero_s = positive(e, "nonzero_s", where, source, /*zero_ok=*/true);
    if (!e.contains("link_bytes_per_s") || !e["link_bytes_per_s"].is_array() ||
        e["link_bytes_per_s"].size() != k)
      bad(source, where + "\"link_bytes_per_s\": expected " + std::to_string(k) + " numbers");
    for (std::size_t p = 0; p < k; ++p) {
      const nlohmann::json& v = e["link_bytes_per_s"][p];
      const double x = v.is_number() ? v.get<double>() : -1;
      if (!std::isfinite(x) || x < 0 || (p != r && x == 0))
        bad(source, where + "\"link_bytes_per_s\"[" + std::to_string(p) +
                        "]: expected a positive number, found " + json_shown(v));
      s.link_bytes_per_s.push_back(x);
    }
    t.ranks.push_back(std::move(s));
  }
  return t;
}

SpeedTable read_speed_table(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file))
    throw InputError(file.string() + ": cannot open the speed table: no such file");
  // A regular file (a FIFO would block), parsed depth-limited.
  const nlohmann::json j = read_json_file(file);
  return speed_table_from_json(j, file.string());
}

std::vector<PartTime> predict_part_times(const Quality& q, const SpeedTable& table) {
  if (std::size_t(q.k) != table.ranks.size())
    throw ParamError("the speed table has " + std::to_string(table.ranks.size()) +
                     " ranks, the partition " + std::to_string(q.k) + " parts");
  std::vector<PartTime> t(std::size_t(q.k));
  for (std::size_t i = 0; i < t.size(); ++i) {
    const RankSpeed& s = table.ranks[i];
    const PartStats& p = q.parts[i];
    t[i].compute_s = s.row_s * double(p.nodes) + s.nonzero_s * double(p.local_edges);
    for (std::size_t j = 0; j < t.size(); ++j) {
      if (j == i) continue;
      const double rows =
          double(p.recv.empty() ? 0 : p.recv[j]) + double(p.send.empty() ? 0 : p.send[j]);
      t[i].comm_s += rows * table.halo_row_bytes / 2 / s.link_bytes_per_s[j];
    }
  }
  return t;
}

std::vector<PartId> partition_for_speed(const GraphDataset& d, const PartitionOptions& options,
                                        const SpeedTable& table, SpeedSearch* found,
                                        MetisPtype* scheme, int rounds) {
  const std::size_t k = std::size_t(options.k);
  if (table.ranks.size() != k)
    throw ParamError("--part-weights auto: the speed table has " +
                     std::to_string(table.ranks.size()) + " ranks, but -k is " +
                     std::to_string(options.k) + " (calibrate under mpirun -np " +
                     std::to_string(options.k) + ")");
  // Start: each part's share proportional to its rank's speed on a row of average degree.
  const double degree =
      d.num_nodes() > 0 ? double(d.graph.num_edges()) / double(d.num_nodes()) : 0.0;
  std::vector<double> w(k);
  for (std::size_t i = 0; i < k; ++i)
    w[i] = 1.0 / (table.ranks[i].row_s + table.ranks[i].nonzero_s * degree);
  const Split* split = choose_split(d, options.split);
  std::vector<PartId> best;
  double best_epoch = std::numeric_limits<double>::infinity();
  nlohmann::json log = nlohmann::json::array();
  for (int round = 0; round < std::max(1, rounds); ++round) {
    const double sum = std::accumulate(w.begin(), w.end(), 0.0);
    for (double& x : w) x /= sum;
    PartitionOptions o = options;
    o.speed_table.clear();  // this round's shares stand in for the table
    o.part_weights = w;
    MetisPtype used = options.ptype;
    std::vector<PartId> owner = partition_nodes(d, o, &used);
    const Quality q = measure_partition(d.graph.view(), d.directed, owner, o.k, split, w);
    const std::vector<PartTime> t = predict_part_times(q, table);
    std::vector<double> totals(k);
    for (std::size_t i = 0; i < k; ++i) totals[i] = t[i].total();
    const double epoch = *std::max_element(totals.begin(), totals.end());
    log.push_back({{"weights", w}, {"predicted_s", totals}, {"epoch_s", epoch}});
    if (epoch < best_epoch) {
      best_epoch = epoch;
      best = std::move(owner);
      if (scheme) *scheme = used;
      if (found) {
        found->weights = w;
        found->quality = q;
        found->times = t;
      }
    }
    // Each part's time grows about in proportion to its share: scaling the share by mean / own
    // time evens the parts out (what a part's halo adds makes it only about proportional, hence
    // several rounds and the best kept).
    const double mean = std::accumulate(totals.begin(), totals.end(), 0.0) / double(k);
    for (std::size_t i = 0; i < k; ++i)
      if (totals[i] > 0) w[i] *= mean / totals[i];
  }
  if (found) found->rounds = std::move(log);
  return best;
}

}  // namespace halo
