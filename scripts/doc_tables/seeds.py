"""Helpers for the seed studies (sst2_seeds.py, lm_seeds.py): the seeds' runs and curves, mean ± s.d.
across seeds, the scorecards' gate cells and the curve table over seeds. Registers no table.
"""
from .core import load, mean_sd
from .common import GATE_NAMES, curve_grid, stage


LAYER_STRATEGIES = ["random:uniform", "random:avoid_consecutive", "random:top", "random:bottom"]  # Budhraja et al.


def seed_runs(s):
    """The seeds' outputs in seed order."""
    return [s["seeds"][k] for k in sorted(s["seeds"], key=int)]


def seed_grids(s, part="curve", key="metric"):
    return [curve_grid(r[part], key) for r in seed_runs(s) if part in r]


def across(grids, strategy, fraction):
    return [g[strategy][fraction] for g in grids]


def seeds_spread(s):
    return "mean ± s.d. over %d seeds (%s)" % (len(s["seeds"]), ", ".join(sorted(s["seeds"], key=int)))


def versus(grids, a, b, fractions, digits=4):
    """'at F %: mean ± s.d. of a vs of b (difference: the per-seed paired differences)' per fraction."""
    return "; ".join("at %g %%: %s vs %s (difference %s)" % (
        100 * f, mean_sd(across(grids, a, f), digits), mean_sd(across(grids, b, f), digits),
        mean_sd([x - y for x, y in zip(across(grids, a, f), across(grids, b, f))], digits)) for f in fractions)


def per_gate(gates, runs, value):
    """'PASS x, PASSCONC y': value(the seeds' runs of one gate method) for each method the study ran."""
    return ", ".join("%s %s" % (GATE_NAMES[m], value([r[m] for r in runs])) for m in gates)


def gates_finetuned(runs):
    """Whether every one of these gate runs ended with its fine-tuning stage."""
    return all(x["stages"][-1]["stage"] == "fine-tuned" for x in runs)


def gates_claim(claim, gates):
    """The gates' scorecard claim, naming Voita et al.'s Hard Concrete where the study ran it too."""
    return claim + (" (Voita et al.'s Hard Concrete gates beside them)" if "hard_concrete" in gates else "")


def gate_cells(gates, runs, digits=4):
    """Per gate method over the seeds: the pruned model's metric (mean ± s.d.; '→ y' the metric after
    fine-tuning where the runs fine-tuned), heads kept per seed (a seed's run that missed its count
    marked '(missed)'), attention layers emptied per seed."""
    def metric(g):
        cell = mean_sd([stage(x, "removed")["metric"] for x in g], digits)
        if gates_finetuned(g):
            cell += " → %s" % mean_sd([x["stages"][-1]["metric"] for x in g], digits)
        return cell

    def kept(x):
        return "%d" % x["stages"][-1]["heads"] + ("" if x["result"]["reached_target"] else " (missed)")

    return (per_gate(gates, runs, metric),
            per_gate(gates, runs, lambda g: "/".join(kept(x) for x in g)),
            per_gate(gates, runs, lambda g: "/".join(str(len(x["emptied_layers"])) for x in g)))


def unpruned_finetuned(runs, digits):
    """'; the unpruned model fine-tuned alike: mean ± s.d.' where every seed's run measured it."""
    if not all("unpruned_finetuned" in r for r in runs):
        return ""
    return "; the unpruned model fine-tuned alike: %s" % mean_sd(
        [curve_grid(r["unpruned_finetuned"], "metric_finetuned")["gradient"][0.0] for r in runs], digits)


def seeds_curve(path, digits):
    """The metric against the share of heads pruned, mean ± s.d. over a seed study's seeds (– : the
    strategy cannot prune that many; its eligible layers hold fewer heads)."""
    grids = seed_grids(load(path))
    return grids_table(grids, "strategy", {st: st for st in grids[0]}, digits)


def grids_table(grids, first, rows, digits):
    """One row per key of rows (shown as its value), one column per fraction of the first row: mean ± s.d.
    over the seeds' grids ({row: {fraction: value}}; – where a seed lacks the fraction)."""
    fractions = sorted(grids[0][next(iter(rows))])
    lines = ["| %s | " % first + " | ".join("%g %%" % (100 * f) for f in fractions) + " |",
             "|---|" + "---:|" * len(fractions)]
    for key, name in rows.items():
        lines.append("| %s | %s |" % (name, " | ".join(
            mean_sd(across(grids, key, f), digits) if all(f in g[key] for g in grids) else "–" for f in fractions)))
    return lines
