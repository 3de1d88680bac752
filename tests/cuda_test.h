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

#include "tests/attnkit_test.h"

/* Helpers every parity test uses: a device copy of a host vector (freed by dfree; an
   empty vector gets a 1-element allocation), the host copy of n device elements (after a
   device synchronisation), normal random host data from the harness's seeded generator,
   and max |x| (the scale for tolerances relative to a buffer). */
template <typename X> static inline X *dput(const std::vector<X> &h)
{
    X *d = NULL;
    if (cudaMalloc((void **)&d, (h.size() ? h.size() : 1) * sizeof(X)) != cudaSuccess) return NULL;
    if (h.size()) cudaMemcpy(d, h.data(), h.size() * sizeof(X), cudaMemcpyHostToDevice);
    return d;
}
template <typename X> static inline std::vector<X> dget(const X *d, size_t n)
{
    std::vector<X> h(n);
    cudaDeviceSynchronize();
    if (n) cudaMemcpy(h.data(), d, n * sizeof(X), cudaMemcpyDeviceToHost);
    return h;
}
static inline void dfree(void *d) { cudaFree(d); }
static inline std::vector<float> randn(size_t n, double scale)
{
    std::vector<float> v(n);
    tt_fill_normal(v.data(), (long)n, scale);
    return v;
}
static inline double maxabs(const std::vector<float> &x)
{
    double m = 0.0;
    for (size_t i = 0; i < x.size(); i++) m = fabs((double)x[i]) > m ? fabs((double)x[i]) : m;
    return m;
}

/* prints the device line every parity binary starts with */
static inline void parity_print_device(void)
{
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        printf("DEVICE %s (%s, sm_%d%d)\n", prop.name, PARITY_BACKEND, prop.major, prop.minor);
}
#endif
