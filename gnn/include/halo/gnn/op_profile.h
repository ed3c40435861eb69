// Where an epoch goes, per Backend op (`halo train --profile`): while a ProfileScope names an
// OpProfile on a thread, every Backend op that thread runs adds its wall time (synchronous: the
// call's, not a GPU's queue) to the profile's entry for the op. The profile belongs to the thread,
// not to the backend, because ranks may be threads of one process sharing cpu_backend() and
// cuda_backend(); with no profile an op pays one thread-local load to find that out.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace halo {

class OpProfile {
 public:
  // Seconds and calls of one op name.
  struct Entry {
    double seconds = 0;
    std::int64_t calls = 0;
  };
  // Seconds and calls per op name since construction. Ops are named as the table prints them:
  // spmm_consume counts as "spmm", the losses as "loss", the batch-norm statistics and apply as
  // "batch_norm", its two backward sums as "batch_norm_backward".
  const std::map<std::string, Entry>& totals() const { return totals_; }
  // The totals as a table, slowest first.
  std::string report() const;
  // The ops' seconds, all together.
  double seconds() const;
  // The entry a call of `op` adds to (made on first use), looked up before the op runs so the
  // lookup is not timed and the time can be added without allocating.
  Entry& entry(const char* op) { return totals_[op]; }

 private:
  std::map<std::string, Entry> totals_;
};

// Makes `profile` the calling thread's profile for the scope's life (the previous one, usually
// none, after it): ops are timed only where someone asked, and only on their own thread.
class ProfileScope {
 public:
  explicit ProfileScope(OpProfile& profile);
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  OpProfile* previous_;
};

namespace detail {
// The calling thread's profile, null when ops are not timed (backend.cc reads it on every op).
// constinit: constant-initialised, so reading it needs no thread-local init wrapper.
extern constinit thread_local OpProfile* t_profile;
}  // namespace detail

}  // namespace halo
