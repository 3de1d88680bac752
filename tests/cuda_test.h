/* cuda_test.h - what a tests/parity_*.cu includes first.

   Built by nvcc, it brings the CUDA runtime; built by g++/clang++ with ATTNKIT_CUDA_SIM
   defined (the `make test` simulation builds), it brings tests/cuda_sim.h instead, so the
   same parity test runs the same kernels on the CPU. Include it before any attnkit header
   with its IMPLEMENTATION macro, so the header's CUDA section (cuda/X.cuh) is compiled too.
   PARITY_BACKEND names what the binary runs on, for its first output line. */
#ifndef ATTNKIT_CUDA_TEST_H
#define ATTNKIT_CUDA_TEST_H
#ifdef ATTNKIT_CUDA_SIM
#include "tests/cuda_sim.h"
#define PARITY_BACKEND "simulation"
#define PARITY_LAUNCH(k, grid, block, smem, stream, ...) ATTNKIT_SIM_LAUNCH(k, grid, block, smem, stream, __VA_ARGS__)
#define PARITY_DYNAMIC_SHARED(T, name) AK_SIM_DYNAMIC_SHARED(T, name)
#else
#include <cuda_runtime.h>
#define PARITY_BACKEND "gpu"
#define PARITY_LAUNCH(k, grid, block, smem, stream, ...) k<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
#define PARITY_DYNAMIC_SHARED(T, name) extern __shared__ __align__(16) unsigned char parity_dsmem_[]; T *name = (T *)parity_dsmem_
#endif
#include <stdio.h>
#include <vector>

/* 1 if kernels can run here: always in simulation, with a usable device under nvcc */
static inline int parity_device_ok(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
}

/* prints the device line every parity binary starts with */
static inline void parity_print_device(void)
{
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        printf("DEVICE %s (%s, sm_%d%d)\n", prop.name, PARITY_BACKEND, prop.major, prop.minor);
}
#endif
