// Command-line flags out of range (issue #35, classes 2, 12, 13): every numeric flag of every
// command has a range shown in --help, and a value outside it (or a thread count the process
// cannot start, or a run the memory cannot hold) is exit 2 with one line naming the flag and
// the range, before anything is written or allocated.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "../test_util.h"

namespace halo {
namespace {
namespace fs = std::filesystem;

std::string halo_bin() { return test::configured("HALO_BINARY", HALO_BINARY); }

// Exit `code` and exactly one line "error: ..." holding every one of parts; no crash, no
// libgomp line.
void expect_one_line(const test::Run& r, int code, const std::vector<std::string>& parts,
                     const std::string& what) {
  EXPECT_EQ(r.code, code) << what << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << what << "\n" << r.err;
  for (const auto& p : parts)
    EXPECT_NE(r.err.find(p), std::string::npos) << what << ": '" << p << "' not in: " << r.err;
  EXPECT_LT(r.seconds, 10.0) << what;  // each refusal within seconds (the suite's promise)
}

// Every entry under dir but the capture files test::shell writes and removes.
std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// Cora and a 1,500-event slice of UCI converted once; each test runs halo in its own empty
// folder and checks it stays empty.
class BadFlags : public ::testing::Test {
 public:
  static fs::path dir() {
    return fs::temp_directory_path() / ("halo-bad-flags-" + std::to_string(getpid()));
  }
  static std::string cora() { return (dir() / "cora").string(); }
  static std::string uci() { return (dir() / "uci").string(); }
  static void SetUpTestSuite() {
    setenv("OMP_NUM_THREADS", "1", 1);
    fs::create_directories(dir());
    const std::string d = dir().string();
    for (const std::string& s :
         {halo_bin() + " convert " + test::bundled("cora").string() + " -o " + cora(),
          "head -n 1502 " + test::bundled("uci-messages/graph.txt").string() + " > " + d +
              "/uci.txt",
          halo_bin() + " convert " + d + "/uci.txt --format konect -o " + uci()}) {
      const test::Run r = test::shell(s, dir());
      if (r.code != 0) setup_failed() = s + "\n" + r.err;
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir()); }
  static std::string& setup_failed() {
    static std::string why;
    return why;
  }

 protected:
  void SetUp() override {
    ASSERT_TRUE(setup_failed().empty()) << setup_failed();
    work_ = dir() / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(work_);
    fs::create_directories(work_);
  }
  void TearDown() override { fs::remove_all(work_); }
  // `halo ARGS` in the test's empty folder (env: VAR=value settings before it), timed.
  test::Run halo(const std::string& args, const std::string& env = "") const {
    return test::shell("cd " + work_.string() + " && " + env + " " + halo_bin() + " " + args,
                       work_);
  }
  // Nothing left behind in the test's folder.
  void expect_nothing_written(const std::string& what) const {
    EXPECT_TRUE(entries(work_).empty()) << what << ": left " << *entries(work_).begin();
  }
  fs::path work_;
};

// ---- class 2: thread counts ---------------------------------------------------------------

// Every --threads flag has one range, [0, 4096]: 100,000 crashed libgomp (its team start keeps
// per-thread data on the stack), -1 meant "default" to some commands only.
TEST_F(BadFlags, ThreadCountsOutsideTheirRangeAreOneLine) {
  for (const std::string& cmd :
       {"train " + cora() + " --epochs 1", "predict " + cora() + " --checkpoint ck -o p.npy",
        "tgn train " + uci() + " --epochs 1"})
    for (const std::string v : {"100000", "4097", "-1"}) {
      const test::Run r = halo(cmd + " --threads " + v);
      expect_one_line(r, 2, {"--threads", "[0, 4096]", v}, cmd + " --threads " + v);
      expect_nothing_written(cmd);
    }
  // OpenMP's own variable, read by every command, has the same bound.
  const test::Run r = halo("info " + cora(), "OMP_NUM_THREADS=100000");
  expect_one_line(r, 2, {"OMP_NUM_THREADS=100000", "[1, 4096]"}, "OMP_NUM_THREADS");
}

// A count in range that the process cannot start (here: 200 threads of 64 MiB stacks under a
// 3 GB address-space limit) is one line naming the flag, not libgomp's raw lines.
TEST_F(BadFlags, ThreadsTheProcessCannotStartAreOneLine) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves more address space than the limit";
#endif
  const std::string limit = "ulimit -v 3000000; OMP_STACKSIZE=64M";
  for (const std::string& cmd :
       {"train " + cora() + " --epochs 1 -q", "tgn train " + uci() + " --epochs 1 -q"}) {
    const test::Run r = halo(cmd + " --threads 200", limit);
    expect_one_line(r, 2, {"--threads 200", "can start only", "ulimit"}, cmd);
    EXPECT_EQ(r.err.find("libgomp"), std::string::npos) << r.err;
    EXPECT_LT(r.seconds, 10) << cmd;
    expect_nothing_written(cmd);
  }
  const test::Run r = halo("info " + cora(), limit + " OMP_NUM_THREADS=200");
  expect_one_line(r, 2, {"OMP_NUM_THREADS=200", "can start only"}, "OMP_NUM_THREADS=200");
}

// --bf16-kernel: a spelling it does not know, a kernel without bf16 products, or the CPU's kernel
// asked of a GPU run are one line each, before any work.
TEST_F(BadFlags, Bf16KernelIsCheckedBeforeAnyWork) {
  const std::string run = "train " + cora() + " --epochs 1 --log l.jsonl";
  struct Case {
    std::string flags;
    std::vector<std::string> words;
  };
  for (const Case& c :
       {Case{"--matmul-precision bf16 --bf16-kernel amx",
             {"--bf16-kernel must be auto, dot or fma", "amx"}},
        Case{"--bf16-kernel fma", {"--bf16-kernel fma needs --matmul-precision bf16"}},
        Case{"--matmul-precision bf16 --bf16-kernel dot --device cuda",
             {"--bf16-kernel", "--device cuda", "tensor cores"}}}) {
    const test::Run r = halo(run + " " + c.flags);
    expect_one_line(r, 2, c.words, c.flags);
    expect_nothing_written(c.flags);
  }
}

// ---- class 12: a run the memory cannot hold names the allocation --------------------------

// Under a 1 GB address-space limit (which the memory check reads, as it reads MemAvailable and
// the cgroup), a TGN run whose GRU weights need hundreds of GB, or whose evaluation batches with
// 100,000 negatives per event need ~180 GB, is refused before the model is built, naming that
// allocation and its flags; so is a GCN whose hidden width cannot fit. Before, the first said
// "node state of ... about 12.93 KiB" and the second a bare "out of memory".
TEST_F(BadFlags, ARunTheMemoryCannotHoldIsRefusedNamingTheAllocation) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves more address space than the limit";
#endif
  const std::string limit = "ulimit -v 1000000;";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"tgn train " + uci() + " --memory-dim 65536 --epochs 1",
       {"--memory-dim 65536", "weights", "GRU", "ulimit -v", "lower --memory-dim"}},
      {"tgn train " + uci() + " --eval-negatives 100000 --epochs 1",
       {"--eval-negatives 100000", "batch's buffers", "ulimit -v", "lower --batch-size"}},
      {"train " + cora() + " --hidden 60000 --epochs 1",
       {"--hidden 60000", "ulimit -v", "lower --hidden"}},
  };
  for (const auto& [args, parts] : cases) {
    const test::Run r = halo(args, limit);
    expect_one_line(r, 2, parts, args);
    EXPECT_LT(r.seconds, 10) << args;
    expect_nothing_written(args);
  }
  // HALO_MEMORY_CHECK=0 leaves it to the allocator, whose failure still names the allocation.
  const test::Run r =
      halo("tgn train " + uci() + " --memory-dim 65536 --epochs 1", limit + " HALO_MEMORY_CHECK=0");
  expect_one_line(r, 1, {"out of memory allocating the model", "--memory-dim 65536", "weights"},
                  "HALO_MEMORY_CHECK=0");
}

// Count flags that sized an allocation without a bound: a billion runs, a billion negatives.
TEST_F(BadFlags, CountFlagsThatSizeAllocationsHaveRanges) {
  for (const auto& [args, parts] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"train " + cora() + " --runs 1000000000", {"--runs", "[1, 10000]"}},
           {"tgn train " + uci() + " --eval-negatives 1000000000",
            {"--eval-negatives", "[0, 100000]"}},
           {"tgn train " + uci() + " --batch-size 100000000", {"--batch-size", "[1, 16777216]"}},
       }) {
    const test::Run r = halo(args);
    expect_one_line(r, 2, parts, args);
    EXPECT_LT(r.seconds, 10) << args;
    expect_nothing_written(args);
  }
}

// --static-memory (DistTGL's static node memory) combines with TGN's attention only: with
// EdgeBank (no memory), JODIE or the identity embedding (no attention to combine it), a width
// out of range, or widths the 2 heads cannot split, the run is refused in one line before
// anything is allocated or written.
TEST_F(BadFlags, StaticMemoryCombinationsThatCannotBeAreRefused) {
  for (const auto& [args, parts] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"tgn train " + uci() + " --static-memory 100 --model edgebank",
            {"--static-memory", "--model edgebank"}},
           {"tgn train " + uci() + " --static-memory 100 --model jodie",
            {"--static-memory", "--model jodie", "--embedding attn"}},
           {"tgn train " + uci() + " --static-memory 100 --embedding identity",
            {"--static-memory", "--embedding identity", "--embedding attn"}},
           {"tgn train " + uci() + " --static-memory 65537", {"--static-memory", "[0, 65536]"}},
           {"tgn train " + uci() + " --static-memory 1", {"--static-memory", "2 heads"}},
       }) {
    const test::Run r = halo(args + " --epochs 1 --log out.jsonl --checkpoint ck");
    expect_one_line(r, 2, parts, args);
    expect_nothing_written(args);
  }
}

// `halo tgn train --device`: a spelling other than cpu, cuda or auto is refused naming them,
// and cuda on a machine (or a build) without a GPU is one line naming why there is none, given
// before the dataset's events are read: a dataset with its events cut short still gets it
// (skipped where a GPU is visible).
TEST_F(BadFlags, TgnDeviceCudaWithoutAGpuIsRefused) {
  const test::Run bogus = halo("tgn train " + uci() + " --device bogus --epochs 1");
  expect_one_line(bogus, 2, {"--device", "cpu, cuda or auto"}, "--device bogus");
  expect_nothing_written("--device bogus");
  const test::Run version = halo("version");
  ASSERT_EQ(version.code, 0) << version.err;
  const std::string none = "gpus: none (";
  const std::size_t at = version.out.find(none);
  if (at == std::string::npos) GTEST_SKIP() << "a GPU is visible";
  const std::string reason =
      version.out.substr(at + none.size(), version.out.find(")\n", at) - at - none.size());
  // A copy of the dataset whose event arrays are empty files: reading them fails.
  const fs::path cut = dir() / "uci-cut";
  fs::remove_all(cut);
  fs::copy(uci(), cut, fs::copy_options::recursive);
  for (const auto& e : fs::directory_iterator(cut))
    if (e.path().filename().string().rfind("events.", 0) == 0) fs::resize_file(e.path(), 0);
  for (const std::string model : {"tgn", "jodie"}) {
    const std::string args = "tgn train " + cut.string() + " --device cuda --model " + model +
                             " --epochs 1 --log out.jsonl --checkpoint ck";
    const test::Run r = halo(args);
    expect_one_line(r, 2, {"--device cuda", reason}, args);
    expect_nothing_written(args);
  }
  // The cut dataset is refused for what it is once the device is not in the way.
  const test::Run cpu = halo("tgn train " + cut.string() + " --device auto --epochs 1");
  EXPECT_NE(cpu.code, 0);
  EXPECT_EQ(cpu.err.find("--device"), std::string::npos) << cpu.err;
  fs::remove_all(cut);
}

// --memory-on: an unknown placement names the three, and EdgeBank (no node memory) refuses a
// placement; both one line, exit 2, nothing written.
TEST_F(BadFlags, TgnMemoryOnIsCheckedBeforeAnyWork) {
  const test::Run bogus = halo("tgn train " + uci() + " --memory-on disk --epochs 1");
  expect_one_line(bogus, 2, {"--memory-on 'disk'", "auto, device or host"}, "--memory-on disk");
  expect_nothing_written("--memory-on disk");
  const std::string args =
      "tgn train " + uci() + " --model edgebank --memory-on host --log out.jsonl";
  expect_one_line(halo(args), 2, {"--memory-on host", "edgebank has none"}, args);
  expect_nothing_written(args);
}

// ---- class 13: every numeric flag has a range -----------------------------------------------

// A numeric flag as --help shows it: "--layers INT:[1, 1024]=2".
struct NumericFlag {
  std::string name;   // the long name
  std::string type;   // INT, UINT or FLOAT
  std::string range;  // "[1, 1024]", "(0, 1000]", or "" when it has none
};

// Parsed by hand: GCC 12 warns falsely (-Wmaybe-uninitialized) inside std::regex under the
// sanitizers' build, where warnings are errors.
std::vector<NumericFlag> numeric_flags(const std::string& help) {
  const char* word = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
  std::vector<NumericFlag> out;
  std::istringstream in(help);
  for (std::string l; std::getline(in, l);) {
    std::size_t at = l.find_first_not_of(" \t");
    if (at == 0 || at == std::string::npos) continue;  // an option line is indented
    if (l[at] == '-' && at + 3 < l.size() && l[at + 1] != '-' && l[at + 2] == ',') at += 3;
    if (l.compare(at, 2, "--") != 0) continue;
    const std::size_t end = l.find_first_not_of(word, at + 2);
    if (end == std::string::npos || (l[end] != ' ' && l[end] != '\t')) continue;
    const std::size_t type_at = l.find_first_not_of(" \t", end);
    if (type_at == std::string::npos) continue;
    std::string type;
    for (const std::string t : {"UINT", "INT", "FLOAT"})
      if (l.compare(type_at, t.size(), t) == 0) type = t;
    if (type.empty()) continue;
    const std::size_t after = type_at + type.size();
    std::string range;
    if (after + 1 < l.size() && l[after] == ':' && (l[after + 1] == '[' || l[after + 1] == '(')) {
      const std::size_t close = l.find_first_of("])", after + 1);
      if (close != std::string::npos) range = l.substr(after + 1, close - after);
    }
    out.push_back({l.substr(at, end - at), type, range});
  }
  return out;
}

// Values just outside "[lo, hi]" / "(lo, hi)": for an integer lo - 1 and hi + 1 (as text, so
// 2^63 and 2^64 too); for a real an open end itself, a closed one moved outward.
std::vector<std::string> outside(const NumericFlag& f) {
  const std::size_t comma = f.range.find(", ");
  const std::string lo = f.range.substr(1, comma - 1),
                    hi = f.range.substr(comma + 2, f.range.size() - comma - 3);
  const bool lo_open = f.range.front() == '(', hi_open = f.range.back() == ')';
  // Decimal text plus or minus one, without overflow.
  auto add = [](std::string s, int d) {
    if (s == "0" && d < 0) return std::string("-1");
    int i = int(s.size()) - 1;
    if (d > 0) {
      for (; i >= 0 && s[std::size_t(i)] == '9'; --i) s[std::size_t(i)] = '0';
      if (i < 0) return "1" + s;
      ++s[std::size_t(i)];
    } else {
      for (; s[std::size_t(i)] == '0'; --i) s[std::size_t(i)] = '9';
      --s[std::size_t(i)];
      if (s.size() > 1 && s[0] == '0') s.erase(0, 1);
    }
    return s;
  };
  if (f.type != "FLOAT") return {add(lo, -1), add(hi, +1)};
  const double l = std::stod(lo), h = std::stod(hi);
  char a[64], b[64];
  std::snprintf(a, sizeof a, "%.17g", lo_open ? l : (l == 0 ? -1e-3 : l - std::abs(l) / 2));
  std::snprintf(b, sizeof b, "%.17g", hi_open ? h : h + std::max(1.0, std::abs(h)));
  return {a, b};
}

// Every numeric flag of every command shows a range in --help, and a value just outside either
// end is exit 2 with one line naming the flag and that range, before anything is written. The
// commands are those `halo --help` lists: a new command or flag without a range fails here.
TEST_F(BadFlags, EveryNumericFlagOfEveryCommandRefusesValuesOutsideItsRange) {
  // Each command with the arguments it requires (a flag under test replaces its own).
  const std::map<std::string, std::vector<std::string>> commands = {
      {"convert", {cora(), "-o out"}},
      {"info", {cora()}},
      {"generate", {"-o out"}},
      {"partition", {cora(), "-k 2", "-o out"}},
      {"export", {cora(), "-o out.graph"}},
      {"reorder", {cora(), "-o out"}},
      {"train", {cora()}},
      {"predict", {cora(), "--checkpoint ck", "-o out.npy"}},
      {"tgn train", {uci()}},
      {"tgn split", {uci(), "-o out.npz"}},
      {"version", {}},
  };
  // `halo --help` and `halo tgn --help` name every command.
  std::set<std::string> listed;
  for (const std::string& parent : {std::string(), std::string("tgn ")}) {
    const test::Run h = halo(parent + "--help");
    std::istringstream in(h.out.substr(h.out.find("Subcommands:")));
    std::string l;
    std::getline(in, l);
    for (std::string word; std::getline(in, l) && l.rfind("  ", 0) == 0;) {
      std::istringstream(l) >> word;
      if (parent + word != "tgn") listed.insert(parent + word);
    }
  }
  for (const auto& name : listed) EXPECT_TRUE(commands.count(name)) << name << " not walked";
  int tried = 0;
  for (const auto& [cmd, required] : commands) {
    const test::Run h = halo(cmd + " --help");
    ASSERT_EQ(h.code, 0) << cmd;
    for (const NumericFlag& f : numeric_flags(h.out)) {
      ASSERT_FALSE(f.range.empty()) << "halo " << cmd << " " << f.name << " shows no range";
      std::string base = cmd;
      for (const std::string& a : required)
        if (a.rfind(f.name == "--parts" ? "-k " : f.name + " ", 0) != 0) base += " " + a;
      for (const std::string& v : outside(f)) {
        const std::string args = base + " " + f.name + " " + v;
        expect_one_line(halo(args), 2, {f.name, f.range}, "halo " + args);
        expect_nothing_written("halo " + args);
        ++tried;
      }
    }
  }
  EXPECT_GT(tried, 80);  // about 45 flags, two ends each
}

// The reproductions: --ufactor -1 was recorded and 0 reached METIS ("METIS rejected the input"),
// a weight of 1e-300 beside 1 underflowed in METIS, a seed above 2^64 - 1 was clamped, and a
// METIS seed above 2^31 - 1 was cut to 32 bits.
TEST_F(BadFlags, PartitionValuesMetisCannotTakeAreRefusedWithTheirRange) {
  const std::string part = "partition " + cora() + " -k 2 ";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"--ufactor -1", {"--ufactor", "[1, 100000]"}},
      {"--ufactor 0", {"--ufactor", "[1, 100000]"}},
      {"--part-weights 1e-300,1", {"--part-weights", "[1e-06, 1e+06]", "1e-300"}},
      {"--part-weights 1,2e6", {"--part-weights", "[1e-06, 1e+06]"}},
      {"--seed 18446744073709551616", {"--seed", "[0, 18446744073709551615]"}},
      {"--seed 2147483648", {"--seed", "[0, 2147483647]", "--method metis"}},
      {"--seed 2147483648 --method lp-metis", {"--seed", "[0, 2147483647]"}},
  };
  int i = 0;
  for (const auto& [flags, parts] : cases) {  // an output each: one written does not hide others
    const test::Run r = halo(part + "-o out" + std::to_string(i++) + " " + flags);
    expect_one_line(r, 2, parts, flags);
    EXPECT_LT(r.seconds, 10) << flags;
    expect_nothing_written(flags);
  }
  // A seed METIS cannot take is any other method's seed.
  EXPECT_EQ(halo(part + "-o out --seed 2147483648 --method random").code, 0);
}

}  // namespace
}  // namespace halo
