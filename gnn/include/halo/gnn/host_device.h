// HALO_HOST_DEVICE: a function compiled for the host and, in CUDA sources, for the device too, so
// code shared by the CPU and the GPU (bf16.h, temporal/cos_sin.h) is one expression on both.
#pragma once

#ifdef __CUDACC__
#define HALO_HOST_DEVICE __host__ __device__
#else
#define HALO_HOST_DEVICE
#endif
