#!/usr/bin/env bash
# tools/gpu_check.sh OUT - everything a GPU machine should run, in one command, one report.
# `make gpu-check OUT=dir` calls it. On a machine with nvcc and an NVIDIA GPU it
#   1. records the device (nvidia-smi), driver and nvcc versions;
#   2. builds every tests/parity_*.cu and every bench/bench_*_cuda.cu with nvcc for the
#      detected compute capability (-lineinfo, so sanitizer reports name source lines);
#   3. runs the parity suite on the GPU (each kernel against the CPU reference);
#   4. runs compute-sanitizer (memcheck, racecheck, initcheck, synccheck) over every
#      parity binary;
#   5. runs every GPU benchmark and keeps its figures (its last line is the headline);
#   5b. builds build/cuda/wt2_train and trains --preset tiny-plain and --preset tiny (seed
#       000's recipe: RPA prior, MoE, gates, Guardian) for 200 steps each on the GPU
#      and on the CPU when the tokenised data was carried (tools/fetch_peers.sh data);
#   6. writes OUT/report.md and OUT/report.json (device, versions, every case, every
#      sanitizer verdict, every figure) and OUT/logs.tar.gz (all raw logs), and prints a
#      one-line summary last.
# Budget: it must fit in 9 minutes on one H100. Each step has a timeout, and once
# GPU_CHECK_BUDGET seconds (default 500) have passed the remaining sanitizer and
# benchmark runs are skipped and reported as skipped (never as passed).
# Exit status: 0 when everything that ran passed, 1 otherwise, 2 when no GPU or nvcc.
# Narrowing (environment): GPU_CHECK_ONLY="parity_gdelta bench_gdelta_cuda" builds and runs
# only the named parity tests / benchmarks (shell patterns); GPU_CHECK_SANITIZERS lists the
# compute-sanitizer tools (default all four; empty: none); GPU_CHECK_BENCH_TIMEOUT seconds
# per benchmark (default 180). Python peers carried as wheels in .whl/ (tools/fetch_peers.sh)
# are installed into a temporary site directory and put on PYTHONPATH first; a carried
# peers/ folder (peer sources, tools/fetch_peers.sh atma) goes on PYTHONPATH too.
set -u
OUT=${1:-build/gpu-check}
BUDGET=${GPU_CHECK_BUDGET:-500}
NVCC=${NVCC:-nvcc}
START=$(date +%s)
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOGS=$(mktemp -d)
B=build/gpu
mkdir -p "$B"
elapsed() { echo $(($(date +%s) - START)); }
selected() ( # selected NAME: in GPU_CHECK_ONLY (or it is unset/empty); POSIX sh, set -f stays in the subshell
    [ -z "${GPU_CHECK_ONLY:-}" ] && exit 0
    set -f
    for p in $GPU_CHECK_ONLY; do case "$1" in $p) exit 0 ;; esac; done
    exit 1
)
over_budget() { [ "$(elapsed)" -ge "$BUDGET" ]; }

if ! command -v "$NVCC" >/dev/null 2>&1; then
    if [ -x /usr/local/cuda/bin/nvcc ]; then NVCC=/usr/local/cuda/bin/nvcc; PATH="/usr/local/cuda/bin:$PATH"
    else echo "gpu-check: nvcc not found"; exit 2; fi
fi
if ! nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader > "$LOGS/device.txt" 2> "$LOGS/device.err" \
    || [ ! -s "$LOGS/device.txt" ]; then
    echo "gpu-check: no usable GPU (nvidia-smi failed: $(head -c 200 "$LOGS/device.err"))"
    exit 2
fi
"$NVCC" --version > "$LOGS/nvcc.txt" 2>&1
CC=$(head -n 1 "$LOGS/device.txt" | awk -F', ' '{print $3}' | tr -d '.')
case "$CC" in ''|*[!0-9]*) CC=90 ;; esac
ARCH="-gencode arch=compute_${CC},code=sm_${CC}"
echo "gpu-check: $(head -n 1 "$LOGS/device.txt"), sm_${CC}, building..."

# ---------------------------------------------------------------- build
: > "$LOGS/build.tsv"
# C dependencies of parity_model (stb_ds.h, liblzma): the system's, else the carried
# peers/deps (tools/fetch_peers.sh deps), which also goes on LD_LIBRARY_PATH
DEPFLAGS="-isystem /usr/include/stb"
if [ -d peers/deps ]; then
    DEPFLAGS="$DEPFLAGS -isystem $PWD/peers/deps/include/stb -isystem $PWD/peers/deps/include -L$PWD/peers/deps/lib"
    DEPLIB="-L$PWD/peers/deps/lib" # the trainer's link line takes LIBS, not INC
    export LD_LIBRARY_PATH="$PWD/peers/deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
build() { # build <src> <exe> <extra flags...>
    src=$1; exe=$2; shift 2
    if "$NVCC" -O3 -std=c++17 $ARCH -lineinfo -I. $DEPFLAGS -Xcompiler -Wall,-Wextra,-fopenmp "$@" "$src" -o "$exe" \
        -lcublas -lgomp -lm -llzma -lpthread > "$LOGS/build_$(basename "$exe").log" 2>&1; then
        printf '%s\tok\n' "$(basename "$exe")" >> "$LOGS/build.tsv"
    else
        printf '%s\tFAILED\n' "$(basename "$exe")" >> "$LOGS/build.tsv"
    fi
}
PARITY=""
for src in tests/parity_*.cu; do
    [ -e "$src" ] || continue
    t=$(basename "$src" .cu); selected "$t" || continue; build "$src" "$B/$t"; PARITY="$PARITY $t"
done
BENCHES=""
for src in bench/bench_*_cuda.cu; do
    [ -e "$src" ] || continue
    t=$(basename "$src" .cu); selected "$t" || continue; build "$src" "$B/$t"; BENCHES="$BENCHES $t"
done
echo "gpu-check: built in $(elapsed) s"

# --------------------------------------------------------------- parity
: > "$LOGS/parity.tsv"
for t in $PARITY; do
    if [ -x "$B/$t" ]; then
        timeout 180 "$B/$t" > "$LOGS/parity_$t.out" 2> "$LOGS/parity_$t.err"
        printf '%s\t%s\n' "$t" "$?" >> "$LOGS/parity.tsv"
    else
        printf '%s\tnot-built\n' "$t" >> "$LOGS/parity.tsv"
    fi
done
echo "gpu-check: parity done at $(elapsed) s"

# -------------------------------------------------------- compute-sanitizer
: > "$LOGS/sanitizer.tsv"
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
for t in $PARITY; do
    for tool in ${GPU_CHECK_SANITIZERS-memcheck racecheck initcheck synccheck}; do
        if [ -z "$SAN" ]; then printf '%s\t%s\tno-compute-sanitizer\n' "$t" "$tool" >> "$LOGS/sanitizer.tsv"; continue; fi
        if [ ! -x "$B/$t" ]; then printf '%s\t%s\tnot-built\n' "$t" "$tool" >> "$LOGS/sanitizer.tsv"; continue; fi
        if over_budget; then printf '%s\t%s\tskipped-budget\n' "$t" "$tool" >> "$LOGS/sanitizer.tsv"; continue; fi
        extra=""
        [ "$tool" = memcheck ] && extra="--leak-check full"
        timeout 150 "$SAN" --tool "$tool" $extra --error-exitcode 42 "$B/$t" > "$LOGS/san_${t}_$tool.log" 2>&1
        printf '%s\t%s\t%s\n' "$t" "$tool" "$?" >> "$LOGS/sanitizer.tsv"
    done
done
echo "gpu-check: sanitizers done at $(elapsed) s"

# ----------------------------------------------------------- benchmarks
: > "$LOGS/bench.tsv"
SITE=""
if ls .whl/*.whl >/dev/null 2>&1; then # Python peers carried as wheels (tools/fetch_peers.sh)
    SITE=$(mktemp -d)
    if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl \
        > "$LOGS/peers_install.log" 2>&1; then
        export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
        echo "gpu-check: peers from .whl/ on PYTHONPATH: $(cd .whl && ls *.whl | tr '\n' ' ')"
    else
        echo "gpu-check: installing .whl/ failed (logs: peers_install.log); the peers will say n/a"
    fi
fi
if [ -d peers ]; then # peer sources carried in peers/ (tools/fetch_peers.sh atma: polar_triton.py)
    export PYTHONPATH="$PWD/peers${PYTHONPATH:+:$PYTHONPATH}"
    echo "gpu-check: peers/ on PYTHONPATH: $(ls peers | tr '\n' ' ')"
fi
for t in $BENCHES; do
    if [ ! -x "$B/$t" ]; then printf '%s\tnot-built\n' "$t" >> "$LOGS/bench.tsv"; continue; fi
    if over_budget; then printf '%s\tskipped-budget\n' "$t" >> "$LOGS/bench.tsv"; continue; fi
    timeout "${GPU_CHECK_BENCH_TIMEOUT:-180}" "$B/$t" > "$LOGS/bench_$t.out" 2> "$LOGS/bench_$t.err"
    printf '%s\t%s\n' "$t" "$?" >> "$LOGS/bench.tsv"
done
echo "gpu-check: benchmarks done at $(elapsed) s"

# ------------------------------------------------- the trainer on the GPU
# build/cuda/wt2_train (impl.c by nvcc) on the carried data (tools/fetch_peers.sh data, or
# WT2_DIR): --preset tiny-plain, then --preset tiny (seed 000's recipe), 200 steps each on
# the GPU (bf16), then the same on the CPU, all evaluated the same way; the report keeps
# each run's last lines.
: > "$LOGS/train.tsv"
WT2=${WT2_DIR:-peers/data}
if selected wt2_train && ls "$WT2"/wt2.*.gpt2.u16 >/dev/null 2>&1 && ! over_budget; then
    if make -s build/cuda/wt2_train NVCC="$NVCC" CUDA_ARCHS="$ARCH" \
        INC="-I. $DEPFLAGS" LIBS="${DEPLIB:+$DEPLIB }-lm -llzma -lpthread" > "$LOGS/build_wt2_train.log" 2>&1; then
        for preset in tiny-plain tiny; do
            for dev in cuda cpu; do
                run="${preset}_$dev"
                if over_budget; then printf '%s\tskipped-budget\n' "$run" >> "$LOGS/train.tsv"; continue; fi
                timeout 240 build/cuda/wt2_train --preset "$preset" --device "$dev" --max-steps 200 --final-chunks 64 \
                    --data-dir "$WT2" --out-dir "$LOGS/wt2_$run" > "$LOGS/train_$run.out" 2> "$LOGS/train_$run.err"
                printf '%s\t%s\n' "$run" "$?" >> "$LOGS/train.tsv"
            done
        done
    else
        printf 'build\tFAILED\n' >> "$LOGS/train.tsv"
    fi
fi
echo "gpu-check: trainer done at $(elapsed) s"

# --------------------------------------------------------------- report
ELAPSED=$(elapsed)
tar -czf "$OUT/logs.tar.gz" -C "$LOGS" . 2>/dev/null
python3 - "$LOGS" "$OUT" "$ELAPSED" "$CC" <<'PY'
import json, os, re, sys, datetime
logs, out, elapsed, cc = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def rd(name):
    p = os.path.join(logs, name)
    return open(p, errors="replace").read() if os.path.exists(p) else ""
def tsv(name):
    return [l.split("\t") for l in rd(name).splitlines() if l.strip()]
dev = rd("device.txt").strip().splitlines()
d = [x.strip() for x in (dev[0].split(",") if dev else [])]
nv = re.findall(r"release ([0-9.]+), (V[0-9.]+)", rd("nvcc.txt"))
rep = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
       "device": d[0] if d else "?", "driver": d[1] if len(d) > 1 else "?",
       "compute_capability": d[2] if len(d) > 2 else cc, "memory": d[3] if len(d) > 3 else "?",
       "nvcc": " ".join(nv[0]) if nv else rd("nvcc.txt").strip()[-80:],
       "elapsed_s": elapsed, "build": {}, "parity": {}, "sanitizer": {}, "benchmarks": {}}
for name, st in tsv("build.tsv"):
    rep["build"][name] = st
for name, rc in tsv("parity.tsv"):
    o, e = rd("parity_%s.out" % name), rd("parity_%s.err" % name)
    cases = []
    for line in (o + "\n" + e).splitlines():
        m = re.match(r"^  ok (\S+)", line)
        if m: cases.append({"case": m.group(1), "status": "pass"}); continue
        m = re.match(r"^FAIL (\S+)$", line)
        if m: cases.append({"case": m.group(1), "status": "FAIL"}); continue
        m = re.match(r"^SKIP (\S+): (.*)$", line)
        if m: cases.append({"case": m.group(1), "status": "skip", "why": m.group(2)})
    res = re.findall(r"RESULT \S+ passed=(\d+) failed=(\d+) skipped=(\d+)", o)
    p, f, s = (map(int, res[-1]) if res else (0, 1, 0))
    if rc not in ("0",) and f == 0: f = 1
    # on a GPU machine a case that skips for want of a GPU is a failure: the device was not usable
    nogpu = sum(1 for c in cases if c["status"] == "skip" and c.get("why") == "no GPU")
    if nogpu: f += nogpu; s -= nogpu
    fails = [l for l in e.splitlines() if l.startswith("  ") and not l.startswith("  ok ")][:40]
    dline = [l for l in o.splitlines() if l.startswith("DEVICE ")]
    rep["parity"][name] = {"exit": rc, "passed": p, "failed": f, "skipped": s, "cases": cases,
                           "failure_lines": fails, "device_line": dline[0] if dline else ""}
for name, tool, rc in tsv("sanitizer.tsv"):
    log = rd("san_%s_%s.log" % (name, tool))
    m = re.findall(r"ERROR SUMMARY: (\d+) error", log)
    verdict = {"0": "clean", "42": "errors", "124": "timeout"}.get(rc, rc if not rc.isdigit() else "exit " + rc)
    if rc == "0" and m and int(m[-1]) > 0: verdict = "errors"
    first = [l for l in log.splitlines() if "=========" in l and ("Invalid" in l or "Race" in l or "Error" in l or "Uninitialized" in l or "Barrier" in l)][:10]
    rep["sanitizer"].setdefault(name, {})[tool] = {"verdict": verdict, "errors": int(m[-1]) if m else None, "first": first}
for name, rc in tsv("bench.tsv"):
    o = rd("bench_%s.out" % name).strip().splitlines()
    rep["benchmarks"][name] = {"exit": rc, "headline": o[-1] if o else "", "output": o[-60:]}
rep["trainer"] = {}
for name, rc in tsv("train.tsv"):  # build/cuda/wt2_train: <preset>_<device>
    o = (rd("train_%s.out" % name) + rd("train_%s.err" % name)).strip().splitlines()
    rep["trainer"][name] = {"exit": rc, "output": o[-25:]}
P = sum(v["passed"] for v in rep["parity"].values()); F = sum(v["failed"] for v in rep["parity"].values())
S = sum(v["skipped"] for v in rep["parity"].values())
san = [t for v in rep["sanitizer"].values() for t in v.values()]
clean = sum(t["verdict"] == "clean" for t in san); bad = sum(t["verdict"] not in ("clean", "skipped-budget") for t in san)
skipped_san = sum(t["verdict"] == "skipped-budget" for t in san)
bfail = sum(st != "ok" for st in rep["build"].values())
bench_ok = sum(v["exit"] == "0" for v in rep["benchmarks"].values())
rep["summary"] = {"parity_passed": P, "parity_failed": F, "parity_skipped": S, "sanitizer_clean": clean,
                  "sanitizer_problems": bad, "sanitizer_skipped": skipped_san, "build_failures": bfail,
                  "benchmarks_ok": bench_ok, "benchmarks": len(rep["benchmarks"])}
json.dump(rep, open(os.path.join(out, "report.json"), "w"), indent=1)
L = ["# make gpu-check report", "",
     "- date: %s" % rep["date"], "- device: %s (sm_%s, %s), driver %s" % (rep["device"], cc, rep["memory"], rep["driver"]),
     "- nvcc: %s" % rep["nvcc"], "- wall time: %d s" % elapsed, "",
     "## Build", "", "| target | status |", "| --- | --- |"]
L += ["| %s | %s |" % kv for kv in sorted(rep["build"].items())]
L += ["", "## Parity (GPU vs CPU reference)", "", "| binary | passed | failed | skipped | exit |", "| --- | --- | --- | --- | --- |"]
L += ["| %s | %d | %d | %d | %s |" % (k, v["passed"], v["failed"], v["skipped"], v["exit"]) for k, v in sorted(rep["parity"].items())]
for k, v in sorted(rep["parity"].items()):
    bad_cases = [c for c in v["cases"] if c["status"] != "pass"]
    if bad_cases or v["failure_lines"]:
        L += ["", "### %s: cases not passed" % k, ""] + ["- %s %s %s" % (c["status"], c["case"], c.get("why", "")) for c in bad_cases]
        if v["failure_lines"]: L += ["", "```"] + v["failure_lines"] + ["```"]
L += ["", "## compute-sanitizer", "", "| binary | memcheck | racecheck | initcheck | synccheck |", "| --- | --- | --- | --- | --- |"]
for k, v in sorted(rep["sanitizer"].items()):
    L.append("| %s | %s |" % (k, " | ".join(v.get(t, {}).get("verdict", "-") for t in ("memcheck", "racecheck", "initcheck", "synccheck"))))
    for t, x in v.items():
        if x["first"]: L += ["", "%s %s:" % (k, t), "```"] + x["first"] + ["```"]
L += ["", "## Benchmarks", ""]
if not rep["benchmarks"]: L.append("(no bench/bench_*_cuda.cu yet)")
for k, v in sorted(rep["benchmarks"].items()):
    L += ["### %s (exit %s)" % (k, v["exit"]), "", "```"] + v["output"] + ["```", ""]
L += ["", "## wt2_train --preset tiny-plain and tiny, 200 steps each (GPU, then CPU)", ""]
if not rep["trainer"]: L.append("(not run: no carried data, or over budget)")
for k, v in rep["trainer"].items():
    L += ["### %s (exit %s)" % (k.replace("_", " --device "), v["exit"]), "", "```"] + v["output"] + ["```", ""]
open(os.path.join(out, "report.md"), "w").write("\n".join(L) + "\n")
s = rep["summary"]
print("gpu-check: %s | parity %d passed, %d failed, %d skipped | sanitizer %d clean, %d problems, %d skipped | "
      "benchmarks %d/%d ok | build failures %d | %d s | report %s/report.md" %
      (rep["device"], P, F, S, clean, bad, skipped_san, bench_ok, len(rep["benchmarks"]), bfail, elapsed, out))
tfail = sum(v["exit"] not in ("0", "skipped-budget") for v in rep["trainer"].values())
sys.exit(0 if F == 0 and bad == 0 and bfail == 0 and tfail == 0 and bench_ok == len(rep["benchmarks"]) else 1)
PY
rc=$?
rm -rf "$LOGS" ${SITE:+"$SITE"}
exit $rc
