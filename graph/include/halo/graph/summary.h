// What `halo info` reports about a native dataset, as JSON (the text view is built from it).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace halo {

// Graph datasets: nodes, edges (stored directed entries), directed, degree {min, mean, max},
// features, labels kind, classes, tasks, splits {name: {train, valid, test}}, components,
// node_weights, edge_weights, reorder, fingerprint. Temporal datasets: nodes, users, events,
// time_min, time_max, edge_features, event_labels. Verifies checksums while mapping.
nlohmann::json summarize_dataset(const std::filesystem::path& dir);

// Human-readable lines for a summary made by summarize_dataset.
std::string format_summary(const nlohmann::json& s);

}  // namespace halo
