# attnkit Makefile
#
#   make test        build every tests/test_*.c with each compiler in COMPILERS under
#                    ASan + UBSan (once with OpenMP and -march=native, once with
#                    neither: the portable path), the header compile checks (C and C++,
#                    every header alone and all together), the CUDA parity tests when
#                    nvcc exists; run them all. Last line: `N passed, N failed, N skipped`.
#   make sim         build every tests/parity_*.cu against the CPU simulation of CUDA
#                    (tests/cuda_sim.h) with g++ and clang++ under ASan + UBSan
#   make sim-fma     the bit-exact parity tests in the simulation with FMA contraction on
#   make cuda        build the CUDA parity tests for sm_80 and sm_90 (needs nvcc)
#   make gpu-kit     no GPU needed: prebuilt sm_90 binaries, data, libraries, peers and
#                    the CPU reference figures in gpu-kit/ for tools/gpu_run.sh on a GPU
#                    lease (docs/GPU.md "The first lease")
#   make gpu-check OUT=dir   on a GPU machine: build for the detected GPU, run the parity
#                    suite, compute-sanitizer and the GPU benchmarks; report in OUT
#   make bench       build the benchmarks in bench/ (optimised, OpenMP, OpenBLAS peer)
#   make examples    build examples/*.c into build/ (CBLAS=-lopenblas: GEMMs through a CBLAS)
#   make run         build examples/wt2_train and train the tiny preset on $(WT2_DIR)
#                    (RUN_ARGS="--seed 2 --json" adds flags)
#   make niah        build examples/niah and run seed 002's length-extrapolation grid
#                    (NIAH_ARGS adds flags)
#   make clean
#
# Variables: COMPILERS (default "gcc clang"), ARCH (default -march=native), ARCH_gcc /
# ARCH_clang (the tests' target per compiler: gcc -march=native, clang -march=x86-64-v3
# where the CPU has AVX2+FMA, so an AVX-512 machine also runs every AVX2 kernel),
# NVCC (default nvcc), CUDA_ARCHS, WT2_DIR (data, default ../shared/data).

COMPILERS ?= gcc clang
ARCH      ?= -march=native
HAVE_AVX2 := $(shell grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo 2>/dev/null && echo 1)
ARCH_gcc  ?= $(ARCH)
ARCH_clang ?= $(if $(HAVE_AVX2),-march=x86-64-v3,$(ARCH))
NVCC      ?= nvcc
CUDA_ARCHS ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
WT2_DIR   ?= ../shared/data

WARN   := -std=c99 -Wall -Wextra -Werror -pedantic
SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
INC    := -I. -isystem /usr/include/stb
LIBS   := -lm -llzma -lpthread
TEST_OPT     = -O1
# TEST_DEBUG: the ASan test builds (tests/test_*.c here, the simulated parity tests below)
# carry line tables only (-g1: file:line and function names in ASan/UBSan stack traces,
# no variable/type info), for CI's time: at -O1 the full -g is 17-36 % of these compiles.
# Measured, CPU-s of one compile, -g against -g1: test_tensor gcc 16.8/10.8, clang
# 17.8/12.7; test_era gcc 8.5/5.8, clang 9.5/7.9; the seven g++ -O1 simulated tests
# 163/124 (parity_tensor 56/42); at -O0 less (test_model gcc 10.8/9.0, parity_model g++
# 46.6/42.7, parity_layers clang++ 23.0/20.2). Same code, same sanitizers and checks.
# For a debugger session: rm the binary (and build/gcc/common*/ for the examples' code a
# test links, TEST_OBJS below), then `make TEST_DEBUG=-g build/gcc/test_x`.
TEST_DEBUG   = -g1
TEST_CFLAGS  = $(WARN) $(TEST_OPT) $(TEST_DEBUG) $(SAN) $(INC) -DATTNKIT_DATA_DIR='"$(WT2_DIR)"'
# -fno-trapping-math: GCC does not vectorise a loop with a float compare-and-select on
# AVX2 under the default -ftrapping-math (the headers set it for their own code; this is
# for the examples' model code). Values are unchanged; nothing reads the FP flags.
OPT_FLAGS    := -O3 -fno-trapping-math
BENCH_CFLAGS := $(WARN) $(OPT_FLAGS) $(ARCH) -fopenmp $(INC) -DATTNKIT_DATA_DIR='"$(WT2_DIR)"'

DEPS       := $(wildcard *.h cuda/*.cuh tests/*.h examples/common/*.c examples/common/*.h examples/common/*.cuh)
TEST_NAMES := $(patsubst tests/%.c,%,$(wildcard tests/test_*.c))
PARITY_NAMES := $(patsubst tests/%.cu,%,$(wildcard tests/parity_*.cu))
BENCH_NAMES  := $(patsubst bench/%.c,%,$(wildcard bench/bench_*.c))

.PHONY: test tests-build cuda sim sim-fma gpu-kit gpu-check bench examples fuzz clean run niah
.DELETE_ON_ERROR:

# The example-level tests (every header's implementation plus the examples' model code:
# test_model and test_ceas_gating #include them, one translation unit each; test_train,
# test_mcqa and test_niah link them, TEST_OBJS below) build their portable
# no-OpenMP variant with gcc only; clang builds and runs them with OpenMP + SIMD. This
# keeps `make test` within CI's 20 minutes on 2 cores; the headers' own tests keep all
# four variants.
EXAMPLE_TESTS := test_model test_train test_mcqa test_niah test_ceas_gating test_decode test_maxent test_maxent_pi
NOOMP_SKIP_clang := $(EXAMPLE_TESTS)
# ... and at -O0 (ASan and UBSan check the same): 8-12 s to compile instead of 27-33 s,
# for runs a few seconds longer (measured: test_model 13 s against 8 s); for the tests that
# link the examples' objects this is their own translation unit only (the objects' level
# is TEST_OBJ_OPT / TEST_IMPL_OPT below)
$(foreach c,$(COMPILERS),$(foreach t,$(EXAMPLE_TESTS),build/$(c)/$(t) build/$(c)/$(t)_noomp)): TEST_OPT = -O0
# clang builds these header tests at -O0 too (both variants; test_layers its OpenMP one
# only): clang's -O1 is 75-85 % of their ASan compile and their runs are short. Measured,
# CPU-s, compile + run of the OpenMP binary (-g1), -O1 against -O0: test_layers 27.9/10.0,
# test_plot 11.0/2.3, test_era 7.5/1.7, test_gdelta 7.9/3.6, test_gdelta_nocuda 4.1/0.9,
# test_data 4.3/1.7, test_ceas 4.5/2.1, test_gemm 7.0/4.6, test_ckpt 3.9/1.5 (kept at -O1,
# longer runs: test_guardian 6.7/9.1, test_bpe 4.9/6.7, test_polar 11.7/11.4, test_tensor
# 24.9/76.6, test_layers_noomp ~30/27.2, its scalar run 4 s against 23 s). clang's
# warnings do not depend on the optimisation level; gcc keeps -O1 (its
# -Wmaybe-uninitialized and the like need the optimiser); ASan and UBSan check the same.
# With TEST_DEBUG=-g1: `make tests-build-clang` 227 CPU-s before, 113 after; running its
# 31 binaries 96 CPU-s before, 122 after (same RESULT counts).
CLANG_O0_TESTS := test_plot test_era test_gdelta test_gdelta_nocuda test_data test_ceas \
    test_gemm test_ckpt
$(foreach t,$(CLANG_O0_TESTS),build/clang/$(t) build/clang/$(t)_noomp) build/clang/test_layers: TEST_OPT = -O0

test:
	@COMPILERS="$(COMPILERS)" NVCC="$(NVCC)" NOOMP_SKIP_clang="$(NOOMP_SKIP_clang)" \
	    SIM_SKIP_clangxx="$(SIM_SKIP_clang++)" SIM_SKIP_gxx="$(SIM_SKIP_g++)" sh tests/run_tests.sh

# The examples' code a test links instead of #including it: TEST_OBJS_<test> lists the
# examples/common units (each built once per configuration, below); the unit a test
# reads the internals of is #included by that test alone (test_train: train.c; test_bpe,
# test_ckpt, test_plot: theirs, and they link nothing). A test that is not listed is one
# translation unit as before (test_model, test_layers, test_ceas_gating still #include
# impl.c, layers.c, model.c ...: it must not link a second copy).
TEST_OBJS_test_train := impl stb_impl bpe data layers model ckpt maxent
TEST_OBJS_test_maxent := impl stb_impl bpe data layers model ckpt train maxent
TEST_OBJS_test_maxent_pi := impl stb_impl bpe data layers model ckpt train maxent
TEST_OBJS_test_niah  := impl stb_impl bpe data layers model plot niah ckpt train maxent
TEST_OBJS_test_mcqa  := impl stb_impl bpe layers model mcqa
TEST_OBJS_test_data  := stb_impl bpe data
TEST_OBJS_test_model := impl layers
TEST_OBJS_test_decode := impl stb_impl layers model sample
TEST_OBJS_test_layers := impl
TEST_OBJS_test_ceas_gating := impl stb_impl bpe data layers
TEST_OBJ_TESTS := $(patsubst TEST_OBJS_%,%,$(filter TEST_OBJS_%,$(.VARIABLES)))
# Their optimisation, every compiler (the per-test TEST_OPT overrides above are the test's
# own TU; an object's own value wins over what the test that first needs it passes down):
# impl.o (the headers' kernels, where these tests spend their time) at TEST_IMPL_OPT = -O1,
# the examples' code at TEST_OBJ_OPT = -O0 (gcc's optimiser-dependent warnings on it come
# from `make examples`, -O3 -Werror). Measured on the 2-core EPYC, user CPU-s to build the
# 13 binaries run_tests.sh builds of test_train, test_niah, test_mcqa, test_data (gcc,
# gcc _noomp, clang; clang _noomp of test_data), make -j1 from clean, then to run each once
# as run_tests.sh does: each test one TU (before) 97 + 53; objects all -O0 40 + 59;
# all -O1 110 + 21; impl -O1, the rest -O0 ~72 + 24. Compile, CPU-s, -O0/-O1: impl.c gcc
# 7.4/14.6, clang 3.5/21.3; model.c gcc 1.6/3.0, clang 0.8/4.3; with impl.o at -O0 the
# runs are 2-3x longer (gcc test_niah_noomp 11.5 s against 4.9).
TEST_OBJ_OPT = -O0
TEST_IMPL_OPT = -O1

# One set of rules per compiler: build/<cc>/test_x (OpenMP, ARCH) and
# build/<cc>/test_x_noomp (no OpenMP, no ARCH: the portable scalar paths), with the
# examples' objects of the same configuration: build/<cc>/common/x.o and
# build/<cc>/common_noomp/x.o (the tests' flags and sanitizers).
define CC_RULES
build/$(1)/common/%.o build/$(1)/common_noomp/%.o: TEST_OPT = $$(TEST_OBJ_OPT)
build/$(1)/common/impl.o build/$(1)/common_noomp/impl.o: TEST_OPT = $$(TEST_IMPL_OPT)
build/$(1)/common/%.o: examples/common/%.c $$(DEPS)
	@mkdir -p build/$(1)/common
	$(1) $$(TEST_CFLAGS) $$(or $$(ARCH_$(1)),$$(ARCH)) -fopenmp -c $$< -o $$@
build/$(1)/common_noomp/%.o: examples/common/%.c $$(DEPS)
	@mkdir -p build/$(1)/common_noomp
	$(1) $$(TEST_CFLAGS) -c $$< -o $$@
$(foreach t,$(TEST_OBJ_TESTS),
build/$(1)/$(t): $(patsubst %,build/$(1)/common/%.o,$(TEST_OBJS_$(t)))
build/$(1)/$(t)_noomp: $(patsubst %,build/$(1)/common_noomp/%.o,$(TEST_OBJS_$(t))))
build/$(1)/%_noomp: tests/%.c $$(DEPS)
	@mkdir -p build/$(1) && rm -f $$@
	$(1) $$(TEST_CFLAGS) $$< $$(filter %.o,$$^) -o $$@ $$(LIBS)
build/$(1)/%: tests/%.c $$(DEPS)
	@mkdir -p build/$(1) && rm -f $$@
	$(1) $$(TEST_CFLAGS) $$(or $$(ARCH_$(1)),$$(ARCH)) -fopenmp $$< $$(filter %.o,$$^) -o $$@ $$(LIBS)
tests-build-$(1): $(foreach t,$(TEST_NAMES),build/$(1)/$(t)) \
    $(foreach t,$(filter-out $(NOOMP_SKIP_$(1)),$(TEST_NAMES)),build/$(1)/$(t)_noomp)
endef
$(foreach c,$(COMPILERS),$(eval $(call CC_RULES,$(c))))

tests-build: $(foreach c,$(COMPILERS),tests-build-$(c))

# tk_sgemm through a CBLAS (tensor.h's TK_USE_CBLAS back end), with OpenBLAS; the runner
# builds it where OpenBLAS is installed and skips it (saying so) where not.
build/gcc/test_gemm_cblas: tests/test_gemm.c $(DEPS)
	@mkdir -p build/gcc
	gcc $(TEST_CFLAGS) $(or $(ARCH_gcc),$(ARCH)) -fopenmp -DTK_USE_CBLAS $< -o $@ -lopenblas $(LIBS)

# (every binary rule removes its old output first: a build that fails leaves no stale
# binary for the runner to run in its place, so it counts as "not built", a failure)
build/cuda/%: tests/%.cu $(DEPS)
	@mkdir -p build/cuda && rm -f $@
	$(NVCC) -O2 -std=c++17 $(CUDA_ARCHS) -I. -isystem /usr/include/stb \
	    -Xcompiler -Wall,-Wextra,-fopenmp $< -o $@ -lcublas -lgomp $(LIBS)

# The data-parallel communicator under MPI (issue 44; tests/dist_check.sh runs it on 1-3
# ranks): mpicc around gcc, the test flags and sanitizers, -DATTNKIT_MPI.
MPICC ?= mpicc
build/mpi/test_dist: tests/test_dist.c examples/common/dist.c examples/common/dist.h examples/common/errf.h
	@mkdir -p build/mpi
	OMPI_CC=gcc $(MPICC) $(TEST_CFLAGS) -DATTNKIT_MPI $< -o $@ $(LIBS)

# GPU benchmarks (bench/bench_*_cuda.cu: attn, polar, gdelta, era, train, decode): compiled
# here so every machine with nvcc checks they build; `make gpu-check` builds them for the
# detected GPU and runs them, `make gpu-kit` packs them for tools/gpu_run.sh. A simulation
# build for a smoke run: build/sim-g++/bench_decode_cuda (SIM_RULES below; each file's
# header gives its small arguments).
CUDA_BENCH_NAMES := $(patsubst bench/%.cu,%,$(wildcard bench/bench_*_cuda.cu))
build/cuda/%: bench/%.cu $(DEPS) bench/bench_cuda_util.h
	@mkdir -p build/cuda && rm -f $@
	$(NVCC) -O3 -std=c++17 $(CUDA_ARCHS) -I. -isystem /usr/include/stb \
	    -Xcompiler -Wall,-Wextra,-fopenmp $< -o $@ -lcublas -lgomp $(LIBS)

cuda: $(foreach p,$(PARITY_NAMES) $(CUDA_BENCH_NAMES),build/cuda/$(p))

# The same parity sources against the CPU simulation: build/sim-<c++>/parity_x.
# SIM_OPT: -O1, except parity_model (the whole examples model in one TU: 30 s to compile at
# -O0 against 2 minutes at -O1, for a run 30 s longer)
SIM_OPT = -O1
SIM_CXXFLAGS = -std=c++17 -x c++ -Wall -Wextra -Werror -pedantic $(SIM_OPT) $(TEST_DEBUG) $(SAN) $(INC) -DATTNKIT_CUDA_SIM
build/sim-g++/parity_model build/sim-clang++/parity_model: SIM_OPT = -O0
# (bench_decode_cuda: the whole model in one TU too; not built by `make test`)
build/sim-g++/bench_decode_cuda build/sim-clang++/bench_decode_cuda: SIM_OPT = -O0
# parity_layers (the examples' layers with every header's CUDA body): -O0 too (46 s to
# compile against 2 minutes at -O1, for a run of about a second)
build/sim-g++/parity_layers build/sim-clang++/parity_layers: SIM_OPT = -O0
# clang++ builds parity_era, parity_ceas and parity_sim at -O0 as well (its -O1 is most of
# their compile, their runs are short; clang's warnings do not depend on -O). Measured,
# CPU-s, compile + run (-g1), -O1 against -O0: parity_era 22.4/15.7, parity_ceas 7.6/6.3,
# parity_sim 5.5/3.0 (kept at -O1: parity_tensor 53.7/103.3; g++ at -O0 -g broke even on
# parity_gdelta 49.3/49.4 and parity_polar 52.1/52.1, lost on parity_guardian 13.0/13.5).
# The planted out-of-bounds accesses (parity_sim --oob-*) are caught at -O0 too.
build/sim-clang++/parity_era build/sim-clang++/parity_ceas build/sim-clang++/parity_sim: SIM_OPT = -O0
SIM_CXX := $(patsubst gcc,g++,$(patsubst clang,clang++,$(COMPILERS)))
# parity_model (the whole examples model on the simulated device: every header's CUDA
# body in one ASan TU) is built with g++ only, parity_layers with clang++ only (the two
# compilers' simulated lanes run side by side in `make test`), for CI's time.
SIM_SKIP_clang++ := parity_model
SIM_SKIP_g++ := parity_layers
define SIM_RULES
build/sim-$(1)/%: tests/%.cu $$(DEPS)
	@mkdir -p build/sim-$(1) && rm -f $$@
	$(1) $$(SIM_CXXFLAGS) $$< -o $$@ $$(LIBS)
build/sim-$(1)/bench_%: bench/bench_%.cu $$(DEPS) bench/bench_util.h bench/bench_cuda_util.h
	@mkdir -p build/sim-$(1) && rm -f $$@
	$(1) $$(SIM_CXXFLAGS) $$< -o $$@ $$(LIBS)
sim-$(1): $(foreach p,$(filter-out $(SIM_SKIP_$(1)),$(PARITY_NAMES)),build/sim-$(1)/$(p))
endef
$(foreach c,$(SIM_CXX),$(eval $(call SIM_RULES,$(c))))
sim: $(foreach c,$(SIM_CXX),sim-$(c))

# The contracting simulation (build/sim-fma/): the parity tests whose CPU and device results
# must agree bit for bit, built by clang++ with -ffp-contract=fast and FMA (clang fuses
# a * b + c at -O1; g++ only from -O2), so host code is contracted wherever a compiler
# may, as nvcc contracts device code: an exact CPU/device pair that depends on neither side
# contracting fails here, not first on a GPU (the first GPU run found five such pairs).
# The simulation's __fmul_rn / __fadd_rn / __fsub_rn stay unfused (tests/cuda_sim.h).
# Built where the CPU has FMA (HAVE_AVX2); `make test` runs them.
SIM_FMA_NAMES := parity_tensor parity_guardian parity_era parity_ceas
SIM_FMA_FLAGS := -ffp-contract=fast -mfma -mavx2
build/sim-fma/%: tests/%.cu $(DEPS)
	@mkdir -p build/sim-fma && rm -f $@
	clang++ $(SIM_CXXFLAGS) $(SIM_FMA_FLAGS) $< -o $@ $(LIBS)
build/sim-fma/parity_era build/sim-fma/parity_ceas: SIM_OPT = -O0
sim-fma: $(foreach p,$(SIM_FMA_NAMES),build/sim-fma/$(p))

# The GPU kit (tools/gpu_kit.sh): built here, run on a lent GPU by tools/gpu_run.sh.
gpu-kit:
	@NVCC="$(NVCC)" WT2_DIR="$(WT2_DIR)" sh -c 'exec bash tools/gpu_kit.sh'

# Everything a GPU machine should run, one report in $(OUT) (see tools/gpu_check.sh).
OUT ?= build/gpu-check
gpu-check:
	@NVCC="$(NVCC)" sh tools/gpu_check.sh "$(OUT)"

# BENCH_DIR: where `make bench` puts the binaries (tools/bench_all.sh builds one set per
# ISA: ARCH=-march=x86-64-v3 BENCH_DIR=build/bench-avx2)
BENCH_DIR ?= build/bench
$(BENCH_DIR)/%: bench/%.c $(DEPS) bench/bench_util.h bench/bench_contended.h
	@mkdir -p $(BENCH_DIR)
	$(CC) $(BENCH_CFLAGS) $< -o $@ -lopenblas $(LIBS)

# bench_dp (issue 44): the data-parallel step under MPI, built by mpicc (-DATTNKIT_MPI) where
# mpicc exists; without it the program builds as one rank and reports nan
HAVE_MPICC := $(shell command -v $(MPICC) 2>/dev/null)
$(BENCH_DIR)/bench_dp: bench/bench_dp.c $(DEPS) bench/bench_util.h
	@mkdir -p $(BENCH_DIR)
	$(if $(HAVE_MPICC),OMPI_CC=$(CC) $(MPICC) -DATTNKIT_MPI,$(CC)) $(BENCH_CFLAGS) $< -o $@ -lopenblas $(LIBS)

bench: $(foreach b,$(BENCH_NAMES),$(BENCH_DIR)/$(b))

# Examples: build/<name> from examples/<name>.c plus every examples/common/*.c
# (examples/common/stb_impl.c holds the one STB_DS / STB_IMAGE_WRITE implementation).
EXAMPLE_NAMES := $(patsubst examples/%.c,%,$(wildcard examples/*.c))
COMMON_SRCS   := $(wildcard examples/common/*.c)
EX_CFLAGS     := $(WARN) $(OPT_FLAGS) $(ARCH) -fopenmp $(INC) -DATTNKIT_DATA_DIR='"$(WT2_DIR)"'
# CBLAS=-lopenblas (or any CBLAS's link flags): the examples' tk_sgemm calls cblas_sgemm
# (tensor.h's TK_USE_CBLAS). Off by default; after switching, `make clean` (the shared
# objects are not rebuilt on a variable change).
CBLAS ?=
EX_CFLAGS     += $(if $(strip $(CBLAS)),-DTK_USE_CBLAS)

# the shared code is compiled once into objects, then linked into every example
COMMON_OBJS   := $(patsubst examples/common/%.c,build/obj/common/%.o,$(COMMON_SRCS))
# kept: make would otherwise treat an object reached only through the pattern rule below
# as intermediate and delete it after each link (every example build recompiled it, and
# two builds at once could link against a half-deleted set)
.SECONDARY: $(COMMON_OBJS)
build/obj/common/%.o: examples/common/%.c $(DEPS)
	@mkdir -p build/obj/common
	$(CC) $(EX_CFLAGS) -c $< -o $@

build/%: examples/%.c $(COMMON_OBJS) $(DEPS)
	@mkdir -p build && rm -f $@
	$(CC) $(EX_CFLAGS) $< $(COMMON_OBJS) -o $@ $(CBLAS) $(LIBS)

examples: $(foreach e,$(EXAMPLE_NAMES),build/$(e))

# Seed 003's experiment's diagnostics of a trained ERA prior (tools/era_diag.c; tools/era_exp.py runs it)
build/era_diag: tools/era_diag.c $(DEPS)
	@mkdir -p build
	$(CC) $(EX_CFLAGS) $< -o $@ $(LIBS)

# The data-parallel trainer (issue 44): wt2_train with dist.c built by mpicc (-DATTNKIT_MPI),
# the other examples' objects as `make examples` builds them. `mpirun -np N
# build/mpi/wt2_train ...` trains on N processes; started without mpirun it is one rank
# (tests/dp_check.sh). The plain build/wt2_train has no MPI. (After COMMON_OBJS: a
# prerequisite list is expanded where the rule is read.)
build/mpi/obj/dist.o: examples/common/dist.c examples/common/dist.h examples/common/errf.h
	@mkdir -p build/mpi/obj
	OMPI_CC=$(CC) $(MPICC) $(EX_CFLAGS) -DATTNKIT_MPI -c $< -o $@
build/mpi/wt2_train: examples/wt2_train.c build/mpi/obj/dist.o $(filter-out build/obj/common/dist.o,$(COMMON_OBJS)) $(DEPS)
	@mkdir -p build/mpi
	OMPI_CC=$(CC) $(MPICC) $(EX_CFLAGS) $< build/mpi/obj/dist.o $(filter-out build/obj/common/dist.o,$(COMMON_OBJS)) -o $@ $(CBLAS) $(LIBS)

# The GPU trainer: the same examples with the headers' implementations (impl.c) compiled
# by nvcc, so every op the model calls has its CUDA body and `--device cuda` trains on the
# GPU (`--device cpu`, the default, is the CPU trainer). Not built by `make test` (CI
# time: tests/parity_model.cu covers the same code under nvcc and in the simulation);
# `make gpu-check` builds and runs it for the detected GPU.
build/cuda/obj/impl.o: examples/common/impl.c $(DEPS)
	@mkdir -p build/cuda/obj
	$(NVCC) -O3 -std=c++17 $(CUDA_ARCHS) -x cu -I. -isystem /usr/include/stb \
	    -Xcompiler -Wall,-Wextra,-fopenmp -c $< -o $@
build/cuda/obj/%.o: examples/%.c $(DEPS)
	@mkdir -p build/cuda/obj
	$(CC) $(EX_CFLAGS) -c $< -o $@
build/cuda/wt2_train: build/cuda/obj/wt2_train.o build/cuda/obj/impl.o $(filter-out build/obj/common/impl.o,$(COMMON_OBJS))
	$(NVCC) $(CUDA_ARCHS) $^ -o $@ -lcublas -lgomp $(LIBS)
# The GPU trainer on several processes (issue 44): the CUDA objects with dist.c built by
# mpicc (-DATTNKIT_MPI), linked by nvcc against MPI (MPI_LINK: OpenMPI's mpicc
# --showme:link; set it for another MPI). NCCL is not linked: examples/common/dpnccl.c
# loads libnccl.so.2 when --device cuda runs on more than one process (`mpirun -np N
# build/mpi-cuda/wt2_train --device cuda ...`; one GPU per process: see docs/GPU.md).
MPI_LINK ?= $(shell $(MPICC) --showme:link 2>/dev/null)
build/mpi-cuda/wt2_train: build/cuda/obj/wt2_train.o build/cuda/obj/impl.o build/mpi/obj/dist.o \
                          $(filter-out build/obj/common/impl.o build/obj/common/dist.o,$(COMMON_OBJS))
	@mkdir -p build/mpi-cuda
	$(NVCC) $(CUDA_ARCHS) $^ -o $@ -lcublas -lgomp $(LIBS) $(MPI_LINK)
# generate on the GPU (--device cuda: model.h's decoding on the device model), built the same way
build/cuda/generate: build/cuda/obj/generate.o build/cuda/obj/impl.o $(filter-out build/obj/common/impl.o,$(COMMON_OBJS))
	$(NVCC) $(CUDA_ARCHS) $^ -o $@ -lcublas -lgomp $(LIBS)

# The tiny preset on WikiText-2 (<= 10 minutes on 2 cores, evaluation included).
RUN_ARGS ?=
# The recipe is silent and its echo goes to stderr, so stdout is only the program's
# (`make -s run RUN_ARGS=--json > r.json` holds the JSON line alone; -s also quiets the build).
run: build/wt2_train
	@test -d "$(WT2_DIR)" || { echo "make run: data directory '$(WT2_DIR)' not found (set WT2_DIR=/path/to/wikitext-2; README, section \"Data\")" >&2; exit 1; }
	@echo 'build/wt2_train --preset tiny --data-dir "$(WT2_DIR)" $(RUN_ARGS)' >&2
	@build/wt2_train --preset tiny --data-dir "$(WT2_DIR)" $(RUN_ARGS)

# Seed 002's length-extrapolation grid (examples/niah.c: 6 arms trained at 64 tokens,
# evaluated at 1x..32x; about 11 minutes on one core): results in runs/niah
# (NIAH_ARGS="--seed 2 --threads 1" adds flags; build/niah --help lists them).
NIAH_ARGS ?=
niah: build/niah
	@test -d "$(WT2_DIR)" || { echo "make niah: data directory '$(WT2_DIR)' not found (set WT2_DIR=/path/to/wikitext-2; README, section \"Data\")" >&2; exit 1; }
	@echo 'build/niah --data-dir "$(WT2_DIR)" $(NIAH_ARGS)' >&2
	@build/niah --data-dir "$(WT2_DIR)" $(NIAH_ARGS)

# Fuzzing: tests/fuzz/fuzz_<x>.c are libFuzzer targets (each a single TU that
# includes what it needs). `make fuzz FUZZ_SECONDS=600` runs each for that long.
FUZZ_NAMES   := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_SECONDS ?= 60
build/fuzz/%: tests/fuzz/%.c $(DEPS)
	@mkdir -p build/fuzz && rm -f $@
	clang -std=c99 -g -O1 -fsanitize=fuzzer,address,undefined $(INC) $< -o $@ -lm -llzma

fuzz: $(foreach f,$(FUZZ_NAMES),build/fuzz/$(f))
	@for f in $(FUZZ_NAMES); do \
	    mkdir -p build/fuzz/corpus_$$f; \
	    echo "== $$f ($(FUZZ_SECONDS) s)"; \
	    build/fuzz/$$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	        build/fuzz/corpus_$$f $$( [ -d tests/fuzz/seeds_$$f ] && echo tests/fuzz/seeds_$$f ) || exit 1; \
	done

clean:
	rm -rf build
