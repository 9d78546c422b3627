"""bench/results/demo.json (`headprune demo`) and bench/results/synthetic_mt.json (the synthetic
translation task trained alone; its text compares with the demo's run).

README.md: demo; docs/training.md: synthetic_mt.
"""
from .core import fmt, load, table


DEMO = "bench/results/demo.json"
SYNTHETIC_MT = "bench/results/synthetic_mt.json"
DEMO_METRICS = {"accuracy": ("accuracy", 3), "perplexity": ("perplexity", 2), "bleu": ("greedy BLEU", 2)}


def minutes_seconds(s):
    s = int(round(s))
    return "%d min %d s" % (s // 60, s % 60) if s >= 60 else "%d s" % s


@table("demo", DEMO)
def demo():
    """`headprune demo` (README): each family trained, half its heads removed, fine-tuned and timed."""
    d = load(DEMO)
    lines = ["| family | metric | trained | half the heads removed | + fine-tuned | forward, batch 64 × 16 |",
             "| --- | --- | --- | --- | --- | --- |"]
    diffs = []
    for i, f in enumerate(d["families"]):
        name, digits = DEMO_METRICS[f["metric"]]
        st = {s["stage"]: s["metric"] for s in f["stages"]}
        sp = f["speed"]
        speed = ("×%s faster (FLOP-ideal ×%s)" if i == 0 else "×%s (×%s)") % (fmt(sp["paired_speedup"], 2),
                                                                              fmt(sp["ideal_speedup"], 2))
        lines.append("| %s | %s | %s | %s | %s | %s |" % (f["family"], name, fmt(st["before"], digits),
                                                          fmt(st["removed"], digits), fmt(st["fine-tuned"], digits), speed))
        diffs += [f["checks"]["masked_vs_removed_max_abs_diff"], f["checks"]["reloaded_max_abs_diff"]]
    env = d["environment"]
    lines.append("")
    lines.append("%s, %d threads, %s; %s in all%s. Masked and physically removed heads give the same outputs, "
                 "and each pruned checkpoint reloads to them: max |diff| %s over the families." % (
                     env["cpu"], env["threads"], env["blas_kernels"], minutes_seconds(d["wall_s"]),
                     ", " + d["date"] if "date" in d else "", "%g" % max(diffs)))
    return lines


@table("synthetic_mt", SYNTHETIC_MT)
def synthetic_mt():
    """The synthetic translation task trained alone (docs/training.md): validation loss, BLEU, time."""
    t = load(SYNTHETIC_MT)
    hist = t["train"]["history"]
    best = min(h["loss"] for h in hist)
    lines = ["| step | " + " | ".join(str(h["step"]) for h in hist) + " |", "| --- |" + " ---: |" * len(hist),
             "| valid loss | " + " | ".join(("**%s**" if h["loss"] == best else "%s") % fmt(h["loss"]) for h in hist) + " |"]
    bleu = t["eval"]["bleu"]
    lines.append("")
    lines.append("Greedy BLEU **%s**, beam 4 **%s** on the %d validation sequences; %s of training on the %s with "
                 "`--threads %d`, `OPENBLAS_CORETYPE` %s, %s." % (
                     fmt(bleu["beam1"]["score"], 2), fmt(bleu["beam4"]["score"], 2), t["eval"]["n_examples"],
                     minutes_seconds(t["train"]["wall_s"]), t["cpu"], t["threads"], t["openblas_coretype"], t["date"]))
    demo_mt = next(f for f in load(DEMO)["families"] if f["family"] == "encoder_decoder")
    trained = next(s for s in demo_mt["stages"] if s["stage"] == "before")
    lines.append("The demo trains the same configuration with the same seed (its run in `%s`: valid loss %s, "
                 "greedy BLEU %s before pruning)." % (DEMO, fmt(trained["loss"]), fmt(trained["metric"], 2)))
    return lines
