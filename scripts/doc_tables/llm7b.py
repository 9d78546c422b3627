"""bench/results/llm7b.json and bench/results/llm7b_cuda.json (bench/llm7b.py): the 7B-class path on
CPU and on a GPU.

docs/large_models.md: llm7b, llm7b_cuda.
"""
from .core import fmt, load, table


LLM7B = "bench/results/llm7b.json"
LLM7B_CUDA = "bench/results/llm7b_cuda.json"


def llm7b_table(path):
    """The 7B-class path (bench/llm7b.py): time, peak RSS and (on a GPU) peak device memory per step."""
    t = load(path)
    ck = t["checkpoint_bytes"]
    gib = lambda b: "%.2f" % (b / 2**30)
    gpu = any(r.get("device_peak_bytes") for r in t["steps"])
    head = "| step | what | seconds | peak RSS GiB | × checkpoint |"
    rule = "|---|---|---:|---:|---:|"
    if gpu:
        head += " GPU peak GiB | GPU × checkpoint |"
        rule += "---:|---:|"
    lines = [head + " exit |", rule + "---:|"]
    what = {"info": "config and headers", "importance": "gradient of every query head and KV group, %d × %d tokens"
            % (t["calibration"]["samples"], t["calibration"]["length"]),
            "prune": "25 % of the KV groups removed, saved, reloaded and checked", "info_pruned": "the pruned checkpoint",
            "export": "HF directory, dense, sharded"}
    for r in t["steps"]:
        row = "| %s | %s | %s | %s | %s |" % (r["step"], what.get(r["step"], ""), fmt(r["seconds"], 1),
                                              gib(r["peak_rss_bytes"]), fmt(r["rss_over_checkpoint"], 3))
        if gpu:
            d = r.get("device_peak_bytes")
            row += " %s | %s |" % ((gib(d), fmt(d / ck, 3)) if d else ("-", "-"))
        lines.append(row + " %d |" % r["exit_code"])
    m, c = t["machine"], t["pruned"].get("checks") or {}
    lines.append("")
    lines.append("%s, %d cores, %s GiB of memory (%s GiB available at the start), %s threads, device %s; checkpoint "
                 "%s GiB (%.2f B parameters, bf16, %d layers), %s. Pruned: %s heads removed; logits masked vs removed "
                 "max |diff| %s, reloaded %s." % (
                     m["cpu"], m["cores"], gib(m["memory_bytes"]), gib(m["available_at_start_bytes"]), m["threads"],
                     m["device"], gib(ck), t["model"]["parameters"] / 1e9, t["model"]["num_hidden_layers"], t["date"],
                     t["pruned"].get("heads_removed", "?"),
                     "%.2g" % c["masked_vs_removed_max_abs_diff"] if c.get("masked_vs_removed_max_abs_diff") is not None else "-",
                     "%.2g" % c["reloaded_max_abs_diff"] if c.get("reloaded_max_abs_diff") is not None else "-"))
    return lines


@table("llm7b", LLM7B)
def llm7b():
    return llm7b_table(LLM7B)


@table("llm7b_cuda", LLM7B_CUDA)
def llm7b_cuda():
    return llm7b_table(LLM7B_CUDA)
