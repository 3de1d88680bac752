#!/usr/bin/env python3
"""tools/wt2_table.py - summarise the runs of tools/wt2_results.sh as the markdown tables
of docs/RESULTS.md: mean +- sample std over seeds of val/test CE per arm and weights."""
import json, math, os, sys

out = sys.argv[1] if len(sys.argv) > 1 else "build/results"
arms = ["recipe", "baseline", "polar"]
seeds = [1, 2, 3]

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

print("| arm | weights | val CE | test CE | test PPL (of the mean CE) | seeds |")
print("| --- | --- | --- | --- | --- | --- |")
for arm in arms:
    for suffix, label in (("", "final (auto)"), (".raw", "raw"), (".ema", "EMA")):
        runs = [load(os.path.join(out, "%s.s%d%s.json" % (arm, s, suffix))) for s in seeds]
        runs = [r for r in runs if r]
        if not runs:
            continue
        v = ms([r["val_ce"] for r in runs])
        t = ms([r["test_ce"] for r in runs])
        w = ",".join(sorted(set(r.get("weights", "?") for r in runs)))
        print("| %s | %s (%s) | %.3f +- %.3f | %.3f +- %.3f | %.0f | %d |"
              % (arm, label, w, v[0], v[1], t[0], t[1], math.exp(t[0]), len(runs)))
print()
print("| seed | " + " | ".join("%s %s" % (a, w) for a in arms for w in ("final", "raw")) + " |")
print("| --- " * (1 + 2 * len(arms)) + "|")
for s in seeds:
    cells = []
    for a in arms:
        for suffix in ("", ".raw"):
            r = load(os.path.join(out, "%s.s%d%s.json" % (a, s, suffix)))
            cells.append("%.4f / %.4f" % (r["val_ce"], r["test_ce"]) if r else "-")
    print("| %d | " % s + " | ".join(cells) + " |")
