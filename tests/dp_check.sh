#!/bin/sh
# dp_check.sh - data-parallel training under MPI (issue 44): build/mpi/wt2_train (mpicc,
# -DATTNKIT_MPI) on 2 ranks x 1 OpenMP thread against one process with --grad-accum 2 (the
# same micro-batches in rank order: train.h trn_set_parallel's rule, bit for bit), a small
# tiny-preset model (seconds per run):
#   - 30 steps (every step logged, periodic evaluations, the context game, Guardian, EMA):
#     metrics.jsonl and ckpt.safetensors identical (cmp; the runs share one out-dir path,
#     which the checkpoint records)
#   - the same with --controller ceas (its attention observables combined over the ranks)
#   - resume at N = 2 from an N = 1 checkpoint (step 15), and at N = 1 from an N = 2 one:
#     the final checkpoint identical to the uninterrupted run's
#   - ZeRO-1 (--zero 1) on 2 ranks identical to --zero 0; resumes across --zero 0 / 1 and
#     to N = 1 continue identically
#   - SIGTERM to one rank: every rank stops, rank 0 checkpoints, exit 143; resumed, the
#     run ends identical to the uninterrupted one; rank 0 notes OpenMPI's 1 s kill grace;
#     SIGINT to mpirun launched with a longer grace: a checkpoint, a stop
#   - a rank killed (kill -9) mid-run: the job exits non-zero within seconds
#   - --batch not divisible by the ranks: refused, exit 2; --grad-accum's range
#   - --ceas-gating on / --maxent-pi on with micro-batches (--grad-accum 2, 2 ranks): refused
# Skips (and says so) where mpicc or mpirun is missing.
#   sh tests/dp_check.sh [DATADIR]   last line: RESULT dp_check passed=P failed=F skipped=S
MAKE=${MAKE:-make}
D=${1:-${WT2_DIR:-../shared/data}}
P=0; F=0; S=0
ok() { echo "ok   $1"; P=$((P + 1)); }
bad() { echo "FAIL $1"; F=$((F + 1)); }
if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
    echo "skip dp_check: mpicc / mpirun not installed (Debian: openmpi-bin libopenmpi-dev)"
    echo "RESULT dp_check passed=0 failed=0 skipped=1"
    exit 0
fi
if [ ! -f "$D/wt2.valid.gpt2.u16" ] && [ ! -f "$D/wiki.valid.raw.xz" ] && [ ! -f "$D/wiki.valid.raw" ]; then
    echo "skip dp_check: no WikiText-2 data in $D"
    echo "RESULT dp_check passed=0 failed=0 skipped=1"
    exit 0
fi
case "$D" in /*) ;; *) D="$(pwd)/$D" ;; esac
# root in CI containers; the ranks may outnumber the cores
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
if ! $MAKE --no-print-directory build/mpi/wt2_train > "$TMP/build.log" 2>&1; then
    cat "$TMP/build.log"
    bad "build/mpi/wt2_train does not build"
    echo "RESULT dp_check passed=$P failed=$F skipped=$S"
    exit 1
fi
B=build/mpi/wt2_train
MPI="mpirun -np 2"
SMALL="--d-model 32 --layers 2 --heads 2 --context 32 --batch 4 --steps 30 --eval-every 10 --eval-chunks 4
 --final-chunks 8 --cg-lengths 16,32 --threads 1 --log-every 1 --progress-seconds 1000 --data-dir $D --seed 7"
R="$TMP/run" # every run trains in this directory (the checkpoint records --out-dir), then moves

# run NAME LAUNCHER ARGS...: train into $R, keep it as $TMP/NAME; 1 if it failed
# (resume NAME FROM LAUNCHER ARGS...: the same from a copy of $TMP/FROM, with --resume)
run() {
    name=$1; shift
    rm -rf "$R"
    run_in "$name" "$@"
}
resume() {
    name=$1; from=$2; shift 2
    rm -rf "$R"
    cp -r "$TMP/$from" "$R" || return 1
    run_in "$name" "$@" --resume "$R/ckpt.safetensors"
}
run_in() {
    name=$1; shift
    timeout 300 "$@" --out-dir "$R" > "$TMP/$name.out" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        mv "$R" "$TMP/$name"
        return 0
    fi
    echo "  $name: exit $rc ($*)"; tail -n 5 "$TMP/$name.out"
    rm -rf "$R"
    return 1
}
# same A B WHAT: the two runs' metrics (without the config / resume lines, and the final
# evaluation of a first half stopped by --max-steps 15) and checkpoints
same() {
    X='"type":"config"\|"type":"resume"\|"type":"final","step":15,'
    grep -v "$X" "$TMP/$1/metrics.jsonl" > "$TMP/$1.m"
    grep -v "$X" "$TMP/$2/metrics.jsonl" > "$TMP/$2.m"
    if cmp -s "$TMP/$1.m" "$TMP/$2.m" && cmp -s "$TMP/$1/ckpt.safetensors" "$TMP/$2/ckpt.safetensors"; then
        ok "$3: $(grep -c '"type":"train"' "$TMP/$1.m") train lines and the checkpoint identical"
    else
        diff "$TMP/$1.m" "$TMP/$2.m" | head -n 6
        bad "$3: differ"
    fi
}

# 1. N = 2 against one process with --grad-accum 2
if run ref $B --preset tiny $SMALL --grad-accum 2 && run dp $MPI $B --preset tiny $SMALL; then
    same ref dp "tiny, 30 steps: mpirun -np 2 = --grad-accum 2"
    if grep -q 'data parallel: 2 process(es) (mpi)' "$TMP/dp.out"; then ok "2 ranks over MPI (stderr says so)"
    else bad "the mpirun run does not report 2 MPI ranks"; fi
else
    bad "tiny runs failed"
fi
if run cref $B --preset tiny-plain --controller ceas $SMALL --steps 20 --grad-accum 2 &&
   run cdp $MPI $B --preset tiny-plain --controller ceas $SMALL --steps 20; then
    same cref cdp "ceas, 20 steps: mpirun -np 2 = --grad-accum 2"
else
    bad "ceas runs failed"
fi

# 2. resume across N: 15 steps at one N, the rest at the other
if run h1 $B --preset tiny $SMALL --grad-accum 2 --max-steps 15 &&
   resume r12 h1 $MPI $B --preset tiny $SMALL; then
    same ref r12 "resume at N = 2 from an N = 1 checkpoint"
else
    bad "resume N=1 -> N=2 failed"
fi
if run h2 $MPI $B --preset tiny $SMALL --max-steps 15 &&
   resume r21 h2 $B --preset tiny $SMALL --grad-accum 2; then
    same ref r21 "resume at N = 1 from an N = 2 checkpoint"
else
    bad "resume N=2 -> N=1 failed"
fi

# 2b. ZeRO-1 (--zero 1: the AdamW moments sharded over the ranks, each updates its slice of
#     the weights, then all-gathers them): bit-identical to --zero 0, the same checkpoints
#     (either resumes from the other's; the first half also checkpoints every 5 steps,
#     each a collective gather of the moments)
if run z $MPI $B --preset tiny $SMALL --zero 1; then
    same dp z "ZeRO-1, 30 steps on 2 ranks: --zero 1 = --zero 0"
    if grep -q 'ZeRO-1: moments sharded over the processes; AdamW moments .* MiB on this process' "$TMP/z.out"; then
        ok "ZeRO-1 reports the moment bytes per rank ($(grep -o 'moments [0-9.]* MiB on this process ([0-9.]* MiB unsharded)' "$TMP/z.out"))"
    else bad "ZeRO-1: no memory line"; fi
else
    bad "ZeRO-1 run failed"
fi
# one process: nothing to shard (--zero 1 = --zero 0, said on stderr)
if run z1 $B --preset tiny $SMALL --grad-accum 2 --zero 1 && grep -q 'one process, nothing to shard' "$TMP/z1.out"; then
    same ref z1 "--zero 1 in one process (nothing to shard) = --zero 0"
else
    bad "--zero 1 in one process failed or did not say it has nothing to shard"
fi
if [ -d "$TMP/h2" ] && resume rz h2 $MPI $B --preset tiny $SMALL --zero 1; then
    same ref rz "resume with --zero 1 (N = 2) from a --zero 0 checkpoint"
else
    bad "resume --zero 0 -> --zero 1 failed"
fi
if run hz $MPI $B --preset tiny $SMALL --zero 1 --max-steps 15 --ckpt-every 5; then
    if resume rz0 hz $MPI $B --preset tiny $SMALL; then
        same ref rz0 "resume with --zero 0 (N = 2) from a --zero 1 checkpoint"
    else bad "resume --zero 1 -> --zero 0 failed"; fi
    if resume rz1 hz $B --preset tiny $SMALL --grad-accum 2; then
        same ref rz1 "resume at N = 1 from a --zero 1 (N = 2) checkpoint"
    else bad "resume --zero 1 (N = 2) -> N = 1 failed"; fi
else
    bad "the --zero 1 first half failed"
fi

# children PID: the pids whose parent is PID (from /proc: no procps needed)
children() {
    for d in /proc/[0-9]*; do
        st=$(cat "$d/stat" 2>/dev/null) || continue
        st=${st##*) }  # after "pid (comm) ": state, ppid, ...
        set -- $st
        [ "$2" = "$PARENT" ] && echo "${d#/proc/}"
    done
}
# rank_pids LAUNCHER_PID: the ranks (children of mpirun running wt2_train), in pid order
rank_pids() {
    PARENT=$1
    for c in $(children | sort -n); do
        case "$(cat /proc/$c/comm 2>/dev/null)" in wt2_train*) echo "$c" ;; esac
    done
}
rank_pid() { p=$(rank_pids "$1" | head -n 1); [ -n "$p" ] && echo "$p"; }
# wait_train DIR: until DIR/metrics.jsonl holds a train line at step >= 3 (60 s at most)
wait_train() {
    k=0
    while [ $k -lt 600 ]; do
        grep -q '"type":"train","step":[3-9]' "$1/metrics.jsonl" 2>/dev/null && return 0
        sleep 0.1; k=$((k + 1))
    done
    return 1
}

# 3. SIGTERM on rank 1 only: all stop, rank 0 checkpoints, exit 143; the resumed run ends
#    as the uninterrupted one
#    (300 steps: long enough that the signal lands mid-training on a fast machine, where 30
#    steps and the final evaluation take under a second)
rm -rf "$R"
LONG="--preset tiny $SMALL --steps 100000 --max-steps 300"
$MPI $B $LONG --out-dir "$R" > "$TMP/term.out" 2>&1 &
mp=$!
if wait_train "$R" && pid=$(rank_pid $mp); then
    # rank 1 is the second child in launch order; any rank will do: the signal is agreed
    pid1=$(rank_pids $mp | tail -n 1)
    kill -TERM "$pid1"
    wait $mp; rc=$?
    if [ "$rc" -eq 143 ] && grep -q 'stopped by SIGTERM' "$TMP/term.out" && [ -f "$R/ckpt.safetensors" ]; then
        st=$(head -c 65536 "$R/ckpt.safetensors" | grep -ao '"attnkit.step":"[0-9]*"' | head -n 1 | tr -dc 0-9)
        ok "SIGTERM to one rank: every rank stopped, exit 143, checkpoint at step ${st:-?}"
        mv "$R" "$TMP/t0"
        if resume tres t0 $MPI $B $LONG && run tfull $B $LONG --grad-accum 2; then
            same tfull tres "stopped by SIGTERM, resumed"
        else
            bad "the SIGTERM resume failed"
        fi
    else
        tail -n 5 "$TMP/term.out"; bad "SIGTERM to one rank: exit $rc (want 143 and a checkpoint)"
    fi
else
    kill -9 $mp 2>/dev/null; wait $mp 2>/dev/null
    tail -n 5 "$TMP/term.out"; bad "SIGTERM case: the run did not start"
fi

# 3b. Ctrl-C on mpirun: OpenMPI sends the ranks SIGCONT, SIGTERM odls_base_sigkill_timeout
#     seconds later and SIGKILL as long after (1 s by default: rank 0 says so at the start);
#     with a grace of 5 s they checkpoint once and stop (mpirun itself exits 1). The run
#     would go on for minutes: the signal always lands mid-training.
if [ "$(grep -c "note: Ctrl-C on mpirun leaves the processes 1 s between SIGTERM and SIGKILL" "$TMP/term.out")" -eq 1 ]; then
    ok "mpirun with OpenMPI's default kill grace: rank 0 says once that Ctrl-C may not checkpoint"
else
    bad "no note (or more than one) on OpenMPI's 1 s kill grace in the SIGTERM run's output"
fi
rm -rf "$R"
OMPI_MCA_odls_base_sigkill_timeout=5 $MPI $B --preset tiny $SMALL --steps 100000 --max-steps 100000 \
    --out-dir "$R" > "$TMP/int.out" 2>&1 &
mp=$!
if wait_train "$R"; then
    kill -INT $mp
    wait $mp; rc=$?
    if [ "$rc" -ne 0 ] && [ "$(grep -c 'stopped by SIGTERM' "$TMP/int.out")" -eq 1 ] &&
       grep -q 'checkpoint .* is complete' "$TMP/int.out" && [ -f "$R/ckpt.safetensors" ] &&
       ! grep -q 'note: Ctrl-C on mpirun' "$TMP/int.out"; then
        ok "SIGINT to mpirun (odls_base_sigkill_timeout 5): the ranks checkpointed once and stopped, no note (mpirun exit $rc)"
    else
        tail -n 5 "$TMP/int.out"; bad "SIGINT to mpirun: exit $rc, no checkpoint, no stop message or a note"
    fi
else
    kill -9 $mp 2>/dev/null; wait $mp 2>/dev/null
    tail -n 5 "$TMP/int.out"; bad "SIGINT case: the run did not start"
fi

# 4. a rank killed mid-run: the job ends non-zero within seconds
rm -rf "$R"
$MPI $B --preset tiny $SMALL --steps 100000 --max-steps 100000 --out-dir "$R" > "$TMP/kill.out" 2>&1 &
mp=$!
ranks=
if wait_train "$R" && pid=$(rank_pid $mp); then
    ranks=$(rank_pids $mp)
    t0=$(date +%s)
    kill -9 "$pid"
    k=0
    while kill -0 $mp 2>/dev/null && [ $k -lt 300 ]; do sleep 0.1; k=$((k + 1)); done
    if kill -0 $mp 2>/dev/null; then
        kill -9 $mp; wait $mp 2>/dev/null
        bad "kill -9 of a rank: the job still runs after 30 s"
    else
        wait $mp; rc=$?
        dt=$(( $(date +%s) - t0 ))
        if [ "$rc" -ne 0 ] && [ "$dt" -le 20 ]; then ok "kill -9 of a rank: the job exited $rc after ${dt} s"
        else bad "kill -9 of a rank: exit $rc after ${dt} s (want non-zero, <= 20 s)"; fi
    fi
else
    kill -9 $mp 2>/dev/null; wait $mp 2>/dev/null
    tail -n 5 "$TMP/kill.out"; bad "kill case: the run did not start"
fi
for q in $ranks; do kill -9 "$q" 2>/dev/null; done # nothing should be left (by pid: the ones started here)

# 5. a batch the ranks cannot share: refused before anything is written
rm -rf "$R"
timeout 60 $MPI $B --preset tiny $SMALL --batch 3 --out-dir "$R" > "$TMP/div.out" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && grep -q 'must divide by the 2 process' "$TMP/div.out" && [ ! -e "$R" ]; then
    ok "--batch 3 on 2 ranks refused: exit 2, nothing written"
else
    tail -n 5 "$TMP/div.out"; bad "--batch 3 on 2 ranks: exit $rc (want 2, nothing written)"
fi
# 6. --grad-accum's own range (one process): 0, 1025, not a number, 3 against batch 4
bad_ga=0
for v in 0 1025 x 2.5 3; do
    timeout 60 $B --preset tiny $SMALL --grad-accum $v --out-dir "$R" > "$TMP/ga.out" 2>&1
    rc=$?
    if [ "$rc" -ne 2 ] || [ -e "$R" ] || ! grep -q 'grad-accum' "$TMP/ga.out"; then
        tail -n 2 "$TMP/ga.out"; bad_ga=1; echo "  --grad-accum $v: exit $rc"
    fi
done
if [ $bad_ga -eq 0 ]; then ok "--grad-accum 0, 1025, x, 2.5 and 3 (batch 4) refused: exit 2, nothing written"
else bad "--grad-accum range"; fi
bad_z=0
for v in 2 -1 x; do
    timeout 60 $B --preset tiny $SMALL --zero $v --out-dir "$R" > "$TMP/z.out" 2>&1
    rc=$?
    if [ "$rc" -ne 2 ] || [ -e "$R" ] || ! grep -q -- '--zero needs 0 or 1' "$TMP/z.out"; then
        tail -n 2 "$TMP/z.out"; bad_z=1; echo "  --zero $v: exit $rc"
    fi
done
if [ $bad_z -eq 0 ]; then ok "--zero 2, -1, x refused: exit 2, nothing written"; else bad "--zero range"; fi
# 7. the controllers that act on one forward's values (CEAS gating, the activation PI
#    controller) are refused with micro-batches, one process (--grad-accum 2) or two ranks:
#    exit 2, nothing written, the sentence says why (they would see a micro-batch, not the
#    global batch)
bad_ctl=0
for how in "--grad-accum 2" "mpi"; do
    for ctl in "--preset tiny-baseline --controller ceas --ceas-preset 9k --ceas-gating on" \
               "--preset tiny-baseline --ffn gelu --maxent-pi on"; do
        rm -rf "$R"
        if [ "$how" = mpi ]; then timeout 60 $MPI $B $SMALL $ctl --out-dir "$R" > "$TMP/ctl.out" 2>&1
        else timeout 60 $B $SMALL $ctl $how --out-dir "$R" > "$TMP/ctl.out" 2>&1; fi
        rc=$?
        if [ "$rc" -ne 2 ] || [ -e "$R" ] || ! grep -q 'is not available with .* micro-batches' "$TMP/ctl.out"; then
            tail -n 2 "$TMP/ctl.out"; bad_ctl=1; echo "  $ctl ($how): exit $rc"
        fi
    done
done
if [ $bad_ctl -eq 0 ]; then ok "--ceas-gating on and --maxent-pi on refused with --grad-accum 2 and on 2 ranks: exit 2, nothing written"
else bad "--ceas-gating / --maxent-pi with micro-batches"; fi
echo "RESULT dp_check passed=$P failed=$F skipped=$S"
[ "$F" -eq 0 ]
