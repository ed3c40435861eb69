// HALO_CUDA_CHECK(call): every CUDA runtime call goes through it, so a failure names the call,
// the file and the line (as NCCL's own code does), and becomes a SystemError, never an exit().
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "halo/graph/error.h"

#define HALO_CUDA_CHECK(call)                                                                 \
  do {                                                                                        \
    const cudaError_t halo_err_ = (call);                                                     \
    if (halo_err_ != cudaSuccess)                                                             \
      throw ::halo::SystemError(std::string(#call) + " failed at " + __FILE__ + ":" +         \
                                std::to_string(__LINE__) + ": " + cudaGetErrorString(halo_err_)); \
  } while (0)
