#!/bin/sh
# tools/wt2_results.sh - the runs behind docs/RESULTS.md: three arms x seeds 1-3 of the
# tiny preset (300 steps of 1,024 tokens), one thread each, two runs at a time, then each
# checkpoint re-evaluated with raw and EMA weights. Summarise with tools/wt2_table.py.
#   make build/wt2_train && sh tools/wt2_results.sh [OUT_DIR]      (default build/results)
OUT=${1:-build/results}
mkdir -p "$OUT"
one() { # one ARM SEED
    arm=$1; seed=$2; R=$OUT/$arm.s$seed
    case $arm in
        recipe)   F="--preset tiny" ;;
        baseline) F="--preset tiny-baseline" ;;
        polar)    F="--preset tiny-baseline --attn polar --memory gdelta" ;;
    esac
    build/wt2_train $F --seed "$seed" --threads 1 --json --out-dir "$R" > "$R.json" 2> "$R.err"
    for w in raw ema; do
        build/wt2_train $F --seed "$seed" --threads 1 --json --resume "$R/ckpt.safetensors" \
            --max-steps 300 --final-weights $w --out-dir "$R.$w" > "$R.$w.json" 2> "$R.$w.err"
    done
}
if [ "$#" -ge 3 ]; then one "$2" "$3"; exit; fi
for s in 1 2 3; do for a in recipe baseline polar; do echo "$OUT $a $s"; done; done |
    xargs -P 2 -n 3 sh "$0"
