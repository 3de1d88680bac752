#!/bin/sh
# programs_check.sh - the example programs never report success they did not have.
#
#   sh tests/programs_check.sh [BINDIR [DATADIR]]     (defaults: build, ${WT2_DIR:-../shared/data})
#
# Runs build/wt2_train, build/bpe and build/wt2_prepare (from BINDIR) on tiny
# configurations and hostile inputs: an output directory that cannot be written, a
# diverging run, token ids outside the model's vocabulary, truncated or empty vocab.bpe,
# an empty raw split, a FIFO as checkpoint, a checkpoint without its CRC, stale temporary
# checkpoints, a resume after a lost checkpoint; and issue 37's rules (9a-9k): an
# output directory holding a run is refused without --resume/--overwrite, one run at a
# time per directory (the lock), SIGINT/TERM/HUP in training, periodic and final
# evaluation stop with a resumable checkpoint (130/143/129), directories as input files,
# range checks, a resume on other data, header tampering, a full disk (tmpfs, as root)
# for the checkpoint, the metrics and loss.png, prior_viz's flags. Each case prints "ok <name>" or
# "FAIL <name>: why"; the last line is `RESULT programs_check passed=P failed=F skipped=S`
# (the runner adds it up) and the exit status is 1 when a case failed. Needs python3 for
# the strict JSON checks (those cases are skipped without it). Takes ~25 s on 2 cores.
BIN=${1:-build}
DATA=${2:-${WT2_DIR:-../shared/data}}
W=$(mktemp -d "${TMPDIR:-/tmp}/attnkit-programs.XXXXXX") || exit 1
trap 'umount "$W/mnt" 2>/dev/null; rm -rf "$W"' EXIT
P=0; F=0; S=0
ok() { echo "ok $1"; P=$((P + 1)); }
fail() { echo "FAIL $1: $2"; F=$((F + 1)); }
skip() { echo "skip $1: $2"; S=$((S + 1)); }
have_py=0; command -v python3 >/dev/null 2>&1 && have_py=1
# strict JSON: NaN / Infinity (which Python's json would accept) are errors
json_ok() { # json_ok FILE: every line is one JSON object
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

TINY="--d-model 16 --layers 1 --heads 2 --context 16 --batch 2 --steps 6 --eval-every 3 --eval-chunks 2 --final-chunks 2 --cg-lengths 8,16 --threads 1 --data-dir $DATA"
WT=$BIN/wt2_train
if [ ! -x "$WT" ] || [ ! -f "$DATA/wt2.valid.gpt2.u16" ]; then
    skip wt2_train "no $WT or no data in $DATA"
else
    # 1. an output "directory" that is a file: refused before training, non-zero exit
    : > "$W/afile"
    "$WT" $TINY --max-steps 2 --out-dir "$W/afile" --json > "$W/1.out" 2> "$W/1.err"; rc=$?
    if [ $rc -ne 0 ] && grep -qi "not a directory" "$W/1.err" && ! grep -q "step 1/" "$W/1.err" && [ ! -s "$W/1.out" ]; then
        ok out_dir_is_a_file
    else fail out_dir_is_a_file "rc=$rc: $(tail -n 2 "$W/1.err")"; fi
    "$WT" $TINY --max-steps 2 --out-dir "$W/afile/sub" > /dev/null 2> "$W/1b.err"; rc=$?
    [ $rc -ne 0 ] && grep -q "output directory" "$W/1b.err" && ok out_dir_under_a_file \
        || fail out_dir_under_a_file "rc=$rc"
    # permission cases: root writes and reads anyway, so as root they run as nobody
    # (setpriv), when that user can run the binary and read the data; else they skip
    AS=""
    if [ "$(id -u)" = 0 ]; then
        AS="setpriv --reuid=65534 --regid=65534 --clear-groups"
        command -v setpriv > /dev/null 2>&1 && chmod 755 "$W" && $AS "$WT" --help > /dev/null 2>&1 \
            && $AS test -r "$DATA/wt2.test.gpt2.u16" || AS=none
    fi
    # 1c. read-only directory
    if [ "$AS" != none ]; then
        mkdir "$W/ro" && chmod 555 "$W/ro"
        $AS "$WT" $TINY --max-steps 2 --out-dir "$W/ro" > /dev/null 2> "$W/1c.err"; rc=$?
        [ $rc -ne 0 ] && grep -q "not writable" "$W/1c.err" && ! grep -q "step 1/" "$W/1c.err" && ok out_dir_read_only \
            || fail out_dir_read_only "rc=$rc: $(tail -n 1 "$W/1c.err")"
        chmod 755 "$W/ro"
    else
        skip out_dir_read_only "root without a usable setpriv"
    fi
    # 1d. the output directory disappears during training, then Ctrl-C: the checkpoint
    #     cannot be written, so no "resume with" and no 130
    mkdir "$W/gone"
    "$WT" $TINY --steps 1000000 --out-dir "$W/gone" > /dev/null 2> "$W/1d.err" &
    pid=$!
    k=0; while [ ! -s "$W/gone/metrics.jsonl" ] && [ $k -lt 200 ]; do sleep 0.05; k=$((k + 1)); done
    mv "$W/gone" "$W/gone.moved" && : > "$W/gone"
    sleep 0.3; kill -INT $pid; wait $pid; rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 130 ] && ! grep -q "resume with" "$W/1d.err" && grep -q "NO checkpoint" "$W/1d.err"; then
        ok interrupted_without_checkpoint
    else fail interrupted_without_checkpoint "rc=$rc: $(tail -n 2 "$W/1d.err")"; fi
    # 1e. ... and at the end of a normal run: the final save fails, the exit status says so
    mkdir "$W/gone2"
    "$WT" $TINY --steps 60 --max-steps 60 --json --out-dir "$W/gone2" > "$W/1e.out" 2> "$W/1e.err" &
    pid=$!
    k=0; while [ ! -s "$W/gone2/metrics.jsonl" ] && [ $k -lt 200 ]; do sleep 0.05; k=$((k + 1)); done
    mv "$W/gone2" "$W/gone2.moved" && : > "$W/gone2"
    wait $pid; rc=$?
    if [ $rc -ne 0 ] && grep -q "checkpoint was not written" "$W/1e.err"; then ok final_save_failed
    else fail final_save_failed "rc=$rc: $(tail -n 2 "$W/1e.err")"; fi

    # 1f. no space for the checkpoints (a file-size limit stands in for a full disk: the
    #     ~10 MB checkpoint cannot be written, the few-KB metrics can): every periodic save
    #     warns, the final one fails the run, and Ctrl-C does not promise a resume
    ( trap '' XFSZ; ulimit -f 2000 && exec "$WT" $TINY --max-steps 4 --ckpt-every 2 --out-dir "$W/full" ) \
        > /dev/null 2> "$W/1f.err"; rc=$?
    if [ $rc -ne 0 ] && [ "$(grep -c 'periodic checkpoint at step [24] FAILED' "$W/1f.err")" = 2 ] \
        && grep -q "2 periodic checkpoint(s) could not be written" "$W/1f.err" \
        && grep -q "checkpoint was not written" "$W/1f.err" && [ ! -e "$W/full/ckpt.safetensors" ] \
        && [ -z "$(ls "$W/full" | grep '\.tmp\.')" ]; then ok save_fails_no_space
    else fail save_fails_no_space "rc=$rc: $(tail -n 3 "$W/1f.err")"; fi
    ( trap '' XFSZ; ulimit -f 2000 && exec "$WT" $TINY --steps 1000000 --out-dir "$W/full2" ) > /dev/null 2> "$W/1g.err" &
    pid=$!
    k=0; while [ ! -s "$W/full2/metrics.jsonl" ] && [ $k -lt 200 ]; do sleep 0.05; k=$((k + 1)); done
    sleep 0.3; kill -INT $pid; wait $pid; rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 130 ] && ! grep -q "resume with" "$W/1g.err" && grep -q "NO checkpoint" "$W/1g.err"; then
        ok interrupted_no_space
    else fail interrupted_no_space "rc=$rc: $(tail -n 2 "$W/1g.err")"; fi
    # 1h. the first metrics line cannot be written (a 1-block file-size limit): refused
    #     before training, with the reason (a full disk: 9j below, as root)
    #     (stderr goes through a pipe: a file would fall under the same 512-byte limit)
    ( trap '' XFSZ; ulimit -f 1; timeout 60 "$WT" $TINY --max-steps 2 --out-dir "$W/mfull" > /dev/null; echo $? > "$W/1h.rc" ) \
        2>&1 | cat > "$W/1h.err"; rc=$(cat "$W/1h.rc")
    [ $rc -eq 1 ] && grep -q "metrics.jsonl: File too large" "$W/1h.err" && ! grep -q "step 1/" "$W/1h.err" \
        && ok metrics_no_space || fail metrics_no_space "rc=$rc: $(tail -n 2 "$W/1h.err")"

    # 2. divergence: non-zero exit, and the --json line and metrics.jsonl stay JSON
    "$WT" $TINY --lr 1e30 --steps 20 --max-steps 20 --out-dir "$W/div" --json > "$W/2.out" 2> "$W/2.err"; rc=$?
    if [ $rc -ne 0 ] && grep -q "diverged" "$W/2.err"; then ok diverged_exit
    else fail diverged_exit "rc=$rc: $(tail -n 2 "$W/2.err")"; fi
    if [ $have_py -eq 1 ]; then
        json_ok "$W/2.out" && grep -q '"val_ce":null' "$W/2.out" && ok diverged_json_stdout \
            || fail diverged_json_stdout "$(head -c 300 "$W/2.out") $(cat "$W/json.err" | tail -n 1)"
        json_ok "$W/div/metrics.jsonl" && ok diverged_json_metrics \
            || fail diverged_json_metrics "$(tail -n 1 "$W/json.err")"
    else
        skip diverged_json "no python3"
    fi

    # 3. ids outside the model's vocabulary: refused at load, naming the file and offset
    "$WT" $TINY --vocab 100 --max-steps 2 --out-dir "$W/voc" > /dev/null 2> "$W/3.err"; rc=$?
    if [ $rc -ne 0 ] && grep -q "wt2\.valid\.gpt2\.u16: token id [0-9]* at byte offset [0-9]*" "$W/3.err" \
        && ! grep -q "step 1/\|training step failed" "$W/3.err"; then ok vocab_checked_at_load
    else fail vocab_checked_at_load "rc=$rc: $(tail -n 2 "$W/3.err")"; fi
    #    a data directory whose test split holds one bad id in its last token
    mkdir "$W/baddata"
    ln -s "$(cd "$DATA" && pwd)/wt2.valid.gpt2.u16" "$W/baddata/wt2.valid.gpt2.u16"
    cp "$DATA/wt2.test.gpt2.u16" "$W/baddata/wt2.test.gpt2.u16" && chmod u+w "$W/baddata/wt2.test.gpt2.u16"
    printf '\377\377' >> "$W/baddata/wt2.test.gpt2.u16"
    sz=$(wc -c < "$W/baddata/wt2.test.gpt2.u16")
    "$WT" $TINY --data-dir "$W/baddata" --max-steps 2 --out-dir "$W/bad" > /dev/null 2> "$W/3b.err"; rc=$?
    if [ $rc -ne 0 ] && grep -q "wt2\.test\.gpt2\.u16: token id 65535 at byte offset $((sz - 2))" "$W/3b.err" \
        && ! grep -q "step 1/" "$W/3b.err"; then ok bad_id_in_test_split
    else fail bad_id_in_test_split "rc=$rc: $(tail -n 2 "$W/3b.err")"; fi

    #    an unreadable token file is "permission denied", not "MISSING"
    if [ "$AS" != none ]; then
        mkdir "$W/noread" && chmod 777 "$W/noread"
        ln -s "$(cd "$DATA" && pwd)/wt2.test.gpt2.u16" "$W/noread/wt2.test.gpt2.u16"
        cp "$DATA/wt2.valid.gpt2.u16" "$W/noread/" && chmod 000 "$W/noread/wt2.valid.gpt2.u16"
        $AS "$WT" $TINY --data-dir "$W/noread" --max-steps 1 --out-dir "$W/noread/out" > /dev/null 2> "$W/3c.err"; rc=$?
        [ $rc -ne 0 ] && grep -qi "permission denied" "$W/3c.err" && ! grep -q "MISSING" "$W/3c.err" \
            && ok unreadable_data_file || fail unreadable_data_file "rc=$rc: $(tail -n 2 "$W/3c.err")"
    else
        skip unreadable_data_file "root without a usable setpriv"
    fi

    # 5. batch * context beyond int: refused with the reason, not "out of memory"
    "$WT" $TINY --batch 134217728 --context 16 --out-dir "$W/big" > /dev/null 2> "$W/5.err"; rc=$?
    if [ $rc -ne 0 ] && grep -q "tokens per step" "$W/5.err" && ! grep -qi "out of memory" "$W/5.err"; then
        ok batch_context_overflow
    else fail batch_context_overflow "rc=$rc: $(tail -n 2 "$W/5.err")"; fi

    # 6. --resume on a FIFO: an error, not a hang
    if mkfifo "$W/fifo" 2>/dev/null; then
        timeout 20 "$WT" $TINY --resume "$W/fifo" --out-dir "$W/ff" > /dev/null 2> "$W/6.err"; rc=$?
        [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "not a regular file" "$W/6.err" && ok resume_fifo \
            || fail resume_fifo "rc=$rc: $(tail -n 1 "$W/6.err")"
    else skip resume_fifo "mkfifo failed"; fi

    # 7. a run, a lost checkpoint: resuming from an older one keeps each step once in
    #    metrics.jsonl; a stale temporary checkpoint is cleaned; --max-t is not silently raised
    R="$W/res"
    "$WT" $TINY --max-steps 2 --log-every 1 --out-dir "$R" > /dev/null 2> "$W/7a.err" \
        && cp "$R/ckpt.safetensors" "$W/step2.safetensors" \
        && "$WT" $TINY --max-steps 4 --log-every 1 --resume "$R/ckpt.safetensors" --out-dir "$R" > /dev/null 2> "$W/7b.err"
    rc=$?
    : > "$R/ckpt.safetensors.tmp.999999999"
    "$WT" $TINY --max-steps 5 --log-every 1 --resume "$W/step2.safetensors" --out-dir "$R" > /dev/null 2> "$W/7c.err"
    rc2=$?
    steps=$(grep '"type":"train"' "$R/metrics.jsonl" | sed 's/.*"step":\([0-9]*\).*/\1/' | tr '\n' ' ')
    if [ $rc -eq 0 ] && [ $rc2 -eq 0 ] && [ "$steps" = "1 2 3 4 5 " ]; then ok resume_metrics_once
    else fail resume_metrics_once "rc=$rc/$rc2 train steps: $steps"; fi
    [ ! -e "$R/ckpt.safetensors.tmp.999999999" ] && ok stale_tmp_removed || fail stale_tmp_removed "still there"
    "$WT" $TINY --max-t 8 --max-steps 1 --out-dir "$W/mt" > /dev/null 2> "$W/7d.err"
    grep -q "max-t 8" "$W/7d.err" && ok max_t_raise_said || fail max_t_raise_said "$(head -n 3 "$W/7d.err")"
    # the progress output in a log has no carriage-return frames
    if grep -q "$(printf '\r')" "$W/7a.err"; then fail progress_plain_in_logs "\\r in a log"
    else ok progress_plain_in_logs; fi

    # 8. a checkpoint whose CRC entry was removed: refused unless --allow-no-crc
    if [ $have_py -eq 1 ]; then
        python3 - "$W/step2.safetensors" "$W/nocrc.safetensors" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
del h["__metadata__"]["attnkit.crc32"]
h["__metadata__"].pop("attnkit.hcrc32", None)
s = json.dumps(h, separators=(",", ":")).encode()
s += b" " * (n - len(s))
open(sys.argv[2], "wb").write(b[:8] + s + b[8 + n:])
EOF
        "$WT" $TINY --max-steps 3 --resume "$W/nocrc.safetensors" --out-dir "$W/nc" > /dev/null 2> "$W/8.err"; rc=$?
        "$WT" $TINY --max-steps 3 --resume "$W/nocrc.safetensors" --allow-no-crc --out-dir "$W/nc" > /dev/null 2> "$W/8b.err"; rc2=$?
        [ $rc -ne 0 ] && grep -q "crc32" "$W/8.err" && [ $rc2 -eq 0 ] && ok checkpoint_without_crc \
            || fail checkpoint_without_crc "rc=$rc/$rc2: $(tail -n 1 "$W/8.err")"
    else skip checkpoint_without_crc "no python3"; fi
fi

# ---------------------------------------------------------------- issue 37: lose nothing
# wait until a file holds a pattern (at most ~20 s)
wait_for() { # wait_for PATTERN FILE
    k=0; while ! grep -q -- "$1" "$2" 2>/dev/null && [ $k -lt 1000 ]; do sleep 0.02; k=$((k + 1)); done
}
sig_code() { case $1 in INT) echo 130 ;; TERM) echo 143 ;; HUP) echo 129 ;; esac; }
if [ ! -x "$WT" ] || [ ! -f "$DATA/wt2.valid.gpt2.u16" ]; then
    skip issue37_wt2_train "no $WT or no data in $DATA"
else
    # 9a. an output directory that holds a run: refused (exit 2, naming it and both ways
    #     out), its files byte-identical; the same with only a checkpoint there;
    #     --overwrite replaces the run; --resume with --overwrite is a contradiction
    O="$W/ow"
    "$WT" $TINY --max-steps 2 --out-dir "$O" > /dev/null 2> "$W/9a0.err"
    sum0=$(cat "$O/metrics.jsonl" "$O/ckpt.safetensors" 2>/dev/null | cksum)
    "$WT" $TINY --max-steps 2 --out-dir "$O" > /dev/null 2> "$W/9a.err"; rc=$?
    sum1=$(cat "$O/metrics.jsonl" "$O/ckpt.safetensors" 2>/dev/null | cksum)
    if [ $rc -eq 2 ] && grep -q "'$O'" "$W/9a.err" && grep -q -- "--resume" "$W/9a.err" \
        && grep -q -- "--overwrite" "$W/9a.err" && [ "$sum0" = "$sum1" ]; then ok overwrite_refused
    else fail overwrite_refused "rc=$rc same=$([ "$sum0" = "$sum1" ] && echo y || echo n): $(tail -n 2 "$W/9a.err")"; fi
    mkdir "$W/ow2" && cp "$O/ckpt.safetensors" "$W/ow2/"
    "$WT" $TINY --max-steps 2 --out-dir "$W/ow2" > /dev/null 2> "$W/9a2.err"; rc=$?
    [ $rc -eq 2 ] && grep -q "ckpt.safetensors" "$W/9a2.err" && cmp -s "$O/ckpt.safetensors" "$W/ow2/ckpt.safetensors" \
        && ok overwrite_refused_checkpoint_only || fail overwrite_refused_checkpoint_only "rc=$rc: $(tail -n 1 "$W/9a2.err")"
    "$WT" $TINY --max-steps 3 --overwrite --out-dir "$O" > /dev/null 2> "$W/9a3.err"; rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -c '"type":"config"' "$O/metrics.jsonl")" = 1 ] \
        && [ "$(grep -c '"type":"final"' "$O/metrics.jsonl")" = 1 ] && grep -q '"type":"final","step":3' "$O/metrics.jsonl"; then
        ok overwrite_flag
    else fail overwrite_flag "rc=$rc: $(tail -n 1 "$W/9a3.err")"; fi
    "$WT" $TINY --max-steps 3 --overwrite --resume "$O/ckpt.safetensors" --out-dir "$O" > /dev/null 2> "$W/9a4.err"; rc=$?
    [ $rc -eq 2 ] && grep -q "choose one" "$W/9a4.err" && ok resume_overwrite_conflict \
        || fail resume_overwrite_conflict "rc=$rc: $(tail -n 1 "$W/9a4.err")"

    # 9b. two runs in one directory at once: the second (even with --overwrite) is refused
    #     by the lock, naming the holder; the first goes on, and stops with a checkpoint
    L="$W/lock"
    "$WT" $TINY --steps 1000000 --out-dir "$L" > /dev/null 2> "$W/9b1.err" &
    pid=$!
    wait_for '"type":"config"' "$L/metrics.jsonl"
    "$WT" $TINY --max-steps 2 --overwrite --out-dir "$L" > /dev/null 2> "$W/9b2.err"; rc=$?
    n1=$(grep -c '"type":"config"' "$L/metrics.jsonl")
    kill -TERM $pid; wait $pid; rcA=$?
    if [ $rc -ne 0 ] && grep -q "in use by another run (pid $pid" "$W/9b2.err" && [ "$n1" = 1 ] && [ $rcA -eq 143 ] \
        && grep -q "stopped by SIGTERM" "$W/9b1.err" && [ -s "$L/ckpt.safetensors" ]; then ok lock_concurrent
    else fail lock_concurrent "rc=$rc/$rcA configs=$n1: $(tail -n 1 "$W/9b2.err")"; fi

    # 9c. SIGINT, SIGTERM, SIGHUP during training: exit 130/143/129 with a checkpoint that
    #     --resume continues from (one more step, then the final evaluation)
    for sig in INT TERM HUP; do
        want=$(sig_code $sig); D="$W/sig_$sig"
        "$WT" $TINY --steps 1000000 --log-every 1 --out-dir "$D" > /dev/null 2> "$W/s_$sig.err" &
        pid=$!
        wait_for '"type":"train"' "$D/metrics.jsonl"
        kill -$sig $pid; wait $pid; rc=$?
        st=$(sed -n 's/.*stopped by SIG[A-Z]* during [a-z ]* at step \([0-9]*\);.*/\1/p' "$W/s_$sig.err")
        if [ $rc -eq $want ] && [ -n "$st" ] && grep -q "stopped by SIG$sig" "$W/s_$sig.err" && [ -s "$D/ckpt.safetensors" ]; then
            "$WT" $TINY --steps 1000000 --log-every 1 --max-steps $((st + 1)) --resume "$D/ckpt.safetensors" --out-dir "$D" \
                > /dev/null 2> "$W/s_$sig.r.err"; rc2=$?
            if [ $rc2 -eq 0 ] && grep -q "resumed from .* at step $st" "$W/s_$sig.r.err" \
                && grep -q "\"type\":\"final\",\"step\":$((st + 1))," "$D/metrics.jsonl"; then ok "signal_${sig}_training"
            else fail "signal_${sig}_training" "resume rc=$rc2: $(tail -n 1 "$W/s_$sig.r.err")"; fi
        else fail "signal_${sig}_training" "rc=$rc (want $want) step='$st': $(tail -n 1 "$W/s_$sig.err")"; fi
    done

    # 9c2. a run killed outright (SIGKILL: no handler) still has its periodic checkpoint,
    #      written by wall time (--ckpt-minutes; default 10, here 0.002 = 0.12 s)
    D="$W/kill9"
    "$WT" $TINY --steps 1000000 --ckpt-minutes 0.002 --out-dir "$D" > /dev/null 2> "$W/k9.err" &
    pid=$!
    k=0; while [ ! -s "$D/ckpt.safetensors" ] && [ $k -lt 1000 ]; do sleep 0.02; k=$((k + 1)); done
    sleep 0.1; kill -KILL $pid; wait $pid 2>/dev/null
    "$WT" $TINY --steps 1000000 --max-steps 1 --resume "$D/ckpt.safetensors" --out-dir "$D" > /dev/null 2> "$W/k9.r.err"; rc=$?
    grep -q "resumed from .* at step [1-9]" "$W/k9.r.err" && ok periodic_checkpoint_by_time \
        || fail periodic_checkpoint_by_time "rc=$rc: $(tail -n 1 "$W/k9.r.err")"

    # 9d. ... and during the final evaluation (once swallowed: the run went on and exited 0):
    #     stopped at once with the checkpoint; the resume evaluates again and finishes
    FC="--final-chunks 300"
    for sig in INT TERM HUP; do
        want=$(sig_code $sig); D="$W/fin_$sig"
        "$WT" $TINY $FC --out-dir "$D" > /dev/null 2> "$W/f_$sig.err" &
        pid=$!
        wait_for "final evaluation" "$W/f_$sig.err"
        kill -$sig $pid; wait $pid; rc=$?
        if [ $rc -eq $want ] && grep -q "stopped by SIG$sig during the final evaluation at step 6" "$W/f_$sig.err" \
            && [ -s "$D/ckpt.safetensors" ] && ! grep -q '"type":"final"' "$D/metrics.jsonl"; then
            "$WT" $TINY $FC --resume "$D/ckpt.safetensors" --out-dir "$D" > /dev/null 2> "$W/f_$sig.r.err"; rc2=$?
            if [ $rc2 -eq 0 ] && grep -q "resumed from .* at step 6" "$W/f_$sig.r.err" \
                && [ "$(grep -c '"type":"final","step":6,' "$D/metrics.jsonl")" = 1 ]; then ok "signal_${sig}_final_eval"
            else fail "signal_${sig}_final_eval" "resume rc=$rc2: $(tail -n 1 "$W/f_$sig.r.err")"; fi
        else fail "signal_${sig}_final_eval" "rc=$rc (want $want): $(tail -n 1 "$W/f_$sig.err")"; fi
    done

    # 9e. ... and during a periodic evaluation (where such a run spends most of its time):
    #     the evaluation stays pending in the checkpoint and runs first on resume
    D="$W/pe"
    PE="--steps 100000 --eval-every 2 --eval-chunks 300 --log-every 1"
    "$WT" $TINY $PE --out-dir "$D" > /dev/null 2> "$W/pe.err" &
    pid=$!
    wait_for '"type":"eval"' "$D/metrics.jsonl"
    sleep 0.2; kill -TERM $pid; wait $pid; rc=$?
    st=$(sed -n 's/.*during a periodic evaluation at step \([0-9]*\);.*/\1/p' "$W/pe.err")
    if [ $rc -eq 143 ] && [ -n "$st" ]; then
        "$WT" $TINY $PE --max-steps $((st + 1)) --resume "$D/ckpt.safetensors" --out-dir "$D" > /dev/null 2> "$W/pe.r.err"; rc2=$?
        [ $rc2 -eq 0 ] && grep -q "its periodic evaluation runs first" "$W/pe.r.err" \
            && sed -n '/"type":"resume"/,$p' "$D/metrics.jsonl" | grep -q "\"type\":\"eval\",\"step\":$st," \
            && ok signal_periodic_eval || fail signal_periodic_eval "resume rc=$rc2: $(tail -n 1 "$W/pe.r.err")"
    elif [ $rc -eq 143 ] && grep -q "stopped by SIGTERM during training" "$W/pe.err"; then
        skip signal_periodic_eval "the signal landed between evaluations this time"
    else fail signal_periodic_eval "rc=$rc: $(tail -n 1 "$W/pe.err")"; fi

    # 9f. a directory given as an input file is an error that says so
    "$WT" $TINY --max-steps 2 --resume "$W" --out-dir "$W/dirin" > /dev/null 2> "$W/9f.err"; rc=$?
    [ $rc -eq 1 ] && grep -q "is a directory" "$W/9f.err" && [ ! -e "$W/dirin" ] && ok resume_directory_input \
        || fail resume_directory_input "rc=$rc: $(tail -n 1 "$W/9f.err")"

    # 9g. numbers are range-checked before anything is read or written (exit 2, no output dir)
    for c in "threads 100000" "threads -1" "seed xyz" "seed -1" "seed 12abc" "steps 99999999999999" \
             "max-steps 5x" "ckpt-minutes abc" "ckpt-minutes -1" "ema 2" "guardian-ramp -3" \
             "attn polar --prior none --polar-distractor 70000" "epochs 2000000000" "optimizer sgd" \
             "muon-momentum 1" "muon-ns-steps 0"; do
        name=$(echo "$c" | tr ' ' '_' | tr -cd 'A-Za-z0-9_-')
        timeout 60 "$WT" $TINY --$c --out-dir "$W/rng_$name" > /dev/null 2> "$W/rng.err"; rc=$?
        flag=${c%% *}
        [ "$flag" = attn ] && flag=polar-distractor
        if [ $rc -eq 2 ] && grep -q -- "--$flag" "$W/rng.err" && [ ! -e "$W/rng_$name" ]; then ok "range_$name"
        else fail "range_$name" "rc=$rc: $(tail -n 1 "$W/rng.err")"; fi
    done
    timeout 60 "$WT" $TINY --attn polar --prior none --polar-distractor 70000 --out-dir "$W/rng_pd" > /dev/null 2> "$W/rng.err"
    grep -q 65536 "$W/rng.err" && ok range_polar_distractor_limit_named \
        || fail range_polar_distractor_limit_named "$(tail -n 1 "$W/rng.err")"

    # 9g2. --optimizer muon (issue 43 item 6) trains, records itself in the configuration,
    #      and its checkpoint resumes with it and is refused without it (exit 1, naming both)
    D="$W/muon"
    "$WT" $TINY --optimizer muon --max-steps 2 --out-dir "$D" > /dev/null 2> "$W/mu.err"; rc=$?
    if [ $rc -eq 0 ] && grep -q '"optimizer":"muon"' "$D/metrics.jsonl" && [ -s "$D/ckpt.safetensors" ]; then
        "$WT" $TINY --optimizer muon --max-steps 3 --resume "$D/ckpt.safetensors" --out-dir "$D" > /dev/null 2> "$W/mu.r.err"; rc2=$?
        "$WT" $TINY --max-steps 4 --resume "$D/ckpt.safetensors" --out-dir "$D" > /dev/null 2> "$W/mu.a.err"; rc3=$?
        if [ $rc2 -eq 0 ] && grep -q "resumed from .* at step 2" "$W/mu.r.err" && [ $rc3 -eq 1 ] \
            && grep -q -- "--optimizer muon, this run has --optimizer adamw" "$W/mu.a.err"; then ok optimizer_muon_resume
        else fail optimizer_muon_resume "rc=$rc2/$rc3: $(tail -n 1 "$W/mu.r.err") / $(tail -n 1 "$W/mu.a.err")"; fi
    else fail optimizer_muon_resume "rc=$rc: $(tail -n 1 "$W/mu.err")"; fi

    # 9h. a resume on other data (a shorter validation split: other token counts) is refused
    mkdir "$W/short"
    head -c 400000 "$DATA/wt2.valid.gpt2.u16" > "$W/short/wt2.valid.gpt2.u16"
    ln -s "$(cd "$DATA" && pwd)/wt2.test.gpt2.u16" "$W/short/wt2.test.gpt2.u16"
    "$WT" $TINY --max-steps 4 --data-dir "$W/short" --resume "$O/ckpt.safetensors" --out-dir "$W/oth" > /dev/null 2> "$W/9h.err"; rc=$?
    [ $rc -eq 1 ] && grep -q "trained on [0-9]* tokens" "$W/9h.err" && [ ! -e "$W/oth/metrics.jsonl" ] && ok resume_other_data \
        || fail resume_other_data "rc=$rc: $(tail -n 1 "$W/9h.err")"

    # 9i. an edited header (the step in the metadata, a renamed tensor) fails the header
    #     checksum; a format-1 file (no header checksum) needs --allow-no-crc
    if [ $have_py -eq 1 ]; then
        python3 - "$O/ckpt.safetensors" "$W" <<'PYEOF'
import json, re, struct, sys
src, out = sys.argv[1], sys.argv[2]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = b[8:8 + n]
def put(name, hh):
    assert len(hh) == n and hh != h
    open(out + "/" + name, "wb").write(b[:8] + hh + b[8 + n:])
m = re.search(rb'"attnkit.step":"[0-9]*([0-9])"', h)
d = str((int(m.group(1)) + 1) % 10).encode()
put("meta.safetensors", h[:m.start(1)] + d + h[m.end(1):])
put("rename.safetensors", h.replace(b'"optim.adam_m"', b'"optim.adam_x"', 1))
j = json.loads(h)
del j["__metadata__"]["attnkit.hcrc32"]
s = json.dumps(j, separators=(",", ":")).encode()
put("v1.safetensors", s + b" " * (n - len(s)))
PYEOF
        for c in meta rename; do
            "$WT" $TINY --max-steps 4 --resume "$W/$c.safetensors" --out-dir "$W/tam_$c" > /dev/null 2> "$W/9i.err"; rc=$?
            [ $rc -eq 1 ] && grep -q "header checksum mismatch" "$W/9i.err" && ok "header_tampered_$c" \
                || fail "header_tampered_$c" "rc=$rc: $(tail -n 1 "$W/9i.err")"
        done
        "$WT" $TINY --max-steps 4 --resume "$W/v1.safetensors" --out-dir "$W/tam_v1" > /dev/null 2> "$W/9i.err"; rc=$?
        "$WT" $TINY --max-steps 4 --resume "$W/v1.safetensors" --allow-no-crc --out-dir "$W/tam_v1" > /dev/null 2> "$W/9i2.err"; rc2=$?
        [ $rc -eq 1 ] && grep -q "hcrc32" "$W/9i.err" && [ $rc2 -eq 0 ] && ok checkpoint_format1_needs_flag \
            || fail checkpoint_format1_needs_flag "rc=$rc/$rc2: $(tail -n 1 "$W/9i.err")"
    else skip header_tampered "no python3"; fi

    # 9j. a full disk (a small tmpfs; root only, unmounted after): the checkpoint, a
    #     metrics line and loss.png that do not fit each fail the run with the reason, and
    #     nothing half-written is left
    M="$W/mnt"
    mkdir "$M" "$W/ref"
    if [ "$(id -u)" != 0 ]; then
        skip enospc "not root: no tmpfs (run as root for the full-disk cases)"
    elif ! mount -t tmpfs -o size=1m tmpfs "$M" 2>/dev/null; then
        skip enospc "mount -t tmpfs failed (no CAP_SYS_ADMIN?)"
    else
        "$WT" $TINY --max-steps 2 --out-dir "$M/r" > /dev/null 2> "$W/9j1.err"; rc=$?
        [ $rc -eq 1 ] && grep -q "No space left" "$W/9j1.err" && [ ! -e "$M/r/ckpt.safetensors" ] \
            && [ -z "$(ls "$M/r" | grep '\.tmp')" ] && ok enospc_checkpoint \
            || fail enospc_checkpoint "rc=$rc: $(tail -n 1 "$W/9j1.err")"
        umount "$M"
        mount -t tmpfs -o size=16k tmpfs "$M"
        timeout 120 "$WT" $TINY --steps 3000 --log-every 1 --out-dir "$M/r" > /dev/null 2> "$W/9j2.err"; rc=$?
        st=$(sed -n 's/.*metrics.jsonl failed at step \([0-9]*\): No space left.*/\1/p' "$W/9j2.err")
        [ $rc -eq 1 ] && [ -n "$st" ] && [ "$st" -lt 1000 ] && ok enospc_metrics \
            || fail enospc_metrics "rc=$rc step='$st': $(tail -n 1 "$W/9j2.err")"
        umount "$M"
        # loss.png: room for this run's checkpoint and metrics (sizes from the same run in
        # a directory whose path has the same length) and two pages, not for the PNG
        "$WT" $TINY --out-dir "$W/ref/r" > /dev/null 2> "$W/9j3.err"
        cb=$(wc -c < "$W/ref/r/ckpt.safetensors"); mb=$(wc -c < "$W/ref/r/metrics.jsonl"); pb=$(wc -c < "$W/ref/r/loss.png")
        pages=$(( (cb + 4095) / 4096 + (mb + 4095) / 4096 + 2 ))
        if [ "$pb" -le 12288 ]; then skip enospc_loss_png "loss.png is only $pb bytes here"
        else
            mount -t tmpfs -o size=$((pages * 4096)) tmpfs "$M"
            "$WT" $TINY --out-dir "$M/r" > /dev/null 2> "$W/9j4.err"; rc=$?
            [ $rc -eq 1 ] && grep -q "loss.png: No space left" "$W/9j4.err" && [ ! -e "$M/r/loss.png" ] \
                && [ -z "$(ls "$M/r" | grep '\.tmp')" ] && [ -s "$M/r/ckpt.safetensors" ] \
                && grep -q '"type":"final"' "$M/r/metrics.jsonl" && ok enospc_loss_png \
                || fail enospc_loss_png "rc=$rc: $(tail -n 1 "$W/9j4.err")"
            umount "$M"
        fi
    fi
fi

# 9k. prior_viz: numbers parsed whole and range-checked (exit 2, nothing written); a
#     directory as --mu is an error that says so; a failed write to stdout is an error
PV=$BIN/prior_viz
if [ ! -x "$PV" ]; then
    skip prior_viz "no $PV"
else
    for c in "R 4x" "R 0" "R 65" "K -1" "min-px abc" "seed -1" "posmix 2" "noise nan" "era-sigma 0"; do
        name=$(echo "$c" | tr ' ' '_' | tr -cd 'A-Za-z0-9_-')
        "$PV" --$c --T 8 --out "$W/pv_$name" > /dev/null 2> "$W/pv.err"; rc=$?
        [ $rc -eq 2 ] && [ ! -e "$W/pv_$name" ] && ok "prior_viz_range_$name" \
            || fail "prior_viz_range_$name" "rc=$rc: $(tail -n 1 "$W/pv.err")"
    done
    for c in 0 64,abc 8x; do
        "$PV" --T $c --out "$W/pv_T" > /dev/null 2> "$W/pv.err"; rc=$?
        [ $rc -eq 2 ] && [ ! -e "$W/pv_T" ] && ok "prior_viz_range_T_$c" || fail "prior_viz_range_T_$c" "rc=$rc"
    done
    "$PV" --mu "$W" --mu-R 4 --T 8 --out "$W/pv_mu" > /dev/null 2> "$W/pv.err"; rc=$?
    [ $rc -eq 1 ] && grep -q "is a directory" "$W/pv.err" && ok prior_viz_directory_input \
        || fail prior_viz_directory_input "rc=$rc: $(tail -n 1 "$W/pv.err")"
    "$PV" --T 8 --min-px 8 --out "$W/pv_ok" > /dev/null 2> "$W/pv.err"; rc=$?
    [ $rc -eq 0 ] && [ -s "$W/pv_ok/rpa_T8.png" ] && [ -s "$W/pv_ok/era_T8.png" ] && ok prior_viz_writes \
        || fail prior_viz_writes "rc=$rc: $(tail -n 1 "$W/pv.err")"
    if [ -w /dev/full ]; then
        "$PV" --T 8 --min-px 8 --out "$W/pv_ok" > /dev/full 2> "$W/pv.err"; rc=$?
        [ $rc -eq 1 ] && grep -q "stdout" "$W/pv.err" && ok prior_viz_stdout_full || fail prior_viz_stdout_full "rc=$rc"
    else skip prior_viz_stdout_full "no /dev/full"; fi
fi

# 4. the tokenizer files: empty, half-length and cut-mid-line vocab.bpe are refused
BP=$BIN/bpe
if [ ! -x "$BP" ] || [ ! -f "$DATA/gpt2/vocab.bpe" ]; then
    skip bpe "no $BP or no $DATA/gpt2"
else
    V="$W/vocab"; mkdir -p "$V/gpt2"
    ln -s "$(cd "$DATA" && pwd)/gpt2/encoder.json" "$V/gpt2/encoder.json"
    for c in empty half cut noversion; do
        case $c in
        empty) : > "$V/gpt2/vocab.bpe" ;;
        half) head -n 25000 "$DATA/gpt2/vocab.bpe" > "$V/gpt2/vocab.bpe" ;;
        cut) head -c 456300 "$DATA/gpt2/vocab.bpe" > "$V/gpt2/vocab.bpe" ;;
        noversion) tail -n +2 "$DATA/gpt2/vocab.bpe" > "$V/gpt2/vocab.bpe" ;;
        esac
        out=$(printf 'Hello world' | WT2_DIR="$V" "$BP" encode 2> "$W/4$c.err"); rc=$?
        [ $rc -ne 0 ] && [ -z "$out" ] && grep -q "vocab.bpe" "$W/4$c.err" && ok "vocab_bpe_$c" \
            || fail "vocab_bpe_$c" "rc=$rc out='$out' $(tail -n 1 "$W/4$c.err")"
    done
    out=$(printf 'Hello world' | WT2_DIR="$DATA" "$BP" encode 2>/dev/null)
    [ "$out" = "15496 995" ] && ok vocab_bpe_intact || fail vocab_bpe_intact "got '$out'"
    # the built-in relative data directory (../shared/data) is found from any current
    # directory when the binary sits in the repository's build/ (BIN/../../shared/data)
    if [ -f "$BIN/../../shared/data/gpt2/encoder.json" ]; then
        absbp=$(cd "$BIN" && pwd)/bpe
        out=$(cd "$W" && printf 'Hello world' | env -u WT2_DIR "$absbp" encode 2> "$W/4d.err")
        [ "$out" = "15496 995" ] && ok default_data_dir_from_elsewhere \
            || fail default_data_dir_from_elsewhere "got '$out' $(tail -n 1 "$W/4d.err")"
    else
        skip default_data_dir_from_elsewhere "no $BIN/../../shared/data"
    fi
fi

# 4b. wt2_prepare on an empty split: refused, no 0-byte token file
WP=$BIN/wt2_prepare
if [ ! -x "$WP" ] || [ ! -f "$DATA/gpt2/vocab.bpe" ]; then
    skip wt2_prepare "no $WP or no $DATA/gpt2"
else
    E="$W/emptysplit"; mkdir -p "$E"
    ln -s "$(cd "$DATA" && pwd)/gpt2" "$E/gpt2"
    : > "$E/wiki.valid.raw"
    printf ' \n\n \n' > "$E/wiki.test.raw"
    "$WP" --data "$E" --out "$E/out" > "$W/4b.out" 2> "$W/4b.err"; rc=$?
    if [ $rc -ne 0 ] && [ ! -e "$E/out/wt2.valid.gpt2.u16" ] && [ ! -e "$E/out/wt2.test.gpt2.u16" ] \
        && grep -q "no tokens" "$W/4b.err"; then ok prepare_empty_split
    else fail prepare_empty_split "rc=$rc: $(tail -n 2 "$W/4b.err")"; fi
    # 4c. --out equal to the data directory would replace the reference the output is
    #     compared with (and then compare it with itself): refused, exit 2, nothing written
    if [ -f "$DATA/wiki.valid.raw.xz" ] && [ -f "$DATA/wt2.valid.gpt2.u16" ]; then
        E="$W/prepself"; mkdir -p "$E"
        ln -s "$(cd "$DATA" && pwd)/gpt2" "$E/gpt2"
        ln -s "$(cd "$DATA" && pwd)/wiki.valid.raw.xz" "$E/wiki.valid.raw.xz"
        cp "$DATA/wt2.valid.gpt2.u16" "$E/" && chmod u+w "$E/wt2.valid.gpt2.u16"
        printf 'x' >> "$E/wt2.valid.gpt2.u16" # a reference that differs: the comparison must not be lost
        sum0=$(cksum < "$E/wt2.valid.gpt2.u16")
        timeout 120 "$WP" --data "$E" --out "$E" > /dev/null 2> "$W/4c.err"; rc=$?
        [ $rc -eq 2 ] && grep -q "would replace the reference" "$W/4c.err" && [ "$(cksum < "$E/wt2.valid.gpt2.u16")" = "$sum0" ] \
            && ok prepare_out_is_reference || fail prepare_out_is_reference "rc=$rc: $(tail -n 1 "$W/4c.err")"
    else skip prepare_out_is_reference "no raw valid split or reference in $DATA"; fi
fi

# 5. CEAS gating (issue 20): wt2_train on byte ids with --ceas-gating on trains and logs a
#    skipped FLOP share > 0 as strict JSON; gating without the CEAS controller is refused;
#    ceas_exp prints one JSON line whose gate arm skipped work
if [ ! -x "$WT" ] || { [ ! -f "$DATA/wiki.valid.raw.xz" ] && [ ! -f "$DATA/wiki.valid.raw" ]; }; then
    skip ceas_gating "no $WT or no raw valid split in $DATA"
else
    CG="--preset tiny-baseline --tokens bytes --d-model 16 --layers 1 --heads 2 --context 32 --batch 2 --steps 6 --eval-every 3 --eval-chunks 2 --final-chunks 2 --log-every 1 --threads 1 --data-dir $DATA --controller ceas --ceas-preset 9k"
    "$WT" $CG --ceas-gating on --out-dir "$W/ceas" > "$W/9.out" 2> "$W/9.err"; rc=$?
    if [ $rc -eq 0 ] && grep -q '"ceas_gating":1,"skipped_flop_share":0\.0*[1-9]' "$W/ceas/metrics.jsonl"; then
        if [ $have_py = 1 ]; then
            json_ok "$W/ceas/metrics.jsonl" && ok ceas_gating_trains || fail ceas_gating_trains "$(tail -n 1 "$W/json.err")"
        else ok ceas_gating_trains; fi
    else fail ceas_gating_trains "rc=$rc: $(tail -n 2 "$W/9.err")"; fi
    "$WT" $CG --controller none --ceas-gating on --out-dir "$W/ceas2" > /dev/null 2> "$W/9b.err"; rc=$?
    [ $rc -eq 2 ] && grep -q "needs --controller ceas" "$W/9b.err" && ok ceas_gating_needs_ceas \
        || fail ceas_gating_needs_ceas "rc=$rc: $(tail -n 1 "$W/9b.err")"
    if [ -x "$BIN/ceas_exp" ]; then
        "$BIN/ceas_exp" --scale 9k --arm gate --steps 20 --eval-every 10 --eval-chunks 2 --data-dir "$DATA" \
            > "$W/9c.out" 2> "$W/9c.err"; rc=$?
        if [ $rc -eq 0 ] && [ $(wc -l < "$W/9c.out") -eq 1 ] && grep -q '"skip_share":0\.0*[1-9]' "$W/9c.out"; then
            if [ $have_py = 1 ]; then
                json_ok "$W/9c.out" && ok ceas_exp_runs || fail ceas_exp_runs "$(tail -n 1 "$W/json.err")"
            else ok ceas_exp_runs; fi
        else fail ceas_exp_runs "rc=$rc: $(tail -n 2 "$W/9c.err")"; fi
        # issue 46 item 4: the maxent arm reports its selected shape, parameters and probe
        # FLOPs and gates; rpa-gate gates beside the RPA prior, rpa (its control) does not;
        # arm-specific flags elsewhere and a catalogue with nothing tile-feasible are refused
        CX="--scale 9k --steps 10 --eval-every 5 --eval-chunks 2 --threads 1 --data-dir $DATA"
        "$BIN/ceas_exp" $CX --arm maxent > "$W/9d.out" 2> "$W/9d.err"; rc1=$?
        "$BIN/ceas_exp" $CX --arm rpa-gate --warmin 4 > "$W/9e.out" 2> "$W/9e.err"; rc2=$?
        "$BIN/ceas_exp" $CX --arm rpa > "$W/9f.out" 2> "$W/9f.err"; rc3=$?
        if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc3 -eq 0 ] && grep -q '^maxent: \* d16 h' "$W/9d.err" \
            && [ $(cat "$W/9d.out" "$W/9e.out" "$W/9f.out" | wc -l) -eq 3 ]; then
            if [ $have_py = 1 ]; then
                python3 -c '
import json, sys
def bad(x): raise ValueError("non-JSON constant " + x)
m, g, r = (json.loads(open(f).read(), parse_constant=bad) for f in sys.argv[1:4])
x = m["maxent"]
assert m["arm"] == "maxent" and m["prior"] == "none", "maxent arm fields"
assert x["selected"] == "d%d h%d ff%d %s" % (m["d_model"], m["heads"], m["ff_mult"], m["pos"]), "selected shape"
assert x["params"] == m["params"] and x["cost"] == "flops" and x["feasible"] >= 1, "maxent record"
assert x["probe_flops"] > 0 and x["init_layers"] == 2 and x["sigma_q"] > 0, "probe FLOPs and (A)"
assert m["skip_share"] > 0 and m["flops_total"] < m["flops_dense_total"], "maxent gates"
assert g["arm"] == "rpa-gate" and g["prior"] == "rpa" and g["warmin"] == 4 and g["skip_share"] > 0, "rpa-gate"
assert r["arm"] == "rpa" and r["prior"] == "rpa" and r["warmin"] == 60 and r["skip_share"] == 0, "rpa"
assert r["params"] == g["params"], "one model in the rpa pair"
assert len(g["evals"]) == 3 and len(r["evals"]) == 3 and "maxent" not in r, "curves"
' "$W/9d.out" "$W/9e.out" "$W/9f.out" 2> "$W/9g.err" && ok ceas_exp_new_arms \
                    || fail ceas_exp_new_arms "$(tail -n 1 "$W/9g.err")"
            else ok ceas_exp_new_arms; fi
        else fail ceas_exp_new_arms "rc=$rc1/$rc2/$rc3: $(tail -n 1 "$W/9d.err") $(tail -n 1 "$W/9e.err")"; fi
        refused=0
        for a in "--arm fixed --maxent-cost flops" "--arm gate --warmin 5" "--arm maxent --maxent-cost fast" \
                 "--arm rpa --warmin -1" "--arm rpa-gat" "--arm gate --pos sideways"; do
            "$BIN/ceas_exp" $CX $a > "$W/9h.out" 2> /dev/null
            [ $? -eq 2 ] && [ ! -s "$W/9h.out" ] && refused=$((refused + 1))
        done
        "$BIN/ceas_exp" $CX --heads 4 --arm maxent > "$W/9h.out" 2> "$W/9h.err"; rc=$?
        [ $refused -eq 6 ] && [ $rc -eq 1 ] && [ ! -s "$W/9h.out" ] && grep -q "none of the .* is feasible" "$W/9h.err" \
            && ok ceas_exp_refusals || fail ceas_exp_refusals "$refused/6 refused; --heads 4 maxent rc=$rc"
    else skip ceas_exp_runs "no $BIN/ceas_exp"; fi
fi

# 5b. MaxEnt (issue 46 item 2): --maxent scores the catalogue (one selected line on stderr,
#    a strict-JSON "maxent" record), trains the selection; a resume without the flag takes
#    the recorded shape; a budget nothing meets exits 1 naming it
if [ ! -x "$WT" ] || [ ! -f "$DATA/wt2.valid.gpt2.u16" ]; then
    skip maxent "no $WT or no data in $DATA"
else
    MX="--preset tiny-plain --d-model 32 --layers 1 --heads 2 --context 16 --batch 2 --steps 6 --eval-every 0 --final-chunks 2 --threads 1 --data-dir $DATA"
    "$WT" $MX --maxent --maxent-cost flops --maxent-probe 2 --maxent-batch 1 --max-steps 2 --out-dir "$W/mx" \
        > /dev/null 2> "$W/mx.err"; rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -c '^maxent: \*' "$W/mx.err")" = 1 ] && grep -q '"type":"maxent"' "$W/mx/metrics.jsonl"; then
        if [ $have_py = 1 ]; then
            json_ok "$W/mx/metrics.jsonl" && ok maxent_selects || fail maxent_selects "$(tail -n 1 "$W/json.err")"
        else ok maxent_selects; fi
    else fail maxent_selects "rc=$rc: $(tail -n 2 "$W/mx.err")"; fi
    "$WT" $MX --max-steps 4 --out-dir "$W/mx" --resume "$W/mx/ckpt.safetensors" > /dev/null 2> "$W/mx2.err"; rc=$?
    [ $rc -eq 0 ] && grep -q "the checkpoint's --maxent selection" "$W/mx2.err" && ok maxent_resume_shape \
        || fail maxent_resume_shape "rc=$rc: $(tail -n 1 "$W/mx2.err")"
    "$WT" $MX --maxent --maxent-cost flops --maxent-probe 1 --maxent-batch 1 --maxent-budget 1 --out-dir "$W/mx3" \
        > /dev/null 2> "$W/mx3.err"; rc=$?
    [ $rc -eq 1 ] && grep -q "maxent-budget" "$W/mx3.err" && [ ! -e "$W/mx3" ] && ok maxent_infeasible \
        || fail maxent_infeasible "rc=$rc: $(tail -n 1 "$W/mx3.err")"
fi

# 6. niah (issue 19): the quick grid trains and evaluates all 6 arms at 2 lengths: 12
#    strict-JSON result lines, a 14-line table, both plots; --aggregate over two runs;
#    bad flags exit 2, an output directory under a file exits 1
NI=$BIN/niah
if [ ! -x "$NI" ] || [ ! -f "$DATA/wt2.valid.gpt2.u16" ] || [ ! -f "$DATA/wt2.test.gpt2.u16" ]; then
    skip niah "no $NI or no data in $DATA"
else
    "$NI" --quick --threads 1 --data-dir "$DATA" --out-dir "$W/niah" > "$W/10.out" 2> "$W/10.err"; rc=$?
    if [ $rc -eq 0 ] && [ "$(wc -l < "$W/niah/results.jsonl")" -eq 12 ] && [ "$(grep -c '^| ' "$W/10.out")" -eq 14 ] \
        && [ -s "$W/niah/niah_acc.png" ] && [ -s "$W/niah/niah_ce.png" ]; then
        if [ $have_py = 1 ]; then
            json_ok "$W/niah/results.jsonl" && ok niah_quick || fail niah_quick "$(tail -n 1 "$W/json.err")"
        else ok niah_quick; fi
    else fail niah_quick "rc=$rc: $(tail -n 2 "$W/10.err")"; fi
    "$NI" --quick --threads 1 --seed 2 --arms polar,polar+gdelta --data-dir "$DATA" --out-dir "$W/niah2" > /dev/null 2> "$W/10b.err"
    "$NI" --aggregate "$W/niah_agg" "$W/niah" "$W/niah2" > "$W/10c.out" 2> "$W/10c.err"; rc=$?
    if [ $rc -eq 0 ] && grep -q '^| polar+gdelta | 2 | 96 | 2 |' "$W/10c.out" && grep -q '^| softmax-rope | 1 | 48 | 1 |' "$W/10c.out" \
        && [ -s "$W/niah_agg/niah_acc.png" ]; then ok niah_aggregate
    else fail niah_aggregate "rc=$rc: $(tail -n 2 "$W/10c.err")"; fi
    "$NI" --quick --arms bogus --out-dir "$W/niah3" > /dev/null 2> "$W/10d.err"; rc=$?
    "$NI" --quick --lengths 1,0 --out-dir "$W/niah3" > /dev/null 2>> "$W/10d.err"; rc2=$?
    [ $rc -eq 2 ] && [ $rc2 -eq 2 ] && ok niah_bad_flags || fail niah_bad_flags "rc=$rc/$rc2: $(tail -n 1 "$W/10d.err")"
    : > "$W/nfile"
    "$NI" --quick --out-dir "$W/nfile/sub" --data-dir "$DATA" > /dev/null 2> "$W/10e.err"; rc=$?
    [ $rc -eq 1 ] && grep -q "output directory" "$W/10e.err" && ok niah_out_dir_under_a_file \
        || fail niah_out_dir_under_a_file "rc=$rc: $(tail -n 1 "$W/10e.err")"
fi

# 7. CLI habits (issue 40): --help on stdout with exit 0 for every program; wt2_prepare
#    takes --data-dir (--data kept); an unknown preset lists every preset; wt2_prepare
#    --check passes on the data and fails on a corrupted copy; a bpe copied out of the tree
#    finds its vocabulary by --vocab-dir and by $ATTNKIT_VOCAB_DIR; the final evaluation
#    prints progress lines in a log (not a terminal)
for prog in wt2_train bpe wt2_prepare mcqa mcqa_gen mcqa_compare niah generate; do
    if [ ! -x "$BIN/$prog" ]; then skip help_stdout_$prog "no $BIN/$prog"; continue; fi
    "$BIN/$prog" --help > "$W/h.out" 2> "$W/h.err"; rc=$?
    [ $rc -eq 0 ] && grep -qi "usage" "$W/h.out" && [ ! -s "$W/h.err" ] && ok help_stdout_$prog \
        || fail help_stdout_$prog "rc=$rc, stdout $(wc -c < "$W/h.out") bytes, stderr $(wc -c < "$W/h.err") bytes"
done
if [ -x "$WT" ]; then
    "$WT" --preset nosuch > /dev/null 2> "$W/p.err"; rc=$?
    miss=""
    for p in tiny tiny-baseline tiny-plain era-gac-tiny paper baseline era-gac; do
        grep -q "[ ,(]$p[,)]" "$W/p.err" || miss="$miss $p"
    done
    [ $rc -eq 2 ] && [ -z "$miss" ] && ok unknown_preset_lists_all || fail unknown_preset_lists_all "rc=$rc, missing:$miss"
    "$WT" --help > "$W/h.out" 2>&1
    grep -q "0\.699999988\|0\.00200000009" "$W/h.out" && fail help_floats_g "float printed with %.9g" || ok help_floats_g
fi
if [ -x "$WT" ] && [ -f "$DATA/wt2.valid.gpt2.u16" ] && [ -f "$DATA/wt2.test.gpt2.u16" ]; then
    "$WT" $TINY --final-chunks 3 --progress-seconds 0 --out-dir "$W/prog" > /dev/null 2> "$W/prog.err"; rc=$?
    if [ $rc -eq 0 ] && grep -q "^wt2_train: final evaluation (test): 3/3 chunks" "$W/prog.err" \
        && ! grep -q "$(printf '\r')" "$W/prog.err"; then ok final_eval_progress_lines
    else fail final_eval_progress_lines "rc=$rc: $(tail -n 2 "$W/prog.err")"; fi
else skip final_eval_progress_lines "no $WT or no data in $DATA"; fi
# make -s run RUN_ARGS=--json: stdout holds the program's JSON line alone (the recipe's
# echo goes to stderr); only where build/wt2_train is up to date (no rebuild inside a test)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -x "$ROOT/build/wt2_train" ] && command -v make > /dev/null 2>&1 && [ -f "$DATA/wt2.valid.gpt2.u16" ] \
    && make -s -q -C "$ROOT" build/wt2_train > /dev/null 2>&1; then
    absdata=$(cd "$DATA" && pwd)
    make -s -C "$ROOT" run WT2_DIR="$absdata" RUN_ARGS="$TINY --data-dir $absdata --out-dir $W/mkrun --json" \
        > "$W/mk.out" 2> "$W/mk.err"; rc=$?
    if [ $rc -eq 0 ] && [ "$(wc -l < "$W/mk.out")" -eq 1 ] && grep -q '^{.*}$' "$W/mk.out" \
        && grep -q "build/wt2_train --preset tiny" "$W/mk.err"; then ok make_run_json_stdout
    else fail make_run_json_stdout "rc=$rc: stdout $(head -c 200 "$W/mk.out" | tr '\n' '|')"; fi
else skip make_run_json_stdout "build/wt2_train not up to date or no make/data"; fi
if [ -x "$WP" ] && [ -f "$DATA/gpt2/vocab.bpe" ]; then
    "$WP" --check --data-dir "$DATA" > "$W/ck.out" 2> "$W/ck.err"; rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -c ' ok (' "$W/ck.out")" -ge 6 ] && grep -q "absent (optional)\|wiki.train.raw.*ok\|present as" "$W/ck.out"; then
        ok prepare_check_ok
    else fail prepare_check_ok "rc=$rc: $(grep -v ' ok (' "$W/ck.out" | head -n 3)"; fi
    C="$W/corrupt"; mkdir -p "$C/gpt2"
    for f in wiki.test.raw.xz wiki.valid.raw.xz wt2.valid.gpt2.u16 wt2.test.gpt2.u16 gpt2/encoder.json gpt2/vocab.bpe; do
        [ -f "$DATA/$f" ] && cp "$DATA/$f" "$C/$f" && chmod u+w "$C/$f"
    done
    # flip one byte of the test ids (same size: only the checksum can tell), drop vocab.bpe
    printf '\377' | dd of="$C/wt2.test.gpt2.u16" bs=1 seek=1000 conv=notrunc 2>/dev/null
    rm -f "$C/gpt2/vocab.bpe"
    "$WP" --check --data-dir "$C" > "$W/ck2.out" 2> "$W/ck2.err"; rc=$?
    [ $rc -eq 1 ] && grep -q "wt2.test.gpt2.u16 *wrong checksum" "$W/ck2.out" && grep -q "gpt2/vocab.bpe *missing" "$W/ck2.out" \
        && grep -q "wt2.valid.gpt2.u16 *ok" "$W/ck2.out" && ok prepare_check_corrupt \
        || fail prepare_check_corrupt "rc=$rc: $(head -n 8 "$W/ck2.out" | tr '\n' '|')"
    # --data-dir is the flag's name (--data, the old one, still works): the empty-split
    # directory of 4b is refused the same way through either name
    E="$W/emptysplit"
    if [ -d "$E" ]; then
        "$WP" --data-dir "$E" --out-dir "$E/out2" > /dev/null 2> "$W/dd.err"; rc=$?
        [ $rc -eq 1 ] && grep -q "no tokens" "$W/dd.err" && ok prepare_data_dir_flag || fail prepare_data_dir_flag "rc=$rc: $(tail -n 1 "$W/dd.err")"
    fi
    "$WP" --bogus > /dev/null 2> "$W/bo.err"; rc=$?
    [ $rc -eq 2 ] && grep -q "usage" "$W/bo.err" && ok prepare_bad_flag_exit2 || fail prepare_bad_flag_exit2 "rc=$rc"
else skip prepare_check "no $WP or no $DATA/gpt2"; fi
if [ -x "$BP" ] && [ -f "$DATA/gpt2/encoder.json" ]; then
    mkdir -p "$W/elsewhere" && cp "$BP" "$W/elsewhere/bpe"
    absdata=$(cd "$DATA" && pwd)
    out=$(cd "$W/elsewhere" && printf 'Hello world' | env -u WT2_DIR -u ATTNKIT_VOCAB_DIR ./bpe encode 2> "$W/bv0.err"); rc=$?
    # the built-in relative path may or may not resolve from the temp dir; when it does not,
    # the error names both ways to point at the vocabulary
    if [ -n "$out" ] || { grep -q -- "--vocab-dir" "$W/bv0.err" && grep -q "ATTNKIT_VOCAB_DIR" "$W/bv0.err"; }; then
        ok bpe_copied_error_names_flag_and_env
    else fail bpe_copied_error_names_flag_and_env "rc=$rc: $(tail -n 1 "$W/bv0.err")"; fi
    out=$(cd "$W/elsewhere" && printf 'Hello world' | env -u WT2_DIR -u ATTNKIT_VOCAB_DIR ./bpe encode --vocab-dir "$absdata/gpt2" 2> "$W/bv1.err")
    [ "$out" = "15496 995" ] && ok bpe_vocab_dir_flag || fail bpe_vocab_dir_flag "got '$out' $(tail -n 1 "$W/bv1.err")"
    out=$(cd "$W/elsewhere" && printf 'Hello world' | env -u WT2_DIR ATTNKIT_VOCAB_DIR="$absdata/gpt2" ./bpe encode 2> "$W/bv2.err")
    [ "$out" = "15496 995" ] && ok bpe_vocab_dir_env || fail bpe_vocab_dir_env "got '$out' $(tail -n 1 "$W/bv2.err")"
    out=$(cd "$W/elsewhere" && printf 'x' | env -u WT2_DIR ATTNKIT_VOCAB_DIR="$W/nowhere" ./bpe encode 2> "$W/bv3.err"); rc=$?
    [ $rc -eq 1 ] && grep -q "ATTNKIT_VOCAB_DIR" "$W/bv3.err" && grep -q "nowhere" "$W/bv3.err" && grep -q '"Data"' "$W/bv3.err" \
        && ok bpe_missing_vocab_message || fail bpe_missing_vocab_message "rc=$rc: $(head -n 2 "$W/bv3.err" | tr '\n' '|')"
else skip bpe_vocab_dir "no $BP or no $DATA/gpt2"; fi

echo "RESULT programs_check passed=$P failed=$F skipped=$S"
[ $F -eq 0 ]
