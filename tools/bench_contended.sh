#!/bin/sh
# bench_contended.sh - issue 41's contended runs: bench_polar, bench_gdelta and bench_train
# beside 2 and 8 busy processes, each under libgomp's default spin (ATTNKIT_WAIT_POLICY set:
# the programs' policy is not applied) and under the programs' policy (GOMP_SPINCOUNT=5000),
# alternating, R repeats (default 2). Build first: make build/bench/bench_polar
# build/bench/bench_gdelta build/bench/bench_train. Needs a quiet machine (it makes its own
# load). About 20 minutes on 2 cores at R = 2.
R=${R:-2}
for i in $(seq 1 "$R"); do
    for b in "build/bench/bench_polar --contended 2,8 2" "build/bench/bench_gdelta --contended 2,8 2" \
             "build/bench/bench_train --contended 2,8 --rounds 2"; do
        name=$(basename "${b%% *}")
        echo "### $name default run $i"
        ATTNKIT_WAIT_POLICY="runtime default (bench)" $b 2>&1 | grep -E "^contended|^  |quiet_|fair_share|^control"
        echo "### $name spin5000 run $i"
        $b 2>&1 | grep -E "^contended|^  |quiet_|fair_share|^control"
    done
done
