// HALO_CUDA_CHECK(call): every CUDA runtime call goes through it, so a failure names the call,
// the file and the line (as NCCL's own code does), and becomes a SystemError, never an exit().
// HALO_CUBLAS_CHECK and HALO_CUSPARSE_CHECK do the same for cuBLAS and cuSPARSE calls.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <string>

#include "halo/graph/error.h"

#define HALO_CUDA_CHECK(call)                                                                     \
  do {                                                                                            \
    const cudaError_t halo_err_ = (call);                                                         \
    if (halo_err_ != cudaSuccess)                                                                 \
      throw ::halo::SystemError(std::string(#call) + " failed at " + __FILE__ + ":" +             \
                                std::to_string(__LINE__) + ": " + cudaGetErrorString(halo_err_)); \
  } while (0)

#define HALO_CUBLAS_CHECK(call)                                                                   \
  do {                                                                                            \
    const cublasStatus_t halo_st_ = (call);                                                       \
    if (halo_st_ != CUBLAS_STATUS_SUCCESS)                                                        \
      throw ::halo::SystemError(std::string(#call) + " failed at " + __FILE__ + ":" +             \
                                std::to_string(__LINE__) + ": " + cublasGetStatusName(halo_st_) + \
                                " (" + cublasGetStatusString(halo_st_) + ")");                    \
  } while (0)

#define HALO_CUSPARSE_CHECK(call)                                                                  \
  do {                                                                                             \
    const cusparseStatus_t halo_st_ = (call);                                                      \
    if (halo_st_ != CUSPARSE_STATUS_SUCCESS)                                                       \
      throw ::halo::SystemError(std::string(#call) + " failed at " + __FILE__ + ":" +              \
                                std::to_string(__LINE__) + ": " + cusparseGetErrorName(halo_st_) + \
                                " (" + cusparseGetErrorString(halo_st_) + ")");                    \
  } while (0)
