#!/bin/sh
# tools/ceas_exp.sh - the runs behind docs/RESULTS.md's CEAS section (issue 20, seed 004):
# scales 9k (bytes) and 1m (GPT-2 BPE) x arms fixed | beta | gate x seeds 1-3, one run at a
# time, one thread, nice 10 (the machine is shared). Summarise with tools/ceas_exp.py.
#   make build/ceas_exp && sh tools/ceas_exp.sh [OUT_DIR] [BIN]     (default build/ceas_exp_runs)
# Budgets: 9k 3,000 steps (eval every 50), 1m 600 steps (eval every 30); 8 x 64 tokens/step.
OUT=${1:-build/ceas_exp_runs}
BIN=${2:-build/ceas_exp}
mkdir -p "$OUT"
for scale in 9k 1m; do
    case $scale in
        9k) S=3000; E=50 ;;
        1m) S=600; E=30 ;;
    esac
    for seed in 1 2 3; do
        for arm in fixed beta gate; do
            f=$OUT/$scale.$arm.s$seed.json
            [ -s "$f" ] && continue   # resumable: finished runs are kept
            echo "ceas_exp: $scale $arm seed $seed" >&2
            nice -n 10 "$BIN" --scale $scale --arm $arm --seed $seed --steps $S --eval-every $E \
                --threads 1 > "$f.tmp" 2> "$OUT/$scale.$arm.s$seed.err" && mv "$f.tmp" "$f"
        done
    done
done
