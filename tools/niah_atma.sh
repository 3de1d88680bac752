#!/bin/sh
# niah_atma.sh - seed 002's length sweep re-run with the ATMA preset (issue 43; docs/RESULTS.md,
# "The length sweep on ATMA's architecture"). It ran the preset's first form, 4 layers (ccAc:
# one attention layer, the memory on its own q/k/v); the preset is 8 layers with the memory on
# polar's q/k/v now, so set NIAH_EXTRA="--layers 4 --mem-qkv own" to repeat
# that run (the 8-layer arms: the commands in RESULTS). Three seeds of:
#   runs/niah_atma/seedS           the 6-arm grid (softmax-rope, softmax-nope, polar, each +-gdelta)
#   runs/niah_atma_dist/seedS      polar+gdelta with the distractor loss (R 2048 keys, weight 0.01:
#                                  seed 002 section 4.2's setting)
#   runs/niah_atma_sigreg/seedS    polar+gdelta with SIGReg strong (alpha 0.01): the mode with the
#                                  best mean 64K retrieval over distractor on/off among polar + memory
#                                  rows of seed 002's Table 6
# then the tables (build/niah --aggregate) into runs/niah_atma*/agg.md and docs/img/niah_atma_*.png.
# Usage: sh tools/niah_atma.sh [NIAH_BINARY]   (default build/niah; JOBS=2 runs two at a time)
# Cost: about 130 CPU-seconds per arm at --threads 1 on the 2-core AMD EPYC (27 arm runs).
set -eu
BIN=${1:-build/niah}
JOBS=${JOBS:-2}
test -x "$BIN" || { echo "niah_atma.sh: $BIN is not built (make build/niah)" >&2; exit 1; }
run() { # out-dir, flags...
    out=$1; shift
    if [ -s "$out/results.jsonl" ]; then echo "niah_atma.sh: $out done, kept"; return 0; fi
    mkdir -p "$out"
    # shellcheck disable=SC2086
    "$BIN" --preset atma ${NIAH_EXTRA:-} --threads 1 --out-dir "$out" "$@" > "$out.table" 2> "$out.log" ||
        { echo "niah_atma.sh: $out failed (see $out.log)" >&2; return 1; }
    echo "niah_atma.sh: $out done"
}
jobs_list() {
    for s in 1 2 3; do
        echo "runs/niah_atma/seed$s --seed $s"
        echo "runs/niah_atma_dist/seed$s --seed $s --arms polar+gdelta --distractor 2048 --distractor-weight 0.01"
        echo "runs/niah_atma_sigreg/seed$s --seed $s --arms polar+gdelta --sigreg strong --sigreg-alpha 0.01"
    done
}
fail=0
pids=""
n=0
jobs_list > "${TMPDIR:-/tmp}/niah_atma.$$"
while read -r line; do
    # shellcheck disable=SC2086
    run $line &
    pids="$pids $!"
    n=$((n + 1))
    if [ "$n" -ge "$JOBS" ]; then
        for p in $pids; do wait "$p" || fail=1; done
        pids=""
        n=0
    fi
done < "${TMPDIR:-/tmp}/niah_atma.$$"
for p in $pids; do wait "$p" || fail=1; done
rm -f "${TMPDIR:-/tmp}/niah_atma.$$"
[ "$fail" = 0 ] || { echo "niah_atma.sh: a run failed; no tables" >&2; exit 1; }
for d in niah_atma niah_atma_dist niah_atma_sigreg; do
    mkdir -p docs/img/$d
    "$BIN" --aggregate docs/img/$d runs/$d/seed1 runs/$d/seed2 runs/$d/seed3 > runs/$d/agg.md
done
echo "niah_atma.sh: tables in runs/niah_atma*/agg.md"
