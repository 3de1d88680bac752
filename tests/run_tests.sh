#!/bin/sh
# Builds and runs the whole test suite; see the Makefile's `test` target.
# Each binary's last line is `RESULT <name> passed=P failed=F skipped=S`.
# A binary that fails to build, crashes, or exits non-zero without reporting
# a failure counts as one failed case. Last line: `N passed, N failed, N skipped`.
COMPILERS=${COMPILERS:-"gcc clang"}
NVCC=${NVCC:-nvcc}
TIMEOUT=${TEST_TIMEOUT:-900}
MAKE=${MAKE:-make}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
P=0; F=0; S=0
LOG=build/test-logs
mkdir -p "$LOG"
T0=$(date +%s)
phase() { echo "-- $1 done at $(( $(date +%s) - T0 )) s"; }

# The nvcc build of the parity tests and GPU benchmarks (one architecture here, CI time;
# `make cuda` builds sm_80 and sm_90) starts now, in the background at low priority: it
# takes the CPU time the mostly single-threaded unit tests leave idle. Waited for in 4.
# Without a GPU (nvidia-smi -L finds none: CI) the binaries only have to build and skip,
# so they are compiled to compute_90 PTX only: nvcc's front end, cicc (device code to
# PTX) and the host compiler still check every file, ptxas (PTX to SASS) does not run:
# 286 CPU-s instead of 345 for the 14 programs. With a GPU: sm_90 SASS as before (a
# PTX-only binary would be JIT-compiled by the driver). `make cuda` and `make gpu-check`
# (tools/gpu_check.sh, its own -gencode) always build SASS; CUDA_TEST_ARCHS overrides.
# -j$JOBS: at nice 10 the jobs only take what the suite leaves idle, and if the build is
# still going when the simulated lanes end (the drop-in checks no longer leave a core
# to it), its tail uses both cores, not one (each nvcc job peaks at ~340 MB).
NVCC_PID=
if ls tests/parity_*.cu >/dev/null 2>&1 && command -v "$NVCC" >/dev/null 2>&1; then
    if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
        arch_default="-gencode arch=compute_90,code=sm_90"
    else
        arch_default="-gencode arch=compute_90,code=compute_90"
    fi
    nice -n 10 $MAKE -k -j"$JOBS" --no-print-directory cuda NVCC="$NVCC" \
        CUDA_ARCHS="${CUDA_TEST_ARCHS:-$arch_default}" > "$LOG/build-cuda.log" 2>&1 &
    NVCC_PID=$!
fi

# exec_one <label> <binary> [args]: runs it, its stdout, stderr and exit code into $LOG,
# and prints one progress line as it ends (to stderr, so the tallies on stdout stay the
# record): "[elapsed] label: P passed, F failed, S skipped (exit rc, seconds)"
exec_one() {
    label=$1; shift
    out="$LOG/$(echo "$label" | tr '/ ' '__').out"
    if [ ! -x "$1" ]; then echo notbuilt > "$out.rc"; echo "[$(( $(date +%s) - T0 )) s] $label: not built" >&2; return; fi
    t1=$(date +%s)
    timeout "$TIMEOUT" "$@" > "$out" 2> "$out.err"
    rc1=$?
    echo $rc1 > "$out.rc"
    res1=$(grep '^RESULT ' "$out" | tail -n 1 | sed 's/^RESULT [^ ]* //')
    echo "[$(( $(date +%s) - T0 )) s] $label: ${res1:-no RESULT line} (exit $rc1, $(( $(date +%s) - t1 )) s)" >&2
}
# exec_shard <label> <i/n> <binary>: exec_one of the binary's cases i modulo n (TEST_SHARD)
exec_shard() {
    if [ -x "$3" ]; then exec_one "$1" "$(command -v env)" TEST_SHARD="$2" "$3"; else exec_one "$1" "$3"; fi
}
# tally_one <label>: adds exec_one's result to P, F, S and prints it
tally_one() {
    label=$1
    out="$LOG/$(echo "$label" | tr '/ ' '__').out"
    rc=$(cat "$out.rc" 2>/dev/null)
    if [ "$rc" = notbuilt ] || [ -z "$rc" ]; then
        echo "FAIL $label: not built"; F=$((F + 1)); return
    fi
    cat "$out.err" | grep -v '^  ok \|makecontext/swapcontext' >&2
    res=$(grep '^RESULT ' "$out" | tail -n 1)
    if [ -z "$res" ]; then
        echo "FAIL $label: no RESULT line (exit $rc)"; F=$((F + 1)); return
    fi
    p=$(echo "$res" | sed -n 's/.*passed=\([0-9]*\).*/\1/p')
    f=$(echo "$res" | sed -n 's/.*failed=\([0-9]*\).*/\1/p')
    s=$(echo "$res" | sed -n 's/.*skipped=\([0-9]*\).*/\1/p')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    echo "$label: $p passed, $f failed, $s skipped"
    P=$((P + p)); F=$((F + f)); S=$((S + s))
}
run_one() { # run_one <label> <binary> [args]
    exec_one "$@"
    tally_one "$1"
}

# 1. unit tests, per compiler, with and without OpenMP. Both compilers' tests are built
#    first; then two lanes run side by side: the OpenMP binaries (2 threads, passive
#    waiting so the lanes do not spin against each other) and the no-OpenMP ones (one
#    thread each); results are tallied in order after both end.
# noomp_wanted <cc> <test>: the Makefile's NOOMP_SKIP_<cc> (example-level tests: gcc
# builds their no-OpenMP variant, clang does not), passed in by `make test`
noomp_wanted() {
    var=$(echo "NOOMP_SKIP_$1" | tr -c 'A-Za-z0-9_\n' '_')
    eval "skip_list=\${$var:-}"
    case " $skip_list " in *" $2 "*) return 1 ;; esac
    return 0
}
UCC=
for cc in $COMPILERS; do
    if ! command -v "$cc" >/dev/null 2>&1; then
        echo "FAIL compiler $cc not found"; F=$((F + 1)); continue
    fi
    UCC="$UCC $cc"
    echo "[$(( $(date +%s) - T0 )) s] building the unit tests with $cc (log: $LOG/build-$cc.log)" >&2
    $MAKE -k -j"$JOBS" --no-print-directory tests-build-"$cc" COMPILERS="$cc" > "$LOG/build-$cc.log" 2>&1 \
        || { echo "build errors with $cc:"; grep -E 'error|Error' "$LOG/build-$cc.log" | head -n 40; }
done
(
    export OMP_WAIT_POLICY=PASSIVE
    for cc in $UCC; do
        for src in tests/test_*.c; do
            [ -e "$src" ] || continue
            t=$(basename "$src" .c)
            exec_one "$cc/$t" "build/$cc/$t"
        done
    done
) &
LANE1=$!
(
    export OMP_NUM_THREADS=1
    for cc in $UCC; do
        for src in tests/test_*.c; do
            [ -e "$src" ] || continue
            t=$(basename "$src" .c)
            if noomp_wanted "$cc" "$t"; then exec_one "$cc/${t}_noomp" "build/$cc/${t}_noomp"; fi
        done
    done
) &
LANE2=$!
wait "$LANE1"
wait "$LANE2"
for cc in $UCC; do
    for src in tests/test_*.c; do
        [ -e "$src" ] || continue
        t=$(basename "$src" .c)
        tally_one "$cc/$t"
        if noomp_wanted "$cc" "$t"; then tally_one "$cc/${t}_noomp"; fi
    done
done

phase "unit tests"

# 1a. tk_sgemm through a CBLAS (TK_USE_CBLAS) where OpenBLAS is installed
if command -v gcc >/dev/null 2>&1 && \
   printf '#include <cblas.h>\nint main(void){return 0;}\n' | gcc -x c - -o /dev/null -lopenblas >/dev/null 2>&1; then
    $MAKE --no-print-directory build/gcc/test_gemm_cblas > "$LOG/build-cblas.log" 2>&1 \
        || { echo "build errors (TK_USE_CBLAS):"; grep -E 'error' "$LOG/build-cblas.log" | head -n 20; }
    run_one "gcc/test_gemm_cblas" build/gcc/test_gemm_cblas
else
    echo "skip gcc/test_gemm_cblas: no CBLAS (cblas.h + -lopenblas) installed"; S=$((S + 1))
fi

phase "CBLAS test"

# 2. header compile checks: every header alone and all together, C and C++
sh tests/compile_check.sh "$COMPILERS" > "$LOG/compile.out" 2>&1
cat "$LOG/compile.out" | grep -v '^ok ' >&2
res=$(grep '^RESULT ' "$LOG/compile.out" | tail -n 1)
if [ -n "$res" ]; then
    p=$(echo "$res" | sed -n 's/.*passed=\([0-9]*\).*/\1/p')
    f=$(echo "$res" | sed -n 's/.*failed=\([0-9]*\).*/\1/p')
    echo "compile checks: $p passed, $f failed"
    P=$((P + p)); F=$((F + f))
else
    echo "FAIL compile checks: no RESULT line"; F=$((F + 1))
fi

phase "compile checks"

# 3. the examples and benchmarks build warning-free (-Werror); they are not run here
for target in examples bench; do
    if $MAKE -k -j"$JOBS" --no-print-directory "$target" > "$LOG/build-$target.log" 2>&1; then
        echo "$target build: 1 passed, 0 failed"; P=$((P + 1))
    else
        echo "FAIL $target build:"; grep -E 'error' "$LOG/build-$target.log" | head -n 20; F=$((F + 1))
    fi
done

phase "examples and bench build"

# 3a. drop-in checks (issue 22): validation under -Ofast/-ffast-math, threads under mixed
#     OpenMP runtimes (clang -fopenmp -lgomp), the examples/dropin trainer (loss falls)
sh tests/dropin_check.sh "$COMPILERS" > "$LOG/dropin.out" 2>&1
grep '^FAIL\|^SKIP' "$LOG/dropin.out" >&2
res=$(grep '^RESULT ' "$LOG/dropin.out" | tail -n 1)
if [ -n "$res" ]; then
    p=$(echo "$res" | sed -n 's/.*passed=\([0-9]*\).*/\1/p')
    f=$(echo "$res" | sed -n 's/.*failed=\([0-9]*\).*/\1/p')
    s=$(echo "$res" | sed -n 's/.*skipped=\([0-9]*\).*/\1/p')
    echo "dropin checks: $p passed, $f failed, $s skipped"
    P=$((P + p)); F=$((F + f)); S=$((S + s))
else
    echo "FAIL dropin checks: no RESULT line"; F=$((F + 1))
fi

phase "drop-in checks"

# 3b. wt2_train end to end on the real data (when present): a short run with --json, a
#     resume, and Ctrl-C (SIGINT must save a checkpoint and exit 130)
WT2_DATA=${WT2_DIR:-../shared/data}
if [ -x build/wt2_train ] && [ -f "$WT2_DATA/wt2.valid.gpt2.u16" ]; then
    SM="$LOG/wt2_smoke"; rm -rf "$SM" "$SM.int" "$SM.bad" # a run never replaces an earlier one: fresh dirs
    SMALL="--d-model 32 --layers 2 --heads 2 --context 32 --batch 4 --steps 6 --eval-every 3 --eval-chunks 4 --final-chunks 8 --cg-lengths 16,32 --threads 2 --data-dir $WT2_DATA"
    ok=1
    build/wt2_train --preset tiny $SMALL --max-steps 3 --out-dir "$SM" --json > "$SM.a.json" 2> "$SM.a.err" || ok=0
    build/wt2_train --preset tiny $SMALL --resume "$SM/ckpt.safetensors" --out-dir "$SM" --json > "$SM.b.json" 2> "$SM.b.err" || ok=0
    grep -q '"val_ce":[0-9]' "$SM.b.json" || ok=0
    grep -q 'training on the first\|training on train' "$SM.a.err" || ok=0
    [ -s "$SM/loss.png" ] && [ -s "$SM/metrics.jsonl" ] || ok=0
    build/wt2_train --preset tiny $SMALL --steps 100000 --out-dir "$SM.int" > /dev/null 2> "$SM.int.err" &
    pid=$!; sleep 4; kill -INT $pid; wait $pid; code=$?
    [ "$code" -eq 130 ] && [ -s "$SM.int/ckpt.safetensors" ] || ok=0
    build/wt2_train --preset tiny $SMALL --d-model 48 --resume "$SM/ckpt.safetensors" --out-dir "$SM.bad" > /dev/null 2> "$SM.bad.err" && ok=0
    grep -q 'd-model' "$SM.bad.err" || ok=0
    if [ $ok -eq 1 ]; then echo "wt2_train smoke: 1 passed, 0 failed"; P=$((P + 1))
    else echo "FAIL wt2_train smoke (logs in $SM.*)"; tail -n 5 "$SM".*.err; F=$((F + 1)); fi
fi

phase "wt2_train smoke"

# 3c. the programs never report success they did not have: unwritable output, divergence,
#     bad ids, bad tokenizer files, empty splits (tests/programs_check.sh, tiny runs)
if [ -x build/wt2_train ]; then
    if sh tests/programs_check.sh build "$WT2_DATA" > "$LOG/programs_check.out" 2>&1 \
        && grep -q '^RESULT programs_check .*failed=0' "$LOG/programs_check.out"; then
        echo "programs check: 1 passed, 0 failed"; P=$((P + 1))
    else
        echo "FAIL programs check (log in $LOG/programs_check.out):"; grep '^FAIL' "$LOG/programs_check.out"; F=$((F + 1))
    fi
fi

phase "programs check"

# 3d. the evaluation programs lose nothing and write nothing invalid (issue 37): mcqa,
#     mcqa_gen, mcqa_compare, niah on hostile inputs (tests/programs_eval_check.sh, tiny runs)
if [ -x build/mcqa ]; then
    if sh tests/programs_eval_check.sh build "$WT2_DATA" > "$LOG/programs_eval_check.out" 2>&1 \
        && grep -q '^RESULT programs_eval_check .*failed=0' "$LOG/programs_eval_check.out"; then
        echo "programs eval check: 1 passed, 0 failed"; P=$((P + 1))
    else
        echo "FAIL programs eval check (log in $LOG/programs_eval_check.out):"; grep '^FAIL' "$LOG/programs_eval_check.out"; F=$((F + 1))
    fi
fi

phase "programs eval check"

# 3d2. text generation (issue 42): build/generate on tiny checkpoints, the same seed the same
#      text, strict --json, errors never a crash (tests/generate_check.sh, tiny runs)
if [ -x build/generate ] && [ -x build/wt2_train ]; then
    if sh tests/generate_check.sh build "$WT2_DATA" > "$LOG/generate_check.out" 2>&1 \
        && grep -q '^RESULT generate_check .*failed=0' "$LOG/generate_check.out"; then
        echo "generate check: 1 passed, 0 failed"; P=$((P + 1))
    else
        echo "FAIL generate check (log in $LOG/generate_check.out):"; grep '^FAIL' "$LOG/generate_check.out"; F=$((F + 1))
    fi
fi

phase "generate check"

# 3e. every command block of README.md runs as written (tests/readme_check.sh: a fresh copy
#     of the tree, the built programs, smoke sizes; issue 40)
if [ -x build/wt2_train ] && [ -x build/mcqa ] && [ -f "$WT2_DATA/wt2.valid.gpt2.u16" ]; then
    $MAKE --no-print-directory examples > "$LOG/build-examples-readme.log" 2>&1
    if sh tests/readme_check.sh "$WT2_DATA" > "$LOG/readme_check.out" 2>&1 \
        && grep -q '^RESULT readme_check .*failed=0' "$LOG/readme_check.out"; then
        echo "readme check: 1 passed, 0 failed"; P=$((P + 1))
    else
        echo "FAIL readme check (log in $LOG/readme_check.out):"; grep '^FAIL' "$LOG/readme_check.out"; F=$((F + 1))
    fi
fi

phase "readme check"

# 3f. the data-parallel communicator under MPI (tests/dist_check.sh: 1, 2 and 3 ranks, a
#     failing rank ends the job; issue 44). Skipped where OpenMPI is not installed.
if sh tests/dist_check.sh > "$LOG/dist_check.out" 2>&1; then
    if grep -q '^RESULT dist_check passed=0 failed=0 skipped=1' "$LOG/dist_check.out"; then
        echo "dist check: skipped ($(head -n 1 "$LOG/dist_check.out"))"; S=$((S + 1))
    else
        echo "dist check: 1 passed, 0 failed"; P=$((P + 1))
    fi
else
    echo "FAIL dist check (log in $LOG/dist_check.out):"; grep '^FAIL' "$LOG/dist_check.out"; F=$((F + 1))
fi

phase "dist check"

# 3g. data-parallel training under MPI (tests/dp_check.sh: build/mpi/wt2_train on 2 ranks
#     x 1 thread bit-identical to one process with --grad-accum 2, resume across N, SIGTERM
#     on one rank, a killed rank, an indivisible batch; issue 44). Skipped where OpenMPI or
#     the data is missing.
if sh tests/dp_check.sh "$WT2_DATA" > "$LOG/dp_check.out" 2>&1; then
    if grep -q '^RESULT dp_check passed=0 failed=0 skipped=1' "$LOG/dp_check.out"; then
        echo "dp check: skipped ($(head -n 1 "$LOG/dp_check.out"))"; S=$((S + 1))
    else
        echo "dp check: 1 passed, 0 failed"; P=$((P + 1))
    fi
else
    echo "FAIL dp check (log in $LOG/dp_check.out):"; grep '^FAIL' "$LOG/dp_check.out"; F=$((F + 1))
fi

phase "dp check"

# 4. CUDA kernels. (a) In the CPU simulation (tests/cuda_sim.h), on every machine: each
#    tests/parity_*.cu built with g++ and clang++ under ASan + UBSan runs every kernel
#    against the CPU reference; a planted out-of-bounds write (global and shared memory)
#    must be caught by ASan, a planted misaligned vector load by UBSan. (b) With nvcc: the same tests (and the GPU benchmarks) built
#    for sm_90 (CUDA_TEST_ARCHS; PTX only without a GPU), run on the GPU when there is one
#    (they skip without).
if ls tests/parity_*.cu >/dev/null 2>&1; then
    # the simulated launches are single-threaded: each compiler's set runs as one lane,
    # the lanes side by side (built first; results tallied after both lanes end)
    # sim_skipped <c++> <test>: the Makefile's SIM_SKIP_<c++> (built with the other compiler only)
    sim_skipped() {
        case "$1" in clang++) skip=$SIM_SKIP_clangxx ;; g++) skip=$SIM_SKIP_gxx ;; *) skip= ;; esac
        case " $skip " in *" $2 "*) return 0 ;; esac
        return 1
    }
    # parity_sim's planted bad accesses: each run must die with its sanitizer report
    BAD_MODES="--oob-global --oob-shared --oob-static-shared --misaligned-vector"
    SIMCXX=
    for cc in $COMPILERS; do
        case $cc in gcc) cxx=g++ ;; clang) cxx=clang++ ;; *) continue ;; esac
        SIMCXX="$SIMCXX $cxx"
        echo "[$(( $(date +%s) - T0 )) s] building the simulated parity tests with $cxx" >&2
        $MAKE -k -j"$JOBS" --no-print-directory sim-"$cxx" COMPILERS="$cc" > "$LOG/build-sim-$cxx.log" 2>&1 \
            || { echo "simulation build errors with $cxx:"; grep -E 'error' "$LOG/build-sim-$cxx.log" | head -n 40; }
    done
    # a program built by g++ only (SIM_SKIP_clangxx, e.g. parity_model) runs in two shards
    # when both lanes exist: its even cases in the g++ lane, its odd ones in the clang++ lane
    # (TEST_SHARD, tests/attnkit_test.h)
    both=0
    case " $SIMCXX " in *" g++ "*) case " $SIMCXX " in *" clang++ "*) both=1 ;; esac ;; esac
    LANES=
    for cxx in $SIMCXX; do
        (
            for src in tests/parity_*.cu; do
                t=$(basename "$src" .cu)
                if [ $both -eq 1 ] && sim_skipped clang++ "$t"; then
                    case $cxx in
                    g++) exec_shard "sim-g++/$t#0" 0/2 "build/sim-g++/$t" ;;
                    clang++) exec_shard "sim-g++/$t#1" 1/2 "build/sim-g++/$t" ;;
                    esac
                    continue
                fi
                sim_skipped "$cxx" "$t" && continue
                exec_one "sim-$cxx/$t" "build/sim-$cxx/$t"
            done
            for mode in $BAD_MODES; do
                if [ -x "build/sim-$cxx/parity_sim" ]; then
                    build/sim-$cxx/parity_sim $mode > "$LOG/oob$mode-$cxx.out" 2>&1
                    echo $? > "$LOG/oob$mode-$cxx.rc"
                else
                    echo notbuilt > "$LOG/oob$mode-$cxx.rc"
                fi
            done
        ) &
        LANES="$LANES $!"
    done
    for pid in $LANES; do wait "$pid"; done # not a bare wait: the nvcc build runs too
    for cxx in $SIMCXX; do
        for src in tests/parity_*.cu; do
            t=$(basename "$src" .cu)
            if [ $both -eq 1 ] && sim_skipped clang++ "$t"; then
                case $cxx in g++) tally_one "sim-g++/$t#0" ;; clang++) tally_one "sim-g++/$t#1" ;; esac
                continue
            fi
            sim_skipped "$cxx" "$t" && continue
            tally_one "sim-$cxx/$t"
        done
        for mode in $BAD_MODES; do
            rc=$(cat "$LOG/oob$mode-$cxx.rc" 2>/dev/null)
            case $mode in
            --misaligned-vector) report='misaligned address' ;;
            *) report='heap-buffer-overflow\|global-buffer-overflow\|out of bounds for type' ;;
            esac
            if [ -n "$rc" ] && [ "$rc" != notbuilt ] && [ "$rc" -ne 0 ] && grep -q "$report" "$LOG/oob$mode-$cxx.out"; then
                echo "sim-$cxx/parity_sim $mode: the sanitizers caught the planted bad access: 1 passed"; P=$((P + 1))
            else
                echo "FAIL sim-$cxx/parity_sim $mode: the planted bad access went unnoticed"; F=$((F + 1))
            fi
        done
    done
    phase "simulated parity tests"
    # the contracting simulation (the Makefile's sim-fma: clang++ -ffp-contract=fast -mfma):
    # the CPU/device pairs that must agree bit for bit, with host code fused as nvcc fuses
    if grep -qw fma /proc/cpuinfo 2>/dev/null && command -v clang++ >/dev/null 2>&1; then
        FMA_NAMES=$(sed -n 's/^SIM_FMA_NAMES := //p' Makefile)
        echo "[$(( $(date +%s) - T0 )) s] building the contracting simulation" >&2
        $MAKE -k -j"$JOBS" --no-print-directory sim-fma > "$LOG/build-sim-fma.log" 2>&1 \
            || { echo "contracting simulation build errors:"; grep -E 'error' "$LOG/build-sim-fma.log" | head -n 40; }
        FMA_PIDS=
        for t in $FMA_NAMES; do exec_one "sim-fma/$t" "build/sim-fma/$t" & FMA_PIDS="$FMA_PIDS $!"; done
        for pid in $FMA_PIDS; do wait "$pid"; done
        for t in $FMA_NAMES; do tally_one "sim-fma/$t"; done
    else
        echo "SKIP the contracting simulation: no FMA on this CPU or no clang++"; S=$((S + 1))
    fi
    phase "contracting simulation"
    # the GPU kit's device runner (tools/gpu_run.sh) in a dry run: simulation-built parity
    # binaries and stand-in scripts in a stand-in kit, no GPU (tests/gpu_run_check.sh)
    sh tests/gpu_run_check.sh build/sim-g++ > "$LOG/gpu_run_check.out" 2>&1
    grep '^FAIL\|^SKIP' "$LOG/gpu_run_check.out" >&2
    res=$(grep '^RESULT ' "$LOG/gpu_run_check.out" | tail -n 1)
    if [ -n "$res" ]; then
        p=$(echo "$res" | sed 's/.*passed=\([0-9]*\).*/\1/'); f=$(echo "$res" | sed 's/.*failed=\([0-9]*\).*/\1/')
        s=$(echo "$res" | sed 's/.*skipped=\([0-9]*\).*/\1/')
        P=$((P + p)); F=$((F + f)); S=$((S + s))
        echo "gpu_run dry run: $p passed, $f failed, $s skipped"
    else
        echo "FAIL gpu_run dry run: no RESULT line (log in $LOG/gpu_run_check.out)"; F=$((F + 1))
    fi
    phase "gpu_run dry run"
    if [ -n "$NVCC_PID" ]; then
        wait "$NVCC_PID" || { echo "CUDA build errors:"; grep -E 'error' "$LOG/build-cuda.log" | head -n 40; }
        phase "nvcc build (background)"
        for src in tests/parity_*.cu; do
            t=$(basename "$src" .cu)
            run_one "cuda/$t" "build/cuda/$t"
        done
        # the GPU benchmarks are built, not run, here: one that does not build is a failure
        # (its rule removes the old binary first, so a stale one cannot stand in for it)
        for src in bench/bench_*_cuda.cu; do
            t=$(basename "$src" .cu)
            if [ -x "build/cuda/$t" ]; then P=$((P + 1)); else
                echo "FAIL cuda/$t: not built (log in $LOG/build-cuda.log)"; F=$((F + 1)); fi
        done
    else
        echo "SKIP CUDA parity tests on the GPU: nvcc not found"
        S=$((S + 1))
    fi
fi

echo "$P passed, $F failed, $S skipped"
[ "$F" -eq 0 ]
