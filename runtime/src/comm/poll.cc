// poll_until: the deadline-bounded wait the NCCL communicator is built on (see comm.h).
#include <chrono>
#include <string>
#include <thread>

#include "halo/graph/error.h"
#include "halo/runtime/comm/comm.h"

namespace halo {

void poll_until(const std::function<bool()>& poll, double timeout_s, const std::string& what,
                const std::function<void()>& give_up) {
  const auto start = std::chrono::steady_clock::now();
  for (long spin = 0;; ++spin) {
    if (poll()) return;
    // Spin first (an exchange usually completes within microseconds), then sleep a little, so
    // a long wait (a slow peer) does not take a core from the rank's compute threads.
    if (spin > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(spin > 20000 ? 200 : 20));
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s) {
      give_up();
      throw SystemError(what + ": no answer from the other ranks after " +
                        std::to_string(int(waited)) +
                        " s (a rank died or hangs; HALO_COMM_TIMEOUT_S sets the limit)");
    }
  }
}

}  // namespace halo
