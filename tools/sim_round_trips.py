#!/usr/bin/env python3
"""sim_round_trips.py - rank the call sites of the simulation's counted host round trips.

Reads the stderr of a simulated parity test run with AK_SIM_TRACE=1 (tests/cuda_sim.h,
"Counters") and, for each traced step ("cuda_sim trace: mark <label>" lines), prints the
events of each kind ranked by where they come from: the outermost attnkit header op
(tensor.h, era.h, ..., cuda/*.cuh) and the first examples/common line that called it.

    AK_SIM_TRACE=1 TEST_ONLY=test_round_trips build/sim-g++/parity_model 2> trace.txt
    tools/sim_round_trips.py trace.txt [--kinds wait,alloc,ptrq] [--top 20] [--label tiny]

Kinds: wait (a synchronising call that waited: the `syncs` count), sync (one that found
the device idle; wait + sync = `sync_calls`), d2h, alloc, free, ptrq.
"""
import argparse
import collections
import sys


def frame(f):
    """'fn(args) (dir/file:line)' -> ('fn', 'dir/file:line')"""
    if " (" not in f:
        return f, ""
    name, loc = f.rsplit(" (", 1)
    return name.split("(")[0], loc.rstrip(")")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--kinds", default="wait,sync,alloc,ptrq,d2h")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--label", default="", help="only the marks containing this")
    a = ap.parse_args()
    steps = collections.OrderedDict()
    label = None
    with open(a.trace, errors="replace") as fh:
        for line in fh:
            if not line.startswith("cuda_sim trace: "):
                continue
            body = line[len("cuda_sim trace: "):].rstrip("\n")
            if body.startswith("mark "):
                label = body[5:]
                steps.setdefault(label, [])
            elif label is not None:
                steps[label].append(body)
    if not steps:
        sys.exit("no 'cuda_sim trace: mark' lines: run with AK_SIM_TRACE=1 (stderr)")
    for label, events in steps.items():
        if a.label not in label:
            continue
        for kind in a.kinds.split(","):
            count = collections.Counter()
            lines = collections.defaultdict(set)
            total = 0
            for ev in events:
                parts = ev.split(" <- ")
                if parts[0].split(" ")[0] != kind:
                    continue
                total += 1
                frames = [frame(p) for p in parts[1:]]
                op = "?"
                for fn, loc in frames:  # innermost first: the last header frame before the caller
                    if loc.startswith("common/") or loc.startswith("tests/"):
                        break
                    op = fn
                # the caller: the first examples/common frame past exctx.h's one-line wrappers
                # (ex_to_host and the like name no decision; their caller does)
                site = next(((fn, loc) for fn, loc in frames
                             if loc.startswith("common/") and not loc.startswith("common/exctx.h")),
                            next(((fn, loc) for fn, loc in frames if loc.startswith("common/")), ("?", "?")))
                key = (op, site[0], site[1].split(":")[0])
                count[key] += 1
                lines[key].add(site[1].split(":")[-1])
            print("== %s: %s %d" % (label, kind, total))
            for (op, fn, f), n in count.most_common(a.top):
                ls = sorted(lines[(op, fn, f)], key=lambda z: int(z) if z.isdigit() else 0)
                print("%6d  %-34s %-26s %s:%s" % (n, op, fn, f, ",".join(ls)))


if __name__ == "__main__":
    main()
