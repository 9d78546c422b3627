"""bench/results/stories260k.json (studies/stories260k.py): the scorers against random plans on
stories260K.

docs/importance.md: stories260k_scorers, stories260k_uniform.
"""
from .core import load, table


STORIES = "bench/results/stories260k.json"


@table("stories260k_scorers", STORIES)
def stories260k_scorers():
    """Every scorer's default plan on stories260K beside random plans of the same size: held-out perplexity
    with the heads masked, before any fine-tuning (studies/stories260k.py)."""
    s = load(STORIES)
    rows = s["targets"]
    head = "| scorer | default normalization |"
    rule = "| --- | --- |"
    for r in rows:
        head += (" %d of %d heads removed: perplexity | vs random (mean) | removed per layer | unnormalized scores |"
                 % (r["count"], s["heads"]))
        rule += " --- | --- | --- | --- |"
    lines = [head, rule]
    rnd = "| random (%d seeded plans) | — |" % s["n_random"]
    for r in rows:
        rnd += " %.1f ± %.1f | 1 | — | — |" % (r["random"]["mean"], r["random"]["sd"])
    lines.append(rnd)
    same = "| random, the same count from every layer (%d plans) | — |" % s["n_random"]
    for r in rows:
        pl = r["random_per_layer"]
        same += " %.1f ± %.1f | ×%.2f | %s | — |" % (pl["mean"], pl["sd"], pl["mean"] / r["random"]["mean"],
                                                   " / ".join([str(r["count"] // s["layers"])] * s["layers"]))
    lines.append(same)
    for m in rows[0]["methods"]:
        line = "| `%s` | %s |" % (m, rows[0]["methods"][m]["normalization"])
        for r in rows:
            v = r["methods"][m]
            ratio = v["perplexity"] / r["random"]["mean"]
            mark = "" if v["beats_random"] else " **(worse than random)**"
            line += " %.1f | ×%.2f%s | %s | %s |" % (v["perplexity"], ratio, mark, " / ".join(map(str, v["per_layer"])),
                                                    "same" if v["normalization"] == "none" else
                                                    "%.1f" % v["unnormalized"]["perplexity"])
        lines.append(line)
    d = s["data"]
    lines.append("")
    lines.append("Unpruned: perplexity %.2f on %d held-out sequences of %d tokens; heads scored on %d other "
                 "sequences (both %s). `%s` (%s, %s threads, %s, %.0f s)."
                 % (s["unpruned_perplexity"], d["heldout"][0], d["heldout"][1], d["calibration"][0], d["how"],
                    s["command"], s["cpu"], s["threads"], s["date"], s["seconds"]))
    return lines


@table("stories260k_uniform", STORIES)
def stories260k_uniform():
    """Uniform plans (--shape uniform) on stories260K: each scorer's beside seeded random uniform plans,
    held-out perplexity with the heads masked (studies/stories260k.py, its "uniform" rows)."""
    s = load(STORIES)
    rows = [r for r in s["targets"] if "uniform" in r]
    if not rows:
        return ["not in this results file: rerun studies/stories260k.py"]
    head, rule = "| scorer |", "| --- |"
    for r in rows:
        head += " %d of %d heads: perplexity | vs random (mean) | groups × heads kept per layer |" % (r["count"], s["heads"])
        rule += " --- | --- | --- |"
    lines = [head, rule]
    rnd = "| random uniform plans (%d seeded) |" % s["n_random"]
    for r in rows:
        u = r["uniform"]["random"]
        shapes = sorted({"%d × %d" % tuple(x) for x in u["shapes"]})
        rnd += " %.1f ± %.1f | 1 | %s |" % (u["mean"], u["sd"], " or ".join(shapes))
    lines.append(rnd)
    for m in rows[0]["uniform"]["methods"]:
        line = "| `%s` |" % m
        for r in rows:
            v, mean = r["uniform"]["methods"][m], r["uniform"]["random"]["mean"]
            mark = "" if v["beats_random"] else " **(worse than random)**"
            line += " %.1f | ×%.2f%s | %d × %d |" % (v["perplexity"], v["perplexity"] / mean, mark, *v["shape"])
        lines.append(line)
    lines.append("")
    lines.append("Same run, model and data as the table above (per-layer plans of the same counts there).")
    return lines
