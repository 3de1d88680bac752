#!/bin/sh
# tools/wt2_prior_compare.sh - the runs behind the "honest evaluation" section of
# docs/RESULTS.md (issue 18): the tiny recipe (RPA prior) trained per seed, one thread,
# its final figures from the cached prior B(T) built from the running membership
# statistics (the default), then the same checkpoint re-evaluated on the held-out
# validation tail and the test split, each cut to its first CHUNKS chunks of 128 tokens
# (default 100: 12,800 targets each), with auto (SWA) and raw weights, each with the
# cached prior (--eval-prior running) and the old per-batch prior (--eval-prior batch),
# so every pair scores the same tokens. Summarise with tools/wt2_prior_table.py.
#   sh tools/wt2_prior_compare.sh [OUT_DIR] [SEEDS...]      (default build/prior_cmp, 1 2 3)
#   CHUNKS=500 sh tools/wt2_prior_compare.sh ...            (more tokens per comparison)
B=${WT2_TRAIN:-build/wt2_train}
CHUNKS=${CHUNKS:-100}
OUT=${1:-build/prior_cmp}
[ "$#" -ge 1 ] && shift
SEEDS=${*:-1 2 3}
mkdir -p "$OUT"
for s in $SEEDS; do
    R=$OUT/recipe.s$s
    $B --preset tiny --seed "$s" --threads 1 --json --out-dir "$R" > "$R.json" 2> "$R.err"
    for w in auto raw; do
        for p in running batch; do
            $B --preset tiny --seed "$s" --threads 1 --json --resume "$R/ckpt.safetensors" --max-steps 300 \
                --final-weights $w --eval-prior $p --final-chunks "$CHUNKS" --out-dir "$R.cmp.$w.$p" \
                > "$R.cmp.$w.$p.json" 2> "$R.cmp.$w.$p.err"
        done
    done
done
