#!/usr/bin/env python3
"""tools/era_exp.py - the tables of docs/RESULTS.md's "Seed 003's experiment" section from
tools/era_exp.sh's runs (issue 45).

    python3 tools/era_exp.py [RUN_DIR] [MCQA_COMPARE] [ERA_DIAG]
                         (default build/era_exp build/mcqa_compare build/era_diag)

Reads RUN_DIR/<arm>.s<seed>.json (wt2_train --json: val_ce, test_ce, params, tokens_per_s),
RUN_DIR/<arm>.s<seed>/metrics.jsonl (the training curve) and RUN_DIR/<arm>.s<seed>.mcqa.jsonl
(mcqa's per-item log), and RUN_DIR/<arm>.s<seed>.diag.txt (tools/era_diag on the era and
era-gac checkpoints; written when missing). Uses the seeds every arm has finished (training and scoring), and says
which. Runs build/mcqa_compare per arm against the baseline, once pooled over those seeds
(--pair per seed: stacked McNemar on the summed discordant pairs, item-cluster bootstrap CI,
paired t over the seeds; Holm within each family) and once per seed; its JSON files go to
RUN_DIR/cmp/. Prints markdown.
"""
import json
import math
import re
import os
import subprocess
import sys

ARMS = ["baseline", "era", "gac", "era-gac", "rpa", "sinusoid", "relative"]
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
# seed 003 Tables 1 and 2 (540 M parameters, 1.87 B tokens, one seed): ERA-GAC vs Transformer
PAPER = [("SciQ", 67.7, 54.7, 13.0, "3.26", "<1e-15"), ("ARC-Easy", 47.4, 36.5, 10.9, "2.61", "2e-7"),
         ("QASC", 17.9, 13.8, 4.1, "1.96", "0.0006"), ("ARC-Challenge", 20.1, 19.4, 0.7, "1.11", "0.87"),
         ("OpenBookQA", 15.2, 15.0, 0.2, "1.04", "1.00"), ("HellaSwag", 27.4, 26.0, 1.4, "1.46", "5e-7"),
         ("CSQA", 23.3, 20.0, 3.3, "1.54", "0.004"), ("BoolQ", 58.6, 61.2, -2.6, "0.68", "7e-5"),
         ("WinoGrande", 49.7, 49.3, 0.4, "1.04", "0.80")]


def mean_sd(v):
    n = len(v)
    m = sum(v) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1)) if n > 1 else float("nan")
    return m, sd


def fmt_p(p):
    if p is None:
        return "-"
    if p < 1e-15:
        return "<1e-15"
    if p < 1e-3:
        return "%.1e" % p
    return "%.3f" % p


def load_json(path):
    with open(path) as f:
        return json.loads(f.read().strip())


def acc_by_task(log):
    acc = {}
    with open(log) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            a = acc.setdefault(r["task"], [0, 0, 0])
            a[0] += r["correct_sum"]
            a[1] += r["correct_mean"]
            a[2] += 1
    return {t: (a[0] / a[2], a[1] / a[2], a[2]) for t, a in acc.items()}


def parse_diag(path):
    """tools/era_diag's output: per layer sigma, alpha, centre spread, and per T the marginal
    error, the std before the z-score, the near-diagonal excess and corr(bias, -|i-j|/T)."""
    layers = []
    with open(path) as f:
        for line in f:
            m = re.match(r"layer (\d+): centres in \[([-\d.e+]+), ([-\d.e+]+)\], mean ([-\d.e+]+), std ([-\d.e+]+).*"
                         r"sigma ([-\d.e+]+); alpha ([-\d.e+]+)", line)
            if m:
                layers.append({"lo": float(m.group(2)), "hi": float(m.group(3)), "std": float(m.group(5)),
                               "sigma": float(m.group(6)), "alpha": float(m.group(7)), "T": {}})
                continue
            m = re.match(r"\s+T\s+(\d+): marginal error ([-\d.e+]+), std before z-score ([-\d.e+]+), "
                         r"near-diagonal excess ([-+\d.e]+), corr\(bias, -\|i-j\|/T\) ([-+\d.e]+)", line)
            if m and layers:
                layers[-1]["T"][int(m.group(1))] = tuple(float(m.group(k)) for k in range(2, 6))
    return layers


def diag_table(d, seeds, diagbin):
    """The trained ERA priors (era and era-gac arms) at the training context, 128, and at 768;
    runs DIAG (make build/era_diag) on each checkpoint whose RUN_DIR/<arm>.s<seed>.diag.txt
    is missing."""
    rows = []
    for a in ("era", "era-gac"):
        ls = []
        for s in seeds:
            p = os.path.join(d, "%s.s%d.diag.txt" % (a, s))
            if not os.path.exists(p) and os.access(diagbin, os.X_OK):
                with open(p + ".tmp", "w") as f:
                    subprocess.run([diagbin, os.path.join(d, "%s.s%d" % (a, s), "ckpt.safetensors")], check=True,
                                   stdout=f)
                os.replace(p + ".tmp", p)
            if os.path.exists(p):
                ls += parse_diag(p)
        if ls:
            rows.append((a, ls))
    if not rows:
        return
    print("\nThe trained ERA prior (tools/era_diag on every seed's checkpoint; mean [min, max] over seeds and "
          "layers; at initialisation: sigma 0.1, alpha 1, centre std 0.289, near-diagonal excess +1.09, corr +0.91):\n")
    print("| arm | layers | sigma | alpha | centre std | marginal error (T 128) | near-diagonal excess T 128 / 768 | "
          "corr(bias, -\\|i-j\\|/T) T 128 / 768 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")

    def f(v, fmt):
        return (fmt + " [" + fmt + ", " + fmt + "]") % (sum(v) / len(v), min(v), max(v))
    for a, ls in rows:
        print("| %s | %d | %s | %s | %s | %s | %s / %s | %s / %s |" % (
            a, len(ls), f([x["sigma"] for x in ls], "%.3f"), f([x["alpha"] for x in ls], "%.2f"),
            f([x["std"] for x in ls], "%.3f"), f([x["T"][128][0] for x in ls], "%.1e"),
            f([x["T"][128][2] for x in ls], "%+.2f"), f([x["T"][768][2] for x in ls], "%+.2f"),
            f([x["T"][128][3] for x in ls], "%+.2f"), f([x["T"][768][3] for x in ls], "%+.2f")))


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "build/era_exp"
    cmpbin = sys.argv[2] if len(sys.argv) > 2 else "build/mcqa_compare"
    diagbin = sys.argv[3] if len(sys.argv) > 3 else "build/era_diag"
    fam = os.path.join(d, "tasks", "families.txt")
    seeds_of = {}
    for a in ARMS:
        s = set()
        for f in os.listdir(d):
            if f.startswith(a + ".s") and f.endswith(".mcqa.jsonl"):
                k = f[len(a) + 2:-len(".mcqa.jsonl")]
                if k.isdigit() and os.path.exists(os.path.join(d, "%s.s%s.json" % (a, k))):
                    s.add(int(k))
        seeds_of[a] = s
    arms = [a for a in ARMS if seeds_of[a]]
    if "baseline" not in arms:
        sys.exit("era_exp.py: no finished baseline run in %s" % d)
    seeds = sorted(set.intersection(*[seeds_of[a] for a in arms]))
    if not seeds:
        sys.exit("era_exp.py: no seed that every arm finished")
    print("Seeds used (finished by every arm: %s): %s\n" % (", ".join(arms), " ".join(map(str, seeds))))

    # ---- CE
    print("| arm | params | val CE (held-out tail) | val PPL | test CE (400 chunks) | tok/s (1 thread; wall clock of a "
          "shared machine, not a speed figure) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    ce = {}
    for a in arms:
        runs = [load_json(os.path.join(d, "%s.s%d.json" % (a, s))) for s in seeds]
        v, vsd = mean_sd([r["val_ce"] for r in runs])
        t, tsd = mean_sd([r["test_ce"] for r in runs])
        sp = sum(r["tokens_per_s"] for r in runs) / len(runs)
        ce[a] = ([r["val_ce"] for r in runs], [r["test_ce"] for r in runs])
        print("| %s | %d | %.4f ± %.4f | %.0f | %.4f ± %.4f | %.0f |" % (a, runs[0]["params"], v, vsd, math.exp(v), t, tsd, sp))
    print("\nPaired by seed against the baseline (same data order and initialisation stream), "
          "difference in val / test CE, mean and 95%% t interval over the %d seeds:\n" % len(seeds))
    print("| arm | Δ val CE | Δ test CE | seeds better (val) |")
    print("| --- | ---: | ---: | ---: |")
    n = len(seeds)
    for a in arms:
        if a == "baseline":
            continue
        row = []
        for k in (0, 1):
            diff = [x - y for x, y in zip(ce[a][k], ce["baseline"][k])]
            m, sd = mean_sd(diff)
            h = T975.get(n - 1, 2.0) * sd / math.sqrt(n) if n > 1 else float("nan")
            row.append("%+.4f [%+.4f, %+.4f]" % (m, m - h, m + h))
        better = sum(1 for x, y in zip(ce[a][0], ce["baseline"][0]) if x < y)
        print("| %s | %s | %s | %d of %d |" % (a, row[0], row[1], better, n))

    # ---- accuracy per task (sum rule), mean over seeds
    accs = {a: [acc_by_task(os.path.join(d, "%s.s%d.mcqa.jsonl" % (a, s))) for s in seeds] for a in arms}
    tasks = list(accs["baseline"][0].keys())
    print("\nAccuracy %% per task (sum rule; mean ± std over the seeds; items per task: %s):\n" %
          ", ".join("%s %d" % (t, accs["baseline"][0][t][2]) for t in tasks))
    print("| task | " + " | ".join(arms) + " |")
    print("| --- |" + " ---: |" * len(arms))
    for t in tasks + ["macro"]:
        cells = []
        for a in arms:
            if t == "macro":
                v = [sum(x[u][0] for u in tasks) / len(tasks) for x in accs[a]]
            else:
                v = [x[t][0] for x in accs[a]]
            m, sd = mean_sd(v)
            cells.append("%.1f ± %.1f" % (100 * m, 100 * sd))
        print("| %s | %s |" % (t, " | ".join(cells)))
    cells = []
    for a in arms:
        m, sd = mean_sd([sum(x[u][1] for u in tasks) / len(tasks) for x in accs[a]])
        cells.append("%.1f ± %.1f" % (100 * m, 100 * sd))
    print("| macro, length-normalised rule | %s |" % " | ".join(cells))

    # ---- paired statistics, pooled over seeds, each arm against the baseline
    os.makedirs(os.path.join(d, "cmp"), exist_ok=True)
    pooled = {}
    pooled_mean = {}
    perseed = {}
    for a in arms:
        if a == "baseline":
            continue
        cmd = [cmpbin, os.path.join(d, "%s.s%d.mcqa.jsonl" % (a, seeds[0])),
               os.path.join(d, "baseline.s%d.mcqa.jsonl" % seeds[0])]
        for s in seeds[1:]:
            cmd += ["--pair", os.path.join(d, "%s.s%d.mcqa.jsonl" % (a, s)), os.path.join(d, "baseline.s%d.mcqa.jsonl" % s)]
        out = os.path.join(d, "cmp", "%s.pooled.json" % a)
        cmd += ["--families", fam, "--names", "%s,baseline" % a, "--json", out]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        pooled[a] = {r["task"]: r for r in load_json(out)["rules"]["sum"]}
        pooled_mean[a] = {r["task"]: r for r in load_json(out)["rules"]["mean"]}
        perseed[a] = []
        for s in seeds:
            out = os.path.join(d, "cmp", "%s.s%d.json" % (a, s))
            subprocess.run([cmpbin, os.path.join(d, "%s.s%d.mcqa.jsonl" % (a, s)),
                            os.path.join(d, "baseline.s%d.mcqa.jsonl" % s), "--families", fam,
                            "--names", "%s,baseline" % a, "--json", out], check=True, stdout=subprocess.DEVNULL)
            perseed[a].append({r["task"]: r for r in load_json(out)["rules"]["sum"]})
    others = [a for a in arms if a != "baseline"]
    print("\nΔ accuracy against the baseline (pp, sum rule), pooled over the %d seeds; "
          "† = Holm-adjusted stacked McNemar p < 0.05, ‡ = Holm-adjusted paired-t p < 0.05 (within the family):\n" % n)
    print("| task | " + " | ".join(others) + " |")
    print("| --- |" + " ---: |" * len(others))
    for t in tasks:
        cells = []
        for a in others:
            r = pooled[a][t]
            mark = ("†" if r["p_holm"] < 0.05 else "") + ("‡" if r.get("p_t_holm") is not None and r["p_t_holm"] < 0.05 else "")
            cells.append("%+.1f%s" % (100 * r["delta"], mark))
        print("| %s | %s |" % (t, " | ".join(cells)))
    cells = []
    for a in others:
        cells.append("%+.1f" % (100 * sum(pooled[a][t]["delta"] for t in tasks) / len(tasks)))
    print("| macro | %s |" % " | ".join(cells))
    print("\nThe same with the length-normalised rule (mean log-probability per token of the choice):\n")
    print("| task | " + " | ".join(others) + " |")
    print("| --- |" + " ---: |" * len(others))
    for t in tasks:
        cells = []
        for a in others:
            r = pooled_mean[a][t]
            mark = ("†" if r["p_holm"] < 0.05 else "") + ("‡" if r.get("p_t_holm") is not None and r["p_t_holm"] < 0.05 else "")
            cells.append("%+.1f%s" % (100 * r["delta"], mark))
        print("| %s | %s |" % (t, " | ".join(cells)))
    print("| macro | %s |" % " | ".join("%+.1f" % (100 * sum(pooled_mean[a][t]["delta"] for t in tasks) / len(tasks))
                                        for a in others))
    print("\nPer seed (unpooled, seed 003's own test on each seed's pair of models): tasks with a Holm-adjusted "
          "McNemar p < 0.05, + / - by the sign of Δ:\n")
    print("| arm | " + " | ".join("seed %d" % s for s in seeds) + " |")
    print("| --- |" + " ---: |" * n)
    for a in others:
        cells = []
        for k in range(n):
            up = sum(1 for t in tasks if perseed[a][k][t]["p_holm"] < 0.05 and perseed[a][k][t]["delta"] > 0)
            dn = sum(1 for t in tasks if perseed[a][k][t]["p_holm"] < 0.05 and perseed[a][k][t]["delta"] < 0)
            cells.append("+%d / -%d" % (up, dn))
        print("| %s | %s |" % (a, " | ".join(cells)))

    for a in others:
        print("\n%s against the baseline, pooled over %d seeds (Table 2 layout; sum rule):\n" % (a, n))
        print("| task | Δ (pp) | OR | n01 / n10 | p_Holm (stacked) | 95% CI of Δ (items) | sd over seeds | p_t Holm |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for t in tasks:
            r = pooled[a][t]
            orr = "-" if r["odds_ratio"] is None else "%.2f" % r["odds_ratio"]
            print("| %s | %+.1f | %s | %d / %d | %s | [%+.1f, %+.1f] | %.1f | %s |" % (
                t, 100 * r["delta"], orr, r["n01"], r["n10"], fmt_p(r["p_holm"]), 100 * r["ci_lo"], 100 * r["ci_hi"],
                100 * r["delta_sd"] if r.get("delta_sd") is not None else float("nan"), fmt_p(r.get("p_t_holm"))))

    diag_table(d, seeds, diagbin)

    print("\nSeed 003's Tables 1-2 (ERA-GAC vs Transformer, 540 M parameters, 1.87 B tokens, one training seed):\n")
    print("| task | ERA-GAC | Transformer | Δ (pp) | OR | p_Holm |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for t, x, y, dd, o, p in PAPER:
        print("| %s | %.1f | %.1f | %+.1f | %s | %s |" % (t, x, y, dd, o, p))
    print("| macro | 35.3 | 32.9 | +2.4 | | |")


if __name__ == "__main__":
    main()
