"""bench/results/cpu_pruned_int8.json (bench/cpu_speed.sh), bert_base_table4.json and
bert_base_textbook.json (bench/bert_base_speed.sh): BERT-base's shape on CPU.

docs/results.md: scorecard_speed; docs/benchmarks.md: pruned_int8, bert_base_table4, bert_base_textbook.
"""
from .core import fmt, load, table, thousands


PRUNED_INT8 = "bench/results/cpu_pruned_int8.json"


@table("pruned_int8", PRUNED_INT8)
def pruned_int8():
    """Unpruned and 50 %-removed BERT-base, and the SST-2 shape, in fp32 and int8 (bench/cpu_speed.sh)."""
    j = load(PRUNED_INT8)
    lines = ["| model | precision | batch × length | ms | speedup | FLOP-ideal |", "|---|---|---|---:|---:|---:|"]
    for key, names in [("bert_base", {"base": "BERT-base", "uniform50": "BERT-base, 50 % removed"}),
                       ("sst2_shape", {"sst2_shape": "SST-2 shape"})]:
        recs = j[key]["records"]
        for r in sorted(recs, key=lambda r: r["batch"]):
            ref = [x for x in recs if x["batch"] == r["batch"] and x["precision"] == "fp32"][0]
            name = next(v for k, v in names.items() if "/%s" % k in r["model"])
            lines.append("| %s | %s | %d × %d | %s | ×%s | ×%s |" % (
                name, r["precision"], r["batch"], r["seq_len"], "{:,.2f}".format(r["median_ms"]),
                fmt(ref["median_ms"] / r["median_ms"], 3), fmt(r["ideal_speedup"], 3)))
    return lines


@table("scorecard_speed", PRUNED_INT8)
def scorecard_speed():
    """Michel's Table 4 claim against the CPU study's pruned BERT-base (bench/cpu_speed.sh)."""
    recs = [r for r in load(PRUNED_INT8)["bert_base"]["records"] if r["precision"] == "fp32"]
    cells = []
    for batch in sorted({r["batch"] for r in recs}):
        full = [r for r in recs if r["batch"] == batch and "/base" in r["model"]][0]
        half = [r for r in recs if r["batch"] == batch and "/uniform50" in r["model"]][0]
        cells.append("batch %d: ×%s (FLOP-ideal ×%s)" % (batch, fmt(full["median_ms"] / half["median_ms"], 3),
                                                        fmt(half["ideal_speedup"], 3)))
    return ["| claim (paper) | ours, BERT-base shape, 50 % of heads removed, length 128, 2 CPU cores | spread | command |",
            "|---|---|---|---|",
            "| Michel et al. 2019, Table 4: up to +17.5 %% examples/s at batch 16–64 on a GPU, almost "
            "nothing at batch 1 | %s | 30 repetitions, median; paired ratios in the JSON | `bash bench/cpu_speed.sh` |"
            % "; ".join(cells)]


BERT_BASE = "bench/results/bert_base_table4.json"
BERT_TEXTBOOK = "bench/results/bert_base_textbook.json"


@table("bert_base_table4", BERT_BASE)
def bert_base_table4():
    """Michel's Table 4 on CPU: the BERT-base shape unpruned, masked and with half the heads removed two
    ways, examples/s per batch (bench/bert_base_speed.sh)."""
    t = load(BERT_BASE)
    models = [("base", "unpruned ex/s"), ("masked50", "masked 50 %"), ("uniform50", "uniform 50 % removed"),
              ("layers50", "6 layers emptied")]
    rec = {(r["model"].split("/")[2], r["batch"]): r for r in t["records"]}
    lines = ["| batch | " + " | ".join(name for _, name in models) + " |", "|---:|" + "---:|" * len(models)]
    for batch in sorted({r["batch"] for r in t["records"]}):
        base = rec[("base", batch)]
        cells = ["%s (%s ms)" % (fmt(base["examples_per_s"], 1), thousands(base["median_ms"]))]
        for m, _ in models[1:]:
            r = rec[(m, batch)]
            cells.append("%s (×%s; paired ×%s)" % (fmt(r["examples_per_s"], 1), fmt(r["measured_speedup"], 3),
                                                  fmt(r["paired_speedup"], 3)))
        lines.append("| %d | %s |" % (batch, " | ".join(cells)))
    lines.append("| FLOP-ideal | | %s |" % " | ".join("×" + fmt(rec[(m, batch)]["ideal_speedup"], 3) for m, _ in models[1:]))
    return lines


@table("bert_base_textbook", BERT_TEXTBOOK)
def bert_base_textbook():
    """The unpruned BERT-base shape against a plain LibTorch forward of the same weights (bench/bert_base_speed.sh)."""
    t = load(BERT_TEXTBOOK)
    rec = {(r["batch"], r["seq_len"], "textbook" in r["model"]): r for r in t["records"]}
    lines = ["| (batch, length) | headprune ms | textbook ms | textbook / headprune |", "|---|---:|---:|---:|"]
    for seq in sorted({r["seq_len"] for r in t["records"]}):
        for batch in sorted({r["batch"] for r in t["records"]}):
            ours, book = rec[(batch, seq, False)], rec[(batch, seq, True)]
            lines.append("| (%d, %d) | %s | %s | %s (paired %s) |" % (
                batch, seq, thousands(ours["median_ms"]), thousands(book["median_ms"]),
                fmt(book["median_ms"] / ours["median_ms"], 2),
                fmt(1 / book["paired_speedup"], 2)))
    return lines
