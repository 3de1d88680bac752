# attnkit Makefile
#
#   make test        build every tests/test_*.c with each compiler in COMPILERS under
#                    ASan + UBSan (once with OpenMP and -march=native, once with
#                    neither: the portable path), the header compile checks (C and C++,
#                    every header alone and all together), the CUDA parity tests when
#                    nvcc exists; run them all. Last line: `N passed, N failed, N skipped`.
#   make cuda        build the CUDA parity tests for sm_80 and sm_90 (needs nvcc)
#   make bench       build the benchmarks in bench/ (optimised, OpenMP, OpenBLAS peer)
#   make clean
#
# Variables: COMPILERS (default "gcc clang"), ARCH (default -march=native),
# NVCC (default nvcc), CUDA_ARCHS, WT2_DIR (data, default ../shared/data).

COMPILERS ?= gcc clang
ARCH      ?= -march=native
NVCC      ?= nvcc
CUDA_ARCHS ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
WT2_DIR   ?= ../shared/data

WARN   := -std=c99 -Wall -Wextra -Werror -pedantic
SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
INC    := -I. -isystem /usr/include/stb
LIBS   := -lm -llzma -lpthread
TEST_CFLAGS := $(WARN) -O1 -g $(SAN) $(INC) -DATTNKIT_DATA_DIR='"$(WT2_DIR)"'
BENCH_CFLAGS := $(WARN) -O3 $(ARCH) -fopenmp $(INC) -DATTNKIT_DATA_DIR='"$(WT2_DIR)"'

DEPS       := $(wildcard *.h cuda/*.cuh tests/*.h examples/common/*.c examples/common/*.h)
TEST_NAMES := $(patsubst tests/%.c,%,$(wildcard tests/test_*.c))
PARITY_NAMES := $(patsubst tests/%.cu,%,$(wildcard tests/parity_*.cu))
BENCH_NAMES  := $(patsubst bench/%.c,%,$(wildcard bench/bench_*.c))

.PHONY: test tests-build cuda bench clean
.DELETE_ON_ERROR:

test:
	@COMPILERS="$(COMPILERS)" NVCC="$(NVCC)" sh tests/run_tests.sh

# One set of rules per compiler: build/<cc>/test_x (OpenMP, ARCH) and
# build/<cc>/test_x_noomp (no OpenMP, no ARCH: the portable scalar paths).
define CC_RULES
build/$(1)/%_noomp: tests/%.c $$(DEPS)
	@mkdir -p build/$(1)
	$(1) $$(TEST_CFLAGS) $$< -o $$@ $$(LIBS)
build/$(1)/%: tests/%.c $$(DEPS)
	@mkdir -p build/$(1)
	$(1) $$(TEST_CFLAGS) $$(ARCH) -fopenmp $$< -o $$@ $$(LIBS)
tests-build-$(1): $(foreach t,$(TEST_NAMES),build/$(1)/$(t) build/$(1)/$(t)_noomp)
endef
$(foreach c,$(COMPILERS),$(eval $(call CC_RULES,$(c))))

tests-build: $(foreach c,$(COMPILERS),tests-build-$(c))

build/cuda/%: tests/%.cu $(DEPS)
	@mkdir -p build/cuda
	$(NVCC) -O2 -std=c++17 $(CUDA_ARCHS) -I. -isystem /usr/include/stb \
	    -Xcompiler -Wall,-Wextra $< -o $@ -lcublas -lm

cuda: $(foreach p,$(PARITY_NAMES),build/cuda/$(p))

build/bench/%: bench/%.c $(DEPS)
	@mkdir -p build/bench
	$(CC) $(BENCH_CFLAGS) $< -o $@ -lopenblas $(LIBS)

bench: $(foreach b,$(BENCH_NAMES),build/bench/$(b))

clean:
	rm -rf build
