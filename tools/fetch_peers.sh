#!/usr/bin/env bash
# tools/fetch_peers.sh [PEER ...] - download the Python peers the GPU benchmarks compare
# with, as wheels into .whl/ (ignored by git through .git/info/exclude; never committed),
# so that a GPU session can carry them to the device machine (`carry: [".whl"]`, see
# docs/GPU.md) where no package registry is reachable. tools/gpu_check.sh installs
# whatever .whl/ holds into a temporary site directory before the benchmarks.
#
# Run it on the development machine (it needs PyPI), from anywhere in the repository:
#   tools/fetch_peers.sh            every peer
#   tools/fetch_peers.sh fla        one peer
# Peers (one function each, peer_<name>; add a new one the same way):
#   atma  kreasof-ai/atma's Triton polar kernel (kernel/polar_triton.py), for
#         bench/bench_polar_cuda.cu through bench/peer_polar.py. A source file, not a
#         wheel, and not from a registry: it is copied out of the bare git mirror that the
#         session's `fetch` tool leaves for github:kreasof-ai/atma (ATMA_MIRROR: that git
#         dir, default /work/.mirror/kreasof-ai+atma/repo; ATMA_REV: the revision, default
#         HEAD) into peers/ (ignored by git through .git/info/exclude; never committed),
#         with its commit in peers/polar_triton.commit. Carry peers/ as well as .whl/;
#         tools/gpu_check.sh puts peers/ on PYTHONPATH.
#   deps  not a peer: stb_ds.h, stb_image_write.h, lzma.h and liblzma.so.5 copied from this
#         machine into peers/deps/, for tests/parity_model.cu on a GPU image without
#         libstb-dev / liblzma-dev (tools/gpu_check.sh uses them when present).
#   data  not a peer: the tokenised WikiText-2 splits (../shared/data/wt2.*.gpt2.u16) into
#         peers/data/, for gpu_check's wt2_train run on the device (3 MB).
#   fla   fla-core (flash-linear-attention's kernels), for bench/bench_gdelta_cuda.cu
#         through bench/peer_fla.py (chunk_gated_delta_rule). A pure-Python wheel
#         (py3-none-any); its one unconditional need, einops, and the torch/triton of its
#         [cuda] extra are already on the GPU image (/work/.library/device/KINDS.md), so
#         nothing else is fetched.
# Wheels are fetched for the GPU image's Python (CPython 3.12, x86-64 manylinux), with
# --no-deps: every needed package is named here. One version of each package is kept
# (an older wheel of the same package is removed). The total must stay well under the
# device tool's 64 MiB working-tree limit; the script prints it and fails above 48 MiB.
set -eu
cd "$(dirname "$0")/.."
WHL=.whl
PY=${PYTHON:-python3}
LIMIT_MIB=48

exclude_whl() { # keep .whl/ out of git in this checkout
    local ex
    ex=$(git rev-parse --git-path info/exclude 2>/dev/null) || return 0
    mkdir -p "$(dirname "$ex")"
    grep -qxF '/.whl/' "$ex" 2>/dev/null || echo '/.whl/' >> "$ex"
}

# fetch NAME VERSION: one wheel for CPython 3.12 on x86-64 Linux (manylinux or pure Python)
fetch() {
    local name=$1 ver=$2 norm
    norm=$(echo "$name" | tr '-' '_')
    if ls "$WHL/${norm}-${ver}-"*.whl >/dev/null 2>&1; then
        echo "fetch_peers: $name $ver already in $WHL/"
        return 0
    fi
    rm -f "$WHL/${norm}-"*.whl
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux1_x86_64 -d "$WHL" "$name==$ver"
    ls "$WHL/${norm}-${ver}-"*.whl >/dev/null 2>&1 || { echo "fetch_peers: no wheel for $name $ver" >&2; return 1; }
    echo "fetch_peers: $name $ver -> $(ls "$WHL/${norm}-${ver}-"*.whl)"
}

# needs WHEEL: print its Requires-Dist lines (extras left out) for a look against KINDS.md
needs() {
    "$PY" - "$1" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")][0]
for l in z.read(meta).decode().splitlines():
    if l.startswith("Requires-Dist:") and "extra ==" not in l:
        print("  needs:", l.split(":", 1)[1].strip())
PY
}

peer_fla() { # bench/bench_gdelta_cuda.cu's peer (issue 14)
    fetch fla-core 0.6.0
    needs "$(ls "$WHL"/fla_core-0.6.0-*.whl)" # einops: on the GPU image
}

peer_atma() { # bench/bench_polar_cuda.cu's Triton peer (issue 13)
    local git=${ATMA_MIRROR:-/work/.mirror/kreasof-ai+atma/repo} rev=${ATMA_REV:-HEAD} c ex
    if ! c=$(git --git-dir="$git" rev-parse --verify -q "$rev^{commit}" 2>/dev/null); then
        echo "fetch_peers: no atma mirror at $git: call the session's fetch tool with" \
            "github:kreasof-ai/atma first (or set ATMA_MIRROR / ATMA_REV)" >&2
        return 1
    fi
    ex=$(git rev-parse --git-path info/exclude) && mkdir -p "$(dirname "$ex")" \
        && { grep -qxF '/peers/' "$ex" 2>/dev/null || echo '/peers/' >> "$ex"; }
    mkdir -p peers
    git --git-dir="$git" show "$c:kernel/polar_triton.py" > peers/polar_triton.py.tmp
    mv peers/polar_triton.py.tmp peers/polar_triton.py
    echo "$c" > peers/polar_triton.commit
    echo "fetch_peers: atma kernel/polar_triton.py @ ${c:0:12} -> peers/polar_triton.py" \
        "($(wc -c < peers/polar_triton.py) bytes)"
}

peer_deps() { # the C dependencies tests/parity_model.cu needs (stb_ds.h, liblzma), in case
    # the GPU image lacks them: copied from this machine into peers/deps/{include,lib};
    # tools/gpu_check.sh adds them to the nvcc command line when present
    local ex f so
    ex=$(git rev-parse --git-path info/exclude) && mkdir -p "$(dirname "$ex")" \
        && { grep -qxF '/peers/' "$ex" 2>/dev/null || echo '/peers/' >> "$ex"; }
    mkdir -p peers/deps/include/stb peers/deps/lib
    for f in /usr/include/stb/stb_ds.h /usr/include/stb/stb_image_write.h; do
        [ -f "$f" ] || { echo "fetch_peers: $f missing (install libstb-dev)" >&2; return 1; }
        cp "$f" peers/deps/include/stb/
    done
    [ -f /usr/include/lzma.h ] || { echo "fetch_peers: /usr/include/lzma.h missing (install liblzma-dev)" >&2; return 1; }
    cp /usr/include/lzma.h peers/deps/include/ && cp -r /usr/include/lzma peers/deps/include/
    so=$(readlink -f "$(ldconfig -p | awk '/liblzma.so.5 .*x86-64/ {print $NF; exit}')")
    [ -f "$so" ] || { echo "fetch_peers: liblzma.so.5 not found" >&2; return 1; }
    cp "$so" peers/deps/lib/liblzma.so.5 && cp "$so" peers/deps/lib/liblzma.so
    echo "fetch_peers: deps -> peers/deps ($(du -sk peers/deps | awk '{print $1}') KiB)"
}

peer_data() { # the tokenised WikiText-2 splits for gpu_check's wt2_train run (never committed)
    local src=${WT2_DIR:-../shared/data} ex
    ls "$src"/wt2.*.gpt2.u16 >/dev/null 2>&1 || { echo "fetch_peers: no wt2.*.gpt2.u16 in $src" >&2; return 1; }
    ex=$(git rev-parse --git-path info/exclude) && mkdir -p "$(dirname "$ex")" \
        && { grep -qxF '/peers/' "$ex" 2>/dev/null || echo '/peers/' >> "$ex"; }
    mkdir -p peers/data
    cp "$src"/wt2.*.gpt2.u16 peers/data/
    echo "fetch_peers: data -> peers/data ($(du -sk peers/data | awk '{print $1}') KiB)"
}

PEERS="fla atma"
[ $# -gt 0 ] && PEERS="$*"
mkdir -p "$WHL"
exclude_whl
for p in $PEERS; do
    if ! declare -F "peer_$p" >/dev/null; then echo "fetch_peers: unknown peer '$p' (known: fla atma deps data)" >&2; exit 2; fi
    "peer_$p"
done
total=$(du -sk "$WHL" | awk '{print $1}')
echo "fetch_peers: $WHL/ holds $(ls "$WHL" | wc -l) wheel(s), $((total / 1024)).$(((total % 1024) * 10 / 1024)) MiB"
ls -l "$WHL"
if [ "$total" -gt $((LIMIT_MIB * 1024)) ]; then
    echo "fetch_peers: over ${LIMIT_MIB} MiB: the device tool carries 64 MiB with the whole tree" >&2
    exit 1
fi
