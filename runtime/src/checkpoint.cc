// Checkpoint folders and the parameter state both trainers store (checkpoint.h). The arrays are
// copied as they are, so a resume continues bit for bit.
#include "halo/runtime/checkpoint.h"

#include <algorithm>
#include <string>

#include "halo/graph/dataset.h"
#include "halo/graph/staging.h"

namespace halo {
namespace fs = std::filesystem;

fs::path epoch_dir(const fs::path& dir, int epoch) {
  return dir / ("epoch-" + std::to_string(epoch));
}

std::vector<int> committed_epochs(const fs::path& dir) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("epoch-", 0) != 0 || !fs::exists(e.path() / "meta.json")) continue;
    try {
      out.push_back(std::stoi(n.substr(6)));
    } catch (const std::logic_error&) {
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void remove_epochs_before(const fs::path& dir, int epoch) {
  for (int e : committed_epochs(dir))
    if (e < epoch) remove_committed_dir(epoch_dir(dir, e), "cannot remove an old checkpoint epoch");
}

void put_adam_state(ArrayDir& a, const std::vector<Param*>& params) {
  for (Param* p : params) {
    a.put(p->name + ".value", p->value.to_host());
    a.put(p->name + ".m", p->m.to_host());
    a.put(p->name + ".v", p->v.to_host());
  }
}

std::vector<float> read_adam_state(const fs::path& dir, const nlohmann::json& meta,
                                   const std::vector<Param*>& params) {
  std::vector<float> out;
  out.reserve(adam_state_size(params));
  for (Param* p : params)
    for (const char* part : {".value", ".m", ".v"}) {
      const Array<float> a =
          map_listed<float>(dir, meta, p->name + part, {}, std::uint64_t(p->value.size()), 1);
      out.insert(out.end(), a.begin(), a.end());
    }
  return out;
}

std::vector<float> adam_state_values(const std::vector<Param*>& params) {
  std::vector<float> out;
  out.reserve(adam_state_size(params));
  for (Param* p : params)
    for (const Matrix* m : {&p->value, &p->m, &p->v}) {
      const std::vector<float> h = m->to_host();
      out.insert(out.end(), h.begin(), h.end());
    }
  return out;
}

std::size_t adam_state_size(const std::vector<Param*>& params) {
  std::size_t n = 0;
  for (Param* p : params) n += 3 * std::size_t(p->value.size());
  return n;
}

const float* set_adam_state(const std::vector<Param*>& params, const float* at) {
  for (Param* p : params)
    for (Matrix* m : {&p->value, &p->m, &p->v}) {
      m->assign(std::vector<float>(at, at + m->size()));
      at += m->size();
    }
  return at;
}

}  // namespace halo
