/* bench_cuda_util.h - device-side input fillers shared by the GPU benchmarks
   (bench/bench_*_cuda.cu). Include after the CUDA runtime (or tests/cuda_sim.h). */
#ifndef ATTNKIT_BENCH_CUDA_UTIL_H
#define ATTNKIT_BENCH_CUDA_UTIL_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* n floats uniform in [-scale/2, scale/2) from a seeded xorshift, on the device */
static float *dfill(size_t n, float scale, unsigned seed)
{
    float *h = (float *)malloc(n * sizeof(float)), *d = NULL;
    size_t i;
    unsigned long long s = 0x9E3779B97F4A7C15ULL * (seed + 1);
    if (!h || cudaMalloc((void **)&d, n * sizeof(float)) != cudaSuccess) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (i = 0; i < n; i++) {
        s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
        h[i] = scale * ((float)((s * 0x2545F4914F6CDD1DULL) >> 40) / 16777216.0f - 0.5f);
    }
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    free(h);
    return d;
}

/* memberships (B,T,R), R <= 64, on the device: rows of a softmax, smooth in t */
static float *dmu_fill(int B, int T, int R)
{
    size_t n = (size_t)B * T * R, i;
    float *h = (float *)malloc(n * sizeof(float)), *d = NULL;
    if (!h || R > 64 || cudaMalloc((void **)&d, n * sizeof(float)) != cudaSuccess) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (i = 0; i < (size_t)B * T; i++) {
        int t = (int)(i % (size_t)T), r;
        double s = 0.0, l[64];
        for (r = 0; r < R; r++) {
            double x = T > 1 ? (double)t / (T - 1) : 0.0, c = (r + 0.5) / R;
            l[r] = -8.0 * (x - c) * (x - c) + 0.2 * (double)((i * 7 + (size_t)r * 13) % 11) / 11.0;
            s += exp(l[r]);
        }
        for (r = 0; r < R; r++) h[i * R + r] = (float)(exp(l[r]) / s);
    }
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    free(h);
    return d;
}
#endif
