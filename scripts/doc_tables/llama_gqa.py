"""bench/results/llama_gqa.json (studies/llama_gqa.sh): grouped-query attention, query heads against
key/value groups.

docs/results.md: scorecard_llama; docs/llama.md: llama_curve, llama_curve_finetuned, llama_speed.
"""
from .core import fmt, load, table, thousands
from .common import curve_grid


LLAMA = "bench/results/llama_gqa.json"
ONE_SEED = "one seed (over 3 seeds, on held-out text: the next section)"


def llama_bench(l):
    """The LLaMA study's bench records by (model, batch): a pruned model by its run directory (p50_head,
    p50_group), the unpruned checkpoint by its own name (best)."""
    rec = {}
    for r in l["bench"]["records"]:
        parts = r["model"].split("/")
        rec[(parts[-2] if parts[-1] == "model" else parts[-1], r["batch"])] = r
    return rec


@table("scorecard_llama", LLAMA)
def scorecard_llama():
    """Grouped-query attention: query heads vs key/value groups (studies/llama_gqa.sh); no paper has it."""
    l = load(LLAMA)
    g, ft = curve_grid(l["curve"]), curve_grid(l["curve_finetuned"], "metric_finetuned")
    bench = llama_bench(l)
    return ["| question | ours, LLaMA-style decoder on Tiny Shakespeare (8 query heads / 2 key-value heads × 4 layers) "
            "| spread | command |", "|---|---|---|---|",
            "| at 50 %% of query heads, remove query heads or whole key/value groups? | validation perplexity "
            "(unpruned %s): query heads %s, groups %s, balanced %s, random %s; after %d fine-tuning steps: "
            "query heads %s, groups %s | %s | `bash studies/llama_gqa.sh` |" % (
                fmt(g["gradient"][0.0], 1), fmt(g["gradient"][0.5], 1), fmt(g["gradient:group"][0.5], 1),
                fmt(g["gradient:balanced"][0.5], 1), fmt(g["random:uniform"][0.5], 1), l["finetune_steps"],
                fmt(ft["gradient"][0.5], 1), fmt(ft["gradient:group"][0.5], 1), ONE_SEED),
            "| what does the group plan save? | batch 16 × %d latency: query-head plan ×%s (FLOP-ideal ×%s), "
            "group plan ×%s (×%s) | %d repetitions, median | `bash studies/llama_gqa.sh` |" % (
                bench[("p50_head", 16)]["seq_len"],
                fmt(bench[("p50_head", 16)]["measured_speedup"], 3), fmt(bench[("p50_head", 16)]["ideal_speedup"], 3),
                fmt(bench[("p50_group", 16)]["measured_speedup"], 3), fmt(bench[("p50_group", 16)]["ideal_speedup"], 3),
                l["bench"]["reps"])]


LLAMA_CURVE = ["gradient", "gradient:group", "gradient:balanced", "random:uniform"]


def llama_pruned_label(n, l):
    """'8 (2 groups)': query heads pruned and the whole groups they make (4 query heads per group here)."""
    group = l["curve"]["n_heads"] // 8  # 8 key/value groups in the study's model
    return "0 of %d" % l["curve"]["n_heads"] if n == 0 else "%d (%d groups)" % (n, n // group)


@table("llama_curve", LLAMA)
def llama_curve():
    """Validation perplexity against query heads pruned, four plans, no fine-tuning (studies/llama_gqa.sh)."""
    l = load(LLAMA)
    rows = {}
    for p in l["curve"]["points"]:
        rows.setdefault(p["n_pruned"], {})[p["strategy"]] = p["metric"]
    lines = ["| query heads pruned | gradient (query heads) | gradient:group | gradient:balanced | random:uniform |",
             "|---:|---:|---:|---:|---:|"]
    for n, r in sorted(rows.items()):
        lines.append("| %s | %s |" % (llama_pruned_label(n, l), " | ".join(thousands(r[s]) for s in LLAMA_CURVE)))
    return lines


@table("llama_curve_finetuned", LLAMA)
def llama_curve_finetuned():
    """The same for query heads and whole groups, each point fine-tuned (studies/llama_gqa.sh)."""
    l = load(LLAMA)
    rows = {}
    for p in l["curve_finetuned"]["points"]:
        rows.setdefault(p["n_pruned"], {})[p["strategy"]] = p
    lines = ["| query heads pruned | gradient (query heads) | gradient:group |", "|---:|---:|---:|"]
    for n, r in sorted(rows.items()):
        lines.append("| %s | %s (from %s) | %s (from %s) |" % (
            llama_pruned_label(n, l), *(x for s in ("gradient", "gradient:group")
                                        for x in (thousands(r[s]["metric_finetuned"]), thousands(r[s]["metric"])))))
    return lines


@table("llama_speed", LLAMA)
def llama_speed():
    """The 50 % models' latency beside the unpruned one (studies/llama_gqa.sh's bench stage)."""
    l = load(LLAMA)
    names = {"best": "unpruned", "p50_head": "16 query heads pruned (gradient)",
             "p50_group": "4 groups pruned (gradient:group)"}
    rec = llama_bench(l)
    batches = sorted({r["batch"] for r in l["bench"]["records"]})
    seq = l["bench"]["records"][0]["seq_len"]
    lines = ["| model | parameters | " + " | ".join("batch %d × %d ms | speedup (FLOP-ideal)" % (b, seq) for b in batches)
             + " |", "|---|---:|" + "---:|---:|" * len(batches)]
    for key, name in names.items():
        r = {b: rec[(key, b)] for b in batches}
        cells = ["%s | ×%s (×%s)" % (fmt(r[b]["median_ms"], 2), fmt(r[b]["measured_speedup"], 3), fmt(r[b]["ideal_speedup"], 3))
                 for b in batches]
        lines.append("| %s | %s | %s |" % (name, thousands(r[batches[0]]["params"], 0), " | ".join(cells)))
    return lines
