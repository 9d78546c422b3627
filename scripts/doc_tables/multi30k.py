"""bench/results/multi30k.json (studies/multi30k.sh): the Multi30k En→De study.

docs/results.md: scorecard_multi30k, multi30k_curve, multi30k_all_but_one; docs/gates.md:
multi30k_gates, multi30k_speed; docs/pruning.md: multi30k_over_training; docs/roles.md: multi30k_roles;
docs/training.md: multi30k_training; docs/importance.md: multi30k_importance_top.
"""
from .core import fmt, load, table
from .common import GATE_NAMES, curve_grid, gate_run_cells, head_name, imp_map, importance_top, roles_table


M30K = "bench/results/multi30k.json"
M30K_TYPES = [("encoder_self", "encoder self"), ("decoder_self", "decoder self"), ("cross", "cross")]


def m30k_bleu(e, beam):
    return e["bleu"]["beam%d" % beam]["score"]


def m30k_selected(m):
    """'valid loss L at step S': the training history entry that chose the checkpoint."""
    t = m["train"]
    step = next(h["step"] for h in t["history"] if h["loss"] == t["best_metric"])
    return "validation loss %s at step %s of %s" % (fmt(t["best_metric"], 3), "{:,}".format(step),
                                                    "{:,}".format(m["train_steps"]))


def per_type(heads):
    """'6 (0-4-2) / 13 (3-4-6) / 17 (3-6-8)': heads ('type:layer:head') per attention type, per layer."""
    cells = []
    for t, _ in M30K_TYPES:
        per = [sum(1 for h in heads if h.split(":")[0] == t and int(h.split(":")[1]) == l) for l in range(3)]
        cells.append("%d (%s)" % (sum(per), "-".join(str(n) for n in per)))
    return " / ".join(cells)


def all_heads():
    return ["%s:%d:%d" % (t, l, h) for t, _ in M30K_TYPES for l in range(3) for h in range(8)]


def share(x, of):
    """x as a percentage of `of` ('–' when `of` is 0, e.g. BLEU of an untrained snapshot)."""
    return fmt(100 * x / of, 0) + " %" if of else "–"


def m30k_gate_runs(m):
    """(kept count, method, gates.json) in the study's order: the count, then PASS, PASSCONC, Hard Concrete."""
    runs = []
    for key in sorted((k for k in m if k.startswith("gates_keep")), key=lambda k: -int(k[len("gates_keep"):])):
        for method in ("pass", "passconc", "hard_concrete"):
            if method in m[key]:
                runs.append((int(key[len("gates_keep"):]), method, m[key][method]))
    return runs


def m30k_head_claims(m):
    """The scorecard's rows on the unpruned model and on single heads (Michel §3.2, §3.3)."""
    abl = imp_map(m, "importance_valid", "ablation")
    abo = m30k_all_but_one(m)[0]
    sig = [head_name(h) for h in abl["heads"] if h["significant"]]
    worst = min(abl["heads"], key=lambda h: h["delta_metric"])
    worst_layer = min(abo, key=lambda r: r["test_delta"])
    others = [r["test_delta"] for r in abo if r is not worst_layer]
    return [
        ("unpruned model (for the rows below)",
         "test_2016_flickr BLEU %s greedy, %s beam 4; out of domain, test_2017_mscoco %s greedy, %s beam 4; "
         "chosen on the %s" % (fmt(m30k_bleu(m["eval_flickr"], 1), 2), fmt(m30k_bleu(m["eval_flickr"], 4), 2),
                               fmt(m30k_bleu(m["eval_mscoco"], 1), 2), fmt(m30k_bleu(m["eval_mscoco"], 4), 2),
                               m30k_selected(m))),
        ("Michel et al. 2019 §3.2: masking one head alone rarely matters (8 of 96 encoder heads of their WMT "
         "model change BLEU significantly, p < 0.01)",
         "%d of 72 heads change validation BLEU significantly when masked alone (paired bootstrap, p < %g): "
         "%s; the largest drop: %s, %s BLEU" % (
             len(sig), abl["info"]["significance_level"], per_type(sig), head_name(worst),
             fmt(worst["delta_metric"], 2))),
        ("Michel et al. 2019 §3.3: most layers can be reduced to their best single head; the exception is "
         "the last cross-attention layer (−13.5 BLEU)",
         "one layer at a time keeps only its best head (chosen on validation), test BLEU: the largest drop "
         "%s layer %d, %s; the other 8 layers %s to %s (table below)" % (
             dict(M30K_TYPES)[worst_layer["attn_type"]], worst_layer["layer"],
             fmt(worst_layer["test_delta"], 2), fmt(min(others), 2), fmt(max(others), 2))),
    ]


def m30k_pruning_claims(m):
    """The scorecard's rows on removing heads: how many, in which order, on other data, over training,
    then fine-tuned (Michel, Budhraja)."""
    g = curve_grid(m["curve"])
    base = g["gradient"][0.0]
    agree = {(r["a"], r["attn_type"]): r for r in m["agreement_valid_mscoco"]}
    by_valid, by_coco = curve_grid(m["curve_mscoco_by_valid"]), curve_grid(m["curve_mscoco_by_mscoco"])
    removable = max(f for f, v in g["gradient"].items() if v >= base - 1)
    over = sorted((int(k), curve_grid(v)["gradient"]) for k, v in m["over_training"].items())
    ft_curve = m["curve_finetuned_%d" % m["finetune_steps"]]
    ft, before_ft = curve_grid(ft_curve, "metric_finetuned"), curve_grid(ft_curve)

    def pair(a, b, fractions):
        return "; ".join("%g %%: %s vs %s" % (100 * f, fmt(a[f], 2), fmt(b[f], 2)) for f in fractions)

    return [
        ("Michel et al. 2019: 20 % of WMT heads removed by importance without a noticeable loss",
         "%g %% of the 72 heads removed by gradient importance (chosen on validation) within 1 BLEU of the "
         "unpruned test BLEU (%s vs %s)" % (100 * removable, fmt(g["gradient"][removable], 2), fmt(base, 2))),
        ("Michel et al. 2019: importance order beats removing heads at random",
         "test BLEU, gradient vs random: " + pair(g["gradient"], g["random:uniform"], (0.25, 0.5, 0.75))),
        ("Michel et al. 2019: iterative pruning (rescoring after each step) against one-shot",
         "iterative vs one-shot: " + pair(g["iterative:gradient"], g["gradient"], (0.5, 0.75, 0.875))),
        ("Michel et al. 2019 ask whether the important heads are the same on another data set; here: in "
         "domain (Multi30k validation) vs out of domain (MSCOCO)",
         "Spearman (Pearson) of the head maps, validation vs MSCOCO: gradient %s (%s), single-head ablation "
         "%s (%s); MSCOCO BLEU with heads chosen on validation vs on MSCOCO itself: %s" % (
             fmt(agree[("gradient", "all")]["spearman"], 2), fmt(agree[("gradient", "all")]["pearson"], 2),
             fmt(agree[("ablation", "all")]["spearman"], 2), fmt(agree[("ablation", "all")]["pearson"], 2),
             pair(by_valid["gradient"], by_coco["gradient"], (0.25, 0.5, 0.75)))),
        ("Michel et al. 2019 §6: the later in training, the more of a model's quality rests on a subset of heads",
         "test BLEU with 50 %% of heads removed by gradient, as a share of the snapshot's unpruned BLEU: %s" %
         ", ".join("step %s %s" % ("{:,}".format(step), share(c[0.5], c[0.0])) for step, c in over)),
        ("Budhraja et al. 2020: random heads removed, then fine-tuning, come close to importance-based pruning",
         "half the heads removed, test BLEU after %d fine-tuning steps (before them): %s" % (
             m["finetune_steps"], ", ".join("%s %s (%s)" % (st, fmt(ft[st][0.5], 2), fmt(before_ft[st][0.5], 2))
                                            for st in ft))),
    ]


def m30k_gate_role_claims(m):
    """The scorecard's rows on learned gates at 36 of 72 heads and on Voita's head roles."""
    roles = m["roles"]
    role_heads = [h for h in roles["heads"] if h["positional"] or h["syntactic"] or h["rare"]]
    kept36 = {r[1]: r[2] for r in m30k_gate_runs(m) if r[0] == 36}

    def gate_cell(r):
        return "%d heads%s, %s BLEU, %d layer(s) emptied" % (
            r["result"]["n_kept"], "" if r["result"]["reached_target"] else " (target %d missed)" % r["result"]["target_kept"],
            fmt(r["stages"][-1]["metric"], 2), len(r["emptied_layers"]))

    return [
        ("PASS/PASSCONC: gates reach the exact head count; the concentrator empties whole layers; Voita et "
         "al.'s Hard Concrete gates beside them",
         "36 of 72 heads: %s (gates table below)" % "; ".join(
             "%s %s" % (GATE_NAMES[k], gate_cell(v)) for k, v in kept36.items())),
        ("Voita et al. 2019: the heads that matter have roles: positional, syntactic, rare-word",
         "of the 24 encoder heads on %d UD English-EWT sentences: %d positional, %d syntactic, %d rare-word "
         "(%d with any role); share with a role among the heads PASSCONC kept: %s of %d, pruned: %s of %d" % (
             roles["sentences"], sum(h["positional"] for h in roles["heads"]),
             sum(h["syntactic"] for h in roles["heads"]), sum(h["rare"] for h in roles["heads"]), len(role_heads),
             fmt(roles["shares"]["kept"]["any"], 2), roles["shares"]["kept"]["heads"],
             fmt(roles["shares"]["pruned"]["any"], 2), roles["shares"]["pruned"]["heads"])),
    ]


@table("scorecard_multi30k", M30K)
def scorecard_multi30k():
    """Papers' claims against the Multi30k study (studies/multi30k.sh): one model, one seed."""
    m = load(M30K)
    rows = m30k_head_claims(m) + m30k_pruning_claims(m) + m30k_gate_role_claims(m)
    lines = ["| claim (paper) | ours, Multi30k En→De (%s, %s steps, 72 heads) | spread | command |" % (
        m["config"], "{:,}".format(m["train_steps"])), "|---|---|---|---|"]
    lines += ["| %s | %s | one seed | `bash studies/multi30k.sh` |" % (c, o) for c, o in rows]
    return lines


@table("multi30k_curve", M30K)
def multi30k_curve():
    """Test BLEU against the share of heads pruned, per strategy (studies/multi30k.sh)."""
    m = load(M30K)
    grids = [curve_grid(m["curve"]), curve_grid(m["curve_by_type"])]
    lines = []
    for grid, n in zip(grids, (72, 24)):
        fractions = sorted({f for st in grid.values() for f in st})
        lines += ["| strategy | " + " | ".join("%g %% (%d)" % (100 * f, round(f * n)) for f in fractions) + " |",
                  "|---|" + "---:|" * len(fractions)]
        for st, pts in grid.items():
            lines.append("| %s | %s |" % (st, " | ".join(fmt(pts[f], 2) if f in pts else "–" for f in fractions)))
        lines.append("")
    return lines[:-1]


def m30k_all_but_one(m):
    """Per attention layer (Michel §3.3): the head that alone keeps the most validation BLEU, and the
    test BLEU with only that head (the other 7 masked), beside the unpruned test BLEU."""
    valid = imp_map(m, "importance_valid", "all_but_one")
    test = imp_map(m, "importance_test", "all_but_one")
    test_score = {head_name(h): h["score"] for h in test["heads"]}
    rows = []
    for r in valid["info"]["per_layer"]:
        name = "%s:%d:%d" % (r["attn_type"], r["layer"], r["best_head"])
        rows.append(dict(r, test_metric=test_score[name], test_delta=test_score[name] - test["info"]["base_metric"]))
    return rows, valid["info"]["base_metric"], test["info"]["base_metric"]


@table("multi30k_all_but_one", M30K)
def multi30k_all_but_one():
    """Each attention layer reduced to one head (Michel §3.3), chosen on validation (studies/multi30k.sh)."""
    rows, valid_base, test_base = m30k_all_but_one(load(M30K))
    lines = ["| attention | layer | best single head (validation) | validation BLEU with only it | test BLEU with only it "
             "| test difference |", "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %s | %d | %d | %s | %s | %s |" % (
            dict(M30K_TYPES)[r["attn_type"]], r["layer"], r["best_head"], fmt(r["best_head_metric"], 2),
            fmt(r["test_metric"], 2), fmt(r["test_delta"], 2)))
    lines.append("| all heads | | | %s | %s | |" % (fmt(valid_base, 2), fmt(test_base, 2)))
    return lines


@table("multi30k_gates", M30K)
def multi30k_gates():
    """Learned gates and Michel's plans at the same head counts, test BLEU (studies/multi30k.sh)."""
    m = load(M30K)
    g = curve_grid(m["curve"])
    # Michel's iterative plans at the gate counts come from the fine-tuned curve's own points (its
    # rescoring path runs through those fractions only, so they are not the main curve's heads).
    plans = {p["fraction"]: p for p in m["curve_finetuned"]["points"] if p["strategy"] == "iterative:gradient"}
    lines = ["| heads kept of 72 | method | encoder self / decoder self / cross (per layer) | emptied layers | steps | test BLEU |",
             "|---:|---|---|---|---:|---:|",
             "| 72 | unpruned | %s | – | – | %s |" % (per_type(all_heads()), fmt(g["gradient"][0.0], 2))]
    for kept, method, r in m30k_gate_runs(m):
        res = r["result"]
        count, name = gate_run_cells(method, res)
        lines.append("| %s | %s | %s | %s | %d | %s |" % (
            count, name, per_type(res["kept"]),
            ", ".join(r["emptied_layers"]) or "–", res["steps"], fmt(r["stages"][-1]["metric"], 2)))
        if method == "hard_concrete" and 1 - kept / 72.0 in plans:
            f = 1 - kept / 72.0
            heads = [h for h in all_heads() if h not in plans[f]["pruned"]]
            lines.append("| %d | iterative gradient (Michel) | %s | – | – | %s |" % (kept, per_type(heads), fmt(plans[f]["metric"], 2)))
            lines.append("| %d | iterative gradient + %d fine-tuning steps | the same | – | %d | %s |" % (
                kept, m["curve_finetuned"]["finetune_steps"], m["curve_finetuned"]["finetune_steps"],
                fmt(plans[f]["metric_finetuned"], 2)))
    return lines


@table("multi30k_over_training", M30K)
def multi30k_over_training():
    """Test BLEU of snapshots with heads removed by gradient importance (Michel §6; studies/multi30k.sh)."""
    m = load(M30K)
    over = sorted((int(k), curve_grid(v)["gradient"]) for k, v in m["over_training"].items())
    fractions = sorted(over[0][1])
    lines = ["| heads pruned of 72 | " + " | ".join("step %s" % "{:,}".format(s) for s, _ in over) + " |",
             "|---:|" + "---:|" * len(over)]
    for f in fractions:
        lines.append("| %d (%g %%) | %s |" % (round(72 * f), 100 * f, " | ".join(
            "%s (%s)" % (fmt(c[f], 2), share(c[f], c[0.0])) for _, c in over)))
    return lines


@table("multi30k_roles", M30K)
def multi30k_roles():
    """Voita's roles of the 24 encoder heads on UD English-EWT, with importance and the PASSCONC plan (studies/multi30k.sh)."""
    return roles_table(load(M30K)["roles"], "BLEU change", 2, "kept by PASSCONC (36 of 72)")


@table("multi30k_training", M30K)
def multi30k_training():
    """The Multi30k model over training: validation loss (the selection rule) and each snapshot's test BLEU (studies/multi30k.sh)."""
    m = load(M30K)
    t = m["train"]
    bleu = {int(k): curve_grid(v)["gradient"][0.0] for k, v in m["over_training"].items()}
    lines = ["| step | validation loss | test_2016_flickr BLEU, greedy | note |", "|---:|---:|---:|---|"]
    for h in t["history"]:
        note = "chosen (lowest validation loss)" if h["loss"] == t["best_metric"] else ""
        lines.append("| %s | %s | %s | %s |" % ("{:,}".format(h["step"]), fmt(h["loss"], 3),
                                                fmt(bleu[h["step"]], 2) if h["step"] in bleu else "–", note))
    return lines


@table("multi30k_speed", M30K)
def multi30k_speed():
    """Latency of the PASS and PASSCONC models beside the unpruned one (studies/multi30k.sh)."""
    m = load(M30K)
    b = m["bench"]
    runs = {"unpruned": None}
    for k, method, g in m30k_gate_runs(m):
        if method in ("pass", "passconc"):
            runs["gates_keep%d/%s/model" % (k, method)] = (k, method, g)
    lines = ["| model | heads | emptied attention layers | batch 1, ms | batch 16, ms | FLOP-ideal | measured, batch 1 / 16 |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for key, run in runs.items():
        recs = {r["batch"]: r for r in b["records"]
                if (r["model"].endswith(key) if run else r["model"].endswith("/train/best"))}
        name = "unpruned" if run is None else "%s, %d heads" % (GATE_NAMES[run[1]], run[0])
        lines.append("| %s | %d | %d | %s | %s | ×%s | ×%s / ×%s |" % (
            name, recs[1]["heads"], 0 if run is None else len(run[2]["emptied_layers"]),
            fmt(recs[1]["median_ms"], 2), fmt(recs[16]["median_ms"], 2), fmt(recs[1]["ideal_speedup"], 2),
            fmt(recs[1]["measured_speedup"], 2), fmt(recs[16]["measured_speedup"], 2)))
    return lines


@table("multi30k_importance_top", M30K)
def multi30k_importance_top():
    """The heads whose single removal costs most, and their rank under the other methods (studies/multi30k.sh)."""
    return importance_top(load(M30K), "importance_valid", ["ablation", "gradient", "lrp", "confidence"], "BLEU change", 2, 8)
