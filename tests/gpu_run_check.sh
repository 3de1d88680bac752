#!/bin/sh
# tests/gpu_run_check.sh [SIM_BIN_DIR] - the dry run of tools/gpu_run.sh (the GPU kit's
# device runner) on a machine without a GPU, for `make test`.
#
# A stand-in kit (bin.tar.xz) holds simulation-built parity binaries from SIM_BIN_DIR
# (default build/sim-g++: parity_ceas and parity_guardian, which run their kernels on the
# CPU) beside small scripts that pass, fail, hang, or write a benchmark headline; a
# stand-in compute-sanitizer runs the program it is given. GPU_RUN_SIM=1 lets the runner
# go without nvidia-smi. Checked:
#   - each step's status: a pass, a FAIL, a step killed by its own time limit (timeout,
#     not pass), steps that would not fit before the deadline (skipped, not pass);
#   - a phase ends within its deadline (plus 5 s of slack for the last reap);
#   - the output folder holds summary.txt and logs.tgz only (at most 4 files), rewritten
#     after every step: a runner killed with SIGKILL mid-phase has left what ran;
#   - the verdict line (the last line of stdout) counts what summary.txt lists, and the
#     exit status is non-zero when anything failed or timed out, 0 otherwise;
#   - bad arguments exit 2; a kit without bin.tar.xz is one FAIL step.
# Last line: RESULT gpu_run_check passed=P failed=F skipped=S.
SIM=${1:-build/sim-g++}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUN=$ROOT/tools/gpu_run.sh
T=$(mktemp -d "${TMPDIR:-/tmp}/gpu_run_check.XXXXXX") || exit 1
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
P=0; F=0; S=0
ok() { echo "  ok $1"; P=$((P + 1)); }
bad() { echo "FAIL $1"; F=$((F + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

# ----------------------------------------------------------------- the stand-in kit
mkdir -p "$T/kit" "$T/bin"
cat > "$T/bin/parity_ok" <<'EOF'
#!/bin/sh
echo "  ok case_a"; echo "RESULT parity_ok passed=1 failed=0 skipped=0"
EOF
cat > "$T/bin/parity_bad" <<'EOF'
#!/bin/sh
echo "FAIL case_b"; echo "  tests/x.cu:1: CHECK(e <= tol)"; echo "RESULT parity_bad passed=0 failed=1 skipped=0"; exit 1
EOF
cat > "$T/bin/parity_hang" <<'EOF'
#!/bin/sh
echo "starting"; while :; do sleep 1; done
EOF
cat > "$T/bin/bench_fake_cuda" <<'EOF'
#!/bin/sh
echo "bench_fake_cuda: ratio=1.25"
EOF
cat > "$T/sanitizer" <<'EOF'
#!/bin/sh
# stand-in compute-sanitizer: --tool T [--leak-check full] --error-exitcode N PROGRAM
while [ $# -gt 1 ]; do case "$1" in --tool|--leak-check|--error-exitcode) shift 2 ;; *) break ;; esac; done
"$@"; rc=$?
echo "========= ERROR SUMMARY: 0 errors"; exit $rc
EOF
chmod +x "$T"/bin/* "$T/sanitizer"
have_sim=0
for b in parity_ceas parity_guardian; do
    if [ -x "$SIM/$b" ]; then cp "$SIM/$b" "$T/bin/$b"; have_sim=$((have_sim + 1)); fi
done
(cd "$T/bin" && tar -c -- *) | xz -1 > "$T/kit/bin.tar.xz"
SHARDS="parity_ok:2 parity_bad:1 parity_hang:1:3"
[ "$have_sim" -eq 2 ] && SHARDS="parity_ceas:1 parity_guardian:2 $SHARDS"
export GPU_RUN_SIM=1 GPU_KIT="$T/kit" GPU_RUN_SANITIZER="$T/sanitizer" GPU_RUN_JOBS=2

# run NAME PHASE DEADLINE [VAR=VALUE ...]: the runner into $T/NAME; its stdout in NAME.out,
# exit status in NAME.rc, wall seconds in NAME.s
run() {
    name=$1 phase=$2 dl=$3
    shift 3
    t0=$(date +%s)
    env "$@" bash "$RUN" "$phase" "$dl" "$T/$name" > "$T/$name.out" 2>&1
    echo $? > "$T/$name.rc"
    echo $(($(date +%s) - t0)) > "$T/$name.s"
}
status() { grep "^STEP $2 " "$T/$1/summary.txt" | awk '{print $3}' | head -n 1; }
count() { grep -c "^STEP [^ ]* $2 " "$T/$1/summary.txt"; }
verdict_ok() { # the last stdout line counts what summary.txt lists
    v=$(tail -n 1 "$T/$1.out")
    case "$v" in "gpu_run: phase $2: $(count "$1" pass) pass, $(count "$1" FAIL) FAIL, $(count "$1" timeout) timeout, $(count "$1" skipped) skipped in "*) return 0 ;; esac
    echo "    verdict: $v" >&2
    return 1
}
files_ok() { # summary.txt and logs.tgz, nothing else
    [ "$(ls -A "$T/$1" | tr '\n' ' ')" = "logs.tgz summary.txt " ] && tar -tzf "$T/$1/logs.tgz" >/dev/null 2>&1
}

# 1. phase 1: parity shards, a hanging one killed at its own limit, memcheck, no trainer
run p1 1 90 GPU_RUN_PARITY_SHARDS="$SHARDS" GPU_RUN_PARITY_TIMEOUT=40 GPU_RUN_SAN_TIMEOUT=40
check "phase 1: parity_ok shards pass" '[ "$(status p1 parity_ok.s0)" = pass ] && [ "$(status p1 parity_ok.s1)" = pass ]'
check "phase 1: a failing parity binary is FAIL" '[ "$(status p1 parity_bad)" = FAIL ]'
check "phase 1: a step killed at its own limit is timeout, not pass" '[ "$(status p1 parity_hang)" = timeout ] && [ "$(status p1 memcheck-parity_hang)" = timeout ]'
check "phase 1: the trainer is skipped without reference figures" '[ "$(status p1 train)" = skipped ]'
check "phase 1: memcheck through the sanitizer passes the good shards" '[ "$(status p1 memcheck-parity_ok.s1)" = pass ]'
if [ "$have_sim" -eq 2 ]; then
    check "phase 1: simulation-built parity binaries pass (ceas, guardian in 2 shards)" \
        '[ "$(status p1 parity_ceas)" = pass ] && [ "$(status p1 parity_guardian.s0)" = pass ] && [ "$(status p1 parity_guardian.s1)" = pass ]'
else
    echo "SKIP phase 1 with simulation-built binaries: none in $SIM"; S=$((S + 1))
fi
check "phase 1: verdict line and exit status 1 (failures)" 'verdict_ok p1 1 && [ "$(cat "$T/p1.rc")" = 1 ]'
check "phase 1: OUT holds summary.txt and logs.tgz only" 'files_ok p1'

# 2. a tight deadline: jobs that would not fit are skipped, the phase ends in time. 20 s:
#    the runner's set-up (its environment record runs nvidia-smi, nvcc, compute-sanitizer
#    and a Python import of torch where one is installed) counts against the deadline; at
#    12 s, on a loaded 2-core machine with torch installed, it left the hanging step under
#    the runner's 5 s minimum, so the step was skipped, not cut (2026-11-28)
run p2 1 20 GPU_RUN_PARITY_SHARDS="parity_hang:1 parity_ok:1" GPU_RUN_PARITY_TIMEOUT=100 GPU_RUN_JOBS=1
check "deadline: the hanging step is cut to the time left (timeout)" '[ "$(status p2 parity_hang)" = timeout ]'
check "deadline: what would not fit is skipped" '[ "$(status p2 parity_ok)" = skipped ] && [ "$(status p2 memcheck-parity_hang)" = skipped ]'
check "deadline: the phase ended within 20 s + 5 s" '[ "$(cat "$T/p2.s")" -le 25 ]'
check "deadline: verdict line" 'verdict_ok p2 1 && [ "$(cat "$T/p2.rc")" = 1 ]'

# 3. phase 2: sanitizers within their share, then a benchmark; all pass: exit 0
run p3 2 30 GPU_RUN_PARITY_SHARDS="parity_ok:1" GPU_RUN_BENCHES="bench_fake_cuda:10" GPU_RUN_SANITIZERS="racecheck initcheck"
check "phase 2: racecheck, initcheck and the benchmark pass" \
    '[ "$(status p3 racecheck-parity_ok)" = pass ] && [ "$(status p3 initcheck-parity_ok)" = pass ] && [ "$(status p3 bench_fake_cuda)" = pass ]'
check "phase 2: the benchmark's headline is in its step line" 'grep -q "bench_fake_cuda: ratio=1.25" "$T/p3/summary.txt"'
check "phase 2: verdict line and exit status 0" 'verdict_ok p3 2 && [ "$(cat "$T/p3.rc")" = 0 ]'

# 4. killed mid-phase (SIGKILL, as the device tool's limit does): what ran is in OUT
env GPU_RUN_PARITY_SHARDS="parity_ok:1 parity_hang:1" GPU_RUN_PARITY_TIMEOUT=6 GPU_RUN_JOBS=1 \
    bash "$RUN" 1 60 "$T/p4" > "$T/p4.out" 2>&1 &
pid=$!
i=0
while [ $i -lt 100 ] && ! grep -q '^STEP parity_ok ' "$T/p4/summary.txt" 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
sleep 1
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
sleep 7 # the orphaned hanging step ends at its own 6 s limit
check "killed mid-phase: summary.txt has the steps done before" \
    'grep -q "^STEP env pass" "$T/p4/summary.txt" && grep -q "^STEP parity_ok pass" "$T/p4/summary.txt" && ! grep -q "^gpu_run: phase" "$T/p4/summary.txt"'
check "killed mid-phase: logs.tgz is a whole archive" 'tar -tzf "$T/p4/logs.tgz" | grep -q "logs/parity_ok.log"'

# 5. bad arguments, no kit
bash "$RUN" 3 10 "$T/p5" > /dev/null 2>&1; rc1=$?
bash "$RUN" 1 soon "$T/p5" > /dev/null 2>&1; rc2=$?
check "bad phase or deadline: exit 2" '[ $rc1 = 2 ] && [ $rc2 = 2 ]'
run p6 1 10 GPU_KIT="$T/nokit"
check "no kit: one FAIL step, exit 1" '[ "$(status p6 kit)" = FAIL ] && [ "$(cat "$T/p6.rc")" = 1 ] && verdict_ok p6 1'

# 7. the trainer checks (phase 1) and the trainer under the sanitizers (phase s), with a
#    stand-in wt2_train: its step-1 loss and val CE chosen by --preset
mkdir -p "$T/kit2/data" "$T/kit2/ref_metrics" "$T/bin2"
cat > "$T/bin2/wt2_train" <<'EOF2'
#!/bin/sh
out="" preset=""
while [ $# -gt 0 ]; do case "$1" in --out-dir) out=$2; shift 2 ;; --preset) preset=$2; shift 2 ;; *) shift ;; esac; done
[ "$preset" = crash ] && { echo "wt2_train: stand-in crash" >&2; exit 3; }
l1=10.0 ce=8.0
[ "$preset" = firstoff ] && l1=10.01
[ "$preset" = farval ] && ce=8.1
mkdir -p "$out"
printf '{"type":"train","step":1,"loss":%s}\n{"type":"train","step":2,"loss":9.5}\n' "$l1" > "$out/metrics.jsonl"
printf '{"val_ce":%s,"tokens_per_s":100}\n' "$ce"
EOF2
chmod +x "$T/bin2/wt2_train"
(cd "$T/bin2" && tar -c -- *) | xz -1 > "$T/kit2/bin.tar.xz"
printf '# stand-in references\n' > "$T/kit2/ref_train.txt"
for n in good firstoff farval; do
    echo "$n 8.0 1e-3 val_ce --preset $n --precision fp32" >> "$T/kit2/ref_train.txt"
    printf '{"type":"train","step":1,"loss":10.0}\n{"type":"train","step":2,"loss":9.5}\n' > "$T/kit2/ref_metrics/$n.jsonl"
done
run p7 1 30 GPU_KIT="$T/kit2" GPU_RUN_PARITY_SHARDS=""
check "trainer: a run that agrees passes, with its first-step check in the line" \
    '[ "$(status p7 train-good)" = pass ] && grep -q "train-good pass .*step 1 loss rel diff 0.00e+00" "$T/p7/summary.txt"'
check "trainer: a first step off by 1e-3 fails though its val CE agrees" '[ "$(status p7 train-firstoff)" = FAIL ]'
check "trainer: a val CE past the tolerance fails" '[ "$(status p7 train-farval)" = FAIL ]'
run p8 s 30 GPU_KIT="$T/kit2" GPU_RUN_SANITIZERS="memcheck racecheck" GPU_RUN_SAN_TRAIN="a|--preset good
b|--preset crash"
check "phase s: the trainer under each tool (pass), a crashing run is FAIL" \
    '[ "$(status p8 memcheck-train-a)" = pass ] && [ "$(status p8 racecheck-train-a)" = pass ] && [ "$(status p8 memcheck-train-b)" = FAIL ] && [ "$(status p8 racecheck-train-b)" = FAIL ]'
check "phase s: verdict line and exit status 1" 'verdict_ok p8 s && [ "$(cat "$T/p8.rc")" = 1 ]'

echo "RESULT gpu_run_check passed=$P failed=$F skipped=$S"
[ "$F" -eq 0 ]
