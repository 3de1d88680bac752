#!/usr/bin/env python3
"""tools/wt2_prior_table.py - summarise tools/wt2_prior_compare.sh: per seed and weights,
val / test CE with the cached prior (honest) and the old per-batch prior, and how much
lower (optimistic) the old figure is; then the full-split final figures of each run."""
import json, math, os, sys

out = sys.argv[1] if len(sys.argv) > 1 else "build/prior_cmp"
seeds = [int(s) for s in sys.argv[2:]] or [1, 2, 3]

def load(path):
    try:
        with open(path) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None

def ms(xs):
    m = sum(xs) / len(xs)
    s = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, s

print("| seed | weights | val CE cached | val CE per-batch | old - new | test CE cached | test CE per-batch | old - new |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
diffs = {}
for s in seeds:
    for w in ("auto", "raw"):
        a = load(os.path.join(out, "recipe.s%d.cmp.%s.running.json" % (s, w)))
        b = load(os.path.join(out, "recipe.s%d.cmp.%s.batch.json" % (s, w)))
        if not a or not b:
            continue
        dv, dt = b["val_ce"] - a["val_ce"], b["test_ce"] - a["test_ce"]
        diffs.setdefault(w, []).append((dv, dt))
        print("| %d | %s (%s) | %.4f | %.4f | %+.4f | %.4f | %.4f | %+.4f |"
              % (s, w, a.get("weights", "?"), a["val_ce"], b["val_ce"], dv, a["test_ce"], b["test_ce"], dt))
for w, d in diffs.items():
    v, t = ms([x[0] for x in d]), ms([x[1] for x in d])
    print("| mean | %s | | | %+.4f +- %.4f | | | %+.4f +- %.4f |" % (w, v[0], v[1], t[0], t[1]))
print()
print("| seed | final weights | val CE (24,960 targets) | test CE (286,080 targets) | test PPL |")
print("| --- | --- | --- | --- | --- |")
runs = []
for s in seeds:
    r = load(os.path.join(out, "recipe.s%d.json" % s))
    if r:
        runs.append(r)
        print("| %d | %s | %.4f | %.4f | %.0f |" % (s, r.get("weights", "?"), r["val_ce"], r["test_ce"], math.exp(r["test_ce"])))
if runs:
    v, t = ms([r["val_ce"] for r in runs]), ms([r["test_ce"] for r in runs])
    print("| mean | | %.3f +- %.3f | %.3f +- %.3f | %.0f |" % (v[0], v[1], t[0], t[1], math.exp(t[0])))
