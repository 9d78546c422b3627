"""bench/results/sst2_study.json (studies/sst2.sh): the SST-2 study's tables.

docs/benchmarks.md: sst2_study_models; docs/pruning.md: sst2_study_curve, sst2_curve_finetuned,
sst2_prune50, sst2_compensation; docs/training.md: sst2_training; docs/importance.md:
sst2_importance_top, sst2_all_but_one, sst2_agreement; docs/gates.md: sst2_gates; docs/roles.md:
sst2_roles.
"""
from .core import fmt, load, table
from .common import GATE_NAMES, curve_grid, gate_run_cells, imp_map, importance_top, roles_table, stage


SST2 = "bench/results/sst2_study.json"


def bench_row(study, model, batch):
    for r in study["bench"]["records"]:
        if r["model"] == model and r["batch"] == batch:
            return r
    raise SystemExit("%s: no bench record for %s at batch %d" % (SST2, model, batch))


SST2_GATE_COUNTS = (16, 8)  # heads kept of 32 by the study's gate runs


def sst2_gate_runs(s):
    """(kept count, method, gates.json) for every gate run of the SST-2 study, in its order."""
    return [(k, m, s["gates_keep%d" % k][m]) for k in SST2_GATE_COUNTS
            for m in ("pass", "passconc", "hard_concrete") if m in s.get("gates_keep%d" % k, {})]


def per_layer(heads, n_layers=4):
    """'7 / 5 / 2 / 2': heads ('type:layer:head') per layer of a single attention type."""
    return " / ".join(str(sum(1 for h in heads if int(h.split(":")[1]) == l)) for l in range(n_layers))


@table("sst2_study_models", SST2)
def sst2_study_models():
    """The SST-2 study's models: heads, dev accuracy, latency side by side (studies/sst2.sh)."""
    s = load(SST2)
    p = s["prune_50"]
    runs = [("unpruned", p["checkpoint"], stage(p, "before"), []),
            ("gradient, 50 %% removed, %d fine-tuning steps" % s["finetune_steps"], p["model"], p["stages"][-1], [])]
    for kept, method, r in sst2_gate_runs(s):
        runs.append(("%s to %d heads" % (GATE_NAMES[method], kept), r["model"], r["stages"][-1], r.get("emptied_layers", [])))
    lines = ["| model | heads | emptied layers | dev accuracy | batch 1 ms | batch 16 ms | speedup at 1 / 16 | FLOP-ideal |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, model, st, emptied in runs:
        b1, b16 = bench_row(s, model, 1), bench_row(s, model, 16)
        lines.append("| %s | %d | %d | %s | %s | %s | ×%s / ×%s | ×%s |" % (
            label, st["heads"], len(emptied), fmt(st["metric"]), fmt(b1["median_ms"], 2), fmt(b16["median_ms"], 2),
            fmt(b1["measured_speedup"], 2), fmt(b16["measured_speedup"], 2), fmt(b16["ideal_speedup"], 2)))
    return lines


@table("sst2_study_curve", SST2)
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


@table("sst2_training", SST2)
def sst2_training():
    """The SST-2 model's training: held-out selection accuracy per evaluation, dev accuracy of the chosen one (studies/sst2.sh)."""
    s = load(SST2)
    t = s["train"]
    dev = curve_grid(s["curve"])["gradient"][0.0]
    chosen = next(h["step"] for h in t["history"] if h["accuracy"] == t["best_metric"])  # the first best
    lines = ["| step | held-out accuracy (selects) | held-out loss | training loss | note |", "|---:|---:|---:|---:|---|"]
    for h in t["history"]:
        note = "chosen; dev accuracy %s" % fmt(dev) if h["step"] == chosen else ""
        lines.append("| %s | %s | %s | %s | %s |" % ("{:,}".format(h["step"]), fmt(h["accuracy"]), fmt(h["loss"]),
                                                    fmt(h["train_loss"]), note))
    return lines


@table("sst2_importance_top", SST2)
def sst2_importance_top():
    """The heads whose single removal changes dev accuracy most, and their rank under the other methods (studies/sst2.sh)."""
    return importance_top(load(SST2), "importance", ["ablation", "gradient", "lrp", "confidence", "output_norm"],
                          "accuracy change", 4, 8)


@table("sst2_all_but_one", SST2)
def sst2_all_but_one():
    """Each layer reduced to its best single head, dev accuracy (Michel §3.3; studies/sst2.sh)."""
    mp = imp_map(load(SST2), "importance", "all_but_one")
    lines = ["| layer | best single head | dev accuracy with only it | with the whole layer masked |", "|---:|---:|---:|---:|"]
    for r in mp["info"]["per_layer"]:
        lines.append("| %d | %d | %s | %s |" % (r["layer"], r["best_head"], fmt(r["best_head_metric"]), fmt(r["layer_masked_metric"])))
    lines.append("| all heads | | %s | |" % fmt(mp["info"]["base_metric"]))
    return lines


@table("sst2_agreement", SST2)
def sst2_agreement():
    """Importance on dev against importance on other data (Michel §3.4; studies/sst2.sh)."""
    s = load(SST2)
    lines = ["| method | dev vs held-out training rows: Spearman / Pearson | dev vs 2,000 training sentences: Spearman / Pearson |",
             "|---|---:|---:|"]
    by = {k: {r["a"]: r for r in s[k] if r["attn_type"] == "all"} for k in ("agreement_test_valid", "agreement_test_train")}
    for method in sorted(by["agreement_test_valid"]):
        lines.append("| %s | %s | %s |" % (method, " / ".join(fmt(by["agreement_test_valid"][method][k], 3) for k in ("spearman", "pearson")),
                                           " / ".join(fmt(by["agreement_test_train"][method][k], 3) for k in ("spearman", "pearson"))))
    return lines


@table("sst2_curve_finetuned", SST2)
def sst2_curve_finetuned():
    """Dev accuracy of pruned models before and after fine-tuning (Budhraja et al.; studies/sst2.sh)."""
    c = load(SST2)["curve_finetuned"]
    lines = ["| strategy | heads pruned of 32 | dev accuracy, pruned | after %d fine-tuning steps |" % c["finetune_steps"],
             "|---|---:|---:|---:|"]
    for p in c["points"]:
        lines.append("| %s | %d | %s | %s |" % (p["strategy"], len(p["pruned"]), fmt(p["metric"]), fmt(p["metric_finetuned"])))
    return lines


@table("sst2_prune50", SST2)
def sst2_prune50():
    """Half the heads removed by gradient importance, then fine-tuned: each stage (studies/sst2.sh)."""
    p = load(SST2)["prune_50"]
    lines = ["| stage | heads | parameters | dev accuracy | dev loss |", "|---|---:|---:|---:|---:|"]
    for st in p["stages"]:
        lines.append("| %s | %d | %s | %s | %s |" % (st["stage"], st["heads"], "{:,}".format(st["params"]), fmt(st["metric"]), fmt(st["loss"])))
    return lines


@table("sst2_compensation", SST2)
def sst2_compensation():
    """Gradient importance of the kept heads before and after fine-tuning, per layer (Budhraja et al.; studies/sst2.sh)."""
    c = load(SST2)["prune_50"]["compensation"]
    lines = ["| layer | heads kept | mean importance before | after fine-tuning | ratio |", "|---|---:|---:|---:|---:|"]
    for r in c["layers"]:
        lines.append("| %s %d | %d | %s | %s | ×%s |" % (r["attn_type"], r["layer"], r["kept_heads"], fmt(r["mean_before"]),
                                                      fmt(r["mean_after"]), fmt(r["ratio"], 2)))
    lines.append("| all kept heads | | | | ×%s (Spearman before/after %s) |" % (fmt(c["total_ratio"], 2), fmt(c["spearman"], 3)))
    return lines


@table("sst2_gates", SST2)
def sst2_gates():
    """Learned gates to exact head counts beside importance and random plans (studies/sst2.sh)."""
    s = load(SST2)
    g = curve_grid(s["curve"])
    lines = ["| heads kept of 32 | method | kept per layer | emptied layers | steps | dev accuracy | after %d fine-tuning steps |"
             % s["finetune_steps"], "|---:|---|---|---:|---:|---:|---:|"]
    for kept, method, r in sst2_gate_runs(s):
        res = r["result"]
        count, name = gate_run_cells(method, res)
        lines.append("| %s | %s | %s | %d | %d | %s | %s |" % (
            count, name, per_layer(res["kept"]), len(r["emptied_layers"]), res["steps"],
            fmt(stage(r, "removed")["metric"]), fmt(r["stages"][-1]["metric"])))
    for kept in SST2_GATE_COUNTS:
        f = 1 - kept / 32.0
        lines.append("| %d | one shot, no training: gradient %s, iterative %s, random %s | | | – | | |" % (
            kept, fmt(g["gradient"][f]), fmt(g["iterative:gradient"][f]), fmt(g["random:uniform"][f])))
    return lines


@table("sst2_roles", SST2)
def sst2_roles():
    """Voita's roles of the 32 heads on UD English-EWT, with importance and the 50 % plan (studies/sst2.sh)."""
    return roles_table(load(SST2)["roles"], "accuracy change", 4, "kept by the 50 % plan")
