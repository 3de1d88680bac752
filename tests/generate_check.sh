#!/bin/sh
# generate_check.sh - build/generate on tiny checkpoints (issue 42): the same seed gives the
# same text (twice, and a prompt alone or in a batch), --json is one strict JSON line,
# greedy decoding is deterministic, and bad flags, checkpoints, data and prompts exit
# non-zero with a message (never a crash: no exit status from a signal).
#
#   sh tests/generate_check.sh [BINDIR [DATADIR]]   (defaults: build, ${WT2_DIR:-../shared/data})
#
# Needs BINDIR/wt2_train, BINDIR/generate and the data (the GPT-2 tokenizer and the
# validation split); skips (saying so) without them. Each case prints "ok <name>",
# "FAIL <name>: why" or "skip <name>: why"; the last line is
# `RESULT generate_check passed=P failed=F skipped=S`, exit 1 when a case failed.
# A few seconds on 2 cores.
BIN=${1:-build}
DATA=${2:-${WT2_DIR:-../shared/data}}
W=$(mktemp -d "${TMPDIR:-/tmp}/attnkit-generate.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
P=0; F=0; S=0
ok() { echo "ok $1"; P=$((P + 1)); }
fail() { echo "FAIL $1: $2"; F=$((F + 1)); }
skip() { echo "skip $1: $2"; S=$((S + 1)); }
check() { if [ "$2" -eq 0 ]; then ok "$1"; else fail "$1" "$3"; fi; }
last() { tail -n 1 "$1" 2>/dev/null | cut -c1-200; }
G=$BIN/generate
T=$BIN/wt2_train
finish() { echo "RESULT generate_check passed=$P failed=$F skipped=$S"; [ $F -eq 0 ]; exit $?; }
if [ ! -x "$G" ] || [ ! -x "$T" ]; then skip all "no $G or $T"; finish; fi
if [ ! -f "$DATA/wt2.valid.gpt2.u16" ] || [ ! -f "$DATA/gpt2/encoder.json" ]; then skip all "no data in $DATA"; finish; fi
SMALL="--d-model 32 --layers 2 --heads 2 --context 32 --batch 4 --steps 6 --eval-every 3 --eval-chunks 4 --final-chunks 8 --cg-lengths 16,32 --threads 2 --data-dir $DATA"
"$T" --preset tiny-plain $SMALL --max-steps 3 --out-dir "$W/plain" > /dev/null 2> "$W/train.err" || {
    fail train_plain "wt2_train failed: $(last "$W/train.err")"; finish; }
"$T" --preset tiny-plain $SMALL --pos rope --norm rmsnorm --ffn relu2 --max-steps 3 --out-dir "$W/rope" > /dev/null 2> "$W/train2.err" || {
    fail train_rope "wt2_train failed: $(last "$W/train2.err")"; finish; }
"$T" --preset tiny $SMALL --max-steps 2 --out-dir "$W/tiny" > /dev/null 2> "$W/train3.err" || {
    fail train_tiny "wt2_train failed: $(last "$W/train3.err")"; finish; }
"$T" --preset tiny-plain $SMALL --controller guardian --max-steps 2 --out-dir "$W/guard" > /dev/null 2> "$W/train4.err" || {
    fail train_guardian "wt2_train failed: $(last "$W/train4.err")"; finish; }
CK=$W/plain/ckpt.safetensors
GEN="$G --data-dir $DATA --threads 2"

# the same seed: the same bytes; a signal never ends it
$GEN --ckpt "$CK" --prompt "The history of" --max-new 16 --seed 5 > "$W/a1" 2> "$W/a1.err"; r1=$?
$GEN --ckpt "$CK" --prompt "The history of" --max-new 16 --seed 5 > "$W/a2" 2> "$W/a2.err"; r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && cmp -s "$W/a1" "$W/a2" && grep -q '^The history of' "$W/a1" && [ "$(wc -c < "$W/a1")" -gt 16 ]
check same_seed_same_text $? "rc $r1 $r2: $(head -c 200 "$W/a1") / $(head -c 200 "$W/a2") $(last "$W/a1.err")"
$GEN --ckpt "$CK" --prompt "The history of" --max-new 16 --seed 6 > "$W/a3" 2> /dev/null
cmp -s "$W/a1" "$W/a3"; [ $? -ne 0 ]
check other_seed_other_text $? "seeds 5 and 6 gave the same text"
$GEN --ckpt "$W/rope/ckpt.safetensors" --prompt "The history of" --max-new 12 --temperature 0 > "$W/g1" 2> "$W/g1.err"; r1=$?
$GEN --ckpt "$W/rope/ckpt.safetensors" --prompt "The history of" --max-new 12 --temperature 0 --threads 1 > "$W/g2" 2> /dev/null; r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && cmp -s "$W/g1" "$W/g2"
check greedy_rope_rms_relu2_deterministic $? "rc $r1 $r2 $(last "$W/g1.err")"

# --json: one strict JSON line; a prompt gives the same tokens alone and first in a batch
# (prompt i samples from stream i of the seed)
$GEN --ckpt "$CK" --prompt "The history of" --prompt "In 1990 , the \"band\"" --max-new 10 --seed 5 --json > "$W/j" 2> "$W/j.err"; rc=$?
$GEN --ckpt "$CK" --prompt "The history of" --max-new 10 --seed 5 --json > "$W/j1" 2> /dev/null
if command -v python3 > /dev/null 2>&1; then
    python3 - "$W/j" "$W/j1" > "$W/py.err" 2>&1 << 'PYEOF'
import json, sys
def bad(x): raise ValueError("non-JSON constant " + x)
lines = [l for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
assert len(lines) == 1, "%d lines" % len(lines)
o = json.loads(lines[0], parse_constant=bad)
assert len(o["prompts"]) == 2 and o["prompts"][1]["prompt"] == 'In 1990 , the "band"'
for p in o["prompts"]:
    assert p["stop"] in ("eot", "max_new", "context") and 1 <= p["generated"] <= 10, p
    assert p["prompt_tokens"] > 0 and isinstance(p["text"], str)
assert len(o["step_ms"]) == o["steps"] and all(x >= 0 for x in o["step_ms"]) and o["new_tokens"] >= 2
assert o["cache_bytes"] > 0 and o["tokens_per_s"] >= 0 and o["seed"] == 5
one = json.loads(open(sys.argv[2], encoding="utf-8").read(), parse_constant=bad)
assert one["prompts"][0]["tokens"] == o["prompts"][0]["tokens"], "batch changes the tokens"
PYEOF
    r=$?
    [ $rc -eq 0 ] && [ $r -eq 0 ]
    check json_strict_and_batch_independent $? "rc $rc: $(tail -n 3 "$W/py.err") $(last "$W/j.err")"
else
    skip json_strict_and_batch_independent "no python3"
fi

# errors: exit 2 for flags, 1 for inputs; a message; no signal
err_case() { # err_case NAME WANT_RC GREP_TEXT ARGS...
    name=$1; want=$2; txt=$3; shift 3
    "$@" > "$W/e.out" 2> "$W/e.err"; rc=$?
    [ $rc -eq "$want" ] && grep -q -- "$txt" "$W/e.err" && ! grep -q "Sanitizer\|runtime error" "$W/e.err"
    check "$name" $? "exit $rc (want $want), stderr: $(last "$W/e.err")"
}
err_case no_args 2 "required" $GEN
err_case no_prompt 2 "prompt" $GEN --ckpt "$CK"
err_case empty_prompt 2 "empty" $GEN --ckpt "$CK" --prompt ""
err_case unknown_flag 2 "unknown option" $GEN --ckpt "$CK" --prompt x --frobnicate 1
err_case missing_value 2 "missing value" $GEN --ckpt "$CK" --prompt
err_case bad_top_p 2 "top-p" $GEN --ckpt "$CK" --prompt x --top-p 0
err_case bad_top_p_high 2 "top-p" $GEN --ckpt "$CK" --prompt x --top-p 1.5
err_case bad_temperature 2 "temperature" $GEN --ckpt "$CK" --prompt x --temperature -1
err_case bad_temperature_nan 2 "temperature" $GEN --ckpt "$CK" --prompt x --temperature nan
err_case bad_max_new 2 "max-new" $GEN --ckpt "$CK" --prompt x --max-new 12x
err_case bad_top_k 2 "top-k" $GEN --ckpt "$CK" --prompt x --top-k -3
err_case bad_seed 2 "seed" $GEN --ckpt "$CK" --prompt x --seed -1
err_case bad_weights 2 "weights" $GEN --ckpt "$CK" --prompt x --weights best
err_case bad_device 2 "device" $GEN --ckpt "$CK" --prompt x --device gpu
# --device cuda: the CPU build says to build the GPU one; a GPU build without a device says so
err_case device_cuda_here 2 "device cuda" $GEN --ckpt "$CK" --prompt x --device cuda
err_case missing_ckpt 1 "cannot read" $GEN --ckpt "$W/nope.safetensors" --prompt x
err_case ckpt_is_dir 1 "directory" $GEN --ckpt "$W" --prompt x
head -c 3000 "$CK" > "$W/trunc.safetensors"
err_case truncated_ckpt 1 "generate:" $GEN --ckpt "$W/trunc.safetensors" --prompt x
printf 'not a checkpoint at all' > "$W/junk.safetensors"
err_case junk_ckpt 1 "generate:" $GEN --ckpt "$W/junk.safetensors" --prompt x
err_case swa_absent 1 "no swa weights" $GEN --ckpt "$CK" --prompt x --weights swa
"$T" --preset tiny-plain $SMALL --attn polar --pos none --memory gdelta --max-steps 1 --out-dir "$W/polar" > /dev/null 2> "$W/train6.err" || {
    fail train_polar "wt2_train failed: $(last "$W/train6.err")"; finish; }
err_case guardian_temperatures 1 "does not restore" $GEN --ckpt "$W/guard/ckpt.safetensors" --prompt x
mkdir "$W/nodata"
err_case no_tokenizer 1 "encoder.json" $G --data-dir "$W/nodata" --ckpt "$CK" --prompt x
long=$(awk 'BEGIN { for (i = 0; i < 300; i++) printf "word%d ", i }')
err_case prompt_too_long 1 "context" $GEN --ckpt "$CK" --prompt "$long"
# tiny-baseline's blocks (fuzzy MoE, residual and value gates) decode too
"$T" --preset tiny-baseline $SMALL --max-steps 2 --out-dir "$W/base" > /dev/null 2> "$W/train5.err" || {
    fail train_baseline "wt2_train failed: $(last "$W/train5.err")"; finish; }
$GEN --ckpt "$W/base/ckpt.safetensors" --prompt "The history of" --max-new 8 --seed 2 > "$W/b1" 2> "$W/b1.err"; r1=$?
$GEN --ckpt "$W/base/ckpt.safetensors" --prompt "The history of" --max-new 8 --seed 2 > "$W/b2" 2> /dev/null; r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && cmp -s "$W/b1" "$W/b2" && grep -q '^The history of' "$W/b1"
check moe_gates_tiny_baseline $? "rc $r1 $r2 $(last "$W/b1.err")"
# the priors decode (window: the model's context): the tiny recipe (RPA from the checkpoint's
# running statistics, Guardian's tau_att, MoE, gates) and ERA + GAC; polar attention with the
# gated-delta memory too; the same seed, the same text
"$T" --preset era-gac-tiny $SMALL --max-steps 2 --out-dir "$W/era" > /dev/null 2> "$W/train7.err" || {
    fail train_era "wt2_train failed: $(last "$W/train7.err")"; finish; }
for k in tiny era polar; do
    $GEN --ckpt "$W/$k/ckpt.safetensors" --prompt "The history of" --max-new 8 --seed 4 > "$W/$k.1" 2> "$W/$k.1.err"; r1=$?
    $GEN --ckpt "$W/$k/ckpt.safetensors" --prompt "The history of" --max-new 8 --seed 4 --threads 1 > "$W/$k.2" 2> /dev/null; r2=$?
    [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && cmp -s "$W/$k.1" "$W/$k.2" && grep -q '^The history of' "$W/$k.1" \
        && grep -q "context 128" "$W/$k.1.err"
    check "prior_${k}_decodes" $? "rc $r1 $r2 $(last "$W/$k.1.err")"
done
# wt2_train --sample N: a line of text at each evaluation (the tiny recipe: RPA prior, MoE);
# refused beyond 1024 tokens
"$T" --preset tiny $SMALL --max-steps 3 --sample 10 --out-dir "$W/smp" > /dev/null 2> "$W/smp.err"; r1=$?
"$T" --preset tiny $SMALL --max-steps 3 --sample 5000 --out-dir "$W/smp2" > /dev/null 2> "$W/smp2.err"; r2=$?
[ $r1 -eq 0 ] && grep -q "^wt2_train: sample at step 3: .* >>" "$W/smp.err" && [ $r2 -eq 2 ] && grep -q "sample" "$W/smp2.err" \
    && [ ! -e "$W/smp2" ]
check train_sample_at_eval $? "rc $r1 $r2: $(grep sample "$W/smp.err" | head -1 | cut -c1-200) $(last "$W/smp2.err")"
# the context bounds the continuation: a long prompt stops at max_T (128 for tiny-plain)
mid=$(awk 'BEGIN { for (i = 0; i < 40; i++) printf "alpha beta "; }')
$GEN --ckpt "$CK" --prompt "$mid" --max-new 1000 --temperature 0 --json > "$W/ctx" 2> "$W/ctx.err"; rc=$?
[ $rc -eq 0 ] && grep -q '"stop":"context"\|"stop":"eot"' "$W/ctx"
check context_bounds_generation $? "rc $rc $(last "$W/ctx.err")"
$GEN --help > "$W/help" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "256 heads" "$W/help" && grep -q "polar attention" "$W/help"
check help_lists_refusals $? "rc $rc"
finish
