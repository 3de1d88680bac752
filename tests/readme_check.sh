#!/bin/sh
# readme_check.sh - every command block of README.md runs as written (issue 40).
#
#   sh tests/readme_check.sh [DATADIR]      (default ${WT2_DIR:-../shared/data})
#
# Extraction is exact: every ```sh block of README.md must sit right under one of
#   <!-- readme-check: run [expect FILE...] -->   the block runs; each FILE must exist
#                                                 and be non-empty afterwards
#   <!-- readme-check: skip WHY -->               listed as skipped, with WHY
# and an unmarked ```sh block is a failure. The run blocks execute in README order, each
# command line (continuation lines joined, the trailing `# comment` dropped) in one `sh -c`,
# in a fresh copy of the tree: the tracked files and the built programs (build/<program>,
# build/obj; timestamps kept, so a README `make build/x` is a no-op when x is built) in a
# temporary directory whose ../shared/data is DATADIR. A command that exits non-zero fails
# its block and the check. A comment of the form `# prints TEXT` is an expected stdout.
#
# Smoke sizes: the README states the full commands; this check appends
#   README_SMOKE_WT2   to every `build/wt2_train` command and to `make run`'s RUN_ARGS,
#   README_SMOKE_NIAH  to `make niah`'s NIAH_ARGS and to `build/niah` runs,
#   README_SMOKE_MCQA  to `build/mcqa` commands,
# so the runs are seconds long (defaults below; set them to "" to run the README at full
# size). Later flags override earlier ones, so the README's own flags still parse and
# their combinations still validate.
#
# Each block prints "ok readme block N (line L)" / "FAIL ..." / "skip ..."; the last line is
# `RESULT readme_check passed=P failed=F skipped=S`; exit 1 when a block failed.
DATA=${1:-${WT2_DIR:-../shared/data}}
SMOKE_WT2=${README_SMOKE_WT2-"--d-model 32 --layers 1 --heads 2 --context 32 --batch 2 --steps 4 --max-steps 4 --eval-every 2 --eval-chunks 2 --final-chunks 2 --cg-lengths 16,32 --threads 2"}
SMOKE_NIAH=${README_SMOKE_NIAH-"--quick --threads 2"}
SMOKE_MCQA=${README_SMOKE_MCQA-"--max-items 12 --threads 2"}
ROOT=$(pwd)
P=0; F=0; S=0
if [ ! -f README.md ]; then echo "readme_check: run from the repository root"; exit 2; fi
case "$DATA" in /*) ;; *) DATA="$ROOT/$DATA" ;; esac
W=$(mktemp -d "${TMPDIR:-/tmp}/attnkit-readme.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT

# the fresh copy: tracked files, then the built programs and objects (mtimes kept)
mkdir -p "$W/main" "$W/shared"
ln -s "$DATA" "$W/shared/data"
if git ls-files > "$W/files" 2>/dev/null && [ -s "$W/files" ]; then
    tar -cf - -T "$W/files" | (cd "$W/main" && tar -xpf -) || { echo "readme_check: cannot copy the tree"; exit 1; }
else
    echo "readme_check: not a git checkout"; exit 2
fi
mkdir -p "$W/main/build"
for b in build/*; do
    [ -f "$b" ] && [ -x "$b" ] && cp -p "$b" "$W/main/build/"
done
[ -d build/obj ] && cp -pR build/obj "$W/main/build/"

# blocks: "<line> <mode> <args>" headers, then the block's lines, then "@@end"
awk '
    /^<!-- readme-check:/ { mark = $0; markline = NR; next }
    /^```sh[[:space:]]*$/ {
        if (mark == "" || markline != NR - 1) { print NR " unmarked"; inb = 1; mark = ""; next }
        m = mark; sub(/^<!-- readme-check:[[:space:]]*/, "", m); sub(/[[:space:]]*-->.*$/, "", m)
        print NR " " m; inb = 1; mark = ""; next
    }
    /^```/ { if (inb) { print "@@end"; inb = 0 }; next }
    { if (inb) print "  " $0 }
' README.md > "$W/blocks"

n=0
exec 3< "$W/blocks"
while IFS= read -r hdr <&3; do
    n=$((n + 1))
    line=${hdr%% *}
    mode=$(echo "$hdr" | cut -d' ' -f2)
    rest=$(echo "$hdr" | cut -d' ' -f3-)
    : > "$W/cmds"
    while IFS= read -r l <&3; do
        [ "$l" = "@@end" ] && break
        printf '%s\n' "${l#  }" >> "$W/cmds"
    done
    case "$mode" in
    unmarked)
        echo "FAIL readme block $n (line $line): a \`\`\`sh block without a readme-check mark"; F=$((F + 1)); continue ;;
    skip)
        echo "skip readme block $n (line $line): $rest"; S=$((S + 1)); continue ;;
    run) ;;
    *)
        echo "FAIL readme block $n (line $line): unknown mark '$mode'"; F=$((F + 1)); continue ;;
    esac
    # join continuation lines
    awk '{ if (sub(/\\$/, "")) { buf = buf $0; next } print buf $0; buf = "" } END { if (buf != "") print buf }' \
        "$W/cmds" > "$W/joined"
    ok=1; why=
    while IFS= read -r c; do
        # the expected stdout, if the comment says `# prints TEXT`
        want=$(printf '%s\n' "$c" | sed -n 's/.*[[:space:]]#[[:space:]]*prints[[:space:]]\{1,\}//p')
        c=$(printf '%s\n' "$c" | sed 's/[[:space:]]#.*$//; s/^#.*$//; s/[[:space:]]*$//')
        [ -z "$c" ] && continue
        case "$c" in
        "make run"*|"make -s run"*)
            if printf '%s' "$c" | grep -q 'RUN_ARGS="'; then
                c=$(printf '%s\n' "$c" | sed "s|RUN_ARGS=\"\\([^\"]*\\)\"|RUN_ARGS=\"\\1 $SMOKE_WT2\"|")
            else c="$c RUN_ARGS=\"$SMOKE_WT2\""; fi ;;
        "make niah"*|"make -s niah"*)
            if printf '%s' "$c" | grep -q 'NIAH_ARGS="'; then
                c=$(printf '%s\n' "$c" | sed "s|NIAH_ARGS=\"\\([^\"]*\\)\"|NIAH_ARGS=\"\\1 $SMOKE_NIAH\"|")
            else c="$c NIAH_ARGS=\"$SMOKE_NIAH\""; fi ;;
        build/wt2_train*) c="$c $SMOKE_WT2" ;;
        "build/niah --aggregate"*) ;;
        build/niah*) c="$c $SMOKE_NIAH" ;;
        build/mcqa\ *) c="$c $SMOKE_MCQA" ;;
        esac
        t1=$(date +%s)
        (cd "$W/main" && sh -c "$c") > "$W/out" 2> "$W/err"; rc=$?
        echo "  \$ $c  (exit $rc, $(( $(date +%s) - t1 )) s)"
        if [ $rc -ne 0 ]; then
            ok=0; why="exit $rc from: $c
$(tail -n 5 "$W/err")"; break
        fi
        if [ -n "$want" ] && [ "$(cat "$W/out")" != "$want" ]; then
            ok=0; why="'$c' printed '$(head -c 200 "$W/out")', README says '$want'"; break
        fi
    done < "$W/joined"
    if [ $ok -eq 1 ]; then
        case "$rest" in
        expect\ *)
            for fl in ${rest#expect }; do
                [ -s "$W/main/$fl" ] || { ok=0; why="promised output $fl is missing or empty"; break; }
            done ;;
        esac
    fi
    if [ $ok -eq 1 ]; then echo "ok readme block $n (line $line)"; P=$((P + 1))
    else echo "FAIL readme block $n (line $line): $why"; F=$((F + 1)); fi
done
exec 3<&-
echo "RESULT readme_check passed=$P failed=$F skipped=$S"
[ $F -eq 0 ]
