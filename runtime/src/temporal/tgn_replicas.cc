// TGN replicated across ranks (see tgn_replicas.h).
#include "temporal/tgn_replicas.h"

#include <algorithm>
#include <vector>

#include "halo/graph/dataset.h"

namespace halo {

TgnOptions resolved(const TgnOptions& o) {
  TgnOptions r = o;
  if (r.model == TgnModel::kJodie) r.embedding = TgnEmbedding::kTime;
  return r;
}

EventStream stream_of(const TemporalDataset& d) {
  EventStream s;
  s.nodes = d.num_nodes;
  s.events = d.num_events();
  s.src = d.src.data();
  s.dst = d.dst.data();
  s.time = d.time.data();
  s.de = d.edge_feature_dim;
  s.efeat = d.edge_features.empty() ? nullptr : d.edge_features.data();
  return s;
}

TgnConfig tgn_config(const TgnOptions& o) {
  TgnConfig c;
  c.memory_dim = o.memory_dim;
  c.embed_dim = o.embed_dim;
  c.time_dim = o.time_dim;
  c.static_dim = o.static_memory;
  c.heads = o.heads;
  c.embedding = o.embedding;
  c.mean_messages = o.aggregator == TgnAggregator::kMean;
  c.neighbors_before_batch = o.neighbors_before == TgnNeighborsBefore::kBatch;
  c.learn_time_frequencies = o.learn_time_frequencies;
  c.seed = o.seed;
  return c;
}

TgnReplicas::TgnReplicas(const EventStream& events, const TgnOptions& o, Communicator* comm)
    : model_(events, tgn_config(o)), comm_(comm), lr_(o.lr) {}

std::int64_t TgnReplicas::slice_begin(std::int64_t n) const {
  return comm_ && !independent_ ? n * comm_->rank() / comm_->size() : 0;
}

std::int64_t TgnReplicas::slice_size(std::int64_t n) const {
  return comm_ && !independent_ ? n * (comm_->rank() + 1) / comm_->size() - slice_begin(n) : n;
}

double TgnReplicas::batch(Backend& be, RecentSampler& sampler, const std::vector<std::int64_t>& ids,
                          const std::vector<NodeId>& neg, std::int64_t step,
                          std::vector<float>* pos_scores, std::vector<float>* neg_scores) {
  const std::int64_t n = std::int64_t(ids.size());
  const bool train = step != 0;
  double loss = model_.score(be, sampler, ids, {slice_begin(n), slice_size(n)}, neg, train,
                             pos_scores, neg_scores);
  if (train) {
    if (step < 0) {
      reduce(be, &loss);
      return loss;
    }
    reduce_and_step(be, step, &loss);
  }
  model_.commit(ids);
  return loss;
}

// Sums (exact mode) or averages (independent memories) every gradient and the loss across
// ranks in one all-reduce of one packed buffer; nothing on one rank. The buffer is host memory
// for MPI (device gradients staged through it), or the backend's own with device_comm_ (NCCL
// sums GPU memory in place); either way the loss is read back before the average, and the
// average is the same float products (the scale op, on the buffer's side).
void TgnReplicas::reduce(Backend& be, double* loss) {
  if (!comm_ || comm_->size() == 1) return;
  const Device d = device_comm_ ? be.device() : Device::kCpu;
  std::int64_t n = 0;
  for (Param* p : params()) n += p->grad.size();
  if (packed_.device() != d) {
    packed_ = Matrix();
    packed_.set_device(d);
  }
  packed_.resize(1, n + 1);
  n = 0;
  for (Param* p : params()) {
    copy_floats(d, packed_.data() + n, p->grad.device(), p->grad.data(), p->grad.size());
    n += p->grad.size();
  }
  float sum = float(*loss);
  copy_floats(d, packed_.data() + n, Device::kCpu, &sum, 1);
  if (device_comm_)
    device_comm_->allreduce_device(packed_.data(), n + 1);
  else
    comm_->allreduce(packed_.data(), n + 1);
  copy_floats(Device::kCpu, &sum, d, packed_.data() + n, 1);
  const float scale = independent_ ? 1.f / float(comm_->size()) : 1.f;
  if (independent_) (device_comm_ ? be : cpu_backend()).scale(packed_.view(), scale);
  n = 0;
  for (Param* p : params()) {
    copy_floats(p->grad.device(), p->grad.data(), d, packed_.data() + n, p->grad.size());
    n += p->grad.size();
  }
  *loss = double(sum) * double(scale);
}

// The all-reduce and the Adam step every rank takes together.
void TgnReplicas::reduce_and_step(Backend& be, std::int64_t step, double* loss) {
  reduce(be, loss);
  AdamStep a;
  a.lr = lr_;
  a.step = step;
  // Every parameter in one op (the CPU's one parallel region): the same bits as one per tensor.
  std::vector<AdamTensor> tensors;
  for (Param* p : params())
    tensors.push_back({p->value.data(), p->grad.data(), p->m.data(), p->v.data(), p->value.size()});
  be.adam_all(tensors.data(), tensors.size(), a);
}

double TgnReplicas::empty_step(Backend& be, std::int64_t step) {
  for (Param* p : params()) p->grad.fill(0.f);
  double loss = 0;
  reduce_and_step(be, step, &loss);
  return loss;
}

void TgnReplicas::sync_state(int root) {
  if (!comm_ || comm_->size() == 1) return;
  NodeMemory& memory = model_.memory();
  MessageStore& messages = model_.messages();
  auto broadcast_floats = [&](Matrix& m) {
    if (m.device() == Device::kCpu) {
      comm_->broadcast(m.data(), sizeof(float) * std::size_t(m.size()), root);
      return;
    }
    std::vector<float> host = m.to_host();  // device tables travel through a host copy
    comm_->broadcast(host.data(), sizeof(float) * host.size(), root);
    m.assign(host);
  };
  broadcast_floats(memory.rows);
  broadcast_floats(messages.self);
  broadcast_floats(messages.other);
  broadcast_floats(messages.edge);
  comm_->broadcast(memory.last_update.data(), sizeof(double) * memory.last_update.size(), root);
  comm_->broadcast(messages.time.data(), sizeof(double) * messages.time.size(), root);
  comm_->broadcast(messages.has_message.data(), messages.has_message.size(), root);
  std::vector<NodeId>& pending = messages.pending;
  std::int64_t np = std::int64_t(pending.size());
  comm_->broadcast(&np, sizeof np, root);
  pending.resize(std::size_t(np));
  comm_->broadcast(pending.data(), sizeof(NodeId) * pending.size(), root);
  comm_->broadcast(messages.count.data(), sizeof(std::int32_t) * messages.count.size(), root);
  if (messages.mean) {  // the pending nodes' message times, flattened in pending order
    std::vector<double> flat;
    if (comm_->rank() == root)
      for (NodeId v : pending)
        flat.insert(flat.end(), messages.times[std::size_t(v)].begin(),
                    messages.times[std::size_t(v)].end());
    std::int64_t n = std::int64_t(flat.size());
    comm_->broadcast(&n, sizeof n, root);
    flat.resize(std::size_t(n));
    comm_->broadcast(flat.data(), sizeof(double) * flat.size(), root);
    for (auto& t : messages.times) t.clear();
    std::size_t at = 0;
    for (NodeId v : pending) {
      const std::size_t c = std::size_t(messages.count[std::size_t(v)]);
      messages.times[std::size_t(v)].assign(flat.begin() + std::ptrdiff_t(at),
                                            flat.begin() + std::ptrdiff_t(at + c));
      at += c;
    }
  }
}

}  // namespace halo
