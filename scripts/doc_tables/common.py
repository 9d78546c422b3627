"""Helpers shared by the study modules (sst2_study, multi30k, llama_gqa, seeds, methods): a run's
stage, a curve as a grid, importance maps, the top-heads and roles tables, gate runs' cells. Covers no
results file and registers no table.
"""
from .core import fmt


def stage(run, name):
    return next(x for x in run["stages"] if x["stage"] == name)


def gate_run_cells(method, res):
    """A gate run's kept count ('10 (target 8, missed)' when it missed) and its method's name (Hard
    Concrete with its λ search's rollbacks and final λ)."""
    count = "%d" % res["n_kept"] if res["reached_target"] else "%d (target %d, missed)" % (res["n_kept"], res["target_kept"])
    name = GATE_NAMES[method]
    if method == "hard_concrete":
        name += " (λ search, %d rollbacks, final λ %s)" % (res["rollbacks"], "%.3g" % res["final_coef"])
    return count, name


def curve_grid(curve, key="metric"):
    grid = {}
    for p in curve["points"]:
        grid.setdefault(p["strategy"], {})[p["fraction"]] = p[key]
    return grid


GATE_NAMES = {"pass": "PASS", "passconc": "PASSCONC", "hard_concrete": "Hard Concrete"}


def imp_map(m, key, method):
    """One method's map from the importance.json stored under `key` in a study's results."""
    return next(x for x in m[key]["maps"] if x["method"] == method)


def head_name(h):
    return "%s:%d:%d" % (h["attn_type"], h["layer"], h["head"])


def roles_table(roles, change, digits, plan):
    """One row per head: Voita's roles (positional, rare-word, the best syntactic relation against its
    baseline), gradient importance, the single-head ablation change, and whether `plan` kept it."""
    lines = ["| head | positional share @ offset | rare-word share | best relation: accuracy / baseline | role | "
             "gradient | single-head ablation (%s) | %s |" % (change, plan),
             "|---|---:|---:|---|---|---:|---:|:---:|"]
    for h in roles["heads"]:
        best = max(h["relations"], key=lambda r: r["accuracy"] - r["baseline"])
        role = ", ".join(n for n in ("positional", "syntactic", "rare") if h[n]) or "–"
        lines.append("| %s | %s %% @ %+d | %s %% | %s %s: %s %% / %s %% | %s | %s | %s | %s |" % (
            h["head"].split(":", 1)[1], fmt(100 * h["positional_share"], 1), h["positional_offset"],
            fmt(100 * h["rare_share"], 1), best["relation"], best["direction"].replace("->", "→"),
            fmt(100 * best["accuracy"], 1), fmt(100 * best["baseline"], 1), role, fmt(h["importance"]["gradient"], 3),
            fmt(0.0 - h["importance"]["ablation"], digits) if "ablation" in h["importance"] else "–",
            "–" if h["pruned"] else "kept"))
    kept = [h for h in roles["heads"] if not h["pruned"]]
    gone = [h for h in roles["heads"] if h["pruned"]]
    mean = lambda hs, k: fmt(100 * sum(h[k] for h in hs) / len(hs), 1) if hs else "–"
    lines.append("| mean, kept (%d) / removed (%d) | %s %% / %s %% | %s %% / %s %% | | | | | |" % (
        len(kept), len(gone), mean(kept, "positional_share"), mean(gone, "positional_share"),
        mean(kept, "rare_share"), mean(gone, "rare_share")))
    return lines


def importance_top(s, key, methods, change, digits, n):
    """The n heads whose single removal costs most (ablation), their change and significance, and their
    rank under each of `methods` (1 = most important)."""
    ranks = {}
    for method in methods:
        mp = imp_map(s, key, method)
        order = sorted(mp["heads"], key=lambda h: h["score"], reverse=mp["higher_is_important"])
        ranks[method] = {head_name(h): i + 1 for i, h in enumerate(order)}
    ablation = imp_map(s, key, "ablation")
    abl = {head_name(h): h for h in ablation["heads"]}
    top = sorted(abl, key=lambda n: ranks["ablation"][n])[:n]
    names = {"lrp": "LRP", "output_norm": "output norm"}
    lines = ["| head | %s when masked alone | significant (p < %g) | rank: %s |"
             % (change, ablation["info"]["significance_level"], " | ".join(names.get(m, m) for m in methods)),
             "|---|---:|---|" + "---:|" * len(methods)]
    for h in top:
        lines.append("| %s | %s | %s | %s |" % (h, fmt(abl[h]["delta_metric"], digits), "yes" if abl[h]["significant"] else "no",
                                               " | ".join(str(ranks[k][h]) for k in methods)))
    return lines
