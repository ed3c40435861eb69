// The MPI communicator and the MPI session (the local communicator is in comm_local.cc).
//
// MPI waits are polls (MPI_Testall) with a deadline rather than MPI_Waitall: a blocking wait on a
// peer that died without MPI noticing (a hung rank, a lost node) would never return; a poll can
// give up, name what it waited for, and let the caller abort the job. Polling yields the CPU
// after a short spin so oversubscribed ranks (more ranks than cores) still make progress.
//
// Asynchronous progress: MPI moves a large message over TCP only while some thread of the
// process is inside an MPI call (the rendezvous handshake and every fragment after the socket
// buffer fills). A halo exchange posted before a layer's compute, or a stale one that spans an
// epoch, would therefore travel only when the rank next waits, and its wire time would come
// back as wait (or as all-reduce time: measured 1.6 s of a 3.2 s epoch at 1 Gbit/s). So while
// exchanges are in flight a progress thread tests their requests every HALO_MPI_PROGRESS_US
// microseconds (default 500; 0 turns it off). MPI runs MPI_THREAD_SERIALIZED: every MPI call of
// this file holds one mutex (mpi_internal.h). Start-up, shutdown and the agreement on failures
// are the MPI session's (mpi_session.cc).
#include "halo/runtime/comm/comm.h"

#include <dirent.h>
#include <linux/tcp.h>
#include <mpi.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "cluster/supervisor_loop.h"
#include "comm/mpi_internal.h"
#include "halo/graph/error.h"

namespace halo {

namespace mpi_internal {  // shared with mpi_session.cc (mpi_internal.h says what each is)
bool g_mpi = false;
bool g_serialized = false;
std::mutex g_mpi_lock;
MPI_Comm g_fail_comm = MPI_COMM_NULL;
}  // namespace mpi_internal
using namespace mpi_internal;

namespace {

class MpiPending;
std::vector<std::string> g_hosts;  // every rank's host name (MpiCommunicator): messages, pacing

// Bulk transfers: how halo exchanges are cut and paced while the progress thread runs. A chunk
// must be larger than MPI's eager limit (Open MPI over TCP: 64 KiB with its header): an eager
// send completes as soon as it is buffered, so "in flight" would count nothing and everything
// would queue again (measured: 63 KiB chunks paced nothing, 64-256 KiB did).
struct Pacing {
  bool on = false;              // off: every block is posted at once
  std::size_t chunk = 1 << 17;  // bytes per message (HALO_MPI_CHUNK_KB, default 128)
  int depth = 4;                // sends in flight per peer (HALO_MPI_CHUNKS, default 4)
};
Pacing g_pacing;
std::atomic<int> g_collectives{0};  // collectives this rank is waiting in: bulk sends hold back

// The progress thread: tests the requests of the exchanges in flight while the rank computes,
// and posts their queued send chunks (see pump()).
class Progress {
 public:
  static Progress& get() {
    static Progress p;
    return p;
  }
  // Registers an exchange (g_mpi_lock held) until remove(); starts the thread on first use.
  void add(MpiPending* p) {
    active_.push_back(p);
    wake_.notify_one();
  }
  void remove(MpiPending* p) { std::erase(active_, p); }
  // Tests every registered exchange and posts queued send chunks (g_mpi_lock held).
  void pump();
  // An error the thread saw (MPI_SUCCESS when none); the next wait reports it.
  int error() const { return error_.load(); }
  void note_error(int rc) { error_.store(rc); }
  // Reads the settings and starts the thread when MPI allows it (once, MPI initialised).
  void start(int ranks) {
    // By default only for jobs that span hosts: on one host MPI moves rows through shared
    // memory and a polling thread per rank only competes for the cores (measured: 4 ranks on 2
    // cores, 20-40% slower epochs with it).
    const char* v = std::getenv("HALO_MPI_PROGRESS_US");
    const bool hosts = std::set<std::string>(g_hosts.begin(), g_hosts.end()).size() > 1;
    period_us_ = v && *v ? std::atol(v) : hosts ? 500 : 0;
    if (period_us_ <= 0 || !g_serialized || ranks < 2) return;
    if (const char* c = std::getenv("HALO_MPI_CHUNK_KB"); c && std::atol(c) > 0)
      g_pacing.chunk = std::size_t(std::atol(c)) << 10;
    if (const char* d = std::getenv("HALO_MPI_CHUNKS"); d && std::atoi(d) > 0)
      g_pacing.depth = std::atoi(d);
    g_pacing.chunk = std::min<std::size_t>(g_pacing.chunk, std::size_t(1) << 30);
    g_pacing.on = true;
    ranks_ = ranks;
    thread_ = std::thread([this] { run(); });
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lk(g_mpi_lock);
      stop_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(g_mpi_lock);
        wake_.wait(lk, [&] { return stop_ || !active_.empty(); });
        if (stop_) return;
        pump();
      }
      std::this_thread::sleep_for(std::chrono::microseconds(period_us_));
    }
  }

  std::vector<MpiPending*> active_;  // in the order they were posted: older chunks go first
  std::condition_variable wake_;
  std::thread thread_;
  bool stop_ = false;
  long period_us_ = 500;
  int ranks_ = 1;
  std::vector<int> inflight_;
  std::atomic<int> error_{MPI_SUCCESS};
};

// Marks a collective in progress for its lifetime (bulk sends wait, see Progress::pump).
struct CollectiveScope {
  CollectiveScope() { ++g_collectives; }
  ~CollectiveScope() { --g_collectives; }
};

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, std::size_t(len));
}

void check(int code, const char* what) {
  if (code != MPI_SUCCESS) throw SystemError(std::string("MPI: ") + what + ": " + mpi_error(code));
}

// "rank 2 (node2) and rank 3 (node2)": the ranks behind the requests of `reqs` not complete yet.
std::string unanswered(std::vector<MPI_Request>& reqs, const std::vector<int>& peers) {
  std::vector<int> ranks;
  for (std::size_t i = 0; i < reqs.size() && i < peers.size(); ++i) {
    int flag = 1;
    MPI_Status st;
    if (reqs[i] != MPI_REQUEST_NULL)
      locked([&] { return MPI_Request_get_status(reqs[i], &flag, &st); });
    if (!flag && std::find(ranks.begin(), ranks.end(), peers[i]) == ranks.end())
      ranks.push_back(peers[i]);
  }
  std::sort(ranks.begin(), ranks.end());
  std::string s;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    s += (i == 0                  ? ""
          : i + 1 == ranks.size() ? " and "
                                  : ", ") +
         ("rank " + std::to_string(ranks[i]));
    if (std::size_t(ranks[i]) < g_hosts.size()) s += " (" + g_hosts[std::size_t(ranks[i])] + ")";
  }
  return s;
}

// Bytes the TCP connections of this process have received so far, by the kernel's count
// (TCP_INFO's tcpi_bytes_received, summed over every socket descriptor): whether a long wait
// is still being answered, even when the bytes are a message MPI has not completed yet. -1 when
// the process has no TCP connection (ranks on one host talk through shared memory).
std::int64_t tcp_bytes_received() {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  std::int64_t sum = -1;
  while (const dirent* e = readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    struct stat st;
    if (fd <= 2 || fd == dirfd(dir) || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    tcp_info info{};
    socklen_t len = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
        len < offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received)
      continue;
    sum = std::max<std::int64_t>(sum, 0) + std::int64_t(info.tcpi_bytes_received);
  }
  closedir(dir);
  return sum;
}

// Polls requests until all complete or the deadline passes (then throws naming `what` and, for
// point-to-point requests whose peers[i] is given, the ranks that did not answer). The deadline
// counts from the last time this process, or any rank of the job, received anything: a peer
// behind a slow link whose bytes are still arriving is not a dead peer (a 6 MB all-reduce over
// 10 Mbit/s takes ~5 s), so a wait ends only after HALO_COMM_TIMEOUT_S with nothing received
// anywhere. A dead, frozen or hung rank stops every transfer of the job, so it is still found.
// `feed`, when given, runs under the MPI lock before each test and says whether every message of
// the exchange has been posted (paced sends).
void wait_all(std::vector<MPI_Request>& reqs, const std::string& what,
              const std::vector<int>& peers = {}, const std::function<bool()>& feed = nullptr) {
  if (reqs.empty() && !feed) return;
  const auto start = std::chrono::steady_clock::now();
  const double limit = comm_timeout_seconds();
  // Progress: probed once a second after the first (the probe reads /proc: never on the short
  // waits of every step).
  double quiet_since = 0, next_probe = std::min(1.0, limit / 2);
  std::int64_t received = -1;
  for (long spin = 0;; ++spin) {
    int done = 0;
    bool posted = true;
    check(locked([&] {
            if (feed) posted = feed();
            return MPI_Testall(int(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
          }),
          what.c_str());
    if (done && posted) return;
    if (const int e = Progress::get().error(); e != MPI_SUCCESS) check(e, what.c_str());
    if (spin > 2000) sched_yield();
    if (spin % 1024 == 0 && spin > 0) {
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited >= next_probe) {
        const std::int64_t now_received = tcp_bytes_received();
        if (received >= 0 && now_received > received) quiet_since = waited;
        received = now_received;
        // Another rank receiving counts too: this one may wait for a rank that itself waits for
        // bytes over a slow link (the supervisors' heartbeats carry it, ~1 s late).
        quiet_since =
            std::max(quiet_since, std::min(waited, waited - seconds_since_job_progress()));
        next_probe = waited + 1;
      }
      if (waited - quiet_since > limit) {
        const std::string who = unanswered(reqs, peers);
        throw SystemError(what + ": no answer from " + (who.empty() ? "the other ranks" : who) +
                          " after " + std::to_string(int(waited)) + " s" +
                          (int(waited) > int(limit) ? " (nothing received for the last " +
                                                          std::to_string(int(limit)) + " s)"
                                                    : "") +
                          " (a rank died or hangs, or its node or link is down; "
                          "HALO_COMM_TIMEOUT_S sets the limit)");
      }
      if (waited > 0.01) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
  }
  return MPI_SUM;
}

// An exchange in flight. Receives are all posted at once (they cost nothing until data comes);
// sends, when paced, wait in per-peer queues and go out a few chunks at a time, so that small
// messages posted later (all-reduces) do not queue behind megabytes on the same TCP connection.
class MpiPending final : public Pending {
 public:
  struct Chunk {
    char* data;
    int bytes;
  };
  explicit MpiPending(int tag) : tag_(tag) {}
  ~MpiPending() override {
    // Never leave requests behind (the buffers are about to go) — except while an exception
    // unwinds: then the job is about to be aborted and waiting on peers could only hang.
    if (std::uncaught_exceptions() == 0) {
      try {
        wait();
      } catch (...) {
      }
    }
    unregister();
  }
  // Posts one message now (g_mpi_lock held).
  void post(char* data, int bytes, int peer, bool send) {
    reqs_.emplace_back();
    const int rc =
        send ? MPI_Isend(data, bytes, MPI_BYTE, peer, tag_, MPI_COMM_WORLD, &reqs_.back())
             : MPI_Irecv(data, bytes, MPI_BYTE, peer, tag_, MPI_COMM_WORLD, &reqs_.back());
    check(rc, send ? "MPI_Isend" : "MPI_Irecv");
    peers_.push_back(peer);
    sending_.push_back(send);
  }
  void queue(char* data, int bytes, int peer) { queued_[peer].push_back({data, bytes}); }
  // Counts this exchange's sends in flight per peer into `inflight` (g_mpi_lock held).
  void count_inflight(std::vector<int>& inflight) const {
    for (std::size_t i = 0; i < reqs_.size(); ++i)
      if (sending_[i] && reqs_[i] != MPI_REQUEST_NULL) ++inflight[std::size_t(peers_[i])];
  }
  // Posts queued chunks while their peer has fewer than `depth` sends in flight.
  void post_queued(std::vector<int>& inflight, int depth) {
    for (auto& [peer, q] : queued_)
      while (!q.empty() && inflight[std::size_t(peer)] < depth) {
        post(q.front().data, q.front().bytes, peer, /*send=*/true);
        q.pop_front();
        ++inflight[std::size_t(peer)];
      }
  }
  // Tests the requests (completed ones become MPI_REQUEST_NULL); MPI's progress happens here.
  int test() {
    if (reqs_.empty()) return MPI_SUCCESS;
    done_.resize(reqs_.size());
    int n = 0;
    return MPI_Testsome(int(reqs_.size()), reqs_.data(), &n, done_.data(), MPI_STATUSES_IGNORE);
  }
  bool all_posted() const {
    for (const auto& [peer, q] : queued_)
      if (!q.empty()) return false;
    return true;
  }
  // Lets the progress thread test and feed this exchange until it completes.
  void register_for_progress() {
    std::lock_guard<std::mutex> lk(g_mpi_lock);
    Progress::get().add(this);
    registered_ = true;
  }
  void wait() override {
    if (waited_) return;
    const std::string what = "halo exchange (tag " + std::to_string(tag_) + ")";
    wait_all(reqs_, what, peers_, [this] {
      if (!all_posted()) Progress::get().pump();  // this rank waits: its queued sends go now
      return all_posted();
    });
    unregister();
    reqs_.clear();
    waited_ = true;
  }

 private:
  void unregister() {
    if (!registered_) return;
    std::lock_guard<std::mutex> lk(g_mpi_lock);
    Progress::get().remove(this);
    registered_ = false;
  }

  int tag_;
  std::vector<MPI_Request> reqs_;
  std::vector<int> peers_;                   // the peer of each request
  std::vector<char> sending_;                // whether each request is a send
  std::map<int, std::deque<Chunk>> queued_;  // sends not posted yet, per peer, in order
  std::vector<int> done_;
  bool registered_ = false, waited_ = false;
};

void Progress::pump() {
  inflight_.assign(std::size_t(ranks_), 0);
  for (MpiPending* p : active_) {
    if (const int rc = p->test(); rc != MPI_SUCCESS) note_error(rc);
    p->count_inflight(inflight_);
  }
  // While this rank waits in a collective, bulk holds back: the collective's small messages
  // would queue behind it on the same connections. (No rank can be waiting for these chunks
  // meanwhile: every rank waits for an exchange before the collectives that follow it.)
  if (g_collectives.load() > 0) return;
  for (MpiPending* p : active_) p->post_queued(inflight_, g_pacing.depth);
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // Every rank's host name, so that a wait that gives up can say where its peers run.
    constexpr int kName = 64;
    char mine[kName] = {};
    gethostname(mine, kName - 1);
    std::vector<char> all(std::size_t(size_) * kName, 0);
    std::vector<MPI_Request> req(1);
    check(locked([&] {
            return MPI_Iallgather(mine, kName, MPI_CHAR, all.data(), kName, MPI_CHAR,
                                  MPI_COMM_WORLD, &req[0]);
          }),
          "MPI_Iallgather");
    wait_all(req, "start-up (host names)");
    for (int r = 0; r < size_; ++r) g_hosts.emplace_back(all.data() + std::size_t(r) * kName);
    // A communicator for agreeing on failures only (first_failed_rank): its all-reduce can never
    // be matched with a collective of WORLD that another rank is waiting in.
    check(locked([&] { return MPI_Comm_idup(MPI_COMM_WORLD, &g_fail_comm, &req[0]); }),
          "MPI_Comm_idup");
    wait_all(req, "start-up (communicators)");
    Progress::get().start(size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "mpi"; }

  std::unique_ptr<Pending> exchange(std::span<const PeerBlock> sends,
                                    std::span<const PeerBlock> recvs, int tag) override {
    // MPI counts are ints, and paced sends travel in chunks: a block is one or more messages
    // with the same tag (MPI keeps their order between one pair of ranks, and both sides cut
    // the block at the same offsets). Only traffic between hosts is paced (both sides agree on
    // that): on one host MPI moves it through shared memory, where nothing queues behind it.
    const auto paced = [&](int peer) {
      return g_pacing.on && g_hosts[std::size_t(peer)] != g_hosts[std::size_t(rank_)];
    };
    const auto chunk = [&](int peer) {
      return paced(peer) ? g_pacing.chunk : std::size_t(1) << 30;
    };
    auto pending = std::make_unique<MpiPending>(tag);
    {
      std::lock_guard<std::mutex> lk(g_mpi_lock);
      for (const PeerBlock& b : recvs)  // receives first: sends can then complete eagerly
        for (std::size_t at = 0, c = chunk(b.peer); at < b.bytes; at += c)
          pending->post(static_cast<char*>(b.data) + at, int(std::min(c, b.bytes - at)), b.peer,
                        false);
      for (const PeerBlock& b : sends)
        for (std::size_t at = 0, c = chunk(b.peer); at < b.bytes; at += c) {
          char* p = static_cast<char*>(b.data) + at;
          const int len = int(std::min(c, b.bytes - at));
          if (paced(b.peer))
            pending->queue(p, len, b.peer);
          else
            pending->post(p, len, b.peer, true);
        }
    }
    pending->register_for_progress();
    {
      std::lock_guard<std::mutex> lk(g_mpi_lock);
      if (!pending->all_posted()) Progress::get().pump();  // the first chunks go now
    }
    return pending;
  }

  void allreduce(float* data, std::int64_t n, ReduceOp op) override {
    reduce(data, n, MPI_FLOAT, op);
  }
  void allreduce(double* data, std::int64_t n, ReduceOp op) override {
    reduce(data, n, MPI_DOUBLE, op);
  }
  void allreduce(std::int64_t* data, std::int64_t n, ReduceOp op) override {
    reduce(data, n, MPI_INT64_T, op);
  }

  std::vector<char> gather(const void* data, std::size_t bytes, int root,
                           std::vector<std::size_t>* counts) override {
    CollectiveScope collective;
    long long mine = static_cast<long long>(bytes);
    std::vector<long long> sizes(std::size_t(size_), 0);
    std::vector<MPI_Request> req(1);
    check(locked([&] {
            return MPI_Iallgather(&mine, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG,
                                  MPI_COMM_WORLD, &req[0]);
          }),
          "MPI_Iallgather");
    wait_all(req, "gather (sizes)");
    // Large payloads (predictions of a big graph) are sent in chunks below INT_MAX bytes.
    std::vector<char> out;
    std::vector<std::size_t> offs(std::size_t(size_) + 1, 0);
    for (int r = 0; r < size_; ++r)
      offs[std::size_t(r) + 1] = offs[std::size_t(r)] + std::size_t(sizes[std::size_t(r)]);
    std::vector<MPI_Request> reqs;
    std::vector<int> gather_peers;  // the peer of each request
    constexpr std::size_t kChunk = std::size_t(1) << 30;
    if (rank_ == root) {
      out.resize(offs.back());
      for (int r = 0; r < size_; ++r) {
        if (r == root) {
          if (bytes) std::memcpy(out.data() + offs[std::size_t(r)], data, bytes);
          continue;
        }
        for (std::size_t at = 0; at < std::size_t(sizes[std::size_t(r)]); at += kChunk) {
          const std::size_t len = std::min(kChunk, std::size_t(sizes[std::size_t(r)]) - at);
          reqs.emplace_back();
          check(locked([&] {
                  return MPI_Irecv(out.data() + offs[std::size_t(r)] + at, int(len), MPI_BYTE, r,
                                   kGatherTag, MPI_COMM_WORLD, &reqs.back());
                }),
                "MPI_Irecv");
          gather_peers.push_back(r);
        }
      }
      if (counts) {
        counts->assign(std::size_t(size_), 0);
        for (int r = 0; r < size_; ++r)
          (*counts)[std::size_t(r)] = std::size_t(sizes[std::size_t(r)]);
      }
    } else {
      for (std::size_t at = 0; at < bytes; at += kChunk) {
        const std::size_t len = std::min(kChunk, bytes - at);
        reqs.emplace_back();
        check(locked([&] {
                return MPI_Isend(static_cast<const char*>(data) + at, int(len), MPI_BYTE, root,
                                 kGatherTag, MPI_COMM_WORLD, &reqs.back());
              }),
              "MPI_Isend");
        gather_peers.push_back(root);
      }
    }
    wait_all(reqs, "gather", gather_peers);
    return out;
  }

  void barrier() override {
    CollectiveScope collective;
    std::vector<MPI_Request> req(1);
    check(locked([&] { return MPI_Ibarrier(MPI_COMM_WORLD, &req[0]); }), "MPI_Ibarrier");
    wait_all(req, "barrier");
  }

  void abort(int code) override {
    if (size_ > 1) locked([&] { return MPI_Abort(MPI_COMM_WORLD, code); });
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    CollectiveScope collective;
    constexpr std::size_t kChunk = std::size_t(1) << 30;
    for (std::size_t at = 0; at < bytes; at += kChunk) {
      std::vector<MPI_Request> req(1);
      check(locked([&] {
              return MPI_Ibcast(static_cast<char*>(data) + at, int(std::min(kChunk, bytes - at)),
                                MPI_BYTE, root, MPI_COMM_WORLD, &req[0]);
            }),
            "MPI_Ibcast");
      wait_all(req, "broadcast");
    }
  }

 private:
  static constexpr int kGatherTag = 1 << 20;

  void reduce(void* data, std::int64_t n, MPI_Datatype type, ReduceOp op) {
    CollectiveScope collective;
    // MPI_Iallreduce's count is an int: reduce in chunks.
    int tsize = 0;
    MPI_Type_size(type, &tsize);
    constexpr std::int64_t kChunk = std::int64_t(1) << 28;
    for (std::int64_t at = 0; at < n; at += kChunk) {
      std::vector<MPI_Request> req(1);
      check(locked([&] {
              return MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + at * tsize,
                                    int(std::min(kChunk, n - at)), type, mpi_op(op), MPI_COMM_WORLD,
                                    &req[0]);
            }),
            "MPI_Iallreduce");
      wait_all(req, "all-reduce");
    }
  }

  int rank_ = 0, size_ = 1;
};

}  // namespace

namespace mpi_internal {
void stop_progress() { Progress::get().stop(); }
}  // namespace mpi_internal

Communicator& world() {
  if (g_mpi) {
    static MpiCommunicator mpi;
    return mpi;
  }
  static LocalCommunicator local;
  return local;
}

}  // namespace halo
