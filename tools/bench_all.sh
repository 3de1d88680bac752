#!/bin/sh
# bench_all.sh - the CPU benchmarks of docs/BENCHMARKS.md, one set per ISA, one table.
#
#   sh tools/bench_all.sh [isa ...]        isa: native | avx2   (default: both)
#
# Builds bench/ with the Makefile's flags into build/bench-native (-march=native) and
# build/bench-avx2 (-march=x86-64-v3: the AVX2+FMA kernels, also on an AVX-512 machine,
# where the peers are restricted to AVX2 by bench_match_isa_env), runs the headline
# benchmarks one after the other (never two at once: run it on a quiet machine), keeps
# each program's full output in build/bench-logs/<isa>-<bench>.log and prints a markdown
# table of their last lines with the machine (model name, ISA flags) at the top.
# Environment: BENCH_QUICK=1 runs fewer rounds (a smoke run, not for the record).
# BENCH_KEEP_CORETYPE=1 keeps an inherited OPENBLAS_CORETYPE for the native peers.
set -u
cd "$(dirname "$0")/.." || exit 1
ISAS=${*:-"native avx2"}
LOGS=build/bench-logs
mkdir -p "$LOGS"
model=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')
model="$model (family $(grep -m1 'cpu family' /proc/cpuinfo | sed 's/.*: //') model $(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | sed 's/.*: //'))"
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f|avx512bw|avx512vl|avx512_bf16|avx512_fp16|amx_tile)$' | tr '\n' ' ')
if [ "${BENCH_QUICK:-0}" = 1 ]; then
    R_GEMM=1; R_POLAR=1; R_GDELTA=1; R_ERA=5; R_CEAS=2; TRAIN="--rounds 1 --steps 2 --warmup 1"
    DECODE="--rounds 1 --steps 8"
else
    R_GEMM=3; R_POLAR=3; R_GDELTA=2; R_ERA=41; R_CEAS=5; TRAIN="--rounds 1"; DECODE=""
fi
echo "machine: $model; $(nproc) CPUs; flags: $flags"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); gcc $(gcc -dumpfullversion 2>/dev/null)"
echo
echo "| ISA build | bench | last line |"
echo "| --- | --- | --- |"
for isa in $ISAS; do
    case $isa in
        native) arch=-march=native
                # OpenBLAS 0.3.21 does not know every AVX-512 CPU (it picks Prescott on
                # Emerald Rapids; on Zen 5 it picks Cooperlake, which has AVX-512): give
                # the peers (OpenBLAS here, PyTorch's BLAS) their AVX-512 kernels. An
                # inherited OPENBLAS_CORETYPE (some machines preset Haswell) is overridden
                # unless BENCH_KEEP_CORETYPE=1.
                if grep -qw avx512f /proc/cpuinfo; then
                    if [ -n "${OPENBLAS_CORETYPE:-}" ] && [ "${BENCH_KEEP_CORETYPE:-0}" = 1 ]; then
                        echo "note: native peers keep OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE (BENCH_KEEP_CORETYPE=1)"
                    else
                        [ "${OPENBLAS_CORETYPE:-SkylakeX}" = SkylakeX ] ||
                            echo "note: inherited OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE replaced by SkylakeX for the native peers"
                        export OPENBLAS_CORETYPE=SkylakeX
                    fi
                fi ;;
        avx2) arch=-march=x86-64-v3
              unset OPENBLAS_CORETYPE ;; # bench_match_isa_env restricts the peers to AVX2
        *) echo "bench_all: unknown isa '$isa' (native | avx2)" >&2; exit 2 ;;
    esac
    dir=build/bench-$isa
    if ! make --no-print-directory -j2 bench ARCH="$arch" BENCH_DIR="$dir" > "$LOGS/$isa-build.log" 2>&1; then
        echo "| $isa | (build) | FAILED, see $LOGS/$isa-build.log |"
        continue
    fi
    for b in gemm train polar gdelta era ceas decode; do
        case $b in
            gemm) args="$R_GEMM" ;;
            train) args="$TRAIN" ;;
            polar) args="$R_POLAR 0 2 0" ;; # no 64-head memory part, T 1K and 4K, no materialised peer
            gdelta) args="$R_GDELTA" ;;
            era) args="$R_ERA" ;;
            ceas) args="$R_CEAS" ;;
            decode) args="$DECODE" ;;
        esac
        # shellcheck disable=SC2086
        OPENBLAS_THREAD_TIMEOUT=4 "$dir/bench_$b" $args > "$LOGS/$isa-$b.log" 2>&1
        grep "^bench_$b: [a-z_0-9]*=" "$LOGS/$isa-$b.log" | while read -r line; do
            echo "| $isa | bench_$b | \`$line\` |"
        done
    done
done
