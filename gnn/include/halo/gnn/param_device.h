// Moving a layer's parameters to the memory its backend computes in (the TGN layers are built
// on the host; the CUDA backend needs them on the GPU).
#pragma once

#include <vector>

#include "halo/gnn/matrix.h"
#include "halo/gnn/model.h"

namespace halo {

// Moves p's value, gradient and Adam moments to d's memory (copied, the old storage freed);
// those already there are untouched, so calling it again is free.
inline void move_param(Param& p, Device d) {
  for (Matrix* m : {&p.value, &p.grad, &p.m, &p.v}) {
    if (m->device() == d) continue;
    Matrix moved;
    moved.set_device(d);
    moved.resize(m->rows(), m->cols());
    copy_floats(d, moved.data(), m->device(), m->data(), m->size());
    *m = std::move(moved);
  }
}

// move_param for each of params.
inline void move_params(const std::vector<Param*>& params, Device d) {
  for (Param* p : params) move_param(*p, d);
}

}  // namespace halo
