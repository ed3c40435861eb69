// OpProfile's table and the thread's current profile; the ops time themselves in backend.cc.
#include "halo/gnn/op_profile.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace halo {

namespace detail {
constinit thread_local OpProfile* t_profile = nullptr;
}  // namespace detail

ProfileScope::ProfileScope(OpProfile& profile) : previous_(detail::t_profile) {
  detail::t_profile = &profile;
}

ProfileScope::~ProfileScope() { detail::t_profile = previous_; }

double OpProfile::seconds() const {
  double total = 0;
  for (const auto& [name, e] : totals_) total += e.seconds;
  return total;
}

std::string OpProfile::report() const {
  std::vector<std::pair<std::string, Entry>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  for (const auto& r : rows) total += r.second.seconds;
  std::string out = "op                      seconds   share   calls\n";
  char line[128];
  for (const auto& [name, e] : rows) {
    std::snprintf(line, sizeof line, "%-22s %8.3f  %5.1f%%  %6lld\n", name.c_str(), e.seconds,
                  total > 0 ? 100 * e.seconds / total : 0.0, (long long)e.calls);
    out += line;
  }
  return out;
}

}  // namespace halo
