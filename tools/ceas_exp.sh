#!/bin/sh
# tools/ceas_exp.sh - the runs behind docs/RESULTS.md's CEAS section (issue 20, seed 004; the
# maxent, rpa and rpa-gate arms: issue 46 item 4): scales 9k (bytes; seeds 1-5), 9k-h4 (the
# 9k model with 4 heads of width 4, so that head freezing can act above the h_min = 2
# floor; seeds 1-5) and 1m (GPT-2 BPE; seeds 1-3) x arms fixed | beta | gate | maxent |
# rpa | rpa-gate, one run at a time, one thread, nice 10 (the machine is shared).
# Summarise with tools/ceas_exp.py.
#   make build/ceas_exp && sh tools/ceas_exp.sh [OUT_DIR] [BIN]     (default build/ceas_exp_runs2)
# Budgets: 9k 3,000 steps (eval every 50), 1m 600 steps (eval every 30); 8 x 64 tokens/step.
# Resumable: a finished run's OUT/<scale>.<arm>.s<seed>.json is kept. The 1m runs come last,
# seed by seed (all arms of a seed before the next), so a cut leaves whole seeds.
# maxent is not run at 9k-h4: every shape of its catalogue has a head width under 16 or
# not a multiple of it, so ceas_maxent_select (tile 16) finds none feasible and ceas_exp
# refuses (exit 1). Set SEEDS_1M (default "1 2 3") to run fewer 1m seeds; ABLATE=1 adds the
# ablations below (ceas_exp --heads / --pos).
# Runtime on the 2-core AMD EPYC VM (one core, the other busy): see docs/RESULTS.md.
OUT=${1:-build/ceas_exp_runs2}
BIN=${2:-build/ceas_exp}
ARMS="fixed beta gate maxent rpa rpa-gate"
mkdir -p "$OUT"
run() { # scale label, seed, arm, flags...
    sc=$1 seed=$2 arm=$3
    shift 3
    f=$OUT/$sc.$arm.s$seed.json
    [ -s "$f" ] && return 0   # resumable: finished runs are kept
    echo "ceas_exp: $sc $arm seed $seed ($(date -u +%H:%M:%S))" >&2
    nice -n 10 "$BIN" "$@" --arm "$arm" --seed "$seed" --threads 1 > "$f.tmp" 2> "$OUT/$sc.$arm.s$seed.err" &&
        mv "$f.tmp" "$f"
}
for seed in 1 2 3 4 5; do
    for arm in $ARMS; do
        run 9k "$seed" "$arm" --scale 9k --steps 3000 --eval-every 50
    done
done
for seed in 1 2 3 4 5; do
    for arm in $ARMS; do
        [ "$arm" = maxent ] && continue
        run 9k-h4 "$seed" "$arm" --scale 9k --heads 4 --steps 3000 --eval-every 50
    done
done
for seed in ${SEEDS_1M:-1 2 3}; do
    for arm in $ARMS; do
        run 1m "$seed" "$arm" --scale 1m --steps 600 --eval-every 30
    done
done
# ABLATE=1: what the maxent arm's selections are worth without the pre-selection and its
# (A) init: at 9k (d16 with 1 head of width 16, learned or rotary positions) the gate arm at
# 1 head (learned, rope) and the fixed and gate arms at the 9k model with rope (2 heads); at
# 1m the gate arm at 2 heads of width 16 with rope.
if [ "${ABLATE:-0}" = 1 ]; then
    for seed in 1 2 3 4 5; do
        run 9k-h1 "$seed" gate --scale 9k --heads 1 --steps 3000 --eval-every 50
        run 9k-h1-rope "$seed" gate --scale 9k --heads 1 --pos rope --steps 3000 --eval-every 50
        for arm in fixed gate; do
            run 9k-rope "$seed" "$arm" --scale 9k --pos rope --steps 3000 --eval-every 50
        done
    done
    # and the 1m selections' most frequent shape (2 heads of width 16, rope) without it
    for seed in ${SEEDS_1M:-1 2 3}; do
        run 1m-h2-rope "$seed" gate --scale 1m --heads 2 --pos rope --steps 600 --eval-every 30
    done
fi
