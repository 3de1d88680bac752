#!/bin/sh
# programs_eval_check.sh - the evaluation programs (mcqa, mcqa_gen, mcqa_compare, niah) lose
# nothing and write nothing invalid (issue 37).
#
#   sh tests/programs_eval_check.sh [BINDIR [DATADIR]]   (defaults: build, ${WT2_DIR:-../shared/data})
#
# Hostile inputs against build/mcqa, build/mcqa_gen, build/mcqa_compare and build/niah (from
# BINDIR), on tiny configurations: an output equal to an input (same path, a symlink), a
# directory or an empty file as input, junk and out-of-range numbers, NaN weights, a
# checkpoint whose config says cuda scored on the CPU, --weights ema|swa on a checkpoint
# without them, a 2^20-sentence paragraph, niah results with duplicate seeds, null and
# 1e300, mcqa logs with positive sums, wrong means and a gold answer that differs; on the
# real test split (issue 45), mcqa_gen's six tasks twice (same bytes), wt2_cloze / wt2_order
# pinned by sha256, every wt2s item well-formed and traced to its source line. Each case
# prints "ok <name>", "FAIL <name>: why" or "skip <name>: why"; the last line is
# `RESULT programs_eval_check passed=P failed=F skipped=S` and the exit status is 1 when a
# case failed. The mcqa cases need build/wt2_train, the data and a C compiler (a small
# checkpoint editor is built from examples/common/ckpt.c); the strict JSON checks need
# python3 (skipped without). Takes ~15 s on 2 cores.
BIN=${1:-build}
DATA=${2:-${WT2_DIR:-../shared/data}}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/attnkit-evalprog.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
P=0; F=0; S=0
ok() { echo "ok $1"; P=$((P + 1)); }
fail() { echo "FAIL $1: $2"; F=$((F + 1)); }
skip() { echo "skip $1: $2"; S=$((S + 1)); }
check() { # check NAME CONDITION-STATUS WHY: ok when the status is 0
    if [ "$2" -eq 0 ]; then ok "$1"; else fail "$1" "$3"; fi
}
have_py=0; command -v python3 >/dev/null 2>&1 && have_py=1
json_ok() { # json_ok FILE: every line is one strict JSON object (no NaN / Infinity), at least one
    [ $have_py -eq 1 ] || return 0
    python3 -c '
import json, sys
def bad(x): raise ValueError("non-JSON constant " + x)
n = 0
for line in open(sys.argv[1]):
    if line.strip():
        o = json.loads(line, parse_constant=bad)
        assert isinstance(o, dict)
        n += 1
assert n > 0, "empty"
' "$1" 2>"$W/json.err"
}
no_tmp() { # no_tmp DIR: no temporary output left behind
    [ -z "$(ls "$1" 2>/dev/null | grep '\.tmp\.')" ]
}
last() { tail -n 1 "$1" 2>/dev/null | cut -c1-200; }

# ------------------------------------------------------------------ mcqa_gen
G=$BIN/mcqa_gen
if [ ! -x "$G" ]; then
    skip mcqa_gen "no $G"
else
    # issue 40: the default output directory is runs/mcqa (never build/, beside the binaries)
    if [ -f "$DATA/wiki.test.raw.xz" ] || [ -f "$DATA/wiki.test.raw" ]; then
        absdata=$(cd "$DATA" && pwd); absg=$(cd "$(dirname "$G")" && pwd)/mcqa_gen
        mkdir "$W/gdef"
        (cd "$W/gdef" && "$absg" --data-dir "$absdata" --cloze 3 --order 3 > /dev/null 2> "$W/gdef.err"); rc=$?
        [ $rc -eq 0 ] && [ -s "$W/gdef/runs/mcqa/wt2_cloze.jsonl" ] && [ ! -e "$W/gdef/build" ]
        check mcqa_gen_default_runs_mcqa $? "rc=$rc: $(tail -n 1 "$W/gdef.err")"
    else skip mcqa_gen_default_runs_mcqa "no raw test split in $DATA"; fi
    # rule 10: a paragraph of more than 2^20 sentences (4 words + "." each, all different):
    # positions were packed as (p << 20) | s, which overflowed into the paragraph index
    mkdir "$W/gd" "$W/go"
    awk 'BEGIN { printf " = T = \n"; for (i = 0; i < 1100000; i++) printf "s%d bb cc dd . ", i; print "" }' \
        > "$W/gd/wiki.test.raw"
    "$G" --data-dir "$W/gd" --out-dir "$W/go" --cloze 0 --order 300 --entity 0 --next 0 --number 0 --heading 0 > /dev/null 2> "$W/g1.err"; rc=$?
    n=$(wc -l < "$W/go/wt2_order.jsonl" 2>/dev/null || echo 0)
    big=$(grep -c '"context":" s1[0-9][0-9][0-9][0-9][0-9][0-9] ' "$W/go/wt2_order.jsonl" 2>/dev/null)
    [ $rc -eq 0 ] && [ "$n" -eq 300 ] && [ "${big:-0}" -gt 0 ] && json_ok "$W/go/wt2_order.jsonl" && no_tmp "$W/go"
    check gen_paragraph_over_2e20_sentences $? "rc=$rc, $n lines, ${big:-0} beyond sentence 2^20: $(last "$W/g1.err")"
    # a task with no eligible position: an error, and the earlier outputs stay
    mkdir "$W/gd2" && printf ' = T = \n tiny text .\n' > "$W/gd2/wiki.test.raw"
    echo keep > "$W/go/families.txt"
    "$G" --data-dir "$W/gd2" --out-dir "$W/go" > /dev/null 2> "$W/g2.err"; rc=$?
    [ $rc -eq 1 ] && grep -q "no eligible" "$W/g2.err" && [ "$(cat "$W/go/families.txt")" = keep ] \
        && [ "$(wc -l < "$W/go/wt2_order.jsonl")" -eq 300 ] && no_tmp "$W/go"
    check gen_no_candidates_keeps_outputs $? "rc=$rc: $(last "$W/g2.err")"
    # an output that is the input text (a symlink to it) is refused; the text is intact
    mkdir "$W/go3" && ln -s "$W/gd/wiki.test.raw" "$W/go3/wt2_order.jsonl"
    sz=$(wc -c < "$W/gd/wiki.test.raw")
    "$G" --data-dir "$W/gd" --out-dir "$W/go3" --cloze 0 --order 5 > /dev/null 2> "$W/g3.err"; rc=$?
    [ $rc -ne 0 ] && grep -q "input text" "$W/g3.err" && [ "$(wc -c < "$W/gd/wiki.test.raw")" -eq "$sz" ]
    check gen_output_is_input $? "rc=$rc: $(last "$W/g3.err")"
    bad=""
    for a in "--seed xyz" "--seed -1" "--seed 1.5" "--cloze 1x" "--order -3" "--cloze 1e9" "--entity -1" "--next 1.5" \
             "--number 1e9" "--heading x" "--cloze 0 --order 0 --entity 0 --next 0 --number 0 --heading 0"; do
        "$G" --data-dir "$W/gd2" --out-dir "$W/go4" $a > /dev/null 2>&1; rc=$?
        [ $rc -eq 2 ] && [ ! -e "$W/go4" ] || bad="$bad [$a: rc=$rc]"
    done
    [ -z "$bad" ]; check gen_flag_ranges $? "$bad"
    # issue 45: the six tasks of the real test split, twice: the same bytes; wt2_cloze and
    # wt2_order exactly the files docs/RESULTS.md scored (sha256 at --seed 1); each wt2s
    # task well-formed, from the test split, with the counts the doc block states
    if [ -f "$DATA/wiki.test.raw.xz" ] || [ -f "$DATA/wiki.test.raw" ]; then
        "$G" --data-dir "$DATA" --out-dir "$W/gr1" > /dev/null 2> "$W/gr1.err"; r1=$?
        "$G" --data-dir "$DATA" --out-dir "$W/gr2" > /dev/null 2> "$W/gr2.err"; r2=$?
        bad=""
        for t in wt2_cloze wt2_order wt2_entity wt2_next wt2_number wt2_heading; do
            [ -s "$W/gr1/$t.jsonl" ] && cmp -s "$W/gr1/$t.jsonl" "$W/gr2/$t.jsonl" || bad="$bad $t"
        done
        cmp -s "$W/gr1/families.txt" "$W/gr2/families.txt" || bad="$bad families.txt"
        [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ -z "$bad" ]
        check gen_six_tasks_deterministic $? "rc=$r1/$r2, differ:$bad: $(last "$W/gr1.err")"
        if command -v sha256sum > /dev/null 2>&1; then
            h1=$(sha256sum < "$W/gr1/wt2_cloze.jsonl" | cut -c1-64); h2=$(sha256sum < "$W/gr1/wt2_order.jsonl" | cut -c1-64)
            "$G" --data-dir "$DATA" --out-dir "$W/gr3" --entity 0 --next 0 --number 0 --heading 0 > /dev/null 2>&1; r3=$?
            [ "$h1" = 3d00138273c40b35c9c8186d0b9daf1d9e86b679a59da1d1470866ef2c020630 ] \
                && [ "$h2" = f5e2f5b56848c452dfd85de1d90d30202acfd7daf8bbf3ad1b18905eb3e8e6fb ] && [ $r3 -eq 0 ] \
                && cmp -s "$W/gr1/wt2_cloze.jsonl" "$W/gr3/wt2_cloze.jsonl" && cmp -s "$W/gr1/wt2_order.jsonl" "$W/gr3/wt2_order.jsonl" \
                && [ "$(grep -v '^#' "$W/gr3/families.txt")" = "wt2: wt2_cloze wt2_order" ] && [ ! -e "$W/gr3/wt2_entity.jsonl" ]
            check gen_wt2_family_unchanged $? "cloze $h1, order $h2, rc=$r3"
        else skip gen_wt2_family_unchanged "no sha256sum"; fi
        if [ $have_py -eq 1 ]; then
            python3 - "$W/gr1" "$DATA" > "$W/gr.py" 2>&1 <<'PYEOF'
import json, lzma, os, re, sys
out, data = sys.argv[1], sys.argv[2]
raw = os.path.join(data, "wiki.test.raw")
text = open(raw, encoding="utf-8").read() if os.path.exists(raw) else lzma.open(raw + ".xz", "rt", encoding="utf-8").read()
lines = text.split("\n")
norm = [" ".join(l.split()) for l in lines]
split = "\n".join(norm)
fam = [l for l in open(os.path.join(out, "families.txt")).read().splitlines() if not l.startswith("#")]
assert fam == ["wt2: wt2_cloze wt2_order", "wt2s: wt2_entity wt2_next wt2_number wt2_heading"], fam
want = {"wt2_entity": 1000, "wt2_next": 1000, "wt2_number": 1000, "wt2_heading": 438}
for task, count in want.items():
    items = [json.loads(l) for l in open(os.path.join(out, task + ".jsonl"), encoding="utf-8")]
    assert len(items) == count, (task, len(items))
    golds = [0, 0, 0, 0]
    for i, it in enumerate(items):
        where = "%s line %d" % (task, i + 1)
        assert it["task"] == task and it["id"] == "%s-%05d" % (task, i), where
        ch, g = it["choices"], it["gold"]
        assert isinstance(g, int) and 0 <= g < 4 and len(ch) == 4, where
        golds[g] += 1
        assert all(c.strip() and c.startswith(" ") for c in ch), where + ": an empty choice"
        assert len(set(ch)) == 4, where + ": choices not distinct"
        assert it["context"].strip(), where + ": empty context"
        m = re.fullmatch(r"line (\d+) of wiki\.test\.raw", it["src"])
        n = int(m.group(1))
        src = norm[n - 1]
        assert " ".join(ch[g].split()) in src, where + ": the answer is not in its source line"
        if task == "wt2_heading":
            assert re.fullmatch(r" (= ){2,}\S.* (= ){2,}\n( *\n)+", it["context"]), where
            assert it["context"] in text, where + ": heading context not in the split"
            assert all(" ".join(c.split()) in split for c in ch), where + ": a choice not from the split"
            assert (it["context"] + ch[g]) in text, where + ": the answer does not follow the heading"
        else:
            assert " ".join(it["context"].split()) in src, where + ": context not in its source line"
        if task == "wt2_next":
            assert all(" ".join(c.split()) in split for c in ch), where + ": a choice not from the split"
            assert " ".join((it["context"] + ch[g]).split()) in src, where + ": the answer does not follow"
        if task == "wt2_entity":
            assert all(re.fullmatch(r"( [A-Z][A-Za-z]+){2,4}", c) for c in ch), where
            assert len({len(c.split()) for c in ch}) == 1, where + ": names of different lengths"
            assert " ".join((it["context"] + ch[g]).split()) in src, where + ": the name does not follow"
        if task == "wt2_number":
            ws = [c.split() for c in ch]
            assert len({len(w) for w in ws}) == 1, where
            diff = [k for k in range(len(ws[0])) if len({w[k] for w in ws}) > 1]
            assert len(diff) == 1 and all(w[diff[0]].isdigit() for w in ws), where + ": not one number replaced"
    assert min(golds) > 0, task + ": a gold index never used"
print("ok")
PYEOF
            [ "$(tail -n 1 "$W/gr.py")" = ok ]
            check gen_wt2s_items_well_formed $? "$(tail -n 3 "$W/gr.py" | tr '\n' ' ' | cut -c1-300)"
        else skip gen_wt2s_items_well_formed "no python3"; fi
    else
        skip gen_six_tasks_deterministic "no raw test split in $DATA"
    fi
fi

# ------------------------------------------------------------------ mcqa_compare
C=$BIN/mcqa_compare
if [ ! -x "$C" ]; then
    skip mcqa_compare "no $C"
else
    # two valid logs of 3 items (sum rule: A right on 1 and 2, B on 1 and 3)
    line() { # line ID GOLD S0 S1 (one-token choices: mean = sum)
        ps=0; awk "BEGIN { exit !($4 > $3) }" && ps=1
        cs=0; [ $ps -eq "$2" ] && cs=1
        printf '{"task":"t","id":"%s","prompt_hash":"00000000000000%02d","n_prompt":3,"n_prompt_full":3,"truncated":0,"gold":%s,"choices":[{"n":1,"sum":%s,"mean":%s},{"n":1,"sum":%s,"mean":%s}],"pred_sum":%s,"pred_mean":%s,"correct_sum":%s,"correct_mean":%s}\n' \
            "$1" "$1" "$2" "$3" "$3" "$4" "$4" $ps $ps $cs $cs
    }
    { line 1 0 -1 -2; line 2 1 -3 -2; line 3 0 -1.5 -2.5; } > "$W/A.jsonl"
    { line 1 0 -1 -2; line 2 1 -2 -3; line 3 0 -2.5 -1.5; } > "$W/B.jsonl"
    cp "$W/A.jsonl" "$W/A.orig"
    "$C" "$W/A.jsonl" "$W/B.jsonl" --bootstrap 200 --json "$W/cmp.json" > "$W/c0.out" 2> "$W/c0.err"; rc=$?
    [ $rc -eq 0 ] && json_ok "$W/cmp.json" && no_tmp "$W"
    check compare_baseline $? "rc=$rc: $(last "$W/c0.err")"
    # rule 4: positive log-probability sums, means that are not sum/n, a gold that differs
    sed '1s/"sum":-1,"mean":-1/"sum":1,"mean":1/; 1s/"pred_sum":0,"pred_mean":0/"pred_sum":0,"pred_mean":0/' "$W/A.jsonl" > "$W/pos.jsonl"
    "$C" "$W/pos.jsonl" "$W/B.jsonl" --bootstrap 200 > /dev/null 2> "$W/c1.err"; rc=$?
    [ $rc -eq 1 ] && grep -q "positive" "$W/c1.err" && grep -q "pos.jsonl:1" "$W/c1.err"
    check compare_positive_sum $? "rc=$rc: $(last "$W/c1.err")"
    sed '2s/"sum":-3,"mean":-3/"sum":-3,"mean":-2.9/' "$W/A.jsonl" > "$W/mean.jsonl"
    "$C" "$W/mean.jsonl" "$W/B.jsonl" --bootstrap 200 > /dev/null 2> "$W/c2.err"; rc=$?
    [ $rc -eq 1 ] && grep -q "not sum / n" "$W/c2.err" && grep -q "mean.jsonl:2" "$W/c2.err"
    check compare_mean_not_sum_over_n $? "rc=$rc: $(last "$W/c2.err")"
    { line 1 1 -1 -2; line 2 1 -2 -3; line 3 0 -2.5 -1.5; } > "$W/Bgold.jsonl"
    "$C" "$W/A.jsonl" "$W/Bgold.jsonl" --bootstrap 200 > /dev/null 2> "$W/c3.err"; rc=$?
    [ $rc -eq 1 ] && grep -q "gold answer of item t/1 differs" "$W/c3.err" && ! grep -q "prompt hash differs" "$W/c3.err"
    check compare_gold_differs $? "rc=$rc: $(last "$W/c3.err")"
    bad=""
    for a in "--bootstrap 2000000000" "--bootstrap 1e4" "--bootstrap 50" "--seed xyz" "--seed -1" "--seed 1x" \
             "--alpha 0" "--alpha nan" "--alpha 0.05x"; do
        timeout 20 "$C" "$W/A.jsonl" "$W/B.jsonl" $a > /dev/null 2>&1; rc=$?
        [ $rc -eq 2 ] || bad="$bad [$a: rc=$rc]"
    done
    [ -z "$bad" ]; check compare_flag_ranges $? "$bad"
    # rule 1: --json equal to an input (same path; another name of the same file)
    "$C" "$W/A.jsonl" "$W/B.jsonl" --bootstrap 200 --json "$W/A.jsonl" > /dev/null 2> "$W/c4.err"; rc=$?
    ln -s "$W/B.jsonl" "$W/B.link"
    "$C" "$W/A.jsonl" "$W/B.jsonl" --bootstrap 200 --json "$W/B.link" > /dev/null 2>&1; rc2=$?
    [ $rc -eq 2 ] && [ $rc2 -eq 2 ] && cmp -s "$W/A.jsonl" "$W/A.orig" && grep -q "refusing to overwrite an input" "$W/c4.err"
    check compare_json_is_input $? "rc=$rc/$rc2: $(last "$W/c4.err")"
    # rule 3: a directory or an empty file as input is an error naming it
    mkdir "$W/adir"; : > "$W/empty.txt"; printf '# only a comment\n' > "$W/nofam.txt"
    "$C" "$W/A.jsonl" "$W/B.jsonl" --bootstrap 200 --families "$W/adir" > /dev/null 2> "$W/c5.err"; r1=$?
    "$C" "$W/A.jsonl" "$W/B.jsonl" --bootstrap 200 --families "$W/nofam.txt" > /dev/null 2> "$W/c6.err"; r2=$?
    "$C" "$W/adir" "$W/B.jsonl" --bootstrap 200 > /dev/null 2> "$W/c7.err"; r3=$?
    "$C" "$W/A.jsonl" "$W/empty.txt" --bootstrap 200 > /dev/null 2> "$W/c8.err"; r4=$?
    [ $r1 -eq 1 ] && grep -q "adir" "$W/c5.err" && [ $r2 -eq 1 ] && grep -q "nofam.txt" "$W/c6.err" \
        && [ $r3 -eq 1 ] && grep -q "directory" "$W/c7.err" && [ $r4 -eq 1 ] && grep -q "empty.txt" "$W/c8.err"
    check compare_unreadable_or_empty_inputs $? "rc=$r1/$r2/$r3/$r4: $(last "$W/c5.err") / $(last "$W/c6.err")"
    # a failed run leaves an earlier --json as it was
    cp "$W/cmp.json" "$W/cmp.orig"
    "$C" "$W/A.jsonl" "$W/Bgold.jsonl" --bootstrap 200 --json "$W/cmp.json" > /dev/null 2>&1
    cmp -s "$W/cmp.json" "$W/cmp.orig" && no_tmp "$W"
    check compare_failed_run_keeps_json $? "cmp.json changed"
    # issue 45: --pair pools pairs of logs (training seeds). The same pair twice: the same
    # accuracies, delta and CI as once (the cluster bootstrap of identical strata), summed
    # discordant pairs, sd 0 across the strata; one pair: the same JSON as before --pair existed
    "$C" "$W/A.jsonl" "$W/B.jsonl" --pair "$W/A.jsonl" "$W/B.jsonl" --bootstrap 200 --json "$W/pool.json" \
        > "$W/p0.out" 2> "$W/p0.err"; rc=$?
    if [ $rc -eq 0 ] && command -v python3 > /dev/null 2>&1; then
        python3 - "$W/cmp.json" "$W/pool.json" << 'PYEOF'
import json, sys
a = json.load(open(sys.argv[1]))["rules"]["sum"][0]
b = json.load(open(sys.argv[2]))
assert b["strata"] == 2 and len(b["a_strata"]) == 2, b.get("strata")
b = b["rules"]["sum"][0]
for k in ("acc_a", "acc_b", "delta", "ci_lo", "ci_hi"):
    assert a[k] == b[k], (k, a[k], b[k])
assert b["n01"] == 2 * a["n01"] and b["n10"] == 2 * a["n10"], (a["n01"], b["n01"])
assert b["delta_sd"] == 0 and b["delta_strata"] == [a["delta"], a["delta"]] and "p_t" not in a
PYEOF
        rc=$?
    fi
    check compare_pair_pools_strata $? "rc=$rc: $(last "$W/p0.err")"
    # a pair that does not hold the first pair's items is refused, naming the logs
    { line 1 0 -1 -2; line 2 1 -3 -2; } > "$W/A2.jsonl"
    { line 1 0 -1 -2; line 2 1 -2 -3; } > "$W/B2.jsonl"
    "$C" "$W/A.jsonl" "$W/B.jsonl" --pair "$W/A2.jsonl" "$W/B2.jsonl" --bootstrap 200 > /dev/null 2> "$W/p1.err"; r1=$?
    "$C" "$W/A.jsonl" "$W/B.jsonl" --pair "$W/A.jsonl" > /dev/null 2>&1; r2=$?
    "$C" "$W/A.jsonl" "$W/B.jsonl" --pair "$W/A.jsonl" "$W/B.jsonl" --json "$W/B.jsonl" > /dev/null 2>&1; r3=$?
    [ $r1 -eq 1 ] && grep -q "do not hold the same items" "$W/p1.err" && [ $r2 -eq 2 ] && [ $r3 -eq 2 ] \
        && cmp -s "$W/A.jsonl" "$W/A.orig"
    check compare_pair_refusals $? "rc=$r1/$r2/$r3: $(last "$W/p1.err")"
fi

# ------------------------------------------------------------------ niah
N=$BIN/niah
if [ ! -x "$N" ]; then
    skip niah "no $N"
else
    # rule 1: a bad configuration or missing data leaves an earlier results.jsonl as it was
    mkdir "$W/nr" && echo keep > "$W/nr/results.jsonl"
    "$N" --quick --out-dir "$W/nr" --conv 1 > /dev/null 2> "$W/n1.err"; r1=$?
    "$N" --quick --out-dir "$W/nr" --data-dir "$W/no-such-dir" > /dev/null 2> "$W/n2.err"; r2=$?
    "$N" --quick --out-dir "$W/nr" --steps x > /dev/null 2>&1; r3=$?
    "$N" --quick --out-dir "$W/nr" --lengths "1, 2" > /dev/null 2>&1; r4=$?
    [ $r1 -eq 2 ] && [ $r2 -eq 1 ] && [ $r3 -eq 2 ] && [ $r4 -eq 2 ] && [ "$(cat "$W/nr/results.jsonl")" = keep ] && no_tmp "$W/nr"
    check niah_refusal_keeps_results $? "rc=$r1/$r2/$r3/$r4, results.jsonl: $(head -c 40 "$W/nr/results.jsonl")"
    # rule 4: --aggregate
    L='{"arm": "polar", "seed": 1, "mult": 1, "T": 48, "acc": 0.5000, "acc_lo": 0.3, "acc_hi": 0.7, "correct": 10, "digits": 20, "exact": 1, "probes": 4, "doc_ce": 5.1, "doc_ppl": 164.0, "doc_tokens": 96, "train_ce": 6.0, "train_s": 0.1, "eval_s": 0.1, "act_mb": 1.0}'
    mkdir "$W/s1" "$W/s2" "$W/s3" "$W/s4" "$W/s5" "$W/s6" "$W/s7"
    echo "$L" > "$W/s1/results.jsonl"
    echo "$L" | sed 's/"seed": 1/"seed": 2/; s/"acc": 0.5000/"acc": 0.7500/; s/"correct": 10/"correct": 15/' > "$W/s2/results.jsonl"
    "$N" --aggregate "$W/agg" "$W/s1" "$W/s2" > "$W/a0.out" 2> "$W/a0.err"; rc=$?
    [ $rc -eq 0 ] && grep -q '| polar | 1 | 48 | 2 | 0.625' "$W/a0.out" && ! grep -qi nan "$W/a0.out"
    check niah_aggregate_two_seeds $? "rc=$rc: $(last "$W/a0.err") $(grep polar "$W/a0.out")"
    "$N" --aggregate "$W/agg" "$W/s1" "$W/s1" > /dev/null 2> "$W/a1.err"; rc=$?
    [ $rc -ne 0 ] && grep -q "twice" "$W/a1.err"
    check niah_aggregate_same_dir_twice $? "rc=$rc: $(last "$W/a1.err")"
    { echo "$L"; echo "$L"; } > "$W/s3/results.jsonl"
    "$N" --aggregate "$W/agg" "$W/s3" > /dev/null 2> "$W/a2.err"; rc=$?
    [ $rc -eq 1 ] && grep -q "seed 1 is already in" "$W/a2.err"
    check niah_aggregate_repeated_line $? "rc=$rc: $(last "$W/a2.err")"
    cp "$W/s1/results.jsonl" "$W/s4/results.jsonl"
    "$N" --aggregate "$W/agg" "$W/s1" "$W/s4" > /dev/null 2> "$W/a3.err"; rc=$?
    [ $rc -eq 1 ] && grep -q "seed 1 is already in" "$W/a3.err"
    check niah_aggregate_same_seed_two_runs $? "rc=$rc: $(last "$W/a3.err")"
    bad=""
    for e in 's/"mult": 1,/"mult": null,/' 's/"mult": 1,/"mult": 1e300,/' 's/"T": 48/"T": -48/' \
             's/"correct": 10/"correct": 1e300/' 's/"digits": 20/"digits": null/' 's/"acc": 0.5000/"acc": 7/' \
             's/"seed": 1/"seed": -1/' 's/"probes": 4/"probes": 4.5/'; do
        echo "$L" | sed "$e" > "$W/s5/results.jsonl"
        "$N" --aggregate "$W/agg" "$W/s5" > /dev/null 2> "$W/a4.err"; rc=$?
        [ $rc -eq 1 ] && grep -q "results.jsonl:1" "$W/a4.err" || bad="$bad [$e: rc=$rc]"
    done
    [ -z "$bad" ]; check niah_aggregate_out_of_range $? "$bad"
    # too few seeds, no digits, no document CE: "-" and a note, never nan
    echo "$L" | sed 's/"correct": 10/"correct": 0/; s/"digits": 20/"digits": 0/; s/"acc": 0.5000/"acc": 0/; s/"exact": 1/"exact": 0/; s/"probes": 4/"probes": 0/; s/"doc_ce": 5.1/"doc_ce": null/' \
        > "$W/s6/results.jsonl"
    "$N" --aggregate "$W/agg" "$W/s6" > "$W/a5.out" 2> "$W/a5.err"; rc=$?
    [ $rc -eq 0 ] && ! grep -qi nan "$W/a5.out" && grep -q "one seed" "$W/a5.out"
    check niah_aggregate_no_nan $? "rc=$rc: $(grep polar "$W/a5.out") $(last "$W/a5.err")"
    # issue 43: runs of different models (the lines' "preset" / "model") are never averaged;
    # lines without them (older runs) aggregate as before
    mkdir "$W/s8" "$W/s9" "$W/s10"
    echo "$L" | sed 's/}$/, "preset": "atma", "model": "d64 L4"}/; s/"seed": 1/"seed": 3/' > "$W/s8/results.jsonl"
    echo "$L" | sed 's/}$/, "preset": "atma", "model": "d64 L4 opt=adamw"}/; s/"seed": 1/"seed": 4/' > "$W/s9/results.jsonl"
    echo "$L" | sed 's/}$/, "preset": "atma", "model": "d64 L4"}/; s/"seed": 1/"seed": 5/' > "$W/s10/results.jsonl"
    "$N" --aggregate "$W/agg" "$W/s8" "$W/s9" > /dev/null 2> "$W/a8.err"; r1=$?
    "$N" --aggregate "$W/agg" "$W/s1" "$W/s8" > /dev/null 2> "$W/a9.err"; r2=$?
    "$N" --aggregate "$W/agg" "$W/s8" "$W/s10" > "$W/a10.out" 2> "$W/a10.err"; r3=$?
    [ $r1 -eq 1 ] && grep -q "refusing to average different models" "$W/a8.err" && [ $r2 -eq 1 ] && [ $r3 -eq 0 ] \
        && grep -q '| polar | 1 | 48 | 2 |' "$W/a10.out" && grep -q 'polar: atma: d64 L4' "$W/a10.out"
    check niah_aggregate_models $? "rc=$r1/$r2/$r3: $(last "$W/a8.err") $(last "$W/a10.err")"
    # issue 43: the preset and its knobs are checked before anything is written
    "$N" --quick --out-dir "$W/nr" --preset atmo > /dev/null 2> "$W/n3.err"; r1=$?
    "$N" --quick --out-dir "$W/nr" --preset atma --layer-pattern ccX > /dev/null 2>> "$W/n3.err"; r2=$?
    "$N" --quick --out-dir "$W/nr" --preset atma --kv-heads 3 > /dev/null 2>> "$W/n3.err"; r3=$?
    "$N" --quick --out-dir "$W/nr" --optimizer sgd > /dev/null 2>> "$W/n3.err"; r4=$?
    "$N" --quick --out-dir "$W/nr" --sigreg weak --sigreg-alpha 1 > /dev/null 2>> "$W/n3.err"; r5=$?
    [ $r1 -eq 2 ] && [ $r2 -eq 2 ] && [ $r3 -eq 2 ] && [ $r4 -eq 2 ] && [ $r5 -eq 2 ] \
        && [ "$(cat "$W/nr/results.jsonl")" = keep ]
    check niah_atma_flag_refusals $? "rc=$r1/$r2/$r3/$r4/$r5: $(last "$W/n3.err")"
    mkdir "$W/s7/results.jsonl"
    "$N" --aggregate "$W/agg" "$W/s7" > /dev/null 2> "$W/a6.err"; r1=$?
    "$N" --aggregate "$W/s1" "$W/s1" > /dev/null 2> "$W/a7.err"; r2=$?
    [ $r1 -eq 1 ] && grep -q "directory" "$W/a6.err" && [ $r2 -eq 2 ]
    check niah_aggregate_bad_paths $? "rc=$r1/$r2: $(last "$W/a6.err") / $(last "$W/a7.err")"
    if [ -f "$DATA/wt2.valid.gpt2.u16" ] && [ -d "$DATA/gpt2" ]; then
        # a whole (tiny) grid: results.jsonl appears complete, strict JSON (a CE without
        # document windows is null), and the table says "-" for it, not nan
        "$N" --quick --threads 1 --arms polar --doc-windows 0 --out-dir "$W/nq" --data-dir "$DATA" \
            > "$W/nq.out" 2> "$W/nq.err"; rc=$?
        [ $rc -eq 0 ] && json_ok "$W/nq/results.jsonl" && ! grep -qi nan "$W/nq.out" && no_tmp "$W/nq" \
            && grep -q '"doc_ce": null' "$W/nq/results.jsonl"
        check niah_quick_run $? "rc=$rc: $(last "$W/nq.err") $(cat "$W/json.err" 2>/dev/null | tail -n 1)"
        # the atma preset at the quick size: every arm trains and evaluates, the lines record it
        "$N" --quick --preset atma --threads 1 --out-dir "$W/na" --data-dir "$DATA" > "$W/na.out" 2> "$W/na.err"; rc=$?
        [ $rc -eq 0 ] && json_ok "$W/na/results.jsonl" && [ "$(grep -c '"preset": "atma"' "$W/na/results.jsonl")" -eq 12 ] \
            && grep -q 'pattern=ccAc' "$W/na/results.jsonl" && grep -q 'opt=muon' "$W/na/results.jsonl"
        check niah_atma_quick_run $? "rc=$rc: $(last "$W/na.err")"
    else
        skip niah_quick_run "no data in $DATA"
    fi
fi

# ------------------------------------------------------------------ mcqa
M=$BIN/mcqa
WT=$BIN/wt2_train
CC=${CC:-cc}
if [ ! -x "$M" ] || [ ! -x "$WT" ] || [ ! -f "$DATA/wt2.valid.gpt2.u16" ]; then
    skip mcqa "no $M, no $WT or no data in $DATA"
elif ! cat > "$W/ckedit.c" <<'CKEDIT_EOF' || ! "$CC" -std=c99 -O1 -I"$ROOT" -o "$W/ckedit" "$W/ckedit.c" \
        "$ROOT/examples/common/ckpt.c" -lm 2> "$W/cc.err"; then
/* ckedit IN OUT MODE: rewrite a wt2_train checkpoint through ckpt.h (so its checksums are
   those of the edited file). MODE cuda: the config says --device cuda --precision bf16;
   nan: the first weight of every model tensor is NaN (EMA / SWA copies too). */
#define _POSIX_C_SOURCE 200809L
#include "examples/common/ckpt.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static char *subst(const char *s, const char *a, const char *b)
{
    const char *p = strstr(s, a);
    char *r;
    if (!p) return NULL;
    r = (char *)malloc(strlen(s) + strlen(b) + 1);
    if (!r) return NULL;
    memcpy(r, s, (size_t)(p - s));
    strcpy(r + (p - s), b);
    strcat(r, p + strlen(a));
    return r;
}
int main(int argc, char **argv)
{
    ckpt_file *f = NULL;
    char err[512];
    ckpt_entry *E;
    const char *keys[64], *vals[64];
    char *own[64] = {0};
    void *bufs[4096] = {0};
    int n, nm = 0, i;
    if (argc != 4) return 2;
    if (ckpt_open(&f, argv[1], err, sizeof err) != CKPT_OK) { fprintf(stderr, "ckedit: %s\n", err); return 1; }
    n = ckpt_count(f);
    E = (ckpt_entry *)calloc((size_t)(n ? n : 1), sizeof *E);
    if (!E || n > 4096) return 1;
    for (i = 0; i < n; i++) {
        ckpt_entry_at(f, i, &E[i]);
        if (!strcmp(argv[3], "nan") && E[i].dtype == CKPT_F32 && strncmp(E[i].name, "optim.adam", 10) &&
            strncmp(E[i].name, "state.", 6)) {
            size_t k, cnt = 1;
            float *c;
            for (k = 0; k < (size_t)E[i].ndim; k++) cnt *= (size_t)E[i].shape[k];
            if (!cnt) continue;
            c = (float *)malloc(cnt * sizeof(float));
            if (!c) return 1;
            memcpy(c, E[i].data, cnt * sizeof(float));
            c[0] = NAN;
            bufs[i] = c;
            E[i].data = c;
        }
    }
    for (i = 0; i < ckpt_meta_count(f) && nm < 64; i++) {
        const char *k, *v;
        ckpt_meta_at(f, i, &k, &v);
        if (!strncmp(k, "attnkit.crc32", 13) || !strcmp(k, "attnkit.hcrc32")) continue; /* written anew */
        if (!strcmp(k, "format")) continue;
        if (!strcmp(k, "attnkit.config") && !strcmp(argv[3], "cuda")) {
            char *a = subst(v, "\"device\":\"cpu\"", "\"device\":\"cuda\""), *b = a ? subst(a, "\"precision\":\"auto\"", "\"precision\":\"bf16\"") : NULL;
            free(a);
            if (!b) { fprintf(stderr, "ckedit: no device / precision in the config\n"); return 1; }
            own[nm] = b;
            v = b;
        }
        keys[nm] = k;
        vals[nm++] = v;
    }
    if (ckpt_write(argv[2], E, n, keys, vals, nm, err, sizeof err) != CKPT_OK) { fprintf(stderr, "ckedit: %s\n", err); return 1; }
    for (i = 0; i < nm; i++) free(own[i]);
    for (i = 0; i < n; i++) free(bufs[i]);
    free(E);
    ckpt_close(f);
    return 0;
}
CKEDIT_EOF
    skip mcqa "cannot build the checkpoint editor: $(last "$W/cc.err")"
else
    TINY="--preset tiny --d-model 16 --layers 1 --heads 2 --context 16 --batch 2 --steps 6 --eval-every 3 --eval-chunks 2 --final-chunks 2 --cg-lengths 8,16 --threads 1 --data-dir $DATA --max-steps 2"
    "$WT" $TINY --out-dir "$W/run" > /dev/null 2> "$W/t1.err" \
        && "$WT" $TINY --ema 0 --swa 0 --out-dir "$W/run_raw" > /dev/null 2> "$W/t2.err"; rc=$?
    if [ $rc -ne 0 ]; then
        fail mcqa_setup "wt2_train rc=$rc: $(last "$W/t1.err") $(last "$W/t2.err")"
    else
        CK="$W/run/ckpt.safetensors"
        MQ="--threads 1 --data-dir $DATA"
        printf '%s\n' '{"task":"t","id":"1","context":"The cat sat on the","choices":[" mat"," dog"],"gold":0}' \
            '{"task":"t","id":"2","context":"One two three","choices":[" four"," banana"," five"],"gold":2}' > "$W/tasks.jsonl"
        printf '%s\n' '{"task":"u","id":"1","context":"It was a","choices":[" day"," night"],"gold":1}' > "$W/tasks2.jsonl"
        cp "$W/tasks.jsonl" "$W/tasks.orig"
        "$M" --ckpt "$CK" --tasks "$W/tasks.jsonl" --out "$W/log.jsonl" $MQ > /dev/null 2> "$W/m0.err"; rc=$?
        [ $rc -eq 0 ] && json_ok "$W/log.jsonl" && [ "$(wc -l < "$W/log.jsonl")" -eq 2 ] && no_tmp "$W"
        check mcqa_baseline $? "rc=$rc: $(last "$W/m0.err")"
        # issue 40: redirected stderr gets plain lines, never the terminal's \r frames
        ! grep -q "$(printf '\r')" "$W/m0.err" && grep -q "^mcqa: .*tasks.jsonl: 2 items" "$W/m0.err"
        check mcqa_no_cr_in_log $? "$(od -c "$W/m0.err" | grep -m1 '\\r')"
        # rule 1: --out equal to --tasks (same path; a symlink; the checkpoint) is refused, the task file intact
        "$M" --ckpt "$CK" --tasks "$W/tasks.jsonl" --out "$W/tasks.jsonl" $MQ > /dev/null 2> "$W/m1.err"; r1=$?
        ln -s "$W/tasks.jsonl" "$W/tasks.link"
        "$M" --ckpt "$CK" --tasks "$W/tasks.jsonl" --out "$W/tasks.link" $MQ > /dev/null 2>&1; r2=$?
        cp "$CK" "$W/ck2.safetensors"
        "$M" --ckpt "$W/ck2.safetensors" --tasks "$W/tasks.jsonl" --out "$W/ck2.safetensors" $MQ > /dev/null 2>&1; r3=$?
        [ $r1 -eq 2 ] && [ $r2 -eq 2 ] && [ $r3 -eq 2 ] && cmp -s "$W/tasks.jsonl" "$W/tasks.orig" \
            && cmp -s "$CK" "$W/ck2.safetensors" \
            && grep -q "refusing to overwrite an input" "$W/m1.err"
        check mcqa_out_is_input $? "rc=$r1/$r2/$r3: $(last "$W/m1.err")"
        cp "$W/tasks.orig" "$W/tasks.jsonl" # (for the cases below, whatever happened above)
        # rule 3: a directory, an empty file, a missing file as --tasks: an error naming it; --out untouched
        cp "$W/log.jsonl" "$W/log.orig"
        mkdir "$W/tdir"; : > "$W/tempty.jsonl"
        "$M" --ckpt "$CK" --tasks "$W/tdir" --out "$W/log.jsonl" $MQ > /dev/null 2> "$W/m2.err"; r1=$?
        "$M" --ckpt "$CK" --tasks "$W/tasks.jsonl" --tasks "$W/tempty.jsonl" --out "$W/log.jsonl" $MQ > /dev/null 2> "$W/m3.err"; r2=$?
        "$M" --ckpt "$CK" --tasks "$W/missing.jsonl" --out "$W/log.jsonl" $MQ > /dev/null 2> "$W/m4.err"; r3=$?
        "$M" --ckpt "$W/tdir" --tasks "$W/tasks.jsonl" --out "$W/log.jsonl" $MQ > /dev/null 2> "$W/m5.err"; r4=$?
        [ $r1 -eq 1 ] && grep -q "tdir' is a directory" "$W/m2.err" && [ $r2 -eq 1 ] && grep -q "tempty.jsonl holds no items" "$W/m3.err" \
            && [ $r3 -eq 1 ] && grep -q "missing.jsonl" "$W/m4.err" && [ $r4 -eq 1 ] && grep -q "directory" "$W/m5.err" \
            && cmp -s "$W/log.jsonl" "$W/log.orig" && no_tmp "$W"
        check mcqa_unreadable_or_empty_tasks $? "rc=$r1/$r2/$r3/$r4: $(last "$W/m2.err") / $(last "$W/m3.err")"
        if [ "$(id -u)" != 0 ]; then
            cp "$W/tasks.jsonl" "$W/tnoread.jsonl" && chmod 000 "$W/tnoread.jsonl"
            "$M" --ckpt "$CK" --tasks "$W/tnoread.jsonl" --out "$W/log.jsonl" $MQ > /dev/null 2> "$W/m5b.err"; rc=$?
            [ $rc -eq 1 ] && grep -q "tnoread.jsonl" "$W/m5b.err" && cmp -s "$W/log.jsonl" "$W/log.orig"
            check mcqa_unreadable_task_file $? "rc=$rc: $(last "$W/m5b.err")"
        else
            skip mcqa_unreadable_task_file "running as root (every file is readable)"
        fi
        # rule 4: ranges and junk, refused before anything is read or written
        bad=""
        for a in "--threads 100000" "--threads -1" "--threads x" "--max-len 1x" "--max-len -5" "--max-items abc" \
                 "--max-items -1" "--max-items 10k" "--device cuda"; do
            "$M" --ckpt "$CK" --tasks "$W/tasks.jsonl" --out "$W/range.jsonl" $MQ $a > /dev/null 2>&1; rc=$?
            [ $rc -eq 2 ] && [ ! -e "$W/range.jsonl" ] || bad="$bad [$a: rc=$rc]"
        done
        mkdir "$W/odir"
        "$M" --ckpt "$CK" --tasks "$W/tasks.jsonl" --out "$W/odir" $MQ > /dev/null 2>&1; rc=$?
        [ $rc -eq 2 ] || bad="$bad [--out a directory: rc=$rc]"
        [ -z "$bad" ]; check mcqa_flag_ranges $? "$bad"
        # rule 1: a run that fails (a malformed line, found after --out would have been opened) leaves --out as it was
        printf '%s\n' '{"task":"u","id":"1","context":"x","choices":[" a"],"gold":0}' > "$W/tbad.jsonl"
        "$M" --ckpt "$CK" --tasks "$W/tbad.jsonl" --tasks "$W/tasks.jsonl" --out "$W/log.jsonl" $MQ > /dev/null 2> "$W/m6.err"; rc=$?
        [ $rc -eq 1 ] && grep -q "tbad.jsonl:1" "$W/m6.err" && cmp -s "$W/log.jsonl" "$W/log.orig" && no_tmp "$W"
        check mcqa_failed_run_keeps_out $? "rc=$rc: $(last "$W/m6.err")"
        # rule 7: NaN weights: an error naming the cause, with and without --no-check; no log
        "$W/ckedit" "$CK" "$W/nan.safetensors" nan 2> "$W/e1.err"
        "$M" --ckpt "$W/nan.safetensors" --tasks "$W/tasks.jsonl" --out "$W/nan1.jsonl" $MQ > /dev/null 2> "$W/m7.err"; r1=$?
        "$M" --ckpt "$W/nan.safetensors" --tasks "$W/tasks.jsonl" --out "$W/nan2.jsonl" $MQ --no-check > /dev/null 2> "$W/m8.err"; r2=$?
        [ $r1 -ne 0 ] && [ $r2 -ne 0 ] && [ ! -e "$W/nan1.jsonl" ] && [ ! -e "$W/nan2.jsonl" ] \
            && grep -qi "nan\|non-finite\|not finite" "$W/m7.err" && grep -qi "nan\|non-finite\|not finite" "$W/m8.err" \
            && ! grep -q "does not run the model as wt2_train" "$W/m7.err" && no_tmp "$W"
        check mcqa_nan_weights $? "rc=$r1/$r2: $(last "$W/m7.err") / $(last "$W/m8.err") $(last "$W/e1.err")"
        # rule 8: a checkpoint whose config says --device cuda --precision bf16 scores on the CPU, the same
        "$W/ckedit" "$CK" "$W/cuda.safetensors" cuda 2> "$W/e2.err"
        "$M" --ckpt "$W/cuda.safetensors" --tasks "$W/tasks.jsonl" --out "$W/logc.jsonl" $MQ > /dev/null 2> "$W/m9.err"; rc=$?
        [ $rc -eq 0 ] && cmp -s "$W/logc.jsonl" "$W/log.jsonl"
        check mcqa_cuda_checkpoint_on_cpu $? "rc=$rc: $(last "$W/m9.err") $(last "$W/e2.err")"
        # rule 9: --weights ema|swa on a checkpoint without them is refused (no silent raw)
        "$M" --ckpt "$CK" --tasks "$W/tasks.jsonl" --out "$W/w1.jsonl" $MQ --weights swa > /dev/null 2> "$W/m10.err"; r1=$?
        "$M" --ckpt "$W/run_raw/ckpt.safetensors" --tasks "$W/tasks.jsonl" --out "$W/w2.jsonl" $MQ --weights ema > /dev/null 2> "$W/m11.err"; r2=$?
        "$M" --ckpt "$W/run_raw/ckpt.safetensors" --tasks "$W/tasks.jsonl" --out "$W/w3.jsonl" $MQ --weights raw > /dev/null 2> "$W/m12.err"; r3=$?
        [ $r1 -eq 1 ] && [ $r2 -eq 1 ] && [ $r3 -eq 0 ] && [ ! -e "$W/w1.jsonl" ] && [ ! -e "$W/w2.jsonl" ] \
            && grep -q "no swa weights" "$W/m10.err" && grep -q "no ema weights" "$W/m11.err"
        check mcqa_weights_no_fallback $? "rc=$r1/$r2/$r3: $(last "$W/m10.err") / $(last "$W/m11.err")"
        # the same item twice (one file given twice, or two files holding it) is refused
        "$M" --ckpt "$CK" --tasks "$W/tasks.jsonl" --tasks "$W/tasks.jsonl" --out "$W/d1.jsonl" $MQ > /dev/null 2>&1; r1=$?
        cp "$W/tasks.jsonl" "$W/tasks_copy.jsonl"
        "$M" --ckpt "$CK" --tasks "$W/tasks.jsonl" --tasks "$W/tasks_copy.jsonl" --out "$W/d2.jsonl" $MQ > /dev/null 2> "$W/m13.err"; r2=$?
        [ $r1 -eq 2 ] && [ $r2 -eq 1 ] && grep -q "given twice" "$W/m13.err" && [ ! -e "$W/d1.jsonl" ] && [ ! -e "$W/d2.jsonl" ]
        check mcqa_duplicate_items $? "rc=$r1/$r2: $(last "$W/m13.err")"
    fi
fi

echo "RESULT programs_eval_check passed=$P failed=$F skipped=$S"
[ $F -eq 0 ]
