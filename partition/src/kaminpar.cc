// --method kaminpar: KaMinPar (Sanders, Seemaier et al.), a shared-memory multilevel partitioner
// that cuts less than METIS in a fraction of its time and memory, through its Python package
// (PyPI `kaminpar`; its C++ library is not packaged for Debian). The package builds graphs only
// from files, so the CSR goes to it as a ParHiP binary graph (no text), and the assignment
// comes back as an int32 .npy read by read_assignment.
#include <fcntl.h>
#include <omp.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "halo/graph/error.h"
#include "halo/partition/partition.h"

extern char** environ;

namespace halo {
namespace fs = std::filesystem;

namespace {

// Reads the graph, partitions it and saves the assignment; argv: graph k eps seed threads out
// [target share per part]. Exit 3 names a missing package on stderr.
constexpr const char* kScript = R"(import sys
try:
    import kaminpar
    import numpy
except ImportError as e:
    sys.stderr.write("missing Python package: %s\n" % e.name)
    sys.exit(3)
graph, k, eps, seed, threads, out = sys.argv[1:7]
k, eps, seed, threads = int(k), float(eps), int(seed), int(threads)
shares = [float(s) for s in sys.argv[7:]]
kaminpar.reseed(seed)
g = kaminpar.load_graph(graph, kaminpar.GraphFileFormat.PARHIP)
solver = kaminpar.KaMinPar(threads, kaminpar.default_context())
if shares:
    part = solver.compute_partition(g, [s * (1.0 + eps) for s in shares])
else:
    part = solver.compute_partition(g, k, eps)
numpy.save(out, numpy.asarray(part, dtype=numpy.int32))
)";

// A private scratch folder, removed with everything in it.
struct Scratch {
  fs::path dir;
  Scratch() {
    std::string t = (fs::temp_directory_path() / "halo-kaminpar-XXXXXX").string();
    if (!mkdtemp(t.data()))
      throw SystemError("--method kaminpar: cannot create a scratch folder in " +
                        fs::temp_directory_path().string() + ": " + std::strerror(errno));
    dir = t;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

// The graph as ParHiP's binary format, version 3 (no weights, 64-bit ids): n, m, then each
// node's first-edge position as a byte offset into the file, then the adjacency.
void write_parhip(const CsrView& g, const fs::path& file) {
  std::ofstream f(file, std::ios::binary);
  const std::uint64_t n = std::uint64_t(g.num_nodes), m = std::uint64_t(g.num_edges());
  const std::uint64_t head[3] = {3, n, m};
  f.write(reinterpret_cast<const char*>(head), sizeof head);
  const std::uint64_t base = sizeof head + (n + 1) * 8;
  std::vector<std::uint64_t> buf;
  buf.reserve(1 << 16);
  auto flush = [&] {
    f.write(reinterpret_cast<const char*>(buf.data()), std::streamsize(buf.size() * 8));
    buf.clear();
  };
  for (std::uint64_t v = 0; v <= n; ++v) {
    buf.push_back(base + std::uint64_t(g.offsets[v]) * 8);
    if (buf.size() == buf.capacity()) flush();
  }
  flush();
  for (std::uint64_t e = 0; e < m; ++e) {
    buf.push_back(std::uint64_t(g.indices[e]));
    if (buf.size() == buf.capacity()) flush();
  }
  flush();
  f.close();
  if (!f)
    throw SystemError("--method kaminpar: cannot write the graph to " + file.string() +
                      " (is the disk full? TMPDIR sets where)");
}

// The last non-empty line of a small file (a failed script's error).
std::string last_line(const fs::path& file) {
  std::ifstream f(file);
  std::string line, last;
  while (std::getline(f, line))
    if (!line.empty()) last = line;
  return last;
}

// Runs argv with stderr into err; its exit status (128 + N for signal N).
int run(const std::vector<std::string>& argv, const fs::path& err) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -rc;  // could not start it at all
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::string kaminpar_python() {
  const char* p = std::getenv("HALO_PYTHON");
  return p && *p ? p : "python3";
}

std::vector<PartId> partition_kaminpar(const GraphDataset& d, const PartitionOptions& o) {
  const std::int64_t n = d.num_nodes();
  if (o.k == 1) return std::vector<PartId>(std::size_t(n), 0);
  const std::string python = kaminpar_python();
  Scratch s;
  const fs::path script = s.dir / "partition.py", graph = s.dir / "graph.parhip",
                 out = s.dir / "assignment.npy", err = s.dir / "stderr.txt";
  {
    std::ofstream f(script);
    f << kScript;
  }
  write_parhip(d.graph.view(), graph);
  const double eps = o.ufactor >= 0 ? o.ufactor / 1000.0 : 0.03;  // METIS's k-way default
  std::vector<std::string> argv = {python,
                                   script.string(),
                                   graph.string(),
                                   std::to_string(o.k),
                                   std::to_string(eps),
                                   std::to_string(o.seed.value_or(0)),
                                   std::to_string(omp_get_max_threads()),
                                   out.string()};
  if (!o.part_weights.empty())
    for (double share : o.targets()) argv.push_back(std::to_string(share));
  const int rc = run(argv, err);
  const std::string why = last_line(err);
  if (rc < 0)
    throw ParamError("--method kaminpar: cannot run " + python + ": " + std::strerror(-rc) +
                     " (HALO_PYTHON names the interpreter)");
  if (rc == 3)
    throw ParamError("--method kaminpar needs KaMinPar's Python package (" + why + " in " + python +
                     "): pip install kaminpar numpy, or set HALO_PYTHON to a Python "
                     "that has it");
  if (rc != 0)
    throw SystemError("--method kaminpar: KaMinPar failed (exit " + std::to_string(rc) +
                      (why.empty() ? std::string(")") : "): " + why));
  return read_assignment(out, n, o.k);
}

}  // namespace halo
