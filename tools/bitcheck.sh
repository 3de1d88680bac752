#!/bin/sh
# bitcheck.sh - is CPU training still bit-identical to an earlier commit? (issue 39's rule
# for restructurings). Builds build/wt2_train of REF (default: main's merge base, else
# HEAD~1) in a temporary worktree and of the working tree here, runs the same 7 fixed-seed
# short CPU trainings with each (tiny, tiny-plain, polar+gdelta, era-gac-tiny,
# rope+relu2+rmsnorm+gates, ceas, moe+gates; 2 threads) under one out-dir path, and cmp's
# every metrics.jsonl and ckpt.safetensors. Exit 0: all identical.
#   sh tools/bitcheck.sh [REF] [DATADIR]          (a few minutes on 2 cores)
REF=${1:-HEAD~1}
D=${2:-${WT2_DIR:-../shared/data}}
case "$D" in /*) ;; *) D="$(pwd)/$D" ;; esac
W=$(mktemp -d) || exit 1
trap 'git worktree remove --force "$W/ref" >/dev/null 2>&1; rm -rf "$W"' EXIT
git worktree add --detach "$W/ref" "$REF" >/dev/null 2>&1 || { echo "bitcheck: cannot check out $REF"; exit 2; }
(cd "$W/ref" && make -s build/wt2_train >/dev/null 2>&1) || { echo "bitcheck: $REF does not build"; exit 2; }
make -s build/wt2_train >/dev/null 2>&1 || { echo "bitcheck: the working tree does not build"; exit 2; }
runs() { # runs OUTDIR (with $BIN)
    OUTD=$1; C="$W/cur"; rm -rf "$C"; mkdir -p "$C"
    S="--d-model 32 --layers 2 --heads 2 --context 32 --batch 4 --steps 8 --eval-every 4 --eval-chunks 4 --final-chunks 8 --cg-lengths 16,32 --threads 2 --data-dir $D --seed 7"
    for spec in "tiny --preset tiny" "tiny-plain --preset tiny-plain" \
        "polar-gdelta --preset tiny --attn polar --prior none --memory gdelta" \
        "era-gac --preset era-gac-tiny" \
        "rope-relu2-rms --preset tiny-plain --pos rope --ffn relu2 --norm rmsnorm --res-gate 1 --value-gate 1" \
        "ceas --preset tiny-plain --controller ceas" \
        "moe-value --preset tiny --ffn moe --value-gate 1 --res-gate 1"; do
        set -- $spec; name=$1; shift
        OMP_WAIT_POLICY=passive "$BIN" "$@" $S --out-dir "$C/$name" > "$C/$name.out" 2>&1 \
            || { echo "bitcheck: $name failed with $BIN"; cat "$C/$name.out"; return 1; }
    done
    mv "$C" "$OUTD"
}
BIN="$W/ref/build/wt2_train"; runs "$W/a" || exit 1
BIN="$(pwd)/build/wt2_train"; runs "$W/b" || exit 1
rc=0
for d in "$W"/a/*/; do n=$(basename "$d")
    for f in metrics.jsonl ckpt.safetensors; do
        if cmp -s "$W/a/$n/$f" "$W/b/$n/$f"; then echo "identical $n/$f"; else echo "DIFFERS   $n/$f"; rc=1; fi
    done
done
echo "bitcheck against $REF: $([ $rc -eq 0 ] && echo all identical || echo DIFFERENCES)"
exit $rc
