"""bench/results/sst2_precision.json (bench/precision_sst2.sh) and
bench/results/importance_cost_sst2.json (bench/importance_cost.sh): what the SST-2 model costs.

docs/benchmarks.md: sst2_precision; docs/importance.md: importance_cost.
"""
from .core import fmt, load, table


PRECISION = "bench/results/sst2_precision.json"


@table("sst2_precision", PRECISION)
def sst2_precision():
    """The SST-2 model and its 50 %-pruned version in fp32, bf16 and int8: dev accuracy, latency (bench/precision_sst2.sh)."""
    d = load(PRECISION)
    full = d["records"][0]["model"].rsplit(" [", 1)[0]  # bench's first model: the unpruned one
    ev = {(e["checkpoint"], e["precision"]): e for e in d["eval"]}
    rec = {(r["model"], r["batch"], r["seq_len"]): r for r in d["records"]}
    lines = ["| model | precision | dev accuracy | loss | batch 1 × 32 ms | batch 32 × 32 ms | batch 32 × 64 ms | speedup at 32 × 64 |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for ckpt in sorted({c for c, _ in ev}, key=lambda c: c != full):
        for prec in ("fp32", "bf16", "int8"):
            e, m = ev[(ckpt, prec)], "%s [%s]" % (ckpt, prec)
            lines.append("| %s | %s | %s | %s | %s | %s | %s | ×%s |" % (
                "unpruned" if ckpt == full else "50 % pruned", prec, fmt(e["accuracy"]), fmt(e["loss"]),
                fmt(rec[(m, 1, 32)]["median_ms"], 2), fmt(rec[(m, 32, 32)]["median_ms"], 2),
                fmt(rec[(m, 32, 64)]["median_ms"], 2), fmt(rec[(m, 32, 64)]["measured_speedup"], 2)))
    return lines


IMPORTANCE_COST = "bench/results/importance_cost_sst2.json"


@table("importance_cost", IMPORTANCE_COST)
def importance_cost():
    """Each scorer's time as multiples of one forward and one forward + backward pass (bench/importance_cost.sh)."""
    d = load(IMPORTANCE_COST)
    lines = ["| method | × one forward pass | × one forward + backward pass | seconds |", "| --- | ---: | ---: | ---: |"]
    for m, r in d["methods"].items():
        lines.append("| %s | %s | %s | %s |" % (m, fmt(r["x_forward"], 2), fmt(r["x_forward_backward"], 2), fmt(r["seconds"], 2)))
    lines.append("| *reference passes* | forward %s s | forward + backward %s s | |" % (fmt(d["forward_s"], 2), fmt(d["forward_backward_s"], 2)))
    return lines
