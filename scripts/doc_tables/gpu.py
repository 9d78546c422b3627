"""bench/results/gpu_table4.json (scripts/gpu.sh table4) and bench/results/hf_client.json
(tests/gpu/hf_client.py): the GPU machine's runs.

docs/gpu.md: gpu_table4, hf_client; docs/results.md: scorecard_speed_gpu.
"""
from .core import fmt, load, table


GPU_TABLE4 = "bench/results/gpu_table4.json"
HF_CLIENT = "bench/results/hf_client.json"


@table("gpu_table4", GPU_TABLE4)
def gpu_table4():
    """Michel's Table 4 on a GPU: BERT-base shape, fp32 and bf16, headprune beside PyTorch eager (scripts/gpu.sh)."""
    t = load(GPU_TABLE4)
    lines = ["| precision | batch | unpruned ms | eager ms | headprune / eager | 50 % masked ms | 50 % removed ms "
             "(measured ×, FLOP-ideal ×) | eager, removed ms | 6 layers emptied ms (measured ×) | GPU peak MiB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in t["rows"]:
        b, m, u, l = r["base"], r["masked50"], r["uniform50"], r["layers50"]
        lines.append("| %s | %d | %s | %s | %s | %s | %s (×%s, ×%s) | %s | %s (×%s) | %s |" % (
            r["precision"], r["batch"], fmt(b["median_ms"], 2), fmt(b["eager_ms"], 2),
            fmt(b["headprune_over_eager"], 2), fmt(m["median_ms"], 2), fmt(u["median_ms"], 2),
            fmt(u["measured_speedup"], 3), fmt(u["ideal_speedup"], 3), fmt(u["eager_ms"], 2), fmt(l["median_ms"], 2),
            fmt(l["measured_speedup"], 3), fmt(b["gpu_peak_mib"], 0)))
    return lines


@table("scorecard_speed_gpu", GPU_TABLE4)
def scorecard_speed_gpu():
    """Michel's Table 4 claim against the GPU run (scripts/gpu.sh table4)."""
    t = load(GPU_TABLE4)
    gpu = t["environment"]["eager"].get("gpu", "GPU")
    cells = []
    for p in ("fp32", "bf16"):
        rows = [r for r in t["rows"] if r["precision"] == p]
        cells.append("%s: %s" % (p, ", ".join("batch %d ×%s" % (r["batch"], fmt(r["uniform50"]["measured_speedup"], 3))
                                              for r in rows)))
    ideal = t["rows"][0]["uniform50"]["ideal_speedup"]
    return ["| claim (paper) | ours, BERT-base shape, 50 %% of heads removed, length 128, one %s | spread | command |" % gpu,
            "|---|---|---|---|",
            "| Michel et al. 2019, Table 4: up to +17.5 %% examples/s at batch 16–64 on a GPU, almost "
            "nothing at batch 1 | %s (FLOP-ideal ×%s) | %d repetitions, median | `bash scripts/gpu.sh table4` |"
            % ("; ".join(cells), fmt(ideal, 3), t["environment"]["reps"])]


@table("hf_client", HF_CLIENT)
def hf_client():
    """transformers loading headprune's HF exports on the GPU machine (tests/gpu/hf_client.py)."""
    t = load(HF_CLIENT)
    lines = ["| case | layout | loaded by | max. abs. logit difference | result |", "|---|---|---|---:|---|"]
    for r in t["records"]:
        who = ("%s (transformers %s)" % (r["hf_class"], r["transformers"])) if r.get("loaded") else "–"
        diff = "%.1e" % r["max_abs_diff"] if "max_abs_diff" in r else "–"
        if r.get("ok"):
            result = "same logits"
        elif not r.get("loaded", True):
            result = "refused: " + r.get("error", "").split(" For details")[0].replace("|", "/")
        else:
            result = "DIFFERENT: " + r.get("error", "")
        lines.append("| %s | %s | %s | %s | %s |" % (r["case"], r["layout"], who, diff, result))
    return lines
