#!/usr/bin/env bash
# tools/gpu_kit.sh - `make gpu-kit`: everything a GPU lease needs, built on the CPU machine.
#
# Builds, from a scratch copy of the working tree (.gpu-kit-build/, so build/ is left alone;
# a second run with nothing changed rebuilds nothing), sm_90 machine code (GPU_KIT_ARCHS) for
# every tests/parity_*.cu, every bench/bench_*_cuda.cu and the GPU trainer
# build/cuda/wt2_train, host code at -march=x86-64-v3 (never -march=native: the device's
# CPU may lack AVX-512), with -lineinfo (compute-sanitizer names source lines), all in
# parallel; then packs into gpu-kit/ (ignored by git; carry it: `carry: ["gpu-kit"]`):
#   bin.tar.xz     the binaries
#   lib/           liblzma.so.5, libgomp.so.1 and libcupti.so.13 from this machine, used on
#                  the device only where it lacks them
#   include/       stb_ds.h, stb_image_write.h, lzma.h: for the fallback build on the device
#   data/          the tokenised WikiText-2 splits the trainer runs need (WT2_DIR), and
#                  gpt2/ (the tokenizer: wt2_train --sample prints text with it)
#   whl/, peers/   the benchmark peers when tools/fetch_peers.sh fetched them (.whl/, peers/)
#   ref_train.txt  the CPU reference figures the device trainer runs are compared with:
#                  NAME CE TOL KEY ARGS..., from the kit's own wt2_train --device cpu (cached
#                  while the binary and the lines' arguments are unchanged); TOL measured
#                  from two CPU builds (see the file's header); ref_metrics/NAME.jsonl the
#                  CPU's per-step losses, for the first-step check and a drift report
#   manifest.txt   commit, date, flags, sizes
# and prints the kit's size (it must stay under 40 MiB: the device tool carries 64 MiB with
# the working tree). tools/gpu_run.sh is the runner on the device; docs/GPU.md "The first
# lease" gives the calls.
#
#   tools/gpu_kit.sh                   build and pack gpu-kit/
#   tools/gpu_kit.sh --build-only DIR  build the binaries into DIR only (the runner's
#                                      fallback on the device, for its own GPU's arch)
# Environment: GPU_KIT (folder, default gpu-kit), GPU_KIT_ARCHS (nvcc -gencode flags, default
# sm_90), GPU_KIT_HOST (host -march, default x86-64-v3), GPU_KIT_REF_STEPS (the reference
# runs' steps, default 60), WT2_DIR (data, default ../shared/data), NVCC.
set -eu
cd "$(dirname "$0")/.."
ROOT=$PWD
KIT=${GPU_KIT:-gpu-kit}
SRC=$ROOT/.gpu-kit-build
ARCHS=${GPU_KIT_ARCHS:-"-gencode arch=compute_90,code=sm_90"}
HOST=${GPU_KIT_HOST:--march=x86-64-v3}
NVCC=${NVCC:-nvcc}
WT2=${WT2_DIR:-../shared/data}
STEPS=${GPU_KIT_REF_STEPS:-60}
LIMIT_MIB=40
if ! command -v "$NVCC" >/dev/null 2>&1; then
    [ -x /usr/local/cuda/bin/nvcc ] && { NVCC=/usr/local/cuda/bin/nvcc; PATH=/usr/local/cuda/bin:$PATH; } \
        || { echo "gpu_kit: nvcc not found" >&2; exit 2; }
fi
PARITY=$(cd tests && ls parity_*.cu | sed 's/\.cu$//')
BENCH=$(cd bench && ls bench_*_cuda.cu | sed 's/\.cu$//')
BINS="$PARITY $BENCH wt2_train"

# sync: the scratch copy of tracked and untracked-not-ignored files, mtimes kept, so make
# rebuilds only what changed; files gone from the tree are removed there (build/ stays)
sync() {
    mkdir -p "$SRC"
    git ls-files -co --exclude-standard -z | tar --null -c -T - -f - | tar -x -C "$SRC" -f -
    comm -23 <(cd "$SRC" && find . -path ./build -prune -o -type f ! -name bins.sha -print | sed 's|^\./||' | sort) \
        <(git ls-files -co --exclude-standard | sort) | (cd "$SRC" && xargs -r rm -f --)
}
# build INCLUDE_FLAGS: the binaries in $SRC/build/cuda, all cores
build() {
    make -C "$SRC" -s -j"$(nproc 2>/dev/null || echo 2)" NVCC="$NVCC -lineinfo -Xcompiler $HOST" \
        CUDA_ARCHS="$ARCHS" ARCH="$HOST" INC="-I. -isystem /usr/include/stb $1" \
        LIBS="-lm -llzma -lpthread $2" $(for b in $BINS; do echo "build/cuda/$b"; done)
}
if [ "${1:-}" = --build-only ]; then
    [ -n "${2:-}" ] || { echo "usage: tools/gpu_kit.sh --build-only DIR" >&2; exit 2; }
    inc="" lib=""
    if [ -d "$KIT/include" ]; then inc="-isystem $ROOT/$KIT/include/stb -isystem $ROOT/$KIT/include"; fi
    if [ -d "$KIT/lib" ]; then lib="-L$ROOT/$KIT/lib"; ln -sf liblzma.so.5 "$KIT/lib/liblzma.so"; fi
    sync
    build "$inc" "$lib"
    mkdir -p "$2"
    for b in $BINS; do cp -p "$SRC/build/cuda/$b" "$2/$b"; done
    exit 0
fi

T0=$(date +%s)
sync
build "" ""
mkdir -p "$KIT"
# pack only when a binary changed (bins.sha: their hashes at the last packing)
(cd "$SRC/build/cuda" && sha256sum $BINS) > "$SRC/bins.sha"
if ! cmp -s "$SRC/bins.sha" "$KIT/bins.sha" || [ ! -f "$KIT/bin.tar.xz" ]; then
    tar -c -C "$SRC/build/cuda" $BINS | xz -T0 -6 > "$KIT/bin.tar.xz.tmp" && mv "$KIT/bin.tar.xz.tmp" "$KIT/bin.tar.xz"
    cp "$SRC/bins.sha" "$KIT/bins.sha"
fi
WT2BIN=$SRC/build/cuda/wt2_train
# the same trainer built by gcc in C mode (no FMA contraction): its CPU run differs from
# WT2BIN's CPU run by rounding alone, which measures how far rounding moves each reference
make -C "$SRC" -s build/wt2_train >/dev/null 2>&1 || echo "gpu_kit: build/wt2_train (gcc) did not build: no rounding spread" >&2
WT2GCC=$SRC/build/wt2_train

# shared libraries the device image may lack (used there only where ldd says missing)
mkdir -p "$KIT/lib" "$KIT/include/stb"
for l in liblzma.so.5 libgomp.so.1; do
    so=$(ldconfig -p | awk -v l="$l" '$1 == l && /x86-64/ {print $NF; exit}')
    [ -n "$so" ] && cp -pL "$so" "$KIT/lib/$l"
done
# CUPTI (bench_train_cuda's sync count dlopens it; used only where the image lacks it)
cupti=$(ls /usr/local/cuda/lib64/libcupti.so.13 /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13 \
    "$(dirname "$(command -v "$NVCC")")"/../lib/libcupti.so.13 2>/dev/null | head -n 1)
[ -n "$cupti" ] && cp -pL "$cupti" "$KIT/lib/libcupti.so.13"
for f in /usr/include/stb/stb_ds.h /usr/include/stb/stb_image_write.h; do [ -f "$f" ] && cp -p "$f" "$KIT/include/stb/"; done
[ -f /usr/include/lzma.h ] && cp -p /usr/include/lzma.h "$KIT/include/" && cp -pr /usr/include/lzma "$KIT/include/"

# data, peers
if ls "$WT2"/wt2.*.gpt2.u16 >/dev/null 2>&1; then mkdir -p "$KIT/data" && cp -p "$WT2"/wt2.*.gpt2.u16 "$KIT/data/"
else echo "gpu_kit: no tokenised data in $WT2 (wt2.*.gpt2.u16): the device trainer runs will be skipped" >&2; fi
# the GPT-2 tokenizer (1.5 MB): wt2_train --sample prints text with it (gpu_run.sh phase b's
# train-sample-cuda)
if [ -d "$KIT/data" ] && [ -f "$WT2/gpt2/encoder.json" ] && [ -f "$WT2/gpt2/vocab.bpe" ]; then
    mkdir -p "$KIT/data/gpt2" && cp -p "$WT2/gpt2/encoder.json" "$WT2/gpt2/vocab.bpe" "$KIT/data/gpt2/"
fi
if ls .whl/*.whl >/dev/null 2>&1; then mkdir -p "$KIT/whl" && cp -p .whl/*.whl "$KIT/whl/"; fi
if [ -f peers/polar_triton.py ]; then mkdir -p "$KIT/peers" && cp -p peers/polar_triton.py peers/polar_triton.commit "$KIT/peers/"; fi

# the CPU reference figures: the same binary, --device cpu, same preset, seed and steps
REFS="tiny-plain-fp32 1e-3 val_ce --preset tiny-plain --precision fp32
tiny-plain-bf16 3e-2 val_ce --preset tiny-plain --precision bf16
tiny-fp32 1e-3 val_ce --preset tiny --precision fp32
era-gac-tiny-fp32 1e-3 val_ce --preset era-gac-tiny --precision fp32
polar-gdelta-fp32 1e-3 val_ce --preset tiny-plain --attn polar --memory gdelta --precision fp32
polar-gdelta-bf16 3e-2 val_ce --preset tiny-plain --attn polar --memory gdelta --precision bf16
ceas-fp32 1e-3 val_ce --preset tiny-plain --controller ceas --precision fp32"
COMMON="--max-steps $STEPS --eval-every 0 --final-chunks 16 --seed 1 --log-every 1"
key=$( (sha256sum "$WT2BIN" "$WT2GCC" 2>/dev/null | cut -c1-16; echo "$REFS $COMMON") | sha256sum | cut -c1-16)
if [ -d "$KIT/data" ] && ! grep -q "^# key $key" "$KIT/ref_train.txt" 2>/dev/null; then
    echo "gpu_kit: CPU reference runs ($STEPS steps each; cached afterwards)..."
    tmp=$(mktemp -d)
    rm -rf "$KIT/ref_metrics.tmp"
    mkdir -p "$KIT/ref_metrics.tmp"
    {
        echo "# key $key"
        echo "# NAME CE TOL KEY ARGS: the CPU's --device cpu figure; the device's run of ARGS --device cuda must agree within TOL (relative)."
        echo "# TOL is the line's floor or, where larger, 3 x the rounding spread: how far the same run moves on the CPU between"
        echo "# two builds that differ in rounding only (nvcc's host g++ contracting a*b+c into FMAs, gcc -std=c99 not); a 60-step"
        echo "# training amplifies rounding chaotically, so a device (other rounding again) is held to that scale. The first"
        echo "# step (same parameters, same batch) is held tight: ref_metrics/NAME.jsonl (the CPU's per-step losses)."
        echo "$REFS" | while read -r name tol k args; do
            dargs=$(echo "$args" | sed 's/--precision [a-z0-9]*//')
            # shellcheck disable=SC2086
            "$WT2BIN" --device cpu $dargs $COMMON --data-dir "$KIT/data" --out-dir "$tmp/$name" --json \
                > "$tmp/$name.json" 2> "$tmp/$name.err" || { echo "gpu_kit: reference $name failed:" >&2; tail -n 3 "$tmp/$name.err" >&2; exit 1; }
            cp "$tmp/$name/metrics.jsonl" "$KIT/ref_metrics.tmp/$name.jsonl"
            ce=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])[sys.argv[2]])' "$tmp/$name.json" "$k")
            spread=""
            if [ -x "$WT2GCC" ]; then
                # shellcheck disable=SC2086
                "$WT2GCC" --device cpu $dargs $COMMON --data-dir "$KIT/data" --out-dir "$tmp/$name-gcc" --json \
                    > "$tmp/$name-gcc.json" 2> "$tmp/$name-gcc.err" || { echo "gpu_kit: reference $name (gcc) failed:" >&2; tail -n 3 "$tmp/$name-gcc.err" >&2; exit 1; }
                spread=$(python3 -c 'import json,sys; v=json.loads(open(sys.argv[1]).read().splitlines()[-1])[sys.argv[2]]; print("%.3e" % (abs(v - float(sys.argv[3])) / abs(float(sys.argv[3]))))' "$tmp/$name-gcc.json" "$k" "$ce")
                tol=$(python3 -c 'import sys; print("%.1e" % max(float(sys.argv[1]), 3 * float(sys.argv[2])))' "$tol" "$spread")
            fi
            echo "# $name: rounding spread between the two CPU builds ${spread:-not measured}"
            echo "$name $ce $tol $k $args $COMMON"
        done
    } > "$KIT/ref_train.txt.tmp"
    mv "$KIT/ref_train.txt.tmp" "$KIT/ref_train.txt"
    rm -rf "$KIT/ref_metrics" && mv "$KIT/ref_metrics.tmp" "$KIT/ref_metrics"
    rm -rf "$tmp"
fi

{
    echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
    echo "built: $(date -u '+%Y-%m-%d %H:%M UTC') on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "nvcc: $("$NVCC" --version | tail -n 1)"
    echo "flags: $ARCHS host $HOST -lineinfo"
    echo "binaries: $(echo $BINS)"
} > "$KIT/manifest.txt"
size=$(du -sk "$KIT" | awk '{print $1}')
echo "gpu_kit: $KIT/ is $((size / 1024)).$(((size % 1024) * 10 / 1024)) MiB (limit $LIMIT_MIB MiB) in $(($(date +%s) - T0)) s"
[ "$size" -le $((LIMIT_MIB * 1024)) ] || { echo "gpu_kit: over $LIMIT_MIB MiB" >&2; exit 1; }
