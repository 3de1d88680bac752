#!/bin/sh
# Drop-in checks (issue 22): the headers built the way other people's trainers build them.
#  1. tests/dropin_fastmath.c with gcc and clang, each -Ofast -march=native -fopenmp
#     and -O2 -ffast-math (portable paths): NaN/Inf inputs must still be refused.
#  2. tests/dropin_mixomp.c: a single-thread reference (no OpenMP), then the threaded
#     build linked the llm.c way under clang (`clang -fopenmp ... -lgomp`, two OpenMP
#     runtimes in one process) and a plain gcc -fopenmp build: results must match.
#     The mixed build must really be mixed (its probe says so), else the case is skipped.
#  3. examples/dropin/polar_dropin.c (a foreign training loop using polar.h on an
#     interleaved qkv buffer) built with -Ofast under gcc and clang (-fopenmp; clang with
#     -lgomp): it must run and its loss must fall (last 10 steps < 0.7 x first 10).
# Usage: sh tests/dropin_check.sh [compilers]   (from the repository root; binaries go to
# $DROPIN_OUT, default build/dropin). Prints ok/FAIL/SKIP lines and, last,
# `RESULT dropin_check passed=P failed=F skipped=S`.
# Each compiler's checks (1-3 above, in that order) run as one lane, the lanes side by
# side: the checks are serial -O2/-Ofast compiles of every header's implementation
# (11 of them, ~140 s on one core in CI), the runs a few seconds. A lane's lines are
# printed after all lanes end, compiler by compiler.
COMPILERS=${1:-"gcc clang"}
D=${DROPIN_OUT:-build/dropin}
mkdir -p "$D"
P=0; F=0; S=0
W="-std=c99 -Wall -Wextra -Werror -pedantic -I."

ok() { echo "ok $1"; P=$((P + 1)); }
fail() { echo "FAIL $1"; [ -n "$2" ] && [ -f "$2" ] && tail -n 15 "$2"; F=$((F + 1)); }
skip() { echo "SKIP $1"; S=$((S + 1)); }

# lane <cc>: checks 1-3 with one compiler; its counts go to $D/lane_<cc>.count
lane() {
    cc=$1
    if ! command -v "$cc" >/dev/null 2>&1; then
        fail "$cc not found"; echo "$P $F $S" > "$D/lane_$cc.count"; return
    fi
    i=0
    for opt in "-Ofast -march=native -fopenmp" "-O2 -ffast-math"; do
        i=$((i + 1))
        exe="$D/fastmath_${cc}_$i"
        if $cc $W $opt tests/dropin_fastmath.c -o "$exe" -lm > "$exe.log" 2>&1 &&
            OMP_NUM_THREADS=2 "$exe" >> "$exe.log" 2>&1 &&
            grep -q 'RESULT .* failed=0' "$exe.log"; then
            ok "$cc $opt: NaN/Inf refused"
        else
            fail "$cc $opt: NaN/Inf refused" "$exe.log"
        fi
    done

    # 2. threads vs one thread, whatever OpenMP the host links
    mixomp "$cc"

    # 3. the drop-in example: builds with -Ofast, trains, loss falls
    exe="$D/polar_dropin_$cc"
    lib=""; [ "$cc" = clang ] && lib="-lgomp"
    if ! $cc $W -Ofast -march=native -fopenmp examples/dropin/polar_dropin.c -o "$exe" -lm \
        $lib > "$exe.log" 2>&1; then
        fail "$cc -Ofast examples/dropin/polar_dropin.c: build" "$exe.log"
    elif OMP_NUM_THREADS=2 "$exe" 200 >> "$exe.log" 2>&1 &&
        awk '/^dropin first_loss/ { ok = ($5 < 0.7 * $3 && $5 > 0) } END { exit !ok }' "$exe.log"; then
        ok "$cc -Ofast polar_dropin: $(grep '^dropin' "$exe.log")"
    else
        fail "$cc -Ofast polar_dropin: loss did not fall" "$exe.log"
    fi
    echo "$P $F $S" > "$D/lane_$cc.count"
}

# mixomp <cc>: check 2 with one compiler
mixomp() {
    cc=$1
    ref="$D/mixomp_ref_$cc"
    if ! { $cc $W -O2 -march=native tests/dropin_mixomp.c -o "$ref" -lm > "$ref.log" 2>&1 &&
           "$ref" write "$ref.bin" >> "$ref.log" 2>&1; }; then
        fail "$cc dropin_mixomp reference" "$ref.log"; return
    fi
    case $cc in
    clang) variants="gomp omp" ;;
    *) variants="omp" ;;
    esac
    for var in $variants; do
        exe="$D/mixomp_${cc}_$var"
        lib=""; [ "$var" = gomp ] && lib="-lgomp"
        if ! $cc $W -O2 -march=native -fopenmp tests/dropin_mixomp.c -o "$exe" -lm $lib \
            > "$exe.log" 2>&1; then
            fail "$cc -fopenmp $lib: build" "$exe.log"; continue
        fi
        label="$cc -fopenmp $lib: threaded == single-thread reference"
        if [ "$var" = gomp ] && ! "$exe" probe >> "$exe.log" 2>&1; then
            skip "$label (the runtimes did not mix on this system)"; continue
        fi
        if OMP_NUM_THREADS=4 "$exe" check "$ref.bin" >> "$exe.log" 2>&1 &&
            grep -q 'RESULT .* failed=0' "$exe.log"; then
            ok "$label$( [ "$var" = gomp ] && echo ' (mixed runtimes)')"
        else
            fail "$label" "$exe.log"
        fi
    done
}

LANES=
for cc in $COMPILERS; do
    rm -f "$D/lane_$cc.out" "$D/lane_$cc.count"
    lane "$cc" > "$D/lane_$cc.out" 2>&1 &
    LANES="$LANES $!"
done
for pid in $LANES; do wait "$pid"; done
for cc in $COMPILERS; do
    cat "$D/lane_$cc.out"
    if read -r p f s 2>/dev/null < "$D/lane_$cc.count"; then
        P=$((P + p)); F=$((F + f)); S=$((S + s))
    else
        echo "FAIL $cc: the drop-in lane ended without its counts"; F=$((F + 1))
    fi
done

echo "RESULT dropin_check passed=$P failed=$F skipped=$S"
[ "$F" -eq 0 ]
