/* parity_sim.cu - tests of the CUDA simulation itself (tests/cuda_sim.h).

   Small kernels with known answers check what the simulation promises: 3-D indices,
   shuffles of every kind with widths and masks, votes, __syncthreads_count, dynamic shared
   memory, atomics, launch limits, the checked memory API. Then what it must catch: a block
   reversal through shared memory without its barrier, and a block reduction missing its
   trailing barrier, must give wrong answers in most launches; a barrier in divergent code
   and a shuffle naming an absent lane must fail the launch instead of hanging; a block that
   reads another block's output of the same launch must see it missing in most launches
   (blocks run in a random order); a block that reads static shared memory before writing
   it must read the poison (0xFF bytes), not the previous block's values; a launch given a
   host or freed pointer must be refused (cudaErrorIllegalAddress); fresh device memory
   reads as NaN.
   Built with nvcc the correct kernels run on the GPU too; the simulation-only cases skip.

   `parity_sim --oob-global` / `--oob-shared` / `--oob-static-shared` run a kernel that
   writes one element past a device buffer / the dynamic shared memory / a static __shared__
   array: under ASan + UBSan the process must die with an overflow report (ASan: heap- or
   global-buffer-overflow; UBSan: index out of bounds for a static array).
   `--misaligned-vector` loads a float4 from an address 4 bytes past a 16-byte boundary (a
   "misaligned address" fault on a GPU): UBSan must report the misaligned load.
   tests/run_tests.sh checks that each of them dies with its report. */
#include "tests/cuda_test.h"
#include "tests/attnkit_test.h"

#include <string.h>
#ifndef ATTNKIT_CUDA_SIM
#include <mma.h>
#include <cuda_bf16.h>
#endif

#define NEED_DEVICE()                                                          \
    do {                                                                       \
        if (!parity_device_ok()) TEST_SKIP("no GPU");                          \
    } while (0)

template <typename X> static X *dalloc(size_t n)
{
    X *d = NULL;
    if (cudaMalloc((void **)&d, n * sizeof(X) + (n == 0)) != cudaSuccess) return NULL;
    cudaMemset(d, 0, n * sizeof(X));
    return d;
}
/* ------------------------------------------------------------ indices */
static __global__ void k_index3d(int *out, int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    int lin = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    out[(z * ny + y) * nx + x] = lin * 1000000 + (int)(gridDim.x * 10000 + gridDim.y * 100 + gridDim.z);
}

static void test_indices_3d(void)
{
    const int bx = 4, by = 3, bz = 2, gx = 3, gy = 2, gz = 5, nx = bx * gx, ny = by * gy, nz = bz * gz;
    int x, y, z, bad = 0;
    NEED_DEVICE();
    int *d = dalloc<int>((size_t)nx * ny * nz);
    PARITY_LAUNCH(k_index3d, dim3(gx, gy, gz), dim3(bx, by, bz), 0, (cudaStream_t)0, d, nx, ny);
    CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
    std::vector<int> h = dget(d, (size_t)nx * ny * nz);
    for (z = 0; z < nz; z++)
        for (y = 0; y < ny; y++)
            for (x = 0; x < nx; x++) {
                int lin = x % bx + bx * (y % by + by * (z % bz));
                bad += h[(size_t)(z * ny + y) * nx + x] != lin * 1000000 + gx * 10000 + gy * 100 + gz;
            }
    CHECK_INT_EQ(bad, 0);
    cudaFree(d);
}

/* ------------------------------------------------------------- shuffles */
/* per thread: [0] xor-butterfly warp sum, [1] shfl_down tree sum (lane 0), [2] shfl idx
   width 8 from lane 3 of the segment, [3] shfl_up by 2 width 16, [4] ballot of odd
   lanes, [5] any(lane == 7), [6] all(lane < 40), [7] __syncthreads_count(even thread) */
static __global__ void k_warp_ops(int *out, const int *in)
{
    int t = threadIdx.x, lane = t & 31, v = in[blockIdx.x * blockDim.x + t], s = v, d = v, o;
    int *r = out + (size_t)(blockIdx.x * blockDim.x + t) * 8;
    for (o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    for (o = 16; o > 0; o >>= 1) d += __shfl_down_sync(0xffffffffu, d, o);
    r[0] = s;
    r[1] = d;
    r[2] = __shfl_sync(0xffffffffu, v, 3, 8);
    r[3] = __shfl_up_sync(0xffffffffu, v, 2, 16);
    r[4] = (int)__ballot_sync(0xffffffffu, lane & 1);
    r[5] = __any_sync(0xffffffffu, lane == 7);
    r[6] = __all_sync(0xffffffffu, lane < 40);
    r[7] = __syncthreads_count((t & 1) == 0);
}

static void test_warp_primitives(void)
{
    const int nb = 3, nt = 96;
    int b, t, bad = 0;
    NEED_DEVICE();
    std::vector<int> in((size_t)nb * nt);
    for (t = 0; t < nb * nt; t++) in[t] = (t * 7919) % 101 - 50;
    int *din = dalloc<int>(in.size()), *dout = dalloc<int>(in.size() * 8);
    cudaMemcpy(din, in.data(), in.size() * sizeof(int), cudaMemcpyHostToDevice);
    PARITY_LAUNCH(k_warp_ops, nb, nt, 0, (cudaStream_t)0, dout, din);
    CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
    std::vector<int> h = dget(dout, in.size() * 8);
    for (b = 0; b < nb; b++)
        for (t = 0; t < nt; t++) {
            const int *r = &h[(size_t)(b * nt + t) * 8];
            int lane = t & 31, w0 = b * nt + (t & ~31), sum = 0, dsum = 0, k;
            for (k = 0; k < 32; k++) sum += in[w0 + k];
            /* shfl_down tree: lane l ends with the sum of lanes l .. l + 31 clipped the
               way the down-shifts clip (a lane past the warp keeps its own value) */
            {
                int vals[32], o2;
                for (k = 0; k < 32; k++) vals[k] = in[w0 + k];
                for (o2 = 16; o2 > 0; o2 >>= 1) {
                    int nv[32];
                    for (k = 0; k < 32; k++) nv[k] = vals[k] + (k + o2 < 32 ? vals[k + o2] : vals[k]);
                    memcpy(vals, nv, sizeof vals);
                }
                dsum = vals[lane];
            }
            bad += r[0] != sum;
            bad += r[1] != dsum;
            bad += r[2] != in[w0 + (lane & ~7) + 3];
            bad += r[3] != ((lane & 15) >= 2 ? in[w0 + lane - 2] : in[w0 + lane]);
            bad += (unsigned)r[4] != 0xaaaaaaaau;
            bad += r[5] != 1;
            bad += r[6] != 1;
            bad += r[7] != nt / 2;
        }
    CHECK_INT_EQ(bad, 0);
    cudaFree(din);
    cudaFree(dout);
}

/* ------------------------------------------ dynamic shared memory, barriers */
/* reverse each block's slice through dynamic shared memory */
static __global__ void k_reverse(float *out, const float *in, int with_barrier)
{
    PARITY_DYNAMIC_SHARED(float, buf);
    int t = threadIdx.x, n = blockDim.x;
    buf[t] = in[blockIdx.x * n + t];
    if (with_barrier) __syncthreads();
    out[blockIdx.x * n + t] = buf[n - 1 - t];
}

/* block sum through shared memory, twice in a row, the classic way; `trailing` = 0
   drops the barrier that keeps the second call from overwriting sh[0] before every
   thread has read the first result */
static __device__ float block_sum(float v, float *sh, int trailing)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5, o;
    for (o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = (threadIdx.x < (unsigned)nw) ? sh[threadIdx.x] : 0.0f;
    if (warp == 0)
        for (o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    v = sh[0];
    if (trailing) __syncthreads();
    return v;
}

static __global__ void k_two_sums(float *out, const float *in, int trailing)
{
    __shared__ float sh[32];
    float x = in[blockIdx.x * blockDim.x + threadIdx.x];
    float a = block_sum(x, sh, trailing);
    float b = block_sum(2.0f * x, sh, trailing);
    out[blockIdx.x * blockDim.x + threadIdx.x] = a + 1000.0f * b;
}

static int run_reverse(int with_barrier, int nb, int nt, float *din, float *dout, const std::vector<float> &in)
{
    int i, bad = 0;
    cudaMemset(dout, 0, in.size() * sizeof(float));
    PARITY_LAUNCH(k_reverse, nb, nt, nt * sizeof(float), (cudaStream_t)0, dout, din, with_barrier);
    if (cudaGetLastError() != cudaSuccess) return -1;
    std::vector<float> h = dget(dout, in.size());
    for (i = 0; i < nb * nt; i++) bad += h[i] != in[(i / nt) * nt + nt - 1 - i % nt];
    return bad;
}

static int run_two_sums(int trailing, int nb, int nt, float *din, float *dout, const std::vector<float> &in)
{
    int b, t, bad = 0;
    PARITY_LAUNCH(k_two_sums, nb, nt, 0, (cudaStream_t)0, dout, din, trailing);
    if (cudaGetLastError() != cudaSuccess) return -1;
    std::vector<float> h = dget(dout, in.size());
    for (b = 0; b < nb; b++) {
        float s = 0.0f;
        for (t = 0; t < nt; t++) s += in[b * nt + t]; /* small integers: exact in any order */
        for (t = 0; t < nt; t++) bad += h[b * nt + t] != s + 1000.0f * 2.0f * s;
    }
    return bad;
}

static void test_barriers_and_races(void)
{
    const int nb = 4, nt = 256, runs = 20;
    int i;
    NEED_DEVICE();
    std::vector<float> in((size_t)nb * nt);
    for (i = 0; i < nb * nt; i++) in[i] = (float)((i * 37) % 19 - 9);
    float *din = dalloc<float>(in.size()), *dout = dalloc<float>(in.size());
    cudaMemcpy(din, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice);
    /* the correct kernels are right every time */
    for (i = 0; i < runs; i++) {
        CHECK_INT_EQ(run_reverse(1, nb, nt, din, dout, in), 0);
        CHECK_INT_EQ(run_two_sums(1, nb, nt, din, dout, in), 0);
    }
#ifdef ATTNKIT_CUDA_SIM
    /* the racy ones are wrong in most launches (on a GPU they may well pass) */
    int wrong_rev = 0, wrong_sum = 0;
    for (i = 0; i < runs; i++) {
        wrong_rev += run_reverse(0, nb, nt, din, dout, in) != 0;
        wrong_sum += run_two_sums(0, nb, nt, din, dout, in) != 0;
    }
    printf("missing barrier caught in %d/%d (reversal) and %d/%d (reduction) launches\n", wrong_rev, runs, wrong_sum, runs);
    CHECK(wrong_rev > runs / 2);
    CHECK(wrong_sum > runs / 2);
#endif
    cudaFree(din);
    cudaFree(dout);
}

/* ------------------------------------------------------------- block order */
#ifdef ATTNKIT_CUDA_SIM /* the kernels below are wrong by design: simulation only */
/* out[b] = out[b - 1] + 1: block b reads what block b - 1 of the same launch writes, a bug
   on a GPU (blocks run in any order and at once). Run x-fastest, one block after another,
   it would give 1, 2, 3, ... every time. `seen` counts the visits of each block. */
static __global__ void k_chain(int *out, int *seen)
{
    unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (threadIdx.x == 0) {
        out[b] = b == 0 ? 1 : out[b - 1] + 1;
        seen[b] += 1;
    }
}

/* launches k_chain `runs` times on an (nx, ny, nz) grid of nt-thread blocks; returns how
   many launches gave the wrong chain, or -1 when a block ran other than once per launch */
static int run_chain(unsigned nx, unsigned ny, unsigned nz, int nt, int runs)
{
    const size_t n = (size_t)nx * ny * nz;
    int r, wrong = 0;
    size_t i;
    int *dout = dalloc<int>(n), *dseen = dalloc<int>(n);
    if (!dout || !dseen) { cudaFree(dout); cudaFree(dseen); return -1; }
    for (r = 0; r < runs; r++) {
        int bad = 0;
        cudaMemset(dout, 0, n * sizeof(int));
        PARITY_LAUNCH(k_chain, dim3(nx, ny, nz), nt, 0, (cudaStream_t)0, dout, dseen);
        if (cudaGetLastError() != cudaSuccess) { wrong = -1; break; }
        std::vector<int> h = dget(dout, n);
        for (i = 0; i < n; i++) bad += h[i] != (int)i + 1;
        wrong += bad != 0;
    }
    if (wrong >= 0) {
        std::vector<int> seen = dget(dseen, n);
        for (i = 0; i < n; i++)
            if (seen[i] != runs) { wrong = -1; break; }
    }
    cudaFree(dout);
    cudaFree(dseen);
    return wrong;
}

static void test_block_order(void)
{
    const int runs = 10;
    /* a shuffled grid (up to 2^16 blocks) and a rotated or reversed one (more blocks) */
    int w_small = run_chain(7, 3, 2, 32, runs), w_large = run_chain(70001, 1, 1, 1, 4);
    printf("inter-block dependence caught in %d/%d launches (42 blocks), %d/4 (70,001 blocks)\n",
           w_small, runs, w_large);
    CHECK(w_small > runs / 2);
    CHECK(w_large >= 2);
}

/* ------------------------------------------- shared memory is not initialised */
/* Sums into static __shared__ memory without zeroing it first: on a GPU a block starts
   with whatever the memory held; the simulation fills it with 0xFF bytes before every
   block, so the bug gives NaN (and -1 for an int) in every block, not a plausible value. */
static __global__ void k_uninit_shared(float *out, int *iout)
{
    __shared__ float acc[4];
    __shared__ int cnt;
    if (threadIdx.x == 0) { acc[1] += 1.0f; cnt += 1; }
    __syncthreads();
    if (threadIdx.x == 0) { out[blockIdx.x] = acc[1]; iout[blockIdx.x] = cnt; }
}

static void test_uninitialised_shared(void)
{
    const int nb = 5;
    int b, nan_blocks = 0, int_blocks = 0;
    float *d = dalloc<float>(nb);
    int *di = dalloc<int>(nb);
    PARITY_LAUNCH(k_uninit_shared, nb, 64, 0, (cudaStream_t)0, d, di);
    CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
    std::vector<float> h = dget(d, nb);
    std::vector<int> hi = dget(di, nb);
    for (b = 0; b < nb; b++) {
        nan_blocks += h[b] != h[b];
        int_blocks += hi[b] == 0; /* 0xFFFFFFFF + 1 */
    }
    printf("read of unwritten static shared memory: NaN in %d/%d blocks, poisoned int in %d/%d\n",
           nan_blocks, nb, int_blocks, nb);
    CHECK_INT_EQ(nan_blocks, nb);
    CHECK_INT_EQ(int_blocks, nb);
    cudaFree(d);
    cudaFree(di);
}
#else
static void test_block_order(void) { TEST_SKIP("simulation-only check (the kernel is wrong on a GPU by design)"); }
static void test_uninitialised_shared(void) { TEST_SKIP("simulation-only check (the kernel reads uninitialised memory by design)"); }
#endif

/* ----------------------------------------------------------------- atomics */
static __global__ void k_histogram(int *hist, const int *v, int n, int nbins)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[v[i] % nbins], 1);
}

static void test_atomics(void)
{
    const int n = 5000, nbins = 17;
    int i, bad = 0;
    NEED_DEVICE();
    std::vector<int> v(n), want(nbins, 0);
    for (i = 0; i < n; i++) { v[i] = (i * 2654435761u) % 1000; want[v[i] % nbins]++; }
    int *dv = dalloc<int>(n), *dh = dalloc<int>(nbins);
    cudaMemcpy(dv, v.data(), n * sizeof(int), cudaMemcpyHostToDevice);
    PARITY_LAUNCH(k_histogram, (n + 127) / 128, 128, 0, (cudaStream_t)0, dh, dv, n, nbins);
    std::vector<int> h = dget(dh, nbins);
    for (i = 0; i < nbins; i++) bad += h[i] != want[i];
    CHECK_INT_EQ(bad, 0);
    cudaFree(dv);
    cudaFree(dh);
}

/* ---------------------------------------------------------------- WMMA */
/* C (32x32) = A (32xK) B (KxN), A row-major, B col-major (i.e. B^T row-major, as attention
   uses K), one warp per 16x16 output tile, bf16 or tf32 inputs, fp32 accumulate; then the
   accumulator is reloaded, scaled by 0.5 element-wise and stored again (a uniform fragment
   op). On a GPU this checks the emulation's reading of the API against the hardware. */
#if defined(ATTNKIT_CUDA_SIM) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || !defined(__CUDA_ARCH__)
#define SIM_WMMA_OK 1
#endif
#ifdef SIM_WMMA_OK
/* one warp's 16x16 tile: C = A B over K, stored, reloaded, halved element-wise, stored */
template <typename TA, int KK, typename E>
static __device__ void wmma_tile(float *c, float *cs, const E *as, const E *bs, int K, int tr, int tc)
{
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, KK, TA, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, KK, TA, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, KK, float> fc;
    int e, k0;
    wmma::fill_fragment(fc, 0.0f);
    for (k0 = 0; k0 < K; k0 += KK) {
        wmma::load_matrix_sync(fa, as + tr * K + k0, K);
        wmma::load_matrix_sync(fb, bs + tc * K + k0, K);
        wmma::mma_sync(fc, fa, fb, fc);
    }
    wmma::store_matrix_sync(cs + tr * 32 + tc, fc, 32, wmma::mem_row_major);
    __syncwarp();
    wmma::load_matrix_sync(fc, cs + tr * 32 + tc, 32, wmma::mem_row_major);
    for (e = 0; e < fc.num_elements; e++) fc.x[e] *= 0.5f;
    wmma::store_matrix_sync(c + tr * 32 + tc, fc, 32, wmma::mem_row_major);
}
#endif

static __global__ void k_wmma(float *c, const float *a, const float *b, int K, int tf32)
{
#ifdef SIM_WMMA_OK
    __shared__ __align__(32) __nv_bfloat16 ah[32 * 32], bh[32 * 32];
    __shared__ __align__(32) float af[32 * 32], bf[32 * 32], cs[32 * 32];
    const int w = threadIdx.x >> 5, tr = (w >> 1) * 16, tc = (w & 1) * 16;
    int e;
    for (e = threadIdx.x; e < 32 * K; e += blockDim.x) {
        ah[e] = __float2bfloat16(a[e]);
        bh[e] = __float2bfloat16(b[e]);
        af[e] = nvcuda::wmma::__float_to_tf32(a[e]);
        bf[e] = nvcuda::wmma::__float_to_tf32(b[e]);
    }
    __syncthreads();
    if (tf32) wmma_tile<nvcuda::wmma::precision::tf32, 8>(c, cs, af, bf, K, tr, tc);
    else wmma_tile<__nv_bfloat16, 16>(c, cs, ah, bh, K, tr, tc);
#else
    (void)c; (void)a; (void)b; (void)K; (void)tf32;
#endif
}

/* the input rounding on the host: bf16 nearest-even, tf32 nearest (ties away) */
static float host_bf16(float x)
{
    unsigned u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}
static float host_tf32(float x)
{
    unsigned u;
    memcpy(&u, &x, 4);
    u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&x, &u, 4);
    return x;
}

static void test_wmma(void)
{
    const int K = 32;
    int mode, i, j, kk;
    std::vector<float> a(32 * K), b(32 * K), c(32 * 32);
    float *da, *db, *dc;
    NEED_DEVICE();
    da = dalloc<float>(32 * K);
    db = dalloc<float>(32 * K);
    dc = dalloc<float>(32 * 32);
    tt_fill_uniform(a.data(), 32 * K, -3.0, 3.0);
    tt_fill_uniform(b.data(), 32 * K, -4.0, 4.0);
    CHECK_INT_EQ(cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    CHECK_INT_EQ(cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    for (mode = 0; mode < 2; mode++) {
        double worst = 0.0, worst_plain = 0.0;
        PARITY_LAUNCH(k_wmma, 1, 128, 0, (cudaStream_t)0, dc, da, db, K, mode);
        CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
        CHECK_INT_EQ(cudaMemcpy(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        for (i = 0; i < 32; i++)
            for (j = 0; j < 32; j++) {
                double s = 0.0, sp = 0.0, mag = 0.0;
                for (kk = 0; kk < K; kk++) {
                    float x = a[(size_t)i * K + kk], y = b[(size_t)j * K + kk];
                    float xr = mode ? host_tf32(x) : host_bf16(x), yr = mode ? host_tf32(y) : host_bf16(y);
                    s += (double)xr * yr;
                    sp += (double)x * y;
                    mag += fabs((double)x * y);
                }
                worst = fmax(worst, fabs(2.0 * c[(size_t)i * 32 + j] - s) / mag);
                worst_plain = fmax(worst_plain, fabs(2.0 * c[(size_t)i * 32 + j] - sp) / mag);
            }
        /* fp32 accumulation of the rounded products: ~K * 2^-24; the rounding itself:
           bf16 2^-8, tf32 2^-11 relative per input */
        CHECK(worst < 1e-5);
        CHECK(worst_plain < (mode ? 2e-3 : 1.6e-2));
        CHECK(worst_plain > (mode ? 1e-6 : 1e-5)); /* the inputs really were rounded */
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
}

/* -------------------------------------------- what the simulation refuses */
#ifdef ATTNKIT_CUDA_SIM
static __global__ void k_divergent_barrier(int *out)
{
    if (threadIdx.x < 16) __syncthreads(); /* half the block never arrives */
    out[threadIdx.x] = 1;
}

static __global__ void k_bad_shuffle(int *out)
{
    int v = (int)threadIdx.x;
    if (threadIdx.x < 16) v = __shfl_sync(0x0000ffffu, v, 20); /* lane 20 is not in the mask */
    out[threadIdx.x] = v;
}

static __global__ void k_absent_lane(int *out)
{
    int v = (int)threadIdx.x;
    if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1); /* lanes 16..31 never come */
    out[threadIdx.x] = v;
}

/* out[t] = t + (sum of in[0:n]) for the block's threads */
static __global__ void k_touch(float *out, const int *in, int n)
{
    int i, acc = 0;
    for (i = 0; i < n; i++) acc += in[i];
    out[threadIdx.x] = (float)(threadIdx.x + acc);
}

static __global__ void k_big_smem(float *out)
{
    PARITY_DYNAMIC_SHARED(float, buf);
    buf[threadIdx.x] = 1.0f;
    out[threadIdx.x] = buf[threadIdx.x];
}

/* WMMA misuse: an ldm that is not a multiple of 16 bytes, a tile pointer that is not 32-byte
   aligned, and a warp-collective reached by half the warp */
static __global__ void k_wmma_misuse(float *out, int which)
{
    using namespace nvcuda;
    __shared__ __align__(32) __nv_bfloat16 t[16 * 40];
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    int e;
    for (e = threadIdx.x; e < 16 * 40; e += blockDim.x) t[e] = __float2bfloat16(1.0f);
    __syncthreads();
    if (which == 0) wmma::load_matrix_sync(fa, t, 20);         /* 40 bytes */
    else if (which == 1) wmma::load_matrix_sync(fa, t + 8, 24); /* 16-byte aligned only */
    else if (threadIdx.x < 16) wmma::load_matrix_sync(fa, t, 24);
    out[threadIdx.x] = 1.0f;
}

/* a warp stages a 16x16 bf16 tile (each lane 8 entries) and loads it into a fragment;
   with_sync 0 drops the __syncwarp between the stores and the load (a race: early lanes
   load entries others have not written yet). out (16x16) = tile * I. */
static __global__ void k_wmma_stage(float *out, int with_sync)
{
    using namespace nvcuda;
    PARITY_DYNAMIC_SHARED(__nv_bfloat16, t);
    __shared__ __align__(32) __nv_bfloat16 eye[16 * 16];
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    int e;
    for (e = threadIdx.x; e < 256; e += 32) {
        t[e] = __float2bfloat16((float)(e % 17));
        eye[e] = __float2bfloat16(e / 16 == e % 16 ? 1.0f : 0.0f);
    }
    if (with_sync) __syncwarp();
    wmma::load_matrix_sync(fa, t, 16);
    wmma::load_matrix_sync(fb, eye, 16);
    wmma::fill_fragment(fc, 0.0f);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(out, fc, 16, wmma::mem_row_major);
}

static int run_wmma_stage(int with_sync, float *d, std::vector<float> &h)
{
    int e;
    PARITY_LAUNCH(k_wmma_stage, 1, 32, 256 * sizeof(__nv_bfloat16), (cudaStream_t)0, d, with_sync);
    if (cudaGetLastError() != cudaSuccess) return -1;
    cudaMemcpy(h.data(), d, 256 * sizeof(float), cudaMemcpyDeviceToHost);
    for (e = 0; e < 256; e++)
        if (h[(size_t)e] != (float)(e % 17)) return 1;
    return 0;
}

static void test_simulation_refuses(void)
{
    int *d = dalloc<int>(1024);
    float *f = dalloc<float>(1024), host[4];
    cudaPointerAttributes at;
    (void)cudaGetLastError();
    PARITY_LAUNCH(k_divergent_barrier, 1, 64, 0, (cudaStream_t)0, d);
    CHECK_INT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    PARITY_LAUNCH(k_bad_shuffle, 1, 32, 0, (cudaStream_t)0, d);
    CHECK_INT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    PARITY_LAUNCH(k_absent_lane, 1, 32, 0, (cudaStream_t)0, d);
    CHECK_INT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    for (int which = 0; which < 3; which++) {
        PARITY_LAUNCH(k_wmma_misuse, 1, 32, 0, (cudaStream_t)0, f, which);
        CHECK_INT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    }
    {
        /* a wmma load right after the lanes' staging stores, without __syncwarp: wrong in
           most launches; with it: right in all */
        std::vector<float> h(256);
        int bad = 0, l;
        for (l = 0; l < 20; l++) bad += run_wmma_stage(0, f, h) == 1;
        printf("missing __syncwarp before a wmma load caught in %d/20 launches\n", bad);
        CHECK(bad > 10);
        for (l = 0; l < 5; l++) CHECK_INT_EQ(run_wmma_stage(1, f, h), 0);
    }
    /* launch limits */
    PARITY_LAUNCH(k_divergent_barrier, 1, 2048, 0, (cudaStream_t)0, d);
    CHECK_INT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    PARITY_LAUNCH(k_big_smem, 1, 32, 64 << 10, (cudaStream_t)0, f);
    CHECK_INT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    CHECK_INT_EQ(cudaFuncSetAttribute(k_big_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10), cudaSuccess);
    PARITY_LAUNCH(k_big_smem, 1, 32, 64 << 10, (cudaStream_t)0, f);
    CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
    /* memory API: host pointers are not device pointers */
    CHECK_INT_EQ(cudaMemcpy(host, f, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(cudaMemcpy(host, f, sizeof host, cudaMemcpyHostToDevice) != cudaSuccess);
    CHECK(cudaMemcpy(f + 1022, host, sizeof host, cudaMemcpyHostToDevice) != cudaSuccess); /* runs past the end */
    CHECK(cudaFree(host) != cudaSuccess);
    (void)cudaGetLastError();
    CHECK_INT_EQ(cudaPointerGetAttributes(&at, f + 7), cudaSuccess);
    CHECK_INT_EQ(at.type, cudaMemoryTypeDevice);
    CHECK_INT_EQ(cudaPointerGetAttributes(&at, host), cudaSuccess);
    CHECK(at.type != cudaMemoryTypeDevice);
    /* a kernel given a host pointer (or a freed one) is refused as a GPU would fault;
       pinned host memory, NULL, an interior pointer and one past the end are fine */
    {
        float *pin = NULL, *gone = dalloc<float>(64);
        int hv[4] = {0, 1, 2, 3};
        CHECK_INT_EQ(cudaMallocHost((void **)&pin, 64 * sizeof(float)), cudaSuccess);
        cudaFree(gone);
        PARITY_LAUNCH(k_touch, 1, 32, 0, (cudaStream_t)0, host, (const int *)d, 4);
        CHECK_INT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
        PARITY_LAUNCH(k_touch, 1, 32, 0, (cudaStream_t)0, gone, (const int *)d, 4);
        CHECK_INT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
        PARITY_LAUNCH(k_touch, 1, 32, 0, (cudaStream_t)0, f, (const int *)hv, 4);
        CHECK_INT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
        PARITY_LAUNCH(k_touch, 1, 32, 0, (cudaStream_t)0, pin, (const int *)d, 4);
        CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
        PARITY_LAUNCH(k_touch, 1, 32, 0, (cudaStream_t)0, f + 5, (const int *)d + 1024, 0);
        CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
        PARITY_LAUNCH(k_touch, 1, 32, 0, (cudaStream_t)0, f, (const int *)NULL, 0);
        CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
        CHECK_INT_EQ(cudaFreeHost(pin), cudaSuccess);
        CHECK(cudaFreeHost(host) != cudaSuccess); /* not from cudaMallocHost */
        (void)cudaGetLastError();
    }
    /* fresh device memory is not zero (nor is a GPU's): NaN as float */
    {
        float *u = NULL, hu[16];
        int nan_count = 0, l;
        CHECK_INT_EQ(cudaMalloc((void **)&u, sizeof hu), cudaSuccess);
        CHECK_INT_EQ(cudaMemcpy(hu, u, sizeof hu, cudaMemcpyDeviceToHost), cudaSuccess);
        for (l = 0; l < 16; l++) nan_count += hu[l] != hu[l];
        CHECK_INT_EQ(nan_count, 16);
        cudaFree(u);
    }
    cudaFree(d);
    cudaFree(f);
}
#else
static void test_simulation_refuses(void) { TEST_SKIP("simulation-only checks"); }
#endif

/* ------------------------------------------- out of bounds (ASan must see) */
static __global__ void k_write_past(float *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) p[i] = 1.0f; /* planted off-by-one */
}

static __global__ void k_shared_past(float *out)
{
    PARITY_DYNAMIC_SHARED(float, buf);
    buf[threadIdx.x + 1] = 1.0f; /* planted off-by-one: one past the dynamic shared memory */
    __syncthreads();
    out[threadIdx.x] = buf[threadIdx.x];
}

static __global__ void k_static_shared_past(float *out)
{
    __shared__ float sh[64];
    sh[threadIdx.x + 1] = 1.0f; /* planted off-by-one: one past a static __shared__ array */
    __syncthreads();
    out[threadIdx.x] = sh[threadIdx.x];
}

static __global__ void k_misaligned_vector(float *out, const float *in)
{
    /* planted: a float4 load 4 bytes past a 16-byte boundary (gcc's UBSan checks the whole
       load, clang's the member access) */
    const float4 *q = (const float4 *)(const void *)(in + 4 * threadIdx.x + 1);
    out[threadIdx.x] = q->x + q->y + q->z + q->w;
}

static int oob_mode(const char *which)
{
    float *d = dalloc<float>(100);
    if (!strcmp(which, "--misaligned-vector")) PARITY_LAUNCH(k_misaligned_vector, 1, 16, 0, (cudaStream_t)0, d, (const float *)d);
    else if (!strcmp(which, "--oob-global")) PARITY_LAUNCH(k_write_past, 1, 128, 0, (cudaStream_t)0, d, 100);
    else if (!strcmp(which, "--oob-static-shared")) PARITY_LAUNCH(k_static_shared_past, 1, 64, 0, (cudaStream_t)0, d);
    else PARITY_LAUNCH(k_shared_past, 1, 64, 64 * sizeof(float), (cudaStream_t)0, d);
    cudaDeviceSynchronize();
    printf("%s: the planted bad access ran to the end (nothing caught it)\n", which);
    cudaFree(d);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--oob-global") || !strcmp(argv[1], "--oob-shared") ||
                     !strcmp(argv[1], "--oob-static-shared") || !strcmp(argv[1], "--misaligned-vector")))
        return oob_mode(argv[1]);
    TEST_INIT(argc, argv);
    if (parity_device_ok()) parity_print_device();
    else printf("SKIP: no GPU\n");
    TEST_RUN(test_indices_3d);
    TEST_RUN(test_warp_primitives);
    TEST_RUN(test_barriers_and_races);
    TEST_RUN(test_block_order);
    TEST_RUN(test_uninitialised_shared);
    TEST_RUN(test_atomics);
    TEST_RUN(test_wmma);
    TEST_RUN(test_simulation_refuses);
    return TEST_END();
}
