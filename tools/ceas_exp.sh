#!/bin/sh
# tools/ceas_exp.sh - the runs behind docs/RESULTS.md's CEAS section (issue 20, seed 004):
# scales 9k (bytes; seeds 1-5: a run takes seconds), 1m (GPT-2 BPE; seeds 1-3) and 9k-h4
# (the 9k model with 4 heads of width 4, so that head freezing can act above the h_min = 2
# floor; seeds 1-5) x arms fixed | beta | gate, one run at a time, one thread, nice 10 (the
# machine is shared). Summarise with tools/ceas_exp.py.
#   make build/ceas_exp && sh tools/ceas_exp.sh [OUT_DIR] [BIN]     (default build/ceas_exp_runs)
# Budgets: 9k 3,000 steps (eval every 50), 1m 600 steps (eval every 30); 8 x 64 tokens/step.
# About 25 minutes of one core in all (9k runs ~12 s, 1m runs ~2 min on a loaded 2-core machine).
OUT=${1:-build/ceas_exp_runs}
BIN=${2:-build/ceas_exp}
mkdir -p "$OUT"
for scale in 9k 1m 9k-h4; do
    case $scale in
        9k) S=3000; E=50; SEEDS="1 2 3 4 5"; X="--scale 9k" ;;
        1m) S=600; E=30; SEEDS="1 2 3"; X="--scale 1m" ;;
        9k-h4) S=3000; E=50; SEEDS="1 2 3 4 5"; X="--scale 9k --heads 4" ;;
    esac
    for seed in $SEEDS; do
        for arm in fixed beta gate; do
            f=$OUT/$scale.$arm.s$seed.json
            [ -s "$f" ] && continue   # resumable: finished runs are kept
            echo "ceas_exp: $scale $arm seed $seed" >&2
            nice -n 10 "$BIN" $X --arm $arm --seed $seed --steps $S --eval-every $E \
                --threads 1 > "$f.tmp" 2> "$OUT/$scale.$arm.s$seed.err" && mv "$f.tmp" "$f"
        done
    done
done
