#!/usr/bin/env python3
"""tools/ceas_exp.py - summarise tools/ceas_exp.sh's runs (one JSON line per run from
build/ceas_exp) into the markdown tables of docs/RESULTS.md's CEAS section.

    python3 tools/ceas_exp.py [RUN_DIR]        (default build/ceas_exp_runs2)

Arms: fixed, beta, gate (issue 20), maxent, rpa, rpa-gate (issue 46 item 4); a directory
of the older three-arm runs (build/ceas_exp_runs) gives the older tables.

Per scale:
  target      the mean over the fixed-beta seeds of their validation CE at 70% of the budget;
  early       the same at 10% of the budget (for the warm-up speed-up s);
  steps/FLOPs/wall to a target: the first evaluation at or below it, linearly interpolated
              with the evaluation before it (None: never reached);
  s           steps of fixed beta to the early target / steps of the arm (per seed, paired);
  chi warm / steady: the mean share of the attention backward not computed (pruned rows +
              frozen heads) over the first third of the budget / the rest;
  savings     1 - arm / control, paired by seed (same data order and initialisation), mean and
              a 95% t interval over the seeds (t_0.975 with n-1 degrees of freedom), for:
              every arm against fixed at fixed's target; maxent against gate at the same
              target; rpa-gate against rpa at rpa's own target (rpa's mean CE at 70% of
              the budget: the prior changes the curve, so the pair gets its own target).
              maxent's FLOPs are given without and with its pre-selection's probe FLOPs
              ("maxent.probe_flops", added to every maxent FLOP figure in the "+ probes"
              column; its control's column repeats the plain figure).
"""
import json
import math
import os
import sys

T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def load(d):
    runs = []
    for f in sorted(os.listdir(d)):
        if f.endswith(".json"):
            with open(os.path.join(d, f)) as fh:
                line = fh.read().strip()
            if line:
                runs.append(json.loads(line))
    return runs


def ce_at(run, step):
    for e in run["evals"]:
        if e[0] == step:
            return e[1]
    raise KeyError("no evaluation at step %d in %s %s seed %d" % (step, run["scale"], run["arm"], run["seed"]))


def to_target(run, target, col):
    """col 0: steps, 2: FLOPs, 3: wall seconds, interpolated at the first crossing"""
    ev = run["evals"]
    for i, e in enumerate(ev):
        if e[1] <= target:
            if i == 0:
                return e[col]
            p = ev[i - 1]
            f = (p[1] - target) / (p[1] - e[1]) if p[1] != e[1] else 1.0
            return p[col] + f * (e[col] - p[col])
    return None


def mean_ci(xs):
    xs = [x for x in xs if x is not None]
    n = len(xs)
    if n == 0:
        return None, None, 0
    m = sum(xs) / n
    if n < 2:
        return m, None, n
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    return m, T975.get(n - 1, 2.0) * sd / math.sqrt(n), n


def fmt(m, ci, pct=False, digits=3):
    if m is None:
        return "n/a"
    if pct:
        s = "%+.1f%%" % (100 * m)
        return s + (" ± %.1f" % (100 * ci) if ci is not None else "")
    s = ("%." + str(digits) + "f") % m
    return s + ((" ± %." + str(digits) + "f") % ci if ci is not None else "")


def chi_phase(run, lo, hi):
    v = [e[4] for e in run["evals"] if lo < e[0] <= hi]
    return sum(v) / len(v) if v else None


NAMES = {"fixed": "fixed β = 1/√d", "beta": "CEAS β", "gate": "CEAS β + gating",
         "maxent": "MaxEnt + CEAS β + gating", "rpa": "RPA prior, fixed β", "rpa-gate": "RPA prior + CEAS β + gating"}
ARMS = ["fixed", "beta", "gate", "maxent", "rpa", "rpa-gate"]


def probe(run):
    return run.get("maxent", {}).get("probe_flops", 0.0)


def arm_rows(rs, arms, tgt, early, ctrl, S, title):
    """the per-arm table at one target; the warm-up speed-up s against ctrl's runs"""
    print(title)
    print()
    print("| arm | runs | steps to target | GFLOP to target | wall s to target | final val CE | "
          "warm-up speed-up s | χ warm | χ steady | skipped / overhead FLOP share | β mean at end (fixed β: 1/√d) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    per = {}
    for a in arms:
        ra = sorted([r for r in rs if r["arm"] == a], key=lambda r: r["seed"])
        if not ra:
            continue
        st = [to_target(r, tgt, 0) for r in ra]
        fl = [to_target(r, tgt, 2) for r in ra]
        wl = [to_target(r, tgt, 3) for r in ra]
        fin = [r["evals"][-1][1] for r in ra]
        sp = []
        for r in ra:
            f = ctrl.get(r["seed"])
            a1, a0 = to_target(r, early, 0), to_target(f, early, 0) if f else None
            sp.append(a0 / a1 if a0 and a1 else None)
        cw = [chi_phase(r, 0, S / 3.0) for r in ra]
        cs = [chi_phase(r, S / 3.0, S) for r in ra]
        per[a] = {r["seed"]: (s_, f_, w_, probe(r)) for r, s_, f_, w_ in zip(ra, st, fl, wl)}
        fl_g = [x / 1e9 if x is not None else None for x in fl]
        reached = sum(1 for x in st if x is not None)
        fixed_beta = a in ("fixed", "rpa")
        print("| %s | %d (%d reached) | %s | %s | %s | %s | %s | %s | %s | %.3f / %.3f | %.3g |" % (
            NAMES.get(a, a), len(ra), reached, fmt(*mean_ci(st)[:2], digits=0), fmt(*mean_ci(fl_g)[:2], digits=2),
            fmt(*mean_ci(wl)[:2], digits=1), fmt(*mean_ci(fin)[:2], digits=4), fmt(*mean_ci(sp)[:2], digits=2),
            fmt(*mean_ci(cw)[:2], digits=3), fmt(*mean_ci(cs)[:2], digits=3),
            sum(r["skip_share"] for r in ra) / len(ra), sum(r["overhead_share"] for r in ra) / len(ra),
            sum(r["beta_init"] if fixed_beta else r["beta_mean"] for r in ra) / len(ra)))
    print()
    return per


def savings(per, pairs):
    print("| arm | against | steps to target | executed FLOPs to target | FLOPs + the pre-selection's probes | "
          "wall time to target |")
    print("|---|---|---|---|---|---|")
    for a, c in pairs:
        if a not in per or c not in per:
            continue
        sv = [[], [], [], []]
        for seed, v in sorted(per[a].items()):
            f = per[c].get(seed)
            ok = f is not None
            for k, (x, y) in enumerate([(v[0], f[0] if ok else None), (v[1], f[1] if ok else None),
                                        (v[1] + v[3] if v[1] is not None else None,
                                         f[1] + f[3] if ok and f[1] is not None else None),
                                        (v[2], f[2] if ok else None)]):
                sv[k].append(1 - x / y if y and x is not None else None)
        has_probe = any(v[3] for v in per[a].values()) or any(v[3] for v in per[c].values())
        print("| %s | %s | %s | %s | %s | %s |" % (
            NAMES.get(a, a), NAMES.get(c, c), fmt(*mean_ci(sv[0])[:2], pct=True), fmt(*mean_ci(sv[1])[:2], pct=True),
            fmt(*mean_ci(sv[2])[:2], pct=True) if has_probe else "(no probes)", fmt(*mean_ci(sv[3])[:2], pct=True)))
    print()


def increment(per, a, b, c):
    """(a's saving against c) - (b's saving against c) per seed, in percentage points: the
    seed's "+N pp" reading (a's extra saving over b's, both against c)"""
    if a not in per or b not in per or c not in per:
        return
    sv = [[], [], []]
    for seed, v in sorted(per[a].items()):
        w, f = per[b].get(seed), per[c].get(seed)
        for k, (x, y, z) in enumerate([(v[0], w and w[0], f and f[0]), (v[1], w and w[1], f and f[1]),
                                       (v[1] + v[3] if v[1] is not None else None, w and w[1], f and f[1])]):
            sv[k].append((y - x) / z if x is not None and y is not None and z else None)
    def pp(xs):
        m, ci, _ = mean_ci(xs)
        return "n/a" if m is None else "%+.1f pp" % (100 * m) + (" ± %.1f" % (100 * ci) if ci is not None else "")
    print("%s's saving minus %s's, both against %s, paired by seed: steps %s, executed FLOPs %s, "
          "FLOPs with the probes %s.\n" % (NAMES[a], NAMES[b], NAMES[c], pp(sv[0]), pp(sv[1]), pp(sv[2])))


def per_seed(per, arms):
    print("Per seed (steps to target; None: not reached): " + "; ".join(
        "%s %s" % (a, ", ".join("s%d %s" % (s, "None" if v[0] is None else "%.0f" % v[0])
                               for s, v in sorted(per[a].items()))) for a in arms if a in per))
    print()


def ablations(runs, base, labels):
    """runs at other shapes of a base scale (ceas_exp --heads / --pos: scale "9k-h1-rope", ...),
    each arm against the base scale's fixed β at the base's target, paired by seed"""
    fixed = {r["seed"]: r for r in runs if r["scale"] == base and r["arm"] == "fixed"}
    if not fixed or not labels:
        return
    S = fixed[min(fixed)]["steps"]
    tgt = sum(ce_at(r, int(round(0.7 * S))) for r in fixed.values()) / len(fixed)
    print("### Ablations at scale %s: other shapes, against %s's fixed β (learned positions) at its target %.4f\n"
          % (base, base, tgt))
    print("| shape | arm | parameters | runs (reached) | steps to target | saving in steps | saving in executed FLOPs | "
          "final val CE | β mean at end |")
    print("|---|---|---|---|---|---|---|---|---|")
    for lab in labels:
        for a in ARMS:
            ra = sorted([r for r in runs if r["scale"] == lab and r["arm"] == a], key=lambda r: r["seed"])
            if not ra:
                continue
            st = [to_target(r, tgt, 0) for r in ra]
            fl = [to_target(r, tgt, 2) for r in ra]
            s0, s1 = [], []
            for r, x, y in zip(ra, st, fl):
                f = fixed.get(r["seed"])
                fx, fy = (to_target(f, tgt, 0), to_target(f, tgt, 2)) if f else (None, None)
                s0.append(1 - x / fx if x is not None and fx else None)
                s1.append(1 - y / fy if y is not None and fy else None)
            fin = [r["evals"][-1][1] for r in ra]
            print("| %s | %s | %d | %d (%d) | %s | %s | %s | %s | %s |" % (
                lab, NAMES.get(a, a), ra[0]["params"], len(ra), sum(1 for x in st if x is not None),
                fmt(*mean_ci(st)[:2], digits=0), fmt(*mean_ci(s0)[:2], pct=True), fmt(*mean_ci(s1)[:2], pct=True),
                fmt(*mean_ci(fin)[:2], digits=4),
                fmt(*mean_ci([r["beta_init"] if a in ("fixed", "rpa") else r["beta_mean"] for r in ra])[:2], digits=3)))
    print()


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "build/ceas_exp_runs2"
    runs = load(d)
    order = ["9k", "9k-h4", "1m"]
    extra = sorted(set(r["scale"] for r in runs) - set(order))
    # other shapes of a grid scale (ceas_exp --heads / --pos ablations, "9k-h1-rope"): one table
    # per base scale at the end, against the base's fixed β
    abl = [x for x in extra if x.split("-")[0] in order]
    for scale in order + [x for x in extra if x not in abl]:
        rs = [r for r in runs if r["scale"] == scale]
        if not rs:
            continue
        S = rs[0]["steps"]
        i70, i10 = int(round(0.7 * S)), int(round(0.1 * S))
        fixed = {r["seed"]: r for r in rs if r["arm"] == "fixed"}
        if not fixed:
            continue
        tgt = sum(ce_at(r, i70) for r in fixed.values()) / len(fixed)
        early = sum(ce_at(r, i10) for r in fixed.values()) / len(fixed)
        print("### scale %s: %d parameters (fixed β's model), %d steps of %d x %d tokens, seeds %s" %
              (scale, fixed[min(fixed)]["params"], S, rs[0]["B"], rs[0]["T"], ",".join(str(s) for s in sorted(fixed))))
        print()
        per = arm_rows(rs, ARMS, tgt, early, fixed, S,
                       "Target: validation CE %.4f (fixed β's mean at step %d = 70%% of the budget); early target "
                       "%.4f (its mean at step %d = 10%%); s against fixed β." % (tgt, i70, early, i10))
        print("Savings, paired by seed (positive = fewer; mean ± 95% t interval over seeds), at fixed β's target:\n")
        savings(per, [(a, "fixed") for a in ARMS[1:]] + [("maxent", "gate")])
        increment(per, "maxent", "gate", "fixed")
        per_seed(per, ARMS)
        rpa = {r["seed"]: r for r in rs if r["arm"] == "rpa"}
        if rpa:
            rt = sum(ce_at(r, i70) for r in rpa.values()) / len(rpa)
            re_ = sum(ce_at(r, i10) for r in rpa.values()) / len(rpa)
            perr = arm_rows(rs, ["rpa", "rpa-gate"], rt, re_, rpa, S,
                            "The RPA pair at its own target: validation CE %.4f (the RPA arm's mean at step %d); "
                            "early target %.4f (step %d); s against the RPA arm." % (rt, i70, re_, i10))
            print("Savings of gating beside the prior, paired by seed, at the RPA arm's target:\n")
            savings(perr, [("rpa-gate", "rpa")])
            per_seed(perr, ["rpa", "rpa-gate"])
        mx = sorted([r for r in rs if r["arm"] == "maxent"], key=lambda r: r["seed"])
        if mx:
            fl = sum(r["flops_dense_total"] for r in fixed.values()) / len(fixed)
            print("MaxEnt pre-selection: " + "; ".join(
                "s%d %s (%d parameters, %d of %d candidates feasible, (A) met %d/%d layers, probes %.3g FLOPs = "
                "%.2f%% of a fixed-β run's, %.1f s)" % (
                    r["seed"], r["maxent"]["selected"], r["params"], r["maxent"]["feasible"], r["maxent"]["candidates"],
                    r["maxent"]["init_met"], r["maxent"]["init_layers"], r["maxent"]["probe_flops"],
                    100.0 * r["maxent"]["probe_flops"] / fl, r["maxent"]["probe_s"]) for r in mx))
            print()
    for base in order:
        ablations(runs, base, [x for x in abl if x.split("-")[0] == base])


if __name__ == "__main__":
    main()
