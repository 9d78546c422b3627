"""bench/results/budget.json and the kept earlier runs bench/results/budget_*.json (bench/budget.sh):
the budget planner's predictions against measurements.

docs/pruning.md: budget, budget_runs.
"""
from .core import load, table


BUDGET = "bench/results/budget.json"


@table("budget", BUDGET)
def budget_table():
    """The budget planner's predictions against the chosen models' measured costs (bench/budget.sh)."""
    t = load(BUDGET)
    lines = ["| run | budget | heads removed | limit | predicted | measured | error | share predicted / measured | share error "
             "| unpruned: check / table | met |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in t["runs"]:
        unit = {"ms": "ms", "bytes": "MiB", "parameters": "M"}[r["unit"]]
        scale = {"ms": 1.0, "bytes": 2.0**-20, "parameters": 1e-6}[r["unit"]]
        v = lambda x: "%.2f %s" % (x * scale, unit)
        share = ("%.3f / %.3f" % (r["predicted_share"], r["measured_share"]), "%+.1f %%" % (100 * r["share_error"])) \
            if "measured_share" in r else ("-", "-")
        drift = "%+.1f %%" % (100 * r["drift"]) if "drift" in r else "-"
        lines.append("| %s | `%s` | %d | %s | %s | %s | %+.1f %% | %s | %s | %s | %s |" % (
            r["run"], r["budget"], r["heads_removed"], v(r["limit"]), v(r["predicted"]), v(r["measured"]),
            100 * r["error"], share[0], share[1], drift, "yes" if r["met"] else "**no**"))
    e = t["environment"] or {}
    lines += ["", "`%s`; %s, %s threads; a latency row's unpruned model was timed beside the chosen one (the "
              "share columns: median ratio over rounds)." % (t["command"], e.get("cpu", "?"), e.get("threads", "?"))]
    return lines


BUDGET_RUNS = [("one rotation, 15 rounds per model (d0b07f0)", "bench/results/budget_repeat.json"),
               ("each variant beside the unpruned model, a pair at a time, ≥ 2 s per model (bfe3089)",
                "bench/results/budget_pairs.json"),
               ("one rotation, ≥ 2 s per model (6ddc094)", "bench/results/budget_earlier.json"),
               ("one rotation, ≥ 2 s per model, first of three in a row", "bench/results/budget_run1.json"),
               ("the same, second", "bench/results/budget_run2.json"),
               ("the same, third (the table above)", BUDGET),
               ("one rotation, ≥ 2 s per model, AMD EPYC, 2026-12-02", "bench/results/budget_amd.json")]


@table("budget_runs", BUDGET)
def budget_runs_table():
    """Every kept run of bench/budget.sh on this machine: the latency rows' errors and drifts side by side."""
    lines = ["| run | share error | ms error | unpruned: check / table | ms within 10 % | met |",
             "|---|---:|---:|---:|---:|---|"]
    for label, path in BUDGET_RUNS:
        runs = [r for r in load(path)["runs"] if "measured_share" in r]
        span = lambda k: "%+.1f … %+.1f %%" % (min(100 * r[k] for r in runs), max(100 * r[k] for r in runs))
        within = sum(abs(r["error"]) <= 0.10 for r in runs)
        lines.append("| %s (`%s`) | %s | %s | %s | %d of %d | %s |" % (
            label, path, span("share_error"), span("error"), span("drift"), within, len(runs),
            "all" if all(r["met"] for r in runs) else "**not all**"))
    return lines
