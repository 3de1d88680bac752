#!/usr/bin/env bash
# tools/gpu_run.sh PHASE DEADLINE_S [OUT] - the device runner of the GPU kit (`make gpu-kit`).
#
# Runs prebuilt binaries from the kit (default gpu-kit/, built on the CPU machine: nothing
# is compiled here unless the carried binaries do not load) on a GPU machine within
# DEADLINE_S seconds of wall time, and keeps in OUT (default $OUT, else build/gpu-run) only:
#   summary.txt  one line per step: `STEP <name> <status> <seconds>s <detail>`, rewritten
#                after every step, so a command killed at its limit still returns what ran
#   logs.tgz     every raw log so far (rewritten after every step)
# Statuses: pass, FAIL, skipped (it would not fit before the deadline, or a tool it needs is
# absent), timeout (it ran and was killed at its own time limit: counted as not passed).
# The last line on stdout is the verdict: `gpu_run: phase P: N pass, N FAIL, N timeout,
# N skipped in S s (device)`; the exit status is 0 only when nothing failed or timed out.
#
# Phases (docs/GPU.md "The first lease" gives the calls):
#   1  environment record, unpack, ldd check (fallback: build on the device), every parity
#      binary on the GPU (several at once, large ones in shards), the GPU trainer's short
#      runs (each line of the kit's ref_train.txt) compared with the kit's CPU reference
#      figures, then compute-sanitizer memcheck over the parity binaries (in shards).
#   2  initcheck, synccheck and racecheck over the parity binaries (in shards, at most
#      45 % of the deadline; the slow racecheck last, so the quick tools are not starved:
#      the first lease's initcheck was), then the GPU benchmarks with what is left.
#   b  the benchmarks alone, against the peers carried in the kit (PyTorch SDPA on the
#      image, fla-core's wheel, the seed's Triton polar kernel; bench_decode_cuda's
#      bench/torch_decode.py --device cuda), after one short trainer run that samples on
#      the device (train-sample-cuda: --device cuda --sample 16 at each of two evaluations;
#      GPU_RUN_SAMPLE=0 skips it; its log keeps the sampled text).
#   s  the GPU trainer under compute-sanitizer: a few steps of four models (seed 000's tiny
#      recipe, polar + gated-delta bf16, ERA + GAC, CEAS with gating) under each of
#      GPU_RUN_SANITIZERS (default memcheck racecheck synccheck initcheck), all at once:
#      the device context, the async copies and fills, the scratch caches as the trainer
#      drives them (the parity binaries do not), including the saves and the final evaluation.
#   t  the trainer at --preset paper --precision bf16 for its tokens/s (and MFU).
#
# Environment: GPU_KIT (the kit folder), GPU_RUN_SIM=1 (the dry run in `make test`: the kit
# holds simulation-built binaries, no GPU or compute-sanitizer is needed; a stand-in
# sanitizer may be named by GPU_RUN_SANITIZER), GPU_RUN_JOBS (parallel jobs, default
# nproc, at most 12), GPU_RUN_ONLY (shell patterns: run only the steps whose names match),
# GPU_RUN_PARITY_SHARDS ("parity_model:8 ...", NAME:SHARDS[:SECONDS]), GPU_RUN_SANITIZERS (phase 2's tools, default
# "initcheck synccheck racecheck"), GPU_RUN_SAN_SHARE (their share of phase 2's deadline, %,
# default 45), GPU_RUN_BENCHES ("bench_attn_cuda:70 ...": name:seconds; empty: none).
# Sanitizer runs set PARITY_NO_PLANTED_ERRORS=1 (a parity test then skips the failed launch
# it plants on purpose, which the tool would report).
set -u
PHASE=${1:-}
DEADLINE=${2:-}
OUTDIR=${3:-${OUT:-build/gpu-run}}
case "$PHASE" in 1|2|b|s|t) ;; *) echo "usage: tools/gpu_run.sh 1|2|b|s|t DEADLINE_S [OUT]" >&2; exit 2 ;; esac
case "$DEADLINE" in ''|*[!0-9]*) echo "gpu_run: DEADLINE_S must be a number of seconds" >&2; exit 2 ;; esac
START=$(date +%s)
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
KIT=${GPU_KIT:-gpu-kit}
case "$KIT" in /*) ;; *) KIT=$ROOT/$KIT ;; esac
mkdir -p "$OUTDIR" || exit 2
OUTDIR=$(cd "$OUTDIR" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/gpu_run.XXXXXX") || exit 2
LOGS=$W/logs
mkdir -p "$LOGS" "$W/rc" "$W/bin"
SUMMARY=$LOGS/summary.txt
: > "$SUMMARY"
SIM=${GPU_RUN_SIM:-0}
NPROC=$(nproc 2>/dev/null || echo 4)
JOBS=${GPU_RUN_JOBS:-$NPROC}
[ "$JOBS" -gt 12 ] && JOBS=12
[ "$JOBS" -lt 1 ] && JOBS=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

elapsed() { echo $(($(date +%s) - START)); }
# the library folders of PyTorch's nvidia-* wheels (cuBLAS, CUPTI, ...), where python3 has them
torch_lib_dirs() {
    python3 -c 'import nvidia, os; p = nvidia.__path__[0]; print(" ".join(os.path.join(p, d, "lib") for d in os.listdir(p)))' 2>/dev/null
}
left() { echo $((DEADLINE - $(date +%s) + START)); }
selected() ( # selected NAME: in GPU_RUN_ONLY (or it is unset)
    [ -z "${GPU_RUN_ONLY:-}" ] && exit 0
    set -f
    for p in $GPU_RUN_ONLY; do case "$1" in $p) exit 0 ;; esac; done
    exit 1
)
# publish: summary.txt and logs.tgz into OUT, each written beside and renamed (never torn)
publish() {
    cp "$SUMMARY" "$OUTDIR/.summary.tmp" && mv -f "$OUTDIR/.summary.tmp" "$OUTDIR/summary.txt"
    tar -czf "$OUTDIR/.logs.tmp" -C "$W" logs 2>/dev/null && mv -f "$OUTDIR/.logs.tmp" "$OUTDIR/logs.tgz"
}
# record NAME STATUS SECONDS DETAIL
record() {
    printf 'STEP %s %s %ss %s\n' "$1" "$2" "$3" "$4" | tee -a "$SUMMARY"
    publish
}
note() { printf '%s\n' "$*" >> "$LOGS/notes.txt"; }

# ---------------------------------------------------------------------------- jobs
# A job is NAME TIMEOUT KIND CMD...; KIND says how its exit is judged (see judge). Jobs run
# JOBS at a time; each gets min(TIMEOUT, time left - 5 s), or is skipped under 5 s.
declare -A J_KIND J_T0 J_TO
judge() { # judge NAME KIND RC SECONDS -> records the step
    local name=$1 kind=$2 rc=$3 secs=$4 log=$LOGS/$1.log st detail res
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then record "$name" timeout "$secs" "killed at its limit of ${J_TO[$name]}s"; return; fi
    case "$kind" in
    parity)
        res=$(grep -a 'RESULT ' "$log" | tail -n 1)
        if grep -aq '^SKIP: no GPU' "$log" && [ "$SIM" != 1 ]; then st=FAIL; detail="no GPU seen by the binary"
        elif [ "$rc" = 0 ] && [ -n "$res" ] && echo "$res" | grep -q 'failed=0'; then st=pass; detail=$res
        else st=FAIL; detail="exit $rc; ${res:-no RESULT line}; $(grep -a '^FAIL\|^  [^o]' "$log" | head -n 3 | tr '\n' ' ' | cut -c1-300)"; fi ;;
    sanitizer)
        res=$(grep -a 'ERROR SUMMARY' "$log" | tail -n 1)
        if [ "$rc" = 0 ]; then st=pass; detail="clean; ${res:-}"
        elif [ "$rc" = 42 ]; then st=FAIL; detail="errors: $res; $(grep -a '^========= [A-Z]' "$log" | grep -v 'ERROR SUMMARY\|COMPUTE-SANITIZER' | head -n 2 | tr '\n' ' ' | cut -c1-300)"
        else st=FAIL; detail="exit $rc (the program failed under the tool); ${res:-}"; fi ;;
    trainer)
        # the per-step figures, for a run that drifts from the CPU's (compare with the CPU's own)
        [ -f "$W/runs/$name/metrics.jsonl" ] && cp "$W/runs/$name/metrics.jsonl" "$LOGS/$name.metrics.jsonl"
        if [ "$rc" = 0 ]; then detail=$(python3 "$W/cmp_train.py" "$name" "$KIT/ref_train.txt" "$LOGS/$name.json" \
            "$KIT/ref_metrics/${name#train-}.jsonl" "$LOGS/$name.metrics.jsonl" 2>&1 | tail -n 1)
            case "$detail" in ok*) st=pass ;; *) st=FAIL ;; esac
        else st=FAIL; detail="exit $rc; $(tail -n 2 "$log" | tr '\n' ' ' | cut -c1-300)"; fi ;;
    bench)
        if [ "$rc" = 0 ]; then st=pass; else st=FAIL; fi
        detail="exit $rc; $(grep -av '^\s*$' "$log" | tail -n 1 | cut -c1-400)" ;;
    *)
        if [ "$rc" = 0 ]; then st=pass; else st=FAIL; fi
        detail="exit $rc; $(tail -n 1 "$log" | cut -c1-300)" ;;
    esac
    record "$name" "$st" "$secs" "$detail"
}
reap() { # reap: record every finished job
    local f name
    for f in "$W"/rc/*; do
        # a job writes NAME.tmp, then renames it: a .tmp seen here is a job still finishing
        case "$f" in *.tmp) continue ;; esac
        [ -e "$f" ] || continue
        name=$(basename "$f")
        judge "$name" "${J_KIND[$name]}" "$(cat "$f")" $(($(date +%s) - ${J_T0[$name]}))
        rm -f "$f"
        unset "J_T0[$name]"
    done
}
running() { local n=0 k; for k in "${!J_T0[@]}"; do n=$((n + 1)); done; echo $n; }
# job NAME TIMEOUT KIND CMD...: start it when a slot is free (or skip it)
job() {
    local name=$1 to=$2 kind=$3 l
    shift 3
    selected "$name" || return 0
    while [ "$(running)" -ge "$JOBS" ]; do wait -n 2>/dev/null || sleep 0.2; reap; done
    l=$(($(left) - 5))
    [ -n "${CAP:-}" ] && [ $((CAP - $(elapsed))) -lt "$l" ] && l=$((CAP - $(elapsed)))
    if [ "$l" -lt 5 ]; then record "$name" skipped 0 "would not fit before the deadline (${DEADLINE}s)"; return 0; fi
    [ "$to" -gt "$l" ] && to=$l
    J_KIND[$name]=$kind; J_T0[$name]=$(date +%s); J_TO[$name]=$to
    ( timeout -k 5 "$to" "$@" > "$LOGS/$name.log" 2>&1; echo $? > "$W/rc/$name.tmp"; mv "$W/rc/$name.tmp" "$W/rc/$name" ) &
}
drain() { while [ "$(running)" -gt 0 ]; do wait -n 2>/dev/null || sleep 0.2; reap; done; }
# CAP (seconds since the start), where set, bounds every job started after it like the deadline
CAP=

# ---------------------------------------------------------------------- the kit
verdict() {
    local p f t s
    p=$(grep -c '^STEP [^ ]* pass ' "$SUMMARY"); f=$(grep -c '^STEP [^ ]* FAIL ' "$SUMMARY")
    t=$(grep -c '^STEP [^ ]* timeout ' "$SUMMARY"); s=$(grep -c '^STEP [^ ]* skipped ' "$SUMMARY")
    echo "gpu_run: phase $PHASE: $p pass, $f FAIL, $t timeout, $s skipped in $(elapsed) s ($DEVICE)" | tee -a "$SUMMARY"
    publish
    rm -rf "$W"
    [ "$f" -eq 0 ] && [ "$t" -eq 0 ]
}
trap 'echo "gpu_run: interrupted" >> "$SUMMARY"; publish; rm -rf "$W"; exit 1' INT TERM

DEVICE=simulation
if [ "$SIM" != 1 ]; then
    if nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader > "$LOGS/device.txt" 2>&1 \
        && [ -s "$LOGS/device.txt" ]; then
        DEVICE=$(head -n 1 "$LOGS/device.txt" | cut -d, -f1-2 | sed 's/, / driver /')
    else
        DEVICE="no GPU"
    fi
fi
echo "gpu_run: phase $PHASE, deadline ${DEADLINE}s, $DEVICE, kit $KIT" | tee "$LOGS/notes.txt"
if [ ! -f "$KIT/bin.tar.xz" ]; then record kit FAIL 0 "no $KIT/bin.tar.xz: run make gpu-kit on the CPU machine and carry gpu-kit"; verdict; exit 1; fi
if [ "$SIM" != 1 ] && [ "$DEVICE" = "no GPU" ]; then record device FAIL 0 "nvidia-smi: $(head -c 200 "$LOGS/device.txt")"; verdict; exit 1; fi

# environment record (every phase: the device may differ between calls)
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"; echo "host: $(uname -a)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2) x $NPROC"
    nvidia-smi 2>&1 | head -n 20
    (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>&1 | tail -n 2
    (compute-sanitizer --version || /usr/local/cuda/bin/compute-sanitizer --version) 2>&1 | tail -n 1
    python3 -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -n 1
    ldd --version 2>&1 | head -n 1
    cat "$KIT/manifest.txt" 2>/dev/null
} > "$LOGS/env.txt" 2>&1
record env pass "$(elapsed)" "$(grep -m1 'python' "$LOGS/env.txt" | cut -c1-120)"

# unpack and check that every binary loads (ldd); the kit's lib/ only where something is missing
t0=$(date +%s)
if ! xz -dc "$KIT/bin.tar.xz" | tar -x -C "$W/bin" 2> "$LOGS/unpack.log"; then
    record unpack FAIL $(($(date +%s) - t0)) "$(head -c 200 "$LOGS/unpack.log")"; verdict; exit 1
fi
B=$W/bin
missing() { for b in "$B"/*; do ldd "$b" 2>&1 | grep 'not found' | sed "s|^|$(basename "$b"): |"; done; }
missing > "$LOGS/ldd.txt"
# what is missing is looked for in the CUDA toolkit's and PyTorch's library folders, then in
# the kit's lib/ (liblzma, libgomp)
if [ -s "$LOGS/ldd.txt" ]; then
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(torch_lib_dirs) "$KIT/lib"; do
        [ -d "$d" ] || continue
        missing | grep -q . || break
        export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
    done
    { echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"; echo "still missing:"; missing; } >> "$LOGS/ldd.txt"
fi
if [ "$SIM" != 1 ] && missing | grep -q .; then
    # fallback: build on the device with all its cores, in this call (docs/GPU.md)
    note "carried binaries do not load; building on the device"
    cc=$(head -n 1 "$LOGS/device.txt" | awk -F', ' '{print $3}' | tr -d '.')
    if GPU_KIT="$KIT" GPU_KIT_ARCHS="-gencode arch=compute_${cc:-90},code=sm_${cc:-90}" GPU_KIT_HOST=-march=native \
        tools/gpu_kit.sh --build-only "$B" > "$LOGS/fallback_build.log" 2>&1; then
        record ldd pass $(($(date +%s) - t0)) "carried binaries did not load ($(grep -m1 'not found' "$LOGS/ldd.txt")); rebuilt on the device"
    else
        record ldd FAIL $(($(date +%s) - t0)) "carried binaries do not load and the device build failed: $(tail -n 1 "$LOGS/fallback_build.log")"
    fi
else
    record ldd pass $(($(date +%s) - t0)) "$(ls "$B" | wc -l) binaries load${LD_LIBRARY_PATH:+ (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)}"
fi

# ------------------------------------------------------------------------- steps
SAN=${GPU_RUN_SANITIZER:-$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)}
# the parity binaries and their shards: NAME:SHARDS (larger ones split so they run side by side)
PARITY_SHARDS=${GPU_RUN_PARITY_SHARDS:-"parity_model:8 parity_polar:4 parity_tensor:3 parity_gdelta:3 parity_layers:3 parity_era:2 parity_ceas:1 parity_guardian:1 parity_sim:1 parity_nccl:1"}
shard_jobs() { # shard_jobs PREFIX TIMEOUT KIND CMD_PREFIX...: one job per binary shard
    local prefix=$1 to0=$2 kind=$3 ent name n i to rest
    shift 3
    for ent in $PARITY_SHARDS; do # NAME:SHARDS or NAME:SHARDS:SECONDS (its own limit)
        name=${ent%%:*}; rest=${ent#*:}; n=${rest%%:*}; to=$to0
        [ "$rest" != "$n" ] && to=${rest#*:}
        [ -x "$B/$name" ] || { selected "$prefix$name" && record "$prefix$name" skipped 0 "not in the kit"; continue; }
        if [ "$n" -le 1 ]; then job "$prefix$name" "$to" "$kind" "$@" "$B/$name"
        else for i in $(seq 0 $((n - 1))); do job "$prefix$name.s$i" "$to" "$kind" env TEST_SHARD="$i/$n" "$@" "$B/$name"; done; fi
    done
}
sanitizer_jobs() { # sanitizer_jobs TOOL TIMEOUT
    local extra=""
    [ "$1" = memcheck ] && extra="--leak-check full"
    if [ -z "$SAN" ]; then record "$1" skipped 0 "no compute-sanitizer on this machine"; return; fi
    # shellcheck disable=SC2086
    shard_jobs "$1-" "$2" sanitizer env PARITY_NO_PLANTED_ERRORS=1 "$SAN" --tool "$1" $extra --error-exitcode 42
}

cat > "$W/cmp_train.py" <<'PY'
# cmp_train.py NAME REF JSON [REF_METRICS DEV_METRICS]: the device run against the kit's CPU
# reference figures: the final figure within the line's TOL (a floor, or 3 x the rounding
# spread of two CPU builds: gpu_kit.sh), and, where both per-step logs exist, the first
# step's loss (same parameters, same batch: no drift yet) within 1e-4 (fp32) / 1e-2
# (tf32, bf16) relative, with the drift at a few steps reported
import json, os, sys
name, ref, js = sys.argv[1:4]
refs = {}
for line in open(ref):
    p = line.split()
    if len(p) >= 4 and not line.startswith("#"): refs[p[0]] = (float(p[1]), float(p[2]), p[3], p[4:])
try:
    res = json.loads(open(js).read().strip().splitlines()[-1])
except Exception as e:
    print("FAIL: no --json result line (%s)" % e); sys.exit(0)
key = name.replace("train-", "")
if key not in refs:
    print("ok (no reference for %s) val_ce %s tok/s %s" % (key, res.get("val_ce"), res.get("tokens_per_s"))); sys.exit(0)
rv, tol, rk, args = refs[key]
def losses(path):
    out = {}
    try:
        for l in open(path):
            r = json.loads(l)
            if r.get("type") == "train" and "loss" in r: out[r["step"]] = r["loss"]
    except Exception:
        pass
    return out
first = ""
ok_first = True
if len(sys.argv) >= 6 and os.path.exists(sys.argv[4]) and os.path.exists(sys.argv[5]):
    lc, lg = losses(sys.argv[4]), losses(sys.argv[5])
    common = sorted(set(lc) & set(lg))
    if common:
        s0 = common[0]
        d0 = abs(lg[s0] - lc[s0]) / abs(lc[s0])
        ftol = 1e-4 if "fp32" in args else 1e-2
        ok_first = d0 <= ftol
        drift = " ".join("%d:%.1e" % (s, abs(lg[s] - lc[s]) / abs(lc[s])) for s in common if s in (2, 5, 10, 20, 40) or s == common[-1])
        first = "; step %d loss rel diff %.2e (tol %.0e), drift %s" % (s0, d0, ftol, drift)
v = res.get(rk)
if not isinstance(v, (int, float)): print("FAIL: %s is %r" % (rk, v)); sys.exit(0)
d = abs(v - rv) / abs(rv)
tps = res.get("tokens_per_s", "")
print("%s %s %.5f vs CPU %.5f: rel diff %.2e (tol %.1e)%s %s" % ("ok" if d <= tol and ok_first else "FAIL", rk, v, rv, d, tol,
      first, ("tok/s %s" % tps) if tps != "" else ""))
PY

trainer_job() { # trainer_job NAME TIMEOUT ARGS...: build/cuda/wt2_train on the kit's data
    local name=$1 to=$2
    shift 2
    [ -x "$B/wt2_train" ] || { record "$name" skipped 0 "wt2_train not in the kit"; return; }
    [ -d "$KIT/data" ] || { record "$name" skipped 0 "no data in the kit"; return; }
    mkdir -p "$W/runs"
    job "$name" "$to" trainer sh -c '"$@" > "$0" ' "$LOGS/$name.json" "$B/wt2_train" --data-dir "$KIT/data" \
        --out-dir "$W/runs/$name" --json "$@"
}
# the kit's reference runs (ref_train.txt: NAME CE TOL KEY ARGS...), all on the device at once
trainer_refs() {
    local name ce tol key args
    [ -f "$KIT/ref_train.txt" ] || { record train skipped 0 "no ref_train.txt in the kit"; return; }
    while read -r name ce tol key args; do
        case "$name" in ''|'#'*) continue ;; esac
        # shellcheck disable=SC2086
        trainer_job "train-$name" "${GPU_RUN_TRAIN_TIMEOUT:-150}" --device cuda $args
    done < "$KIT/ref_train.txt"
}
# the trainer under each sanitizer (phase s): NAME|ARGS per model, a few steps each
SAN_TRAIN_RUNS=${GPU_RUN_SAN_TRAIN:-"tiny|--preset tiny --precision fp32
polar-gdelta-bf16|--preset tiny-plain --attn polar --memory gdelta --precision bf16
era-gac|--preset era-gac-tiny --precision fp32
ceas-gating|--preset tiny-plain --controller ceas --ceas-gating on --precision fp32"}
san_trainer_jobs() { # san_trainer_jobs TOOL TIMEOUT
    local tool=$1 to=$2 extra="" name args
    [ "$tool" = memcheck ] && extra="--leak-check full"
    if [ -z "$SAN" ]; then record "$tool-train" skipped 0 "no compute-sanitizer on this machine"; return; fi
    [ -x "$B/wt2_train" ] || { record "$tool-train" skipped 0 "wt2_train not in the kit"; return; }
    [ -d "$KIT/data" ] || { record "$tool-train" skipped 0 "no data in the kit"; return; }
    mkdir -p "$W/runs"
    while IFS='|' read -r name args; do
        [ -n "$name" ] || continue
        # shellcheck disable=SC2086
        job "$tool-train-$name" "$to" sanitizer "$SAN" --tool "$tool" $extra --error-exitcode 42 \
            "$B/wt2_train" --data-dir "$KIT/data" --out-dir "$W/runs/$tool-$name" --device cuda $args \
            --max-steps "${GPU_RUN_SAN_STEPS:-4}" --eval-every 2 --eval-chunks 2 --final-chunks 2 --seed 1
    done <<< "$SAN_TRAIN_RUNS"
}
peers_env() { # the peers carried in the kit onto PYTHONPATH
    local site=$W/site
    if ls "$KIT"/whl/*.whl >/dev/null 2>&1; then
        if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$KIT"/whl/*.whl \
            > "$LOGS/peers_install.log" 2>&1; then export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
        else note "installing the kit's wheels failed (peers_install.log)"; fi
    fi
    [ -d "$KIT/peers" ] && export PYTHONPATH="$KIT/peers${PYTHONPATH:+:$PYTHONPATH}"
    export PYTHONPATH="$ROOT/bench${PYTHONPATH:+:$PYTHONPATH}"
    # CUPTI for bench_train_cuda's sync count (it dlopens libcupti.so.13): the image's, else the kit's
    local d
    for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
        $(torch_lib_dirs) "$KIT/lib"; do
        if [ -e "$d/libcupti.so.13" ]; then
            export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
            note "libcupti.so.13 from $d"
            break
        fi
    done
}
# the benchmarks, one at a time (a quiet GPU), each within its share (NAME:SECONDS) and what
# is left; the benchmarks that budget themselves are told their limit
BENCH_SHARES=${GPU_RUN_BENCHES-"bench_attn_cuda:70 bench_polar_cuda:80 bench_gdelta_cuda:80 bench_train_cuda:90 bench_era_cuda:30 bench_decode_cuda:100"}
bench_jobs() {
    local saved=$JOBS ent b to
    JOBS=1
    for ent in $BENCH_SHARES; do
        b=${ent%%:*}; to=${ent##*:}
        [ -n "${GPU_RUN_BENCH_TIMEOUT:-}" ] && to=$GPU_RUN_BENCH_TIMEOUT
        [ -x "$B/$b" ] || { record "$b" skipped 0 "not in the kit"; continue; }
        [ "$to" -gt $(($(left) - 5)) ] && to=$(($(left) - 5))
        job "$b" "$to" bench env GPU_CHECK_BENCH_TIMEOUT="$to" GD_FLA_TIMEOUT=$((to * 2 / 3)) "$B/$b"
        drain
    done
    JOBS=$saved
}

case "$PHASE" in
1)
    shard_jobs "" "${GPU_RUN_PARITY_TIMEOUT:-150}" parity
    trainer_refs
    drain
    sanitizer_jobs memcheck "${GPU_RUN_SAN_TIMEOUT:-200}"
    drain ;;
2)
    # the three slower tools share at most 45 % of the deadline, then the benchmarks
    CAP=$((DEADLINE * ${GPU_RUN_SAN_SHARE:-45} / 100))
    for tool in ${GPU_RUN_SANITIZERS-initcheck synccheck racecheck}; do sanitizer_jobs "$tool" "$CAP"; done
    drain
    CAP=
    peers_env
    bench_jobs ;;
b)
    # wt2_train --sample on the device (issue 42): a few steps of the tiny recipe (RPA prior,
    # MoE), a sample at each evaluation through the device decode; pass = exit 0 and a
    # sample line in its log (judged as a trainer run without a reference: exit status)
    if [ "${GPU_RUN_SAMPLE:-1}" != 0 ]; then
        trainer_job train-sample-cuda "${GPU_RUN_SAMPLE_TIMEOUT:-60}" --device cuda --preset tiny --precision fp32 \
            --max-steps 4 --eval-every 2 --eval-chunks 2 --final-chunks 2 --seed 1 --sample 16
        drain
        if [ -f "$LOGS/train-sample-cuda.log" ] && ! grep -aq '^wt2_train: sample at step' "$LOGS/train-sample-cuda.log"; then
            record train-sample-cuda-text FAIL 0 "no 'wt2_train: sample at step' line in train-sample-cuda.log"
        fi
    fi
    peers_env
    bench_jobs ;;
s)
    for tool in ${GPU_RUN_SANITIZERS-memcheck racecheck synccheck initcheck}; do
        san_trainer_jobs "$tool" $(($(left) - 5))
    done
    drain ;;
t)
    trainer_job train-paper-bf16 $(($(left) - 10)) --device cuda --preset paper --precision bf16 \
        --max-steps "${GPU_RUN_PAPER_STEPS:-300}" --eval-every 0 --final-chunks 16
    drain ;;
esac
verdict
