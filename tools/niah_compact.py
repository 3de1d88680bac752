#!/usr/bin/env python3
"""niah_compact.py - compact markdown tables (needle accuracy, document CE: mean +- std over
seeds per arm and length) from niah results.jsonl files, one row per (label, arm).

    tools/niah_compact.py LABEL=RUN_DIR[,RUN_DIR...] [LABEL=...]

Each RUN_DIR holds results.jsonl (or results.partial.jsonl: the finished arms of a run that
was stopped early). Lines of one (label, arm) must share their "model" description."""
import json
import math
import os
import sys


def load(d):
    for name in ("results.jsonl", "results.partial.jsonl"):
        p = os.path.join(d, name)
        if os.path.exists(p):
            with open(p) as f:
                return [json.loads(l) for l in f if l.strip()]
    raise SystemExit(f"niah_compact: no results in {d}")


def ms(v):
    m = sum(v) / len(v)
    s = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else float("nan")
    return m, s


def main():
    rows, mults = {}, set()
    for arg in sys.argv[1:]:
        label, dirs = arg.split("=", 1)
        for d in dirs.split(","):
            for r in load(d):
                key = (label, r["arm"])
                cell = rows.setdefault(key, {"model": r.get("model", ""), "acc": {}, "ce": {}, "seeds": set()})
                if cell["model"] != r.get("model", ""):
                    raise SystemExit(f"niah_compact: {label} {r['arm']}: two models in one row")
                cell["acc"].setdefault(r["mult"], []).append(r["acc"])
                if r["doc_ce"] is not None:
                    cell["ce"].setdefault(r["mult"], []).append(r["doc_ce"])
                cell["seeds"].add(r["seed"])
                mults.add(r["mult"])
    ms_ = sorted(mults)
    for what, fmt in (("acc", "{:.2f} ± {:.2f}"), ("ce", "{:.2f} ± {:.2f}")):
        print(f"\n{'Needle accuracy (per digit)' if what == 'acc' else 'Document CE (nats)'}, mean ± std over seeds:\n")
        print("| run | arm | seeds | " + " | ".join(f"{m}x" for m in ms_) + " |")
        print("| --- | --- | ---: | " + " | ".join("---:" for _ in ms_) + " |")
        for (label, arm), c in rows.items():
            cells = []
            for m in ms_:
                v = c[what].get(m)
                if not v:
                    cells.append("")
                    continue
                a, s = ms(v)
                cells.append(fmt.format(a, s).replace("± nan", "").strip() if math.isnan(s) else fmt.format(a, s))
            print(f"| {label} | {arm} | {len(c['seeds'])} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
