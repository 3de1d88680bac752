/* cuda_sim.h - run attnkit's CUDA kernels on the CPU (the simulation back end of `make test`).

   The kernels in cuda/ (the X.cuh files) are written once. Compiled by nvcc they run on a GPU; compiled
   by a C++17 compiler (g++ or clang++) with ATTNKIT_CUDA_SIM defined and this header
   included first, the same source runs here, on the CPU, so every CUDA line is exercised
   and checked against the CPU reference on machines without a GPU. Test-only: no attnkit
   header includes it; tests include it through tests/cuda_test.h.

   Execution model
     - A launch runs the grid's blocks one after another, in a pseudo-random order (seeded,
       see AK_SIM_SEED): a block that reads what another block of the same launch writes
       sees the write in some runs and not in others.
     - A block's threads are fibers (one stack each, ucontext) run by a cooperative
       scheduler on the calling host thread. A fiber runs until it reaches a
       synchronisation point (__syncthreads*, __syncwarp, a warp shuffle/vote) or returns;
       then the scheduler runs the others. At every round the order of the runnable
       fibers is a fresh pseudo-random permutation (seeded, see AK_SIM_SEED below), so
       code that reads shared data another thread writes without a barrier sees the
       write or not depending on the order, and fails a parity check in most runs.
     - __syncthreads() releases when every thread of the block waits at the same
       __syncthreads (same file and line). A thread that has returned while others wait
       at a barrier, or threads waiting at different barriers, fail the launch: CUDA
       leaves both undefined (newer GPUs often tolerate the first; this does not).
     - Warp primitives (__shfl_sync, __shfl_xor_sync, __shfl_up_sync, __shfl_down_sync,
       __ballot_sync, __any_sync, __all_sync, __syncwarp) release when every lane named in
       the mask is waiting at a warp primitive with the same mask; values are exchanged at
       that moment. A lane that reads from a lane outside the mask, a mask that does not
       contain the caller, or a lane of the mask that has returned is reported as an error.
     - Deadlock (no fiber can run but some have not finished: a __syncthreads in divergent
       code, a shuffle whose mask names lanes that never arrive) is detected: the launch
       fails (cudaGetLastError returns cudaErrorLaunchFailure) with a message on stderr.
     - __shared__ is function-static storage (one copy, reused block after block), kept in
       one ELF section that is filled with 0xFF bytes before every block (gcc or clang on
       ELF). Dynamic shared memory (AK_SIM_DYNAMIC_SHARED) is a fresh heap block of exactly
       the launch's size per block, filled with 0xFF bytes too. Either way a read before
       the block's own write sees NaN (float, double) or -1 (int), not the last block's
       values; ASan catches accesses past the end of the dynamic block.
     - Atomics are atomic: fibers never interleave inside one operation.
     - Launch limits are checked as on an sm_90 device: at most 1024 threads per block,
       blockDim.z <= 64, gridDim.y/z <= 65535, dynamic shared memory <= 48 KiB unless
       cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, n) raised it
       (<= 227 KiB). A bad launch sets cudaErrorInvalidConfiguration and runs nothing.
     - Memory: cudaMalloc returns host memory (ASan watches it) and records the range;
       its bytes start as 0xFF (NaN as float: cudaMalloc does not clear memory either);
       a launch whose pointer arguments are not NULL and not inside a live allocation (or
       a cudaMallocHost block) fails with cudaErrorIllegalAddress and runs nothing;
       cudaMemcpy/cudaMemset check that the device side lies inside one live allocation,
       cudaFree refuses unknown pointers, and cudaPointerGetAttributes tells device
       pointers from host ones, so "host pointer passed to a _cuda function" is testable.
     - Streams and events: created and destroyed; work runs synchronously at the launch,
       so every stream operation is already complete; event times are host wall-clock.
     - cuBLAS: cublasSgemm (column-major, FP32 accumulation) is a plain reference loop;
       cublasGemmEx with fp32 storage and the FAST_TF32 / FAST_16BF compute types reduces
       each input as tensor cores do (tf32: low 13 bits dropped; bf16: nearest even) first.

   What it cannot catch: the CUDA memory model beyond barriers (a missing __threadfence,
   stale L1 reads, volatile), races between blocks that need them to overlap (blocks run
   one at a time here, in a random order), code that relies on implicit warp lock-step
   without __syncwarp (it fails here, as it may on Volta+), occupancy, register pressure,
   bank conflicts, timing and performance, and host memory reached through a device
   pointer's contents (a pointer inside a struct, a table of pointers): every pointer is
   a host pointer here, and only a kernel's own pointer arguments are checked.

   Not supported (a compile error, not a silent difference): `extern __shared__` (use
   AK_SIM_DYNAMIC_SHARED through the kernel file's own macro), inline PTX (asm: so no
   mma.sync or ldmatrix; tensor cores through nvcuda::wmma, which is emulated below),
   cooperative groups, textures and surfaces, device-side printf formatting of CUDA vector
   types, dynamic parallelism, cudaGraph capture. A kernel file that needs a
   GPU-only fast path keeps a simulable sibling and checks one against the other on a GPU.

   Counters (what a GPU program pays the host for beyond its kernels; the simulation
   only, nvcc builds have none): ak_sim_counts_get() returns, since ak_sim_counts_reset(),
     d2h          device -> host copies: cudaMemcpy / cudaMemcpyAsync DeviceToHost, and
                  Default ones from device memory to host memory;
     h2d          host -> device copies (the same way);
     sync_calls   synchronising calls: cudaStreamSynchronize, cudaDeviceSynchronize,
                  cudaEventSynchronize, and the calls that synchronise implicitly on a GPU:
                  cudaMemcpy device -> host (returns when its copy is done) and host ->
                  device (synchronises the stream first), cudaMemcpyAsync device -> host
                  into pageable memory (not cudaMallocHost's: staged, returns when done),
                  cudaFree (waits for the device); a device -> host cudaMemcpy is thus
                  counted both as a copy and as a synchronisation;
     syncs        host waits: the synchronising calls that find device work unfinished
                  (a launch, a GEMM, a copy or memset since the last wait; a device -> host
                  copy always waits for itself). tk_copy's cudaMemcpy + cudaStreamSynchronize
                  is 2 sync_calls and 1 wait: the second call finds the device idle.
                  Streams are not told apart (everything here runs on one);
     allocs/frees cudaMalloc, cudaMallocAsync, cudaMallocHost / cudaFree, cudaFreeAsync,
                  cudaFreeHost;
     ptr_queries  cudaPointerGetAttributes;
     launches     kernel launches and cuBLAS GEMMs.
   AK_SIM_TRACE=1 prints one stderr line per counted event but launches and host -> device
   copies: "cuda_sim trace: <event> <call> <bytes> <- function (file:line) <- ...", the
   callers outside this file, innermost first (AK_SIM_TRACE_DEPTH of them, default 6);
   events d2h, alloc, free, ptrq, and wait / sync for a synchronising call that waited /
   found the device idle. Symbolised by one addr2line process (llvm-addr2line first when
   built by clang; without either, prog+0x... offsets for `addr2line -e <program>`).
   ak_sim_trace_set(on) switches the trace at run time, ak_sim_trace_mark(label) adds a
   "mark <label>" line. Tests: tests/parity_model.cu's test_round_trips_*.

   Environment: AK_SIM_SEED=n changes the scheduling permutations and the block order
   (default 1, so a run is reproducible; the parity tests passed with seeds 1, 2 and 3);
   AK_SIM_VERBOSE=1 prints each launch; AK_SIM_TRACE, AK_SIM_TRACE_DEPTH: see Counters.

   Requires C++17 and POSIX (ucontext, mmap, posix_spawn; the trace: glibc's backtrace and
   dl_iterate_phdr). */
#ifndef ATTNKIT_CUDA_SIM_H
#define ATTNKIT_CUDA_SIM_H
#ifndef ATTNKIT_CUDA_SIM
#define ATTNKIT_CUDA_SIM 1
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <initializer_list>
#include <tuple>
#include <utility>
#include <vector>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <execinfo.h>
#include <link.h>
#include <signal.h>
#include <spawn.h>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#define AK_SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AK_SIM_ASAN 1
#endif
#endif
#ifdef AK_SIM_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

/* ----------------------------------------------------------- qualifiers */
#define __global__
#define __device__
#define __host__
/* Static __shared__ arrays: function statics, all in one ELF section (ak_sim_shared) that
   is filled with 0xFF bytes before every block (NaN as float or double, -1 as int), as
   the dynamic shared memory is: a read before the block's own write shows up instead of
   seeing the previous block's values. Elsewhere plain statics, not poisoned. */
#if defined(__ELF__) && (defined(__GNUC__) || defined(__clang__))
#define __shared__ static __attribute__((section("ak_sim_shared")))
#define AK_SIM_SHARED_SECTION 1
extern "C" {
extern char __start_ak_sim_shared[] __attribute__((weak));
extern char __stop_ak_sim_shared[] __attribute__((weak));
}
#else
#define __shared__ static
#endif
#define __constant__ static
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n))) /* in any declaration-specifier position, as nvcc accepts it */
#ifndef __restrict__
#define __restrict__ __restrict
#endif

/* --------------------------------------------------------------- types */
struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
/* aligned as CUDA's: a vector load from a misaligned address faults on a GPU ("misaligned
   address"); here UBSan's alignment check reports it */
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
static inline float2 make_float2(float x, float y) { float2 r = {x, y}; return r; }
static inline float4 make_float4(float x, float y, float z, float w) { float4 r = {x, y, z, w}; return r; }
static inline int2 make_int2(int x, int y) { int2 r = {x, y}; return r; }

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchFailure = 719
} cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4
};
enum cudaMemoryType { cudaMemoryTypeUnregistered = 0, cudaMemoryTypeHost = 1, cudaMemoryTypeDevice = 2, cudaMemoryTypeManaged = 3 };
struct cudaPointerAttributes { enum cudaMemoryType type; int device; void *devicePointer; void *hostPointer; };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem, sharedMemPerBlock, sharedMemPerBlockOptin;
    int major, minor, multiProcessorCount, warpSize, maxThreadsPerBlock, clockRate, memoryClockRate, memoryBusWidth;
};
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00

namespace ak_sim {

/* ------------------------------------------------------------ fibers */
enum fstate { F_RUN, F_BAR, F_WARP, F_DONE };
enum wop { W_SYNC, W_IDX, W_XOR, W_UP, W_DOWN, W_BALLOT, W_ANY, W_ALL };

struct fiber {
    ucontext_t ctx;
    void *stack;
    size_t stack_size;
    uint3 tid;
    int lin, lane, warp;
    fstate state;
    /* warp primitive in progress */
    unsigned mask;
    wop op;
    int arg, width;
    uint64_t val, recv;
    /* __syncthreads_count/and/or */
    int pred, bar_result;
    int stall; /* rounds this fiber sits out although it could run (race exposure) */
    const char *file; /* where it waits */
    int line;
};

struct state {
    std::vector<fiber> fibers;
    ucontext_t sched;
    fiber *cur = nullptr;
    uint3 block = {0, 0, 0};
    dim3 bdim, gdim;
    const std::function<void()> *body = nullptr;
    unsigned char *dsmem = nullptr;
    size_t dsmem_bytes = 0;
    uint64_t rng = 0x853c49e6748fea9bULL;
    bool failed = false;
    char msg[512];
#ifdef AK_SIM_ASAN
    void *fake_stack = nullptr;
    const void *main_bottom = nullptr;
    size_t main_size = 0;
#endif
};

inline state &st()
{
    static thread_local state s;
    return s;
}

inline std::mutex &launch_mutex()
{
    static std::mutex m;
    return m;
}

struct alloc_info { size_t size; };
inline std::map<uintptr_t, alloc_info> &allocs()
{
    static std::map<uintptr_t, alloc_info> m;
    return m;
}
inline std::mutex &alloc_mutex()
{
    static std::mutex m;
    return m;
}
/* page-locked host memory (cudaMallocHost): kernels may read it (unified addressing) */
inline std::map<uintptr_t, alloc_info> &pinned()
{
    static std::map<uintptr_t, alloc_info> m;
    return m;
}
/* [p, p + n) inside one range of m; with n == 0, p may also be one past the end */
inline bool in_ranges(const std::map<uintptr_t, alloc_info> &m, const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    auto it = m.upper_bound(a);
    if (it == m.begin()) return false;
    --it;
    return a >= it->first && a + n <= it->first + it->second.size && (n > 0 || a < it->first + it->second.size + 1);
}
/* a kernel's pointer argument: NULL, or inside a live device allocation or pinned block */
inline bool kernel_ptr_ok(const void *p)
{
    if (!p) return true;
    std::lock_guard<std::mutex> lock(alloc_mutex());
    return in_ranges(allocs(), p, 0) || in_ranges(pinned(), p, 0);
}
inline cudaError_t &last_error()
{
    static thread_local cudaError_t e = cudaSuccess;
    return e;
}
inline std::map<const void *, size_t> &func_smem_limit()
{
    static std::map<const void *, size_t> m;
    return m;
}

/* ------------------------------------------- host round-trip counters and trace
   What a step costs the host beyond its kernels, counted per call (the simulation only:
   a real CUDA build has none of this). See "Counters" at the top of the file. */
struct counts {
    unsigned long long d2h;         /* device -> host copies (cudaMemcpy / cudaMemcpyAsync) */
    unsigned long long h2d;         /* host -> device copies */
    unsigned long long syncs;       /* host waits: synchronising calls that found device work unfinished */
    unsigned long long sync_calls;  /* every synchronising call, waiting or not */
    unsigned long long allocs;      /* cudaMalloc, cudaMallocAsync, cudaMallocHost */
    unsigned long long frees;       /* cudaFree, cudaFreeAsync, cudaFreeHost */
    unsigned long long ptr_queries; /* cudaPointerGetAttributes */
    unsigned long long launches;    /* kernel launches and cuBLAS GEMMs */
};
enum ev { EV_D2H, EV_H2D, EV_ALLOC, EV_FREE, EV_PTRQ, EV_LAUNCH };

struct tracer {
    std::mutex m;
    counts c = {0, 0, 0, 0, 0, 0, 0, 0};
    bool pending = false; /* device work queued since the last host wait */
    int on = -1, depth = 6;
    /* symbolising the trace's return addresses: one addr2line process, answers cached */
    bool sym_tried = false, sym_ok = false;
    uintptr_t bias = 0;
    std::vector<std::pair<uintptr_t, uintptr_t>> text;
    FILE *to = nullptr, *from = nullptr;
    std::map<uintptr_t, std::vector<std::string>> cache;
};
/* never destroyed: a count made by an exit handler still finds it */
inline tracer &tr()
{
    static tracer *t = new tracer();
    return *t;
}
inline void trace_env(tracer &t)
{
    if (t.on >= 0) return;
    const char *e = getenv("AK_SIM_TRACE"), *d = getenv("AK_SIM_TRACE_DEPTH");
    t.on = e && *e && *e != '0';
    if (d && atoi(d) > 0) t.depth = atoi(d);
}

inline int trace_phdr(struct dl_phdr_info *info, size_t, void *data)
{
    tracer *t = (tracer *)data;
    t->bias = (uintptr_t)info->dlpi_addr;
    for (int i = 0; i < (int)info->dlpi_phnum; i++) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
            t->text.push_back(std::make_pair(t->bias + (uintptr_t)ph.p_vaddr, t->bias + (uintptr_t)(ph.p_vaddr + ph.p_memsz)));
    }
    return 1; /* the first object is the program itself */
}
/* starts `addr2line -a -f -i -C -e <this program>` on a pair of pipes (llvm-addr2line
   first when built by clang) */
inline bool sym_start(tracer &t)
{
    if (t.sym_tried) return t.sym_ok;
    t.sym_tried = true;
    static char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return false;
    exe[n] = 0;
    dl_iterate_phdr(trace_phdr, &t);
    int in[2], out[2];
    if (pipe(in) != 0) return false;
    if (pipe(out) != 0) { close(in[0]); close(in[1]); return false; }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    /* clang's DWARF 5 line tables: binutils 2.40 names the wrong file; LLVM's reads them */
#ifdef __clang__
    static char a0[] = "llvm-addr2line";
#else
    static char a0[] = "addr2line";
#endif
    static char a1[] = "-a", a2[] = "-f", a3[] = "-i", a4[] = "-C", a5[] = "-e", gnu[] = "addr2line";
    char *argv[] = {a0, a1, a2, a3, a4, a5, exe, nullptr};
    pid_t pid;
    int rc = posix_spawnp(&pid, a0, &fa, nullptr, argv, environ);
    if (rc != 0 && strcmp(a0, gnu) != 0) {
        argv[0] = gnu;
        rc = posix_spawnp(&pid, gnu, &fa, nullptr, argv, environ);
    }
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc != 0) { close(in[1]); close(out[0]); return false; }
    signal(SIGPIPE, SIG_IGN); /* an addr2line that died: the trace shows offsets, the test goes on */
    t.to = fdopen(in[1], "w");
    t.from = fdopen(out[0], "r");
    t.sym_ok = t.to && t.from;
    return t.sym_ok;
}
/* "function (dir/file:line)" for each frame at return address a, innermost first (the
   inlined ones too); "prog+0x..." where it cannot tell; nothing outside the program */
inline const std::vector<std::string> &symbolise(tracer &t, uintptr_t a)
{
    auto it = t.cache.find(a);
    if (it != t.cache.end()) return it->second;
    std::vector<std::string> r;
    bool mine = false;
    char line[4096], fn[4096];
    if (sym_start(t))
        for (const auto &x : t.text) mine = mine || (a > x.first && a <= x.second);
    if (mine && fprintf(t.to, "0x%lx\n0x0\n", (unsigned long)(a - 1 - t.bias)) > 0 && fflush(t.to) == 0 &&
        fgets(line, sizeof line, t.from)) { /* the address echoed back, then function / file pairs */
        while (fgets(fn, sizeof fn, t.from)) {
            if (!strncmp(fn, "0x", 2) && strtoull(fn + 2, nullptr, 16) == 0) { /* the sentinel 0x0: "??", "??:0" */
                if (!fgets(line, sizeof line, t.from) || !fgets(line, sizeof line, t.from)) t.sym_ok = false;
                break;
            }
            if (!fgets(line, sizeof line, t.from)) { t.sym_ok = false; break; }
            fn[strcspn(fn, "\n")] = 0;
            line[strcspn(line, "\n")] = 0;
            { /* a C++ name without its parameter list: "f(int, float*) const" -> "f" */
                size_t e = strlen(fn);
                if (e > 6 && !strcmp(fn + e - 6, " const")) e -= 6;
                if (e > 0 && fn[e - 1] == ')') {
                    int depth = 0;
                    while (e-- > 0) {
                        depth += (fn[e] == ')') - (fn[e] == '(');
                        if (depth == 0) break;
                    }
                    if (e > 0 && e < sizeof fn) fn[e] = 0;
                }
            }
            char *disc = strstr(line, " (discriminator");
            if (disc) *disc = 0;
            /* the last two components of the path: cuda/tensor.cuh, common/model.c */
            const char *f = line, *p;
            int slashes = 0;
            for (p = line + strlen(line); p > line; p--)
                if (p[-1] == '/' && ++slashes == 2) { f = p; break; }
            r.push_back(std::string(fn) + " (" + f + ")");
        }
    }
    if (r.empty() && mine) { /* no addr2line: the offset to give `addr2line -e <program>` */
        snprintf(line, sizeof line, "prog+0x%lx", (unsigned long)(a - 1 - t.bias));
        r.push_back(line);
    }
    return t.cache[a] = r; /* empty: outside the program (the C library, the sanitizers) */
}
/* one trace line: the event, then its callers outside this file, innermost first */
__attribute__((noinline)) inline void trace_line(tracer &t, const char *what, const char *name, size_t bytes)
{
    void *bt[64];
    int n = backtrace(bt, 64), shown = 0;
    std::string out;
    for (int i = 0; i < n && shown < t.depth; i++)
        for (const std::string &f : symbolise(t, (uintptr_t)bt[i])) {
            /* this file's frames, and those without a line (the sanitizers' interceptors, _start) */
            if (f.find("cuda_sim.h:") != std::string::npos || f.find("(??:") != std::string::npos) continue;
            if (shown++ >= t.depth) break;
            out += " <- " + f;
        }
    fprintf(stderr, "cuda_sim trace: %s %s %zu%s\n", what, name, bytes, out.c_str());
}
/* a counted event; EV_D2H and EV_H2D also queue device work */
inline void note(ev k, const char *name, size_t bytes = 0)
{
    tracer &t = tr();
    std::lock_guard<std::mutex> lock(t.m);
    const char *what = nullptr;
    switch (k) {
    case EV_D2H: t.c.d2h++; t.pending = true; what = "d2h"; break;
    case EV_H2D: t.c.h2d++; t.pending = true; break;
    case EV_ALLOC: t.c.allocs++; what = "alloc"; break;
    case EV_FREE: t.c.frees++; what = "free"; break;
    case EV_PTRQ: t.c.ptr_queries++; what = "ptrq"; break;
    case EV_LAUNCH: t.c.launches++; t.pending = true; break;
    }
    trace_env(t);
    if (t.on && what) trace_line(t, what, name, bytes);
}
/* device work queued without a count (memset, D2D copy) */
inline void work()
{
    tracer &t = tr();
    std::lock_guard<std::mutex> lock(t.m);
    t.pending = true;
}
/* a synchronising call: a host wait when device work is unfinished (or `waits`: the call
   waits for its own copy); the device is idle afterwards */
inline void sync_point(const char *name, bool waits = false)
{
    tracer &t = tr();
    std::lock_guard<std::mutex> lock(t.m);
    const bool w = waits || t.pending;
    t.c.sync_calls++;
    t.c.syncs += w;
    t.pending = false;
    trace_env(t);
    if (t.on) trace_line(t, w ? "wait" : "sync", name, 0);
}

inline uint32_t rand32()
{
    state &s = st();
    uint64_t old = s.rng;
    s.rng = old * 6364136223846793005ULL + 1442695040888963407ULL;
    uint32_t xs = (uint32_t)(((old >> 18u) ^ old) >> 27u), rot = (uint32_t)(old >> 59u);
    return (xs >> rot) | (xs << ((-rot) & 31));
}

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 1, 2)))
#endif
inline void fail(const char *fmt, ...)
{
    state &s = st();
    if (!s.failed) {
        va_list ap;
        va_start(ap, fmt);
        s.failed = true;
        vsnprintf(s.msg, sizeof s.msg, fmt, ap);
        va_end(ap);
    }
}

/* switch from a fiber back to the scheduler */
inline void yield_to_sched()
{
    state &s = st();
    fiber *f = s.cur;
#ifdef AK_SIM_ASAN
    void *fs = nullptr;
    __sanitizer_start_switch_fiber(&fs, s.main_bottom, s.main_size);
    swapcontext(&f->ctx, &s.sched);
    __sanitizer_finish_switch_fiber(fs, nullptr, nullptr);
#else
    swapcontext(&f->ctx, &s.sched);
#endif
}

inline void fiber_entry()
{
    state &s = st();
#ifdef AK_SIM_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &s.main_bottom, &s.main_size);
#endif
    (*s.body)();
    s.cur->state = F_DONE;
    /* final switch: this fiber is never resumed (its context is rebuilt for the next block) */
#ifdef AK_SIM_ASAN
    __sanitizer_start_switch_fiber(nullptr, s.main_bottom, s.main_size);
#endif
    setcontext(&s.sched);
}

inline size_t stack_bytes()
{
#ifdef AK_SIM_ASAN
    return (size_t)64 << 10;
#else
    return (size_t)64 << 10;
#endif
}

inline bool ensure_fibers(int n)
{
    state &s = st();
    while ((int)s.fibers.size() < n) {
        fiber f;
        memset(&f, 0, sizeof f);
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        f.stack_size = stack_bytes();
        void *p = mmap(nullptr, f.stack_size + page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return false;
        mprotect(p, page, PROT_NONE); /* guard page below the stack */
        f.stack = (char *)p + page;
        s.fibers.push_back(f);
    }
    return true;
}

inline void run_fiber(fiber *f)
{
    state &s = st();
    s.cur = f;
#ifdef AK_SIM_ASAN
    __sanitizer_start_switch_fiber(&s.fake_stack, f->stack, f->stack_size);
    swapcontext(&s.sched, &f->ctx);
    __sanitizer_finish_switch_fiber(s.fake_stack, nullptr, nullptr);
#else
    swapcontext(&s.sched, &f->ctx);
#endif
    s.cur = nullptr;
}

/* source lane of a shuffle, or -1 for "the caller's own value" */
inline int shfl_src(const fiber &f)
{
    int w = f.width, base = f.lane & ~(w - 1), l = f.lane, src;
    switch (f.op) {
    case W_IDX: src = base + (f.arg & (w - 1)); break;
    case W_XOR: src = l ^ f.arg; if (src < base || src >= base + w) return -1; break;
    case W_UP: src = l - f.arg; if (src < base) return -1; break;
    case W_DOWN: src = l + f.arg; if (src >= base + w) return -1; break;
    default: return -1;
    }
    return src;
}

/* Release the warps whose masks are complete; returns how many fibers were released. */
inline int release_warps(int nthreads)
{
    state &s = st();
    int released = 0, nwarps = (nthreads + 31) / 32, w, l;
    for (w = 0; w < nwarps; w++) {
        fiber *lanes[32] = {nullptr};
        for (l = 0; l < 32 && w * 32 + l < nthreads; l++) lanes[l] = &s.fibers[(size_t)w * 32 + l];
        for (l = 0; l < 32; l++) {
            fiber *f = lanes[l];
            if (!f || f->state != F_WARP) continue;
            unsigned m = f->mask;
            bool ready = true;
            int k;
            for (k = 0; k < 32; k++) {
                if (!(m & (1u << k))) continue;
                fiber *g = lanes[k];
                if (!g) { fail("warp primitive at %s:%d: the mask names thread %d, beyond the block", f->file, f->line, w * 32 + k); return 0; }
                if (g->state == F_DONE) {
                    fail("warp primitive at %s:%d: lane %d of the mask (thread %d) has returned", f->file, f->line, k, w * 32 + k);
                    return 0;
                }
                if (g->state != F_WARP || g->mask != m) { ready = false; break; }
            }
            if (!ready) continue;
            /* every lane of m is here with the same mask: exchange */
            uint32_t ballot = 0;
            for (k = 0; k < 32; k++)
                if ((m & (1u << k)) && (uint32_t)lanes[k]->val) ballot |= 1u << k;
            for (k = 0; k < 32; k++) {
                if (!(m & (1u << k))) continue;
                fiber *g = lanes[k];
                switch (g->op) {
                case W_SYNC: break;
                case W_BALLOT: g->recv = ballot; break;
                case W_ANY: g->recv = ballot != 0; break;
                case W_ALL: g->recv = ballot == m; break;
                default: {
                    int src = shfl_src(*g);
                    if (src < 0) g->recv = g->val;
                    else if (!(m & (1u << src))) {
                        fail("shuffle at %s:%d: lane %d reads lane %d, which is not in the mask", g->file, g->line, k, src);
                        return 0;
                    } else g->recv = lanes[src]->val;
                }
                }
            }
            for (k = 0; k < 32; k++)
                if (m & (1u << k)) { lanes[k]->state = F_RUN; released++; }
        }
    }
    return released;
}

/* Delay whole warps at random after a release: a warp that sits out a few rounds lets
   the others run ahead through later shuffles and barrier-free code, which is what
   exposes a missing __syncthreads (a fast thread overwriting shared data a slow one has
   not read yet). Warps are delayed whole so delays never split a warp's shuffles. */
inline void stall_some_warps(int nthreads, int per_mille, int max_rounds)
{
    state &s = st();
    int nwarps = (nthreads + 31) / 32, w, l;
    for (w = 0; w < nwarps; w++) {
        if ((int)(rand32() % 1000u) >= per_mille) continue;
        int r = 1 + (int)(rand32() % (uint32_t)max_rounds);
        for (l = w * 32; l < nthreads && l < w * 32 + 32; l++) s.fibers[(size_t)l].stall = r;
    }
}

inline void run_block(int nthreads)
{
    state &s = st();
    int t;
    std::vector<int> order((size_t)nthreads);
    for (t = 0; t < nthreads; t++) {
        fiber &f = s.fibers[(size_t)t];
        f.lin = t;
        f.lane = t & 31;
        f.warp = t >> 5;
        f.tid.x = (unsigned)t % s.bdim.x;
        f.tid.y = ((unsigned)t / s.bdim.x) % s.bdim.y;
        f.tid.z = (unsigned)t / (s.bdim.x * s.bdim.y);
        f.state = F_RUN;
        f.stall = 0;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = f.stack_size;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, (void (*)())fiber_entry, 0);
    }
    if (nthreads > 32) stall_some_warps(nthreads, 500, 16);
    for (;;) {
        int n = 0, done = 0, at_bar = 0, stalled = 0;
        for (t = 0; t < nthreads; t++) {
            fiber &f = s.fibers[(size_t)t];
            if (f.state != F_RUN) continue;
            if (f.stall > 0) { f.stall--; stalled++; continue; }
            order[(size_t)n++] = t;
        }
        /* a fresh random order each round */
        for (t = n - 1; t > 0; t--) {
            int j = (int)(rand32() % (uint32_t)(t + 1));
            std::swap(order[(size_t)t], order[(size_t)j]);
        }
        for (t = 0; t < n; t++) run_fiber(&s.fibers[(size_t)order[(size_t)t]]);
        if (s.failed) return;
        for (t = 0; t < nthreads; t++) {
            fstate q = s.fibers[(size_t)t].state;
            done += q == F_DONE;
            at_bar += q == F_BAR;
        }
        if (done == nthreads) return;
        if (release_warps(nthreads) > 0) continue;
        if (s.failed) return;
        if (at_bar + done == nthreads) {
            int cnt = 0, first = -1;
            for (t = 0; t < nthreads; t++) {
                fiber &f = s.fibers[(size_t)t];
                if (f.state != F_BAR) continue;
                if (done) {
                    fail("divergent __syncthreads: thread %d waits at %s:%d but %d thread(s) of the block have returned", t,
                         f.file, f.line, done);
                    return;
                }
                if (first < 0) first = t;
                else if (f.line != s.fibers[(size_t)first].line || strcmp(f.file, s.fibers[(size_t)first].file)) {
                    fail("divergent __syncthreads: thread %d waits at %s:%d, thread %d at %s:%d", first,
                         s.fibers[(size_t)first].file, s.fibers[(size_t)first].line, t, f.file, f.line);
                    return;
                }
            }
            for (t = 0; t < nthreads; t++)
                if (s.fibers[(size_t)t].state == F_BAR) cnt += s.fibers[(size_t)t].pred != 0;
            for (t = 0; t < nthreads; t++)
                if (s.fibers[(size_t)t].state == F_BAR) {
                    s.fibers[(size_t)t].state = F_RUN;
                    s.fibers[(size_t)t].bar_result = cnt;
                }
            if (nthreads > 32) stall_some_warps(nthreads, 500, 16);
            continue;
        }
        if (stalled) continue; /* nothing to release yet: the delayed warps come back */
        for (t = 0; t < nthreads; t++) {
            fiber &f = s.fibers[(size_t)t];
            if (f.state == F_BAR || f.state == F_WARP) {
                fail("deadlock: thread %d waits at %s:%d while others wait elsewhere (divergent barrier or incomplete warp mask)",
                     t, f.file, f.line);
                return;
            }
        }
        fail("deadlock: no runnable thread");
        return;
    }
}

inline bool verbose()
{
    static int v = -1;
    if (v < 0) { const char *e = getenv("AK_SIM_VERBOSE"); v = e && *e && *e != '0'; }
    return v != 0;
}

inline void seed_once()
{
    static thread_local bool done = false;
    if (!done) {
        const char *e = getenv("AK_SIM_SEED");
        uint64_t sd = e ? strtoull(e, nullptr, 10) : 1;
        st().rng = 0x853c49e6748fea9bULL ^ (sd * 0x9E3779B97F4A7C15ULL);
        done = true;
    }
}

/* Fills the static __shared__ section with 0xFF bytes. Word stores through a volatile
   pointer, not memset: under ASan the section holds the globals' redzones too, which a
   checked memset would report; this function is not instrumented. */
#ifdef AK_SIM_ASAN
__attribute__((no_sanitize("address")))
#endif
inline void poison_static_shared()
{
#ifdef AK_SIM_SHARED_SECTION
    char *p = __start_ak_sim_shared, *e = __stop_ak_sim_shared;
    if (!p || !e || e <= p) return;
    while (p < e && ((uintptr_t)p & 7u)) *(volatile unsigned char *)p++ = 0xFF;
    for (; p + 8 <= e; p += 8) *(volatile uint64_t *)(void *)p = ~(uint64_t)0;
    while (p < e) *(volatile unsigned char *)p++ = 0xFF;
#endif
}

inline void run_grid(const char *name, const void *fn, dim3 g, dim3 b, size_t smem, const std::function<void()> &body)
{
    std::lock_guard<std::mutex> lock(launch_mutex());
    state &s = st();
    unsigned long long nthreads = (unsigned long long)b.x * b.y * b.z;
    size_t limit = 48u << 10;
    seed_once();
    {
        auto it = func_smem_limit().find(fn);
        if (it != func_smem_limit().end()) limit = it->second;
    }
    if (nthreads == 0 || nthreads > 1024 || b.z > 64 || g.x == 0 || g.y == 0 || g.z == 0 || g.x > 2147483647u ||
        g.y > 65535 || g.z > 65535 || smem > limit) {
        fprintf(stderr, "cuda_sim: %s: invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u) smem %zu (limit %zu)\n",
                name, g.x, g.y, g.z, b.x, b.y, b.z, smem, limit);
        last_error() = cudaErrorInvalidConfiguration;
        return;
    }
    if (!ensure_fibers((int)nthreads)) { last_error() = cudaErrorMemoryAllocation; return; }
    if (verbose())
        fprintf(stderr, "cuda_sim: launch %s grid (%u,%u,%u) block (%u,%u,%u) smem %zu\n", name, g.x, g.y, g.z, b.x, b.y, b.z, smem);
    s.bdim = b;
    s.gdim = g;
    s.body = &body;
    s.failed = false;
    s.dsmem_bytes = smem;
    {
        /* Blocks in a seeded random order: a GPU runs them in any order (and at once), so a
           block that reads what another block of the same launch writes is a bug; in a fixed
           x-fastest order such a read could see the write every time and pass. Up to 2^16
           blocks: a Fisher-Yates shuffle; beyond, a random rotation, reversed or not. */
        const unsigned long long nblk = (unsigned long long)g.x * g.y * g.z;
        std::vector<unsigned> perm;
        unsigned long long c = 0, i;
        bool rev = false;
        if (nblk <= 65536) {
            perm.resize((size_t)nblk);
            for (i = 0; i < nblk; i++) perm[(size_t)i] = (unsigned)i;
            for (i = nblk; i > 1; i--) {
                unsigned long long j = rand32() % i;
                unsigned t = perm[(size_t)(i - 1)]; perm[(size_t)(i - 1)] = perm[(size_t)j]; perm[(size_t)j] = t;
            }
        } else {
            c = (((unsigned long long)rand32() << 32) | rand32()) % nblk;
            rev = (rand32() & 1u) != 0;
        }
        for (i = 0; i < nblk; i++) {
            unsigned long long lin = perm.empty() ? (i + c) % nblk : perm[(size_t)i];
            if (rev) lin = nblk - 1 - lin;
            const unsigned x = (unsigned)(lin % g.x), y = (unsigned)(lin / g.x % g.y), z = (unsigned)(lin / g.x / g.y);
            s.block.x = x; s.block.y = y; s.block.z = z;
            s.dsmem = smem ? (unsigned char *)malloc(smem) : nullptr;
            if (smem && !s.dsmem) { last_error() = cudaErrorMemoryAllocation; s.body = nullptr; return; }
            if (smem) memset(s.dsmem, 0xFF, smem);
            poison_static_shared();
            run_block((int)nthreads);
            free(s.dsmem);
            s.dsmem = nullptr;
            if (s.failed) {
                fprintf(stderr, "cuda_sim: %s: block (%u,%u,%u): %s\n", name, x, y, z, s.msg);
                last_error() = cudaErrorLaunchFailure;
                s.body = nullptr;
                return;
            }
        }
    }
    s.body = nullptr;
}

/* index of the first pointer argument that is not NULL and not inside device memory (or
   pinned host memory), or -1: on a GPU such a kernel faults when it dereferences it */
template <typename T> inline bool arg_ok(const T &) { return true; }
template <typename T> inline bool arg_ok(T *p) { return kernel_ptr_ok((const void *)p); }
template <typename Tup, size_t... I> inline int bad_pointer_arg(const Tup &t, std::index_sequence<I...>)
{
    int bad = -1;
    (void)std::initializer_list<int>{(bad < 0 && !arg_ok(std::get<I>(t)) ? (bad = (int)I) : 0)...};
    return bad;
}

template <typename... P, typename... A>
inline void launch(const char *name, void (*k)(P...), dim3 g, dim3 b, size_t smem, cudaStream_t stream, A &&...a)
{
    (void)stream;
    std::tuple<typename std::decay<P>::type...> args(std::forward<A>(a)...);
    const int bad = bad_pointer_arg(args, std::index_sequence_for<P...>{});
    if (bad >= 0) {
        /* a host pointer (or a freed or stray one) given to a kernel: the GPU would fault
           with an illegal address when a thread reads it; refuse the launch instead */
        fprintf(stderr, "cuda_sim: %s: pointer argument %d lies outside every live device allocation "
                        "(a host pointer?)\n", name, bad + 1);
        last_error() = cudaErrorIllegalAddress;
        return;
    }
    note(EV_LAUNCH, name);
    std::function<void()> body = [&]() { std::apply(k, args); /* each thread: its own copies */ };
    run_grid(name, (const void *)k, g, b, smem, body);
}

/* ---------------------------------------------------- warp primitives */
template <typename T> inline uint64_t to_bits(T v)
{
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    return u;
}
template <typename T> inline T from_bits(uint64_t u)
{
    T v;
    memcpy(&v, &u, sizeof v);
    return v;
}

inline uint64_t warp_op(const char *file, int line, unsigned mask, wop op, uint64_t val, int arg, int width)
{
    state &s = st();
    fiber *f = s.cur;
    if (!f) { fprintf(stderr, "cuda_sim: %s:%d: warp primitive called outside a kernel\n", file, line); abort(); }
    if (width <= 0 || width > 32 || (width & (width - 1))) {
        fail("warp primitive at %s:%d: width %d is not a power of two in [1, 32]", file, line, width);
        width = 32;
    }
    if (!(mask & (1u << f->lane))) fail("warp primitive at %s:%d: the mask does not contain the calling lane %d", file, line, f->lane);
    f->mask = mask;
    f->op = op;
    f->val = val;
    f->arg = arg;
    f->width = width;
    f->file = file;
    f->line = line;
    f->state = F_WARP;
    yield_to_sched();
    return f->recv;
}

inline void syncthreads_at(const char *file, int line, int pred)
{
    state &s = st();
    fiber *f = s.cur;
    if (!f) { fprintf(stderr, "cuda_sim: %s:%d: __syncthreads called outside a kernel\n", file, line); abort(); }
    f->file = file;
    f->line = line;
    f->pred = pred;
    f->state = F_BAR;
    yield_to_sched();
}

} /* namespace ak_sim */

/* --------------------------------------------------- built-in variables */
#define threadIdx (ak_sim::st().cur->tid)
#define blockIdx (ak_sim::st().block)
#define blockDim (ak_sim::st().bdim)
#define gridDim (ak_sim::st().gdim)
static constexpr int warpSize = 32;

/* dynamic shared memory: `AK_SIM_DYNAMIC_SHARED(float, buf);` declares `float *buf` */
#define AK_SIM_DYNAMIC_SHARED(T, name) T *name = (T *)(void *)ak_sim::st().dsmem

/* the launch: what `k<<<g, b, smem, stream>>>(args...)` means under nvcc */
#define ATTNKIT_SIM_LAUNCH(k, g, b, smem, stream, ...) ak_sim::launch(#k, k, dim3(g), dim3(b), (size_t)(smem), stream, __VA_ARGS__)

/* Synchronisation and warp primitives: functions whose defaulted trailing arguments
   record the caller's file and line for the simulation's error messages. */
#define AK_SIM_LOC const char *ak_file_ = __builtin_FILE(), int ak_line_ = __builtin_LINE()
static inline void __syncthreads(AK_SIM_LOC) { ak_sim::syncthreads_at(ak_file_, ak_line_, 0); }
static inline int __syncthreads_count(int p, AK_SIM_LOC) { ak_sim::syncthreads_at(ak_file_, ak_line_, p != 0); return ak_sim::st().cur->bar_result; }
static inline int __syncthreads_or(int p, AK_SIM_LOC) { return __syncthreads_count(p, ak_file_, ak_line_) != 0; }
static inline int __syncthreads_and(int p, AK_SIM_LOC)
{
    dim3 b = ak_sim::st().bdim;
    return __syncthreads_count(p, ak_file_, ak_line_) == (int)(b.x * b.y * b.z);
}
static inline void __syncwarp(unsigned m = 0xffffffffu, AK_SIM_LOC) { (void)ak_sim::warp_op(ak_file_, ak_line_, m, ak_sim::W_SYNC, 0, 0, 32); }
template <typename T> static inline T __shfl_sync(unsigned m, T v, int l, int w = 32, AK_SIM_LOC)
{ return ak_sim::from_bits<T>(ak_sim::warp_op(ak_file_, ak_line_, m, ak_sim::W_IDX, ak_sim::to_bits(v), l, w)); }
template <typename T> static inline T __shfl_xor_sync(unsigned m, T v, int l, int w = 32, AK_SIM_LOC)
{ return ak_sim::from_bits<T>(ak_sim::warp_op(ak_file_, ak_line_, m, ak_sim::W_XOR, ak_sim::to_bits(v), l, w)); }
template <typename T> static inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32, AK_SIM_LOC)
{ return ak_sim::from_bits<T>(ak_sim::warp_op(ak_file_, ak_line_, m, ak_sim::W_UP, ak_sim::to_bits(v), (int)d, w)); }
template <typename T> static inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32, AK_SIM_LOC)
{ return ak_sim::from_bits<T>(ak_sim::warp_op(ak_file_, ak_line_, m, ak_sim::W_DOWN, ak_sim::to_bits(v), (int)d, w)); }
static inline unsigned __ballot_sync(unsigned m, int p, AK_SIM_LOC) { return (unsigned)ak_sim::warp_op(ak_file_, ak_line_, m, ak_sim::W_BALLOT, p != 0, 0, 32); }
static inline int __any_sync(unsigned m, int p, AK_SIM_LOC) { return (int)ak_sim::warp_op(ak_file_, ak_line_, m, ak_sim::W_ANY, p != 0, 0, 32); }
static inline int __all_sync(unsigned m, int p, AK_SIM_LOC) { return (int)ak_sim::warp_op(ak_file_, ak_line_, m, ak_sim::W_ALL, p != 0, 0, 32); }
/* the active mask is the set of lanes executing together, which fibers cannot know */
static inline unsigned __activemask(void) { return 0xffffffffu; }
static inline void __threadfence(void) {}
static inline void __threadfence_block(void) {}

/* ------------------------------------------------------------- atomics */
template <typename T> static inline T atomicAdd(T *p, T v) { T o = *p; *p = o + v; return o; }
template <typename T> static inline T atomicSub(T *p, T v) { T o = *p; *p = o - v; return o; }
template <typename T> static inline T atomicExch(T *p, T v) { T o = *p; *p = v; return o; }
template <typename T> static inline T atomicMax(T *p, T v) { T o = *p; if (v > o) *p = v; return o; }
template <typename T> static inline T atomicMin(T *p, T v) { T o = *p; if (v < o) *p = v; return o; }
template <typename T> static inline T atomicCAS(T *p, T cmp, T v) { T o = *p; if (o == cmp) *p = v; return o; }
template <typename T> static inline T atomicOr(T *p, T v) { T o = *p; *p = o | v; return o; }
template <typename T> static inline T atomicAnd(T *p, T v) { T o = *p; *p = o & v; return o; }

/* ------------------------------------------------ device math intrinsics */
static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
/* glibc declares __expf/__logf itself: macros, so they stay glibc's exact expf/logf */
#define __expf(x) expf(x)
#define __logf(x) logf(x)
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return std::sqrt(x); }
/* The rounded arithmetic intrinsics: one rounding each, and never fused with a neighbour
   into an fma by the host compiler (the simulation's contracting build, -ffp-contract=fast
   -mfma, fuses plain a * b + c as nvcc does; these stay separate as on the device). The
   empty asm makes the compiler hold the rounded value in a register. */
static inline float ak_sim_rounded(float x)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__("" : "+x"(x));
#elif defined(__aarch64__)
    __asm__("" : "+w"(x));
#else
    volatile float v = x;
    x = v;
#endif
    return x;
}
static inline float __fmul_rn(float a, float b) { return ak_sim_rounded(a * b); }
static inline float __fadd_rn(float a, float b) { return ak_sim_rounded(a + b); }
static inline float __fsub_rn(float a, float b) { return ak_sim_rounded(a - b); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
template <typename T> static inline T __ldg(const T *p) { return *p; }

/* ---------------------------------------------- bf16 and tf32 conversions */
/* __nv_bfloat16 (cuda_bf16.h): the top 16 bits of an IEEE float. Conversions round to
   nearest even, NaN stays NaN, as the device's cvt.rn.bf16.f32. */
struct __nv_bfloat16 { unsigned short x; };
static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    unsigned u = __float_as_uint(f);
    __nv_bfloat16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) r.x = (unsigned short)((u >> 16) | 0x40u); /* quiet NaN */
    else r.x = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return r;
}
static inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
static inline float __bfloat162float(__nv_bfloat16 h) { return __uint_as_float((unsigned)h.x << 16); }

/* ------------------------------------------------ WMMA (nvcuda::wmma, mma.h) */
/* Warp matrix products as the device's tensor cores do them, for the shapes attnkit's
   kernels use: bf16 m16n16k16 (also m32n8k16, m8n32k16) and tf32 m16n16k8, fp32
   accumulators. A fragment here holds the whole tile in every lane (row-major by the
   tile's logical rows: A m x k, B k x n, accumulator m x n), so code that treats a
   fragment's x[] uniformly (fill, scale every element, convert every element) behaves
   as on the device; code that assumes which lane holds which element cannot be written
   against the real API either. Each call is a warp-collective: every lane of the warp
   must reach it (it synchronises the warp like __syncwarp, so divergence is reported);
   load/store check the device's rules (pointer 32-byte aligned, ldm a multiple of 16
   bytes) and fail the launch otherwise. load_matrix_sync reads before the warp meets,
   so a tile loaded without a barrier after the lanes' staging stores comes out stale in
   the early lanes; store_matrix_sync writes one slice per lane after it, so another lane
   reads the stored tile only after a __syncwarp/__syncthreads, as on the device. mma_sync computes the product once per warp (each lane a slice, then every
   lane copies it): tf32 inputs lose their low 13 mantissa bits as the hardware's do,
   bf16 products are exact, sums are fp32 in k order. */
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
namespace precision { struct tf32 {}; }
enum layout_t { mem_row_major, mem_col_major };

template <typename T> struct ak_store { typedef T type; };
template <> struct ak_store<precision::tf32> { typedef float type; };
template <typename Use, int M, int N, int K> struct ak_dims;
template <int M, int N, int K> struct ak_dims<matrix_a, M, N, K> { enum { R = M, C = K }; };
template <int M, int N, int K> struct ak_dims<matrix_b, M, N, K> { enum { R = K, C = N }; };
template <int M, int N, int K> struct ak_dims<accumulator, M, N, K> { enum { R = M, C = N }; };
template <typename L> struct ak_rowmaj;
template <> struct ak_rowmaj<row_major> { enum { v = 1 }; };
template <> struct ak_rowmaj<col_major> { enum { v = 0 }; };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    static_assert((M == 16 && N == 16 && (K == 16 || K == 8)) || (M == 32 && N == 8 && K == 16) ||
                  (M == 8 && N == 32 && K == 16), "cuda_sim WMMA: a shape the device lacks");
    typedef typename ak_store<T>::type storage_element_type;
    typedef storage_element_type element_type;
    enum { rows = ak_dims<Use, M, N, K>::R, cols = ak_dims<Use, M, N, K>::C, num_elements = rows * cols };
    storage_element_type x[num_elements];
};

template <typename S> static inline float ak_val(S v) { return (float)v; }
template <> inline float ak_val<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename S> static inline S ak_from(float v) { return (S)v; }
template <> inline __nv_bfloat16 ak_from<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

static inline float __float_to_tf32(float f)
{
    unsigned u = __float_as_uint(f);
    if ((u & 0x7f800000u) == 0x7f800000u) return f; /* Inf/NaN unchanged */
    u = (u + 0x1000u) & 0xffffe000u;                /* nearest, ties away from zero */
    return __uint_as_float(u);
}

static inline bool ak_check(const char *what, const void *p, unsigned ldm, size_t esize, const char *file, int line)
{
    if (((uintptr_t)p & 31u) != 0) {
        ak_sim::fail("%s at %s:%d: pointer %p is not 32-byte aligned", what, file, line, p);
        return false;
    }
    if ((ldm * esize) % 16u != 0 || ldm == 0) {
        ak_sim::fail("%s at %s:%d: ldm %u is not a multiple of 16 bytes", what, file, line, ldm);
        return false;
    }
    return true;
}
/* the per-warp slice buffer of mma_sync */
static inline float *ak_scratch(void)
{
    static thread_local float buf[32][32 * 16];
    return buf[ak_sim::st().cur->warp];
}

template <typename Use, int M, int N, int K, typename T, typename L, typename V>
static inline void fill_fragment(fragment<Use, M, N, K, T, L> &f, const V &v)
{
    typedef typename fragment<Use, M, N, K, T, L>::storage_element_type S;
    for (int i = 0; i < f.num_elements; i++) f.x[i] = ak_from<S>(ak_val(v));
}

template <typename FR, typename P>
static inline void ak_load(FR &f, const P *p, unsigned ldm, bool rowmaj, const char *file, int line)
{
    typedef typename FR::storage_element_type S;
    /* each lane reads when it gets here, before the warp meets: a tile some lanes are
       still writing (a missing __syncwarp / __syncthreads after the staging stores)
       reaches the early lanes' copies stale, as it would reach their registers */
    if (ak_check("wmma::load_matrix_sync", p, ldm, sizeof(P), file, line))
        for (int r = 0; r < FR::rows; r++)
            for (int c = 0; c < FR::cols; c++)
                f.x[r * FR::cols + c] = ak_from<S>(ak_val(rowmaj ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r]));
    (void)ak_sim::warp_op(file, line, 0xffffffffu, ak_sim::W_SYNC, 0, 0, 32);
}
template <typename Use, int M, int N, int K, typename T, typename L, typename P>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, L> &f, const P *p, unsigned ldm, AK_SIM_LOC)
{
    ak_load(f, p, ldm, ak_rowmaj<L>::v != 0, ak_file_, ak_line_);
}
template <int M, int N, int K, typename T>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, T, void> &f, const T *p, unsigned ldm, layout_t l, AK_SIM_LOC)
{
    ak_load(f, p, ldm, l == mem_row_major, ak_file_, ak_line_);
}
template <int M, int N, int K, typename T>
static inline void store_matrix_sync(T *p, const fragment<accumulator, M, N, K, T, void> &f, unsigned ldm, layout_t l, AK_SIM_LOC)
{
    typedef fragment<accumulator, M, N, K, T, void> FR;
    (void)ak_sim::warp_op(ak_file_, ak_line_, 0xffffffffu, ak_sim::W_SYNC, 0, 0, 32);
    if (!ak_check("wmma::store_matrix_sync", p, ldm, sizeof(T), ak_file_, ak_line_)) return;
    for (int e = ak_sim::st().cur->lane; e < FR::num_elements; e += 32) {
        int r = e / FR::cols, c = e % FR::cols;
        p[l == mem_row_major ? (size_t)r * ldm + c : (size_t)c * ldm + r] = f.x[e];
    }
}
template <int M, int N, int K, typename TA, typename LA, typename LB, typename TC>
static inline void mma_sync(fragment<accumulator, M, N, K, TC, void> &d, const fragment<matrix_a, M, N, K, TA, LA> &a,
                            const fragment<matrix_b, M, N, K, TA, LB> &b, const fragment<accumulator, M, N, K, TC, void> &c,
                            bool satf = false, AK_SIM_LOC)
{
    const bool tf32 = sizeof(typename fragment<matrix_a, M, N, K, TA, LA>::storage_element_type) == 4;
    float *w = ak_scratch();
    int e, kk;
    (void)satf;
    (void)ak_sim::warp_op(ak_file_, ak_line_, 0xffffffffu, ak_sim::W_SYNC, 0, 0, 32);
    for (e = ak_sim::st().cur->lane; e < M * N; e += 32) {
        int r = e / N, col = e % N;
        float s = ak_val(c.x[e]);
        for (kk = 0; kk < K; kk++) {
            float x = ak_val(a.x[r * K + kk]), y = ak_val(b.x[kk * N + col]);
            if (tf32) { x = __uint_as_float(__float_as_uint(x) & 0xffffe000u); y = __uint_as_float(__float_as_uint(y) & 0xffffe000u); }
            s = std::fma(x, y, s);
        }
        w[e] = s;
    }
    (void)ak_sim::warp_op(ak_file_, ak_line_, 0xffffffffu, ak_sim::W_SYNC, 0, 0, 32);
    /* no closing sync: every wmma call opens with one, so no lane writes the buffer
       again before all have copied it */
    for (e = 0; e < M * N; e++) d.x[e] = ak_from<TC>(w[e]);
}
} /* namespace wmma */
} /* namespace nvcuda */

/* --------------------------------------------------------------- runtime */
static inline const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error (simulation)";
    case cudaErrorInvalidValue: return "invalid argument (simulation)";
    case cudaErrorMemoryAllocation: return "out of memory (simulation)";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument (simulation)";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer (simulation)";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction (simulation)";
    case cudaErrorNoDevice: return "no CUDA-capable device (simulation)";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle (simulation)";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered (simulation: see stderr)";
    case cudaErrorLaunchFailure: return "unspecified launch failure (simulation: see stderr)";
    }
    return "unknown error (simulation)";
}
static inline cudaError_t cudaGetLastError(void) { cudaError_t e = ak_sim::last_error(); ak_sim::last_error() = cudaSuccess; return e; }
static inline cudaError_t cudaPeekAtLastError(void) { return ak_sim::last_error(); }
static inline cudaError_t ak_sim__ret(cudaError_t e) { if (e != cudaSuccess) ak_sim::last_error() = e; return e; }

static inline cudaError_t cudaGetDeviceCount(int *n) { if (!n) return cudaErrorInvalidValue; *n = 1; return cudaSuccess; }
static inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : ak_sim__ret(cudaErrorInvalidValue); }
static inline cudaError_t cudaGetDevice(int *d) { if (d) *d = 0; return cudaSuccess; }
static inline cudaError_t cudaDeviceSynchronize(void) { ak_sim::sync_point("cudaDeviceSynchronize"); return cudaSuccess; }
static inline cudaError_t cudaDeviceReset(void) { return cudaSuccess; }
static inline cudaError_t cudaDriverGetVersion(int *v) { if (v) *v = 0; return cudaSuccess; }
static inline cudaError_t cudaRuntimeGetVersion(int *v) { if (v) *v = 0; return cudaSuccess; }
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d)
{
    if (!p || d != 0) return ak_sim__ret(cudaErrorInvalidValue);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "attnkit CPU simulation (tests/cuda_sim.h)");
    p->totalGlobalMem = (size_t)1 << 34;
    p->sharedMemPerBlock = 48u << 10;
    p->sharedMemPerBlockOptin = 227u << 10;
    p->major = 9; p->minor = 0; p->multiProcessorCount = 1; p->warpSize = 32; p->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}

/* allocations: host memory, ranges recorded */
static inline bool ak_sim__dev_range(const void *p, size_t n)
{
    std::lock_guard<std::mutex> lock(ak_sim::alloc_mutex());
    return ak_sim::in_ranges(ak_sim::allocs(), p, n);
}
static inline cudaError_t ak_sim__malloc(void **p, size_t n)
{
    if (!p) return ak_sim__ret(cudaErrorInvalidValue);
    *p = nullptr;
    void *q = nullptr;
    /* exactly n bytes (256-aligned like cudaMalloc), so ASan sees one past the end */
    if (posix_memalign(&q, 256, n ? n : 1) != 0 || !q) return ak_sim__ret(cudaErrorMemoryAllocation);
    memset(q, 0xFF, n); /* not zero, as on a GPU: a read before any write sees NaN / -1 */
    {
        std::lock_guard<std::mutex> lock(ak_sim::alloc_mutex());
        ak_sim::allocs()[(uintptr_t)q].size = n;
    }
    *p = q;
    return cudaSuccess;
}
static inline cudaError_t cudaMalloc(void **p, size_t n)
{
    cudaError_t e = ak_sim__malloc(p, n);
    if (e == cudaSuccess) ak_sim::note(ak_sim::EV_ALLOC, "cudaMalloc", n);
    return e;
}
template <typename T> static inline cudaError_t cudaMalloc(T **p, size_t n) { return cudaMalloc((void **)p, n); }
static inline cudaError_t ak_sim__free(void *p)
{
    if (!p) return cudaSuccess;
    {
        std::lock_guard<std::mutex> lock(ak_sim::alloc_mutex());
        auto &m = ak_sim::allocs();
        auto it = m.find((uintptr_t)p);
        if (it == m.end()) {
            fprintf(stderr, "cuda_sim: cudaFree of a pointer cudaMalloc did not return\n");
            return ak_sim__ret(cudaErrorInvalidDevicePointer);
        }
        m.erase(it);
    }
    free(p);
    return cudaSuccess;
}
/* cudaFree waits for the device to finish (the driver does, in practice): a synchronising call */
static inline cudaError_t cudaFree(void *p)
{
    cudaError_t e = ak_sim__free(p);
    if (p && e == cudaSuccess) {
        ak_sim::note(ak_sim::EV_FREE, "cudaFree");
        ak_sim::sync_point("cudaFree");
    }
    return e;
}
static inline cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t)
{
    cudaError_t e = ak_sim__malloc(p, n);
    if (e == cudaSuccess) ak_sim::note(ak_sim::EV_ALLOC, "cudaMallocAsync", n);
    return e;
}
template <typename T> static inline cudaError_t cudaMallocAsync(T **p, size_t n, cudaStream_t s) { return cudaMallocAsync((void **)p, n, s); }
static inline cudaError_t cudaFreeAsync(void *p, cudaStream_t)
{
    cudaError_t e = ak_sim__free(p);
    if (p && e == cudaSuccess) ak_sim::note(ak_sim::EV_FREE, "cudaFreeAsync");
    return e;
}
static inline cudaError_t cudaMallocHost(void **p, size_t n)
{
    if (!p) return cudaErrorInvalidValue;
    *p = malloc(n ? n : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    std::lock_guard<std::mutex> lock(ak_sim::alloc_mutex());
    ak_sim::pinned()[(uintptr_t)*p].size = n;
    ak_sim::note(ak_sim::EV_ALLOC, "cudaMallocHost", n);
    return cudaSuccess;
}
static inline cudaError_t cudaFreeHost(void *p)
{
    if (!p) return cudaSuccess;
    {
        std::lock_guard<std::mutex> lock(ak_sim::alloc_mutex());
        if (ak_sim::pinned().erase((uintptr_t)p) == 0) {
            fprintf(stderr, "cuda_sim: cudaFreeHost of a pointer cudaMallocHost did not return\n");
            return ak_sim__ret(cudaErrorInvalidValue);
        }
    }
    free(p);
    ak_sim::note(ak_sim::EV_FREE, "cudaFreeHost");
    return cudaSuccess;
}

static inline cudaError_t ak_sim__memcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    if (n == 0) return cudaSuccess;
    if (!dst || !src) return ak_sim__ret(cudaErrorInvalidValue);
    bool dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if ((dd && !ak_sim__dev_range(dst, n)) || (sd && !ak_sim__dev_range(src, n))) {
        fprintf(stderr, "cuda_sim: cudaMemcpy of %zu bytes: the device side is not inside one live allocation\n", n);
        return ak_sim__ret(cudaErrorInvalidValue);
    }
    memmove(dst, src, n);
    return cudaSuccess;
}
/* the copy's direction as counted: bit 1 the destination is device memory, bit 0 the
   source (cudaMemcpyDefault: from the allocations) */
static inline int ak_sim__copy_sides(void *dst, const void *src, cudaMemcpyKind kind)
{
    if (kind != cudaMemcpyDefault)
        return (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) * 2 +
               (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice);
    return ak_sim__dev_range(dst, 0) * 2 + ak_sim__dev_range(src, 0);
}
/* Counted as a GPU runs them: a device -> host cudaMemcpy returns when its copy is done (a
   synchronising call that always waits); a host -> device one first synchronises the
   stream, then leaves its copy in flight; device -> device ones do not synchronise. */
static inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    cudaError_t e = ak_sim__memcpy(dst, src, n, kind);
    if (e != cudaSuccess || n == 0) return e;
    switch (ak_sim__copy_sides(dst, src, kind)) {
    case 1: ak_sim::note(ak_sim::EV_D2H, "cudaMemcpy", n); ak_sim::sync_point("cudaMemcpy", true); break;
    case 2: ak_sim::sync_point("cudaMemcpy"); ak_sim::note(ak_sim::EV_H2D, "cudaMemcpy", n); break;
    case 3: ak_sim::work(); break;
    default: break;
    }
    return e;
}
/* cudaMemcpyAsync from the device into pageable host memory (not cudaMallocHost's) is
   synchronous on a GPU too (the runtime stages it and returns when it is done): counted
   as a synchronising call that waits; into pinned memory it is not */
static inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t)
{
    cudaError_t e = ak_sim__memcpy(dst, src, n, kind);
    if (e != cudaSuccess || n == 0) return e;
    switch (ak_sim__copy_sides(dst, src, kind)) {
    case 1: {
        bool pin;
        {
            std::lock_guard<std::mutex> lock(ak_sim::alloc_mutex());
            pin = ak_sim::in_ranges(ak_sim::pinned(), dst, n);
        }
        ak_sim::note(ak_sim::EV_D2H, "cudaMemcpyAsync", n);
        if (!pin) ak_sim::sync_point("cudaMemcpyAsync (pageable)", true);
        break;
    }
    case 2: ak_sim::note(ak_sim::EV_H2D, "cudaMemcpyAsync", n); break;
    case 3: ak_sim::work(); break;
    default: break;
    }
    return e;
}
static inline cudaError_t cudaMemset(void *p, int v, size_t n)
{
    if (n == 0) return cudaSuccess;
    if (!ak_sim__dev_range(p, n)) {
        fprintf(stderr, "cuda_sim: cudaMemset of %zu bytes outside a live allocation\n", n);
        return ak_sim__ret(cudaErrorInvalidValue);
    }
    memset(p, v, n);
    ak_sim::work();
    return cudaSuccess;
}
static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) { return cudaMemset(p, v, n); }
static inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p)
{
    if (!a) return ak_sim__ret(cudaErrorInvalidValue);
    ak_sim::note(ak_sim::EV_PTRQ, "cudaPointerGetAttributes");
    memset(a, 0, sizeof *a);
    if (p && ak_sim__dev_range(p, 0)) {
        a->type = cudaMemoryTypeDevice;
        a->devicePointer = (void *)p;
    } else {
        a->type = cudaMemoryTypeUnregistered;
        a->hostPointer = (void *)p;
    }
    return cudaSuccess;
}
static inline cudaError_t cudaMemGetInfo(size_t *fr, size_t *tot) { if (fr) *fr = (size_t)1 << 33; if (tot) *tot = (size_t)1 << 34; return cudaSuccess; }

/* the counters (see "Counters" at the top): a snapshot, a reset (the device's state, work
   in flight or not, is kept), the trace switch (returns the previous state; the first
   state comes from AK_SIM_TRACE) and a line of the caller's own in the trace */
typedef ak_sim::counts ak_sim_counts;
static inline ak_sim_counts ak_sim_counts_get(void)
{
    std::lock_guard<std::mutex> lock(ak_sim::tr().m);
    return ak_sim::tr().c;
}
static inline void ak_sim_counts_reset(void)
{
    std::lock_guard<std::mutex> lock(ak_sim::tr().m);
    ak_sim::tr().c = ak_sim_counts{0, 0, 0, 0, 0, 0, 0, 0};
}
static inline int ak_sim_trace_set(int on)
{
    std::lock_guard<std::mutex> lock(ak_sim::tr().m);
    ak_sim::trace_env(ak_sim::tr());
    int was = ak_sim::tr().on;
    ak_sim::tr().on = on != 0;
    return was;
}
static inline void ak_sim_trace_mark(const char *label)
{
    std::lock_guard<std::mutex> lock(ak_sim::tr().m);
    ak_sim::trace_env(ak_sim::tr());
    if (ak_sim::tr().on) fprintf(stderr, "cuda_sim trace: mark %s\n", label ? label : "");
}

/* streams and events: everything has already run when the call returns */
struct CUstream_st { int dummy; };
struct CUevent_st { std::chrono::steady_clock::time_point t; };
static inline cudaError_t cudaStreamCreate(cudaStream_t *s) { if (!s) return cudaErrorInvalidValue; *s = new CUstream_st(); return cudaSuccess; }
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { return cudaStreamCreate(s); }
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) { delete s; return cudaSuccess; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { ak_sim::sync_point("cudaStreamSynchronize"); return cudaSuccess; }
static inline cudaError_t cudaEventCreate(cudaEvent_t *e) { if (!e) return cudaErrorInvalidValue; *e = new CUevent_st(); return cudaSuccess; }
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { return cudaEventCreate(e); }
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) { if (!e) return cudaErrorInvalidResourceHandle; e->t = std::chrono::steady_clock::now(); return cudaSuccess; }
static inline cudaError_t cudaEventSynchronize(cudaEvent_t) { ak_sim::sync_point("cudaEventSynchronize"); return cudaSuccess; }
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned = 0) { return cudaSuccess; }
static inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    if (!ms || !a || !b) return cudaErrorInvalidValue;
    *ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
    return cudaSuccess;
}
template <typename K> static inline cudaError_t cudaFuncSetAttribute(K *k, cudaFuncAttribute attr, int v)
{
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || v < 0 || v > (227 << 10)) return ak_sim__ret(cudaErrorInvalidValue);
    ak_sim::func_smem_limit()[(const void *)k] = (size_t)v;
    return cudaSuccess;
}

/* ---------------------------------------------------------------- cuBLAS */
typedef struct cublasContext *cublasHandle_t;
struct cublasContext { cudaStream_t stream; };
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_ALLOC_FAILED = 3,
               CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_EXECUTION_FAILED = 13 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
static inline cublasStatus_t cublasCreate(cublasHandle_t *h) { if (!h) return CUBLAS_STATUS_INVALID_VALUE; *h = new cublasContext(); (*h)->stream = nullptr; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasDestroy(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) { if (!h) return CUBLAS_STATUS_NOT_INITIALIZED; h->stream = s; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t) { return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED; }
/* the argument checks cuBLAS makes on a GEMM (column-major), and operands in device memory */
static inline cublasStatus_t ak_sim__gemm_check(const char *who, cublasHandle_t h, cublasOperation_t ta,
                                                cublasOperation_t tb, int m, int n, int k, const void *alpha,
                                                const void *A, int lda, const void *B, int ldb, const void *beta,
                                                const void *C, int ldc)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || !alpha || !beta || lda < (ta == CUBLAS_OP_N ? (m > 1 ? m : 1) : (k > 1 ? k : 1)) ||
        ldb < (tb == CUBLAS_OP_N ? (k > 1 ? k : 1) : (n > 1 ? n : 1)) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if ((m && k && !ak_sim__dev_range(A, 1)) || (n && k && !ak_sim__dev_range(B, 1)) || (m && n && !ak_sim__dev_range(C, 1))) {
        fprintf(stderr, "cuda_sim: %s: an operand is not device memory\n", who);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* column-major C = alpha op(A) op(B) + beta C; FP32 accumulation in k order */
static inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda, const float *B, int ldb,
                                         const float *beta, float *C, int ldc)
{
    cublasStatus_t st = ak_sim__gemm_check("cublasSgemm", h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    ak_sim::note(ak_sim::EV_LAUNCH, "cublasSgemm");
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float acc = 0.0f;
            for (int p = 0; p < k; p++) {
                float a = ta == CUBLAS_OP_N ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
                float b = tb == CUBLAS_OP_N ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
                acc += a * b;
            }
            float *c = &C[(size_t)j * ldc + i];
            *c = *beta == 0.0f ? *alpha * acc : *alpha * acc + *beta * *c;
        }
    return CUBLAS_STATUS_SUCCESS;
}

/* cublasGemmEx for fp32 storage with a reduced-precision compute type (what
   tk_sgemm_cuda uses for TK_MATH_TF32 / TK_MATH_BF16): every product's inputs are first
   reduced as tensor cores see them (CUBLAS_COMPUTE_32F_FAST_TF32: the low 13 mantissa
   bits dropped; CUBLAS_COMPUTE_32F_FAST_16BF: rounded to bf16, nearest even), then
   multiplied and summed in fp32 in k order. CUBLAS_COMPUTE_32F is cublasSgemm. Only fp32
   A, B, C (CUDA_R_32F) are accepted. */
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_16F = 74, CUBLAS_COMPUTE_32F_FAST_16BF = 75,
               CUBLAS_COMPUTE_32F_FAST_TF32 = 77 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
static inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void *alpha, const void *A, cudaDataType at, int lda,
                                          const void *B, cudaDataType bt, int ldb, const void *beta, void *C,
                                          cudaDataType ct, int ldc, cublasComputeType_t comp, cublasGemmAlgo_t)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (at != CUDA_R_32F || bt != CUDA_R_32F || ct != CUDA_R_32F ||
        (comp != CUBLAS_COMPUTE_32F && comp != CUBLAS_COMPUTE_32F_FAST_16BF && comp != CUBLAS_COMPUTE_32F_FAST_TF32))
        return CUBLAS_STATUS_INVALID_VALUE; /* not emulated */
    if (comp == CUBLAS_COMPUTE_32F)
        return cublasSgemm(h, ta, tb, m, n, k, (const float *)alpha, (const float *)A, lda, (const float *)B, ldb,
                           (const float *)beta, (float *)C, ldc);
    {
        cublasStatus_t st = ak_sim__gemm_check("cublasGemmEx", h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
        if (st != CUBLAS_STATUS_SUCCESS) return st;
        ak_sim::note(ak_sim::EV_LAUNCH, "cublasGemmEx");
    }
    {
        const float *Af = (const float *)A, *Bf = (const float *)B, al = *(const float *)alpha, be = *(const float *)beta;
        float *Cf = (float *)C;
        auto red = [comp](float x) {
            return comp == CUBLAS_COMPUTE_32F_FAST_TF32 ? __uint_as_float(__float_as_uint(x) & 0xffffe000u)
                                                        : __bfloat162float(__float2bfloat16_rn(x));
        };
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                float acc = 0.0f;
                for (int p = 0; p < k; p++) {
                    float a = ta == CUBLAS_OP_N ? Af[(size_t)p * lda + i] : Af[(size_t)i * lda + p];
                    float b = tb == CUBLAS_OP_N ? Bf[(size_t)j * ldb + p] : Bf[(size_t)p * ldb + j];
                    acc += red(a) * red(b);
                }
                float *c = &Cf[(size_t)j * ldc + i];
                *c = be == 0.0f ? al * acc : al * acc + be * *c;
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}

#endif /* ATTNKIT_CUDA_SIM_H */
