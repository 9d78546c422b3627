#!/usr/bin/env python3
"""Tables in docs/ generated from committed results JSON, so a doc table cannot drift from its data.

A generated table sits between two marker lines in a Markdown file:

    <!-- table NAME (scripts/doc_tables.py; from FILE) -->
    | ... |
    <!-- end table -->

  python3 scripts/doc_tables.py          rewrite every marked table from its JSON
  python3 scripts/doc_tables.py --check  fail (exit 1, naming doc and table) when a table differs;
                                         CTest docs_tables (label lint) runs this in CI

Each NAME is a function below that reads its results file and returns the table's lines.
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SST2 = "bench/results/sst2_study.json"


def load(path):
    with open(os.path.join(ROOT, path)) as f:
        return json.load(f)


def fmt(v, digits=4):
    return "%.*f" % (digits, v)


def bench_row(study, model, batch):
    for r in study["bench"]["records"]:
        if r["model"] == model and r["batch"] == batch:
            return r
    raise SystemExit("%s: no bench record for %s at batch %d" % (SST2, model, batch))


def sst2_study_models():
    """The SST-2 study's models: heads, dev accuracy, latency (bench/sst2_study.sh)."""
    s = load(SST2)
    base = s["prune_50"]["checkpoint"]
    runs = [("unpruned", base, s["prune_50"]["stages"][0], [])]
    for label, key in [("gradient, 50 % removed", "prune_50"), ("PASS to 16 heads", "pass"),
                       ("PASSCONC to 16 heads", "passconc")]:
        r = s[key]
        runs.append((label, r["model"], r["stages"][-1], r.get("emptied_layers", [])))
    lines = ["| model | heads | emptied layers | dev accuracy | batch 1 ms | batch 16 ms | speedup at 16 | FLOP-ideal |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, model, stage, emptied in runs:
        b1, b16 = bench_row(s, model, 1), bench_row(s, model, 16)
        lines.append("| %s | %d | %d | %s | %s | %s | ×%s | ×%s |" % (
            label, stage["heads"], len(emptied), fmt(stage["metric"]), fmt(b1["median_ms"], 2),
            fmt(b16["median_ms"], 2), fmt(b16["measured_speedup"], 2), fmt(b16["ideal_speedup"], 2)))
    return lines


def sst2_study_curve():
    """Dev accuracy against the share of heads pruned, per strategy (no fine-tuning)."""
    c = load(SST2)["curve"]
    fractions = sorted({p["fraction"] for p in c["points"]})
    strategies = []
    for p in c["points"]:
        if p["strategy"] not in strategies:
            strategies.append(p["strategy"])
    acc = {(p["strategy"], p["fraction"]): p["metric"] for p in c["points"]}
    lines = ["| strategy | " + " | ".join("%g %%" % (100 * f) for f in fractions) + " |",
             "|---|" + "---:|" * len(fractions)]
    for st in strategies:
        lines.append("| %s | " % st + " | ".join(fmt(acc[(st, f)]) if (st, f) in acc else "" for f in fractions) + " |")
    return lines


TABLES = {"sst2_study_models": (SST2, sst2_study_models), "sst2_study_curve": (SST2, sst2_study_curve)}
OPEN = re.compile(r"^<!-- table (\S+) \(scripts/doc_tables\.py; from (\S+)\) -->$")
CLOSE = "<!-- end table -->"


def process(doc, check):
    with open(doc) as f:
        lines = f.read().split("\n")
    out, i, differ, found = [], 0, [], []
    while i < len(lines):
        m = OPEN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not m:
            continue
        name, source = m.group(1), m.group(2)
        if name not in TABLES:
            raise SystemExit("%s: unknown table '%s' (known: %s)" % (doc, name, ", ".join(sorted(TABLES))))
        if source != TABLES[name][0]:
            raise SystemExit("%s: table %s says it is from %s, it is from %s" % (doc, name, source, TABLES[name][0]))
        end = i
        while end < len(lines) and lines[end] != CLOSE:
            end += 1
        if end == len(lines):
            raise SystemExit("%s: table %s has no '%s' line" % (doc, name, CLOSE))
        want = TABLES[name][1]()
        if lines[i:end] != want:
            differ.append(name)
        out.extend(want)
        found.append(name)
        i = end
    if differ and not check:
        with open(doc + ".tmp", "w") as f:
            f.write("\n".join(out))
        os.replace(doc + ".tmp", doc)
    return found, differ


def main():
    check = "--check" in sys.argv[1:]
    docs_dir = os.path.join(ROOT, "docs")
    total, bad = 0, []
    for name in sorted(os.listdir(docs_dir)):
        if name.endswith(".md"):
            found, differ = process(os.path.join(docs_dir, name), check)
            total += len(found)
            bad += ["docs/%s: table %s" % (name, t) for t in differ]
    if check and bad:
        for b in bad:
            print("%s differs from its results JSON (run python3 scripts/doc_tables.py and commit)" % b, file=sys.stderr)
        sys.exit(1)
    print("tables OK: %d generated tables in docs/ %s their results" % (total, "match" if check else "written from"))


if __name__ == "__main__":
    main()
