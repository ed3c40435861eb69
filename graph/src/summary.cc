// `halo info`: a dataset summary computed from the mapped arrays (components by union-find).
#include "halo/graph/summary.h"

#include <cstdio>
#include <sstream>

#include "halo/graph/algorithms.h"
#include "halo/graph/dataset.h"
#include "halo/graph/text.h"

namespace halo {
using json = nlohmann::json;

json summarize_dataset(const std::filesystem::path& dir) {
  const json meta = read_dataset_meta(dir);
  json s;
  s["path"] = dir.string();
  s["name"] = meta.value("name", "");
  s["fingerprint"] = meta.value("fingerprint", "");
  if (meta.value("kind", "graph") == "temporal") {
    const TemporalDataset t = read_temporal_dataset(dir);
    s["kind"] = "temporal";
    s["nodes"] = t.num_nodes;
    s["users"] = t.num_users;
    s["events"] = t.num_events();
    s["time_min"] = t.num_events() ? t.time[0] : 0.0;
    s["time_max"] = t.num_events() ? t.time[t.time.size() - 1] : 0.0;
    s["edge_features"] = t.edge_feature_dim;
    s["event_labels"] = !t.labels.empty();
    return s;
  }
  const GraphDataset d = read_graph_dataset(dir);
  const CsrView g = d.graph.view();
  const DegreeStats deg = degree_stats(g);
  std::int64_t components = 0;
  connected_components(g, d.directed, &components);
  json splits = json::object();
  for (const auto& sp : d.splits)
    splits[sp.name] = {
        {"train", sp.train.size()}, {"valid", sp.valid.size()}, {"test", sp.test.size()}};
  s["kind"] = "graph";
  s["nodes"] = d.num_nodes();
  s["edges"] = g.num_edges();
  s["directed"] = d.directed;
  s["degree"] = {{"min", deg.min}, {"mean", deg.mean}, {"max", deg.max}};
  s["features"] = d.num_features;
  s["labels"] = label_kind_name(d.label_kind);
  s["classes"] = d.num_classes;
  s["tasks"] = d.label_kind == LabelKind::kMultilabel ? d.label_cols : (d.label_cols > 0 ? 1 : 0);
  std::int64_t missing = 0;
  for (std::int32_t v : d.labels) missing += v < 0;
  s["missing_labels"] = missing;
  s["splits"] = splits;
  s["components"] = components;
  s["node_weights"] = d.ncon;
  s["edge_weights"] = !d.graph.values.empty();
  s["reorder"] = d.reorder;
  return s;
}

std::string format_summary(const json& s) {
  std::ostringstream o;
  // Names and paths come from files and folders: shown escaped, so no byte drives the terminal
  // and a NUL cannot hide what follows (the reader refuses such names; this is the backstop).
  o << "dataset     " << printable(s.value("name", "")) << " (" << printable(s.value("path", ""))
    << ")\n";
  if (s.value("kind", "") == "temporal") {
    o << "kind        temporal event stream\n"
      << "nodes       " << s["nodes"]
      << (s["users"].get<std::int64_t>() > 0 ? " (" + s["users"].dump() + " users, then items)"
                                             : std::string())
      << "\n"
      << "events      " << s["events"] << "\n"
      << "time        " << s["time_min"] << " .. " << s["time_max"] << "\n"
      << "edge feats  " << s["edge_features"] << "\n";
    return o.str();
  }
  char mean[32];
  std::snprintf(mean, sizeof mean, "%.2f", s["degree"]["mean"].get<double>());
  o << "nodes       " << s["nodes"] << "\n"
    << "edges       " << s["edges"]
    << (s["directed"].get<bool>() ? " (directed)" : " (stored both ways)") << "\n"
    << "degree      min " << s["degree"]["min"] << ", mean " << mean << ", max "
    << s["degree"]["max"] << "\n"
    << "features    " << s["features"] << "\n"
    << "labels      " << s["labels"].get<std::string>();
  if (s["labels"] == "multiclass") o << ", " << s["classes"] << " classes";
  if (s["labels"] == "multilabel") o << ", " << s["tasks"] << " binary tasks";
  if (s["missing_labels"].get<std::int64_t>() > 0)
    o << ", " << s["missing_labels"] << " unlabelled";
  o << "\n";
  for (const auto& [name, c] : s["splits"].items())
    o << "split       " << printable(name) << ": train " << c["train"] << ", valid " << c["valid"]
      << ", test " << c["test"] << "\n";
  o << "components  " << s["components"] << "\n";
  if (s["node_weights"].get<int>() > 0) o << "node wgts   " << s["node_weights"] << " per node\n";
  if (s["edge_weights"].get<bool>()) o << "edge wgts   yes\n";
  if (s["reorder"] != "none")
    o << "reordered   " << printable(s["reorder"].get<std::string>()) << "\n";
  return o.str();
}

}  // namespace halo
