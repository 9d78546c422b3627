"""bench/results/methods.json and bench/results/methods_full.json (studies/methods.sh): every
method at half the heads, over seeds.

docs/results.md: methods, methods_full.
"""
import functools

from .core import add, fmt, load, mean_sd, table
from .common import stage


METHODS = "bench/results/methods.json"
METHODS_FULL = "bench/results/methods_full.json"  # the full-size study, run seed by seed over sessions
METHOD_ROWS = [("score_gradient", "gradient importance (Michel)"), ("score_taylor", "Taylor, LLM-Pruner"),
               ("score_activation", "activation, Minitron"), ("score_magnitude", "weight magnitude"),
               ("score_layer_drop", "attention-layer drop"), ("gates_passconc", "PASSCONC gates"),
               ("gates_dsp", "DSP gates"), ("gates_cofi", "CoFi gates"),
               ("budget", "budget planner at PASSCONC's latency")]


def random_row(runs):
    """The methods table's baseline: the study's seeded random plans of the same count (studies/methods.sh,
    N_RANDOM per seed and variant), mean ± s.d. over every plan of every seed; a results file from before
    the study had them says it has none (the rows above then have no baseline: rerun the study)."""
    plain = [x for r in runs for k, x in sorted(r["plain"].items()) if k.startswith("random_")]
    kd = [x for r in runs for k, x in sorted(r.get("kd", {}).items()) if k.startswith("random_")]
    if not plain:
        return ("| random plans of the same count (the baseline) | | | not in this results file: rerun "
                "studies/methods.sh (N_RANDOM) | | | |")
    heads = stage(plain[0], "removed")["heads"]
    cell = lambda xs: mean_sd(xs) if len(xs) > 1 else fmt(xs[0])  # noqa: E731
    return "| random plans of the same count (%d per seed) | %d | - | %s | %s | %s | - |" % (
        len(plain) // len(runs), heads, cell([stage(x, "removed")["metric"] for x in plain]),
        cell([x["stages"][-1]["metric"] for x in plain]),
        cell([x["stages"][-1]["metric"] for x in kd]) if kd else "-")


@table("methods", METHODS)
def methods_table(path=METHODS):
    """Every method at half the heads, with and without distillation, over seeds (studies/methods.sh)."""
    t = load(path)
    lines = []
    for model in t["models"].split():
        runs = [t[model][k] for k in sorted(t.get(model, {}), key=int)]
        if not runs:
            continue
        def cell(xs, digits=4):  # one seed: its value (the header says "1 seed")
            return fmt(xs[0], digits) if len(runs) == 1 else mean_sd(xs, digits)
        metric = runs[0]["plain"]["score_gradient"].get("metric", "metric")
        lines += ["**%s** (%s; %s)" % (model, metric, "1 seed" if len(runs) == 1 else "%d seeds; mean ± s.d." % len(runs)), "",
                  "| method | heads kept | layers emptied | after pruning | fine-tuned | fine-tuned with distillation | latency share (batch %d × %d) |"
                  % tuple(t["bench"]), "|---|---:|---:|---:|---:|---:|---:|"]
        base = [stage(r["plain"]["score_gradient"], "before")["metric"] for r in runs]
        lines.append("| unpruned | %d | 0 | %s | | | 1 |" % (stage(runs[0]["plain"]["score_gradient"], "before")["heads"], cell(base)))
        for key, label in METHOD_ROWS:
            plain = [r["plain"][key] for r in runs if key in r["plain"]]
            kd = [r["kd"][key] for r in runs if key in r.get("kd", {})]
            if not plain:
                continue
            removed = [stage(x, "removed")["metric"] for x in plain]
            ft = [x["stages"][-1]["metric"] for x in plain]
            ftk = [x["stages"][-1]["metric"] for x in kd]
            def kept(x):  # the heads kept, and what the gates kept by themselves where a ranking completed them
                n = stage(x, "removed")["heads"]
                by_gates = x.get("result", {}).get("closed_by_gates")
                own = stage(x, "before")["heads"] - by_gates if by_gates is not None else n
                return "%d" % n if own == n else "%d (%d)" % (n, own)
            heads = "/".join(kept(x) for x in plain)
            def n_emptied(x):
                if "emptied_layers" in x:
                    return str(len(x["emptied_layers"]))
                kept = x["plan"]["info"].get("kept_groups")  # the budget planner's groups per layer
                return str(sum(1 for v in kept.values() if v == 0)) if kept else "-"
            emptied = "/".join(n_emptied(x) for x in plain)
            shares = []
            for r, x in zip(runs, plain):
                recs = r["bench"]["records"]
                rec = next((q for q in recs if q["model"] == x.get("model")), None)
                if rec:
                    shares.append(1 / rec["paired_speedup"])
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (label, heads, emptied, cell(removed), cell(ft),
                                                                    cell(ftk) if ftk else "-", cell(shares, 3) if shares else "-"))
        lines.append(random_row(runs))
        lines.append("")
    lines.append("Heads kept per seed; in parentheses, what the gates kept by themselves where the ranking "
                 "(P(open); DSP and CoFi always, `--complete-by-rank` for PASSCONC) changed the count.")
    lines.append("")
    for model in t["models"].split():
        run = t.get("runs", {}).get(model)
        if run is None:  # one run did every model
            run = {k: t[k] for k in ("command", "finetune_steps", "gate_steps", "steps_sst2", "steps_llama", "max_examples")}
        records = run.get("earlier", []) + [run]  # a study run seed by seed: one record per run
        for r in records:
            what = []
            if "settings" in r or "steps_sst2" in r:
                cfg = r.get("settings") or dict(r, steps=r["steps_sst2" if model == "sst2" else "steps_llama"])
                what.append("training steps: %d; fine-tuning %d steps; gates %d steps" % (
                    cfg["steps"], cfg["finetune_steps"], cfg["gate_steps"]))
                if cfg.get("max_examples"):
                    what.append("every split cut to its first %s examples" % cfg["max_examples"])
            if "cpu" in r:
                what.append("%s, %s threads, %s" % (r["cpu"], r["threads"], r["date"]))
            who = "%s seed%s %s" % (model, "s" if " " in r["seeds"] else "", r["seeds"]) if len(records) > 1 else model
            lines.append("%s: `%s`%s." % (who, r["command"], " (%s)" % "; ".join(what) if what else ""))
            lines.append("")
    return lines[:-1]


add("methods_full", METHODS_FULL, functools.partial(methods_table, METHODS_FULL))
