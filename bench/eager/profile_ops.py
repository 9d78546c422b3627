#!/usr/bin/env python3
"""Sum Chrome traces op by op: each op's self time (its duration less that of the ops it called),
so that the nested calls (aten::linear -> aten::addmm) are not counted twice. With two traces
(`headprune bench --profile A.json`, `eager.py --profile B.json`, the same shapes and repetitions),
the ops side by side, largest difference first.

  python3 bench/eager/profile_ops.py A.json [B.json] [--top 30] [--steps N]

Not part of the product: a tool for finding where time goes.
"""
import argparse
import collections
import json


def self_times(path):
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    by_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and "dur" in e:
            by_thread[e.get("tid")].append((float(e["ts"]), float(e["dur"]), e["name"]))
    total = collections.Counter()
    calls = collections.Counter()
    for evs in by_thread.values():
        evs.sort(key=lambda x: (x[0], -x[1]))
        stack = []  # [end, name, child time]
        def close(item):
            end, name, child, dur = item
            total[name] += dur - child
        for ts, dur, name in evs:
            while stack and ts >= stack[-1][0] - 1e-3:
                close(stack.pop())
            if stack:
                stack[-1][2] += dur
            stack.append([ts + dur, name, 0.0, dur])
            calls[name] += 1
        while stack:
            close(stack.pop())
    return total, calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--steps", type=int, default=1, help="divide by this many repetitions (ms per step)")
    a = ap.parse_args()
    sums = [self_times(p) for p in a.traces[:2]]
    names = set().union(*(t for t, _ in sums))
    def ms(i, n):
        return sums[i][0].get(n, 0.0) / 1000 / a.steps if i < len(sums) else 0.0
    key = (lambda n: abs(ms(0, n) - ms(1, n))) if len(sums) > 1 else (lambda n: ms(0, n))
    rows = sorted(names, key=key, reverse=True)[:a.top]
    head = "| op | " + " | ".join(f"{p} ms (calls)" for p in a.traces[:2]) + (" | difference ms |" if len(sums) > 1 else " |")
    print(head)
    print("|---|" + "---:|" * (len(sums) + (1 if len(sums) > 1 else 0)))
    for n in rows:
        cells = [f"{ms(i, n):.2f} ({sums[i][1].get(n, 0) // a.steps})" for i in range(len(sums))]
        diff = [f"{ms(0, n) - ms(1, n):+.2f}"] if len(sums) > 1 else []
        print(f"| {n} | " + " | ".join(cells + diff) + " |")
    print("| total | " + " | ".join(f"{sum(t.values()) / 1000 / a.steps:.2f}" for t, _ in sums) + " |")


if __name__ == "__main__":
    main()
