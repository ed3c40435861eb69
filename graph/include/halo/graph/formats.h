// Readers for the graph formats people have: OGB node-property directories (text and the
// binary .npz layout of ogbn-papers100M), METIS .graph files, plain edge lists, and temporal
// event lists (KONECT, SNAP, JODIE CSV). Every reader validates as it goes and throws
// InputError "FILE: line N: what was expected" on the first problem.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "halo/graph/dataset.h"

namespace halo {

enum class Format { kAuto, kOgb, kMetis, kEdgeList, kKonect, kSnap, kJodie };

// Parses a --format name (auto, ogb, metis, edgelist, konect, snap, jodie); throws ParamError.
Format parse_format(const std::string& name);
const char* format_name(Format f);
// Guesses the format of path: a directory with raw/ is OGB, *.graph / *.mgraph / *.metis is
// METIS, a CSV whose header starts "user_id" is JODIE, a file opening with a KONECT "% sym" /
// "% asym" / "% bip" line is KONECT, anything else an edge list.
Format detect_format(const std::filesystem::path& path);
// True for formats that produce a temporal dataset.
bool is_temporal(Format f);

// ---- METIS -------------------------------------------------------------------------------
// Reads a METIS graph: header "n m [fmt [ncon]]", then n vertex lines with optional vertex
// size, ncon vertex weights and (neighbour [edge weight])* 1-based. '%' lines are comments.
// Checks the body against the header and that the adjacency is symmetric.
GraphDataset read_metis(const std::filesystem::path& path);

// Writes g as a METIS graph file (1-based ids, as gpmetis reads it): vertex weights when
// ncon > 0 (vwgt is n x ncon), integer edge weights when g has values. g must be symmetric.
// Written under a temporary name and renamed, like every output.
void write_metis(const std::filesystem::path& path, const CsrView& g, const std::int32_t* vwgt,
                 int ncon);

// ---- edge lists --------------------------------------------------------------------------
struct EdgeListOptions {
  bool one_based = false;         // ids in the file start at 1
  bool directed = false;          // keep as given instead of symmetrising
  std::int64_t num_nodes = 0;     // 0 = max id + 1; otherwise ids must be below it
  bool allow_sparse_ids = false;  // accept max id + 1 nodes however few ids are used
};
// Reads "u v [w]" lines, fields split by blanks or commas, '#' and '%' comment lines. Weights
// are finite. Without num_nodes, ids must be dense enough (check_id_density); a negative
// num_nodes throws ParamError.
GraphDataset read_edge_list(const std::filesystem::path& path, const EdgeListOptions& options);

// Sparse ids: a file whose largest id gives more than kSparseIdsRatio times as many nodes as
// distinct ids appear (and over kSparseIdsFloor nodes) is refused, because one stray id would
// otherwise size the whole dataset (594387432 in a 69 KB file: 4.5 GB written).
inline constexpr std::int64_t kSparseIdsRatio = 100;
inline constexpr std::int64_t kSparseIdsFloor = std::int64_t(1) << 20;
// Throws InputError "FILE: line LINE: node id SHOWN_ID makes NODES nodes, but only USED ...;
// ALLOW" when nodes exceeds both bounds above; allow says which flag accepts it.
void check_id_density(const std::filesystem::path& path, std::int64_t line, std::int64_t shown_id,
                      std::int64_t nodes, std::int64_t used, const char* allow);
// Number of distinct ids in [0, n) over a and b (n / 8 bytes of scratch).
std::int64_t count_distinct_ids(const std::vector<NodeId>& a, const std::vector<NodeId>& b,
                                std::int64_t n);

// ---- temporal ----------------------------------------------------------------------------
// KONECT "src dst weight time" (1-based ids; '%' comments), SNAP "src dst time" (0-based),
// JODIE CSV "user_id,item_id,timestamp,state_label,f1,...,fd" with a header line; JODIE items
// become nodes num_users + item. Events are sorted by time (stable). Weights, times and
// features are finite; ids must be dense (check_id_density) unless allow_sparse_ids.
TemporalDataset read_konect(const std::filesystem::path& path, bool allow_sparse_ids = false);
TemporalDataset read_snap(const std::filesystem::path& path, bool allow_sparse_ids = false);
TemporalDataset read_jodie(const std::filesystem::path& path, bool allow_sparse_ids = false);

// ---- OGB ---------------------------------------------------------------------------------
// Reads a one-number file (num-node-list.csv.gz / num-edge-list.csv.gz).
std::int64_t read_count_file(const std::filesystem::path& path);
// Reads E "src,dst" lines with ids in [0, n); errors name the line. text_bytes (optional)
// accumulates the decompressed bytes parsed, as do the readers below.
EdgeList read_ogb_edges(const std::filesystem::path& path, std::int64_t n, std::int64_t e,
                        std::uint64_t* text_bytes = nullptr);
// Reads label rows (int, or NaN/empty for missing; multi-label 0/1 rows). Returns n x cols
// int32 with -1 for missing; cols through *cols.
std::vector<std::int32_t> read_ogb_labels(const std::filesystem::path& path, std::int64_t n,
                                          std::int64_t* cols, std::uint64_t* text_bytes = nullptr);
// Reads a split index file: one node id per line, each in [0, n), none twice.
std::vector<NodeId> read_index_file(const std::filesystem::path& path, std::int64_t n,
                                    std::uint64_t* text_bytes = nullptr);
// The same for one of the files of a split (train, valid, test must be disjoint): owner (n
// entries, shared by the files of the split) records tag for each id read; an id already
// tagged throws InputError naming the line, the id and tag_files[its tag - 1].
std::vector<NodeId> read_index_file(const std::filesystem::path& path, std::int64_t n,
                                    std::vector<std::uint8_t>& owner, std::uint8_t tag,
                                    const std::vector<std::string>& tag_files,
                                    std::uint64_t* text_bytes = nullptr);

// ---- the pipeline ------------------------------------------------------------------------
// The node order convert writes: as read, or reverse Cuthill-McKee.
enum class NodeOrder { kNone, kRcm };
// "none" | "rcm" (the --reorder spellings); throws ParamError naming the expected ones.
NodeOrder parse_node_order(std::string_view s);

struct ConvertOptions {
  Format format = Format::kAuto;
  bool directed = false;
  bool one_based = false;         // edge lists
  std::int64_t num_nodes = 0;     // edge lists; 0 = max id + 1
  bool allow_sparse_ids = false;  // edge and event lists: keep ids however sparse
  NodeOrder reorder = NodeOrder::kNone;
  std::string name;  // default: input's name
  bool overwrite = false;
};

struct ConvertReport {
  Format format = Format::kAuto;
  std::string kind;  // graph | temporal
  std::int64_t nodes = 0, edges = 0, events = 0;
  std::uint64_t text_bytes = 0;  // decompressed text parsed
  double seconds = 0;
};

// Reads input in its format, validates it and writes a native dataset at output atomically.
ConvertReport convert(const std::filesystem::path& input, const std::filesystem::path& output,
                      const ConvertOptions& options);

}  // namespace halo
