"""bench/results/engines.json (bench/engines.py): headprune against ONNX Runtime and llama.cpp.

docs/benchmarks.md: engines_checks, engines_llama, engines_bert, engines_kv.
"""
from .core import fmt, load, table, thousands


ENGINES = "bench/results/engines.json"


@table("engines_bert", ENGINES)
def engines_bert():
    """headprune against ONNX Runtime on BERT-base's shape, and its pruned models against the FLOP-ideal (bench/engines.py)."""
    e = load(ENGINES)["bert"]
    lines = ["| batch x length | headprune ms | ONNX Runtime ms | headprune / ORT | 6 of 12 heads removed: speed-up (FLOP-ideal, share) | every second layer emptied: speed-up (FLOP-ideal, share) |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in e["rows"]:
        cell = lambda v: "x%s (x%s, %s)" % (fmt(v["paired_speedup"], 2), fmt(v["flop_ideal"], 2), fmt(v["of_ideal"], 2))
        lines.append("| %d x %d | %s | %s | **%s** | %s | %s |" % (
            r["batch"], r["length"], thousands(r["headprune_ms"]), thousands(r["onnxruntime_ms"]), fmt(r["ratio"], 2),
            cell(r["uniform50"]), cell(r["layers50"])))
    return lines


@table("engines_llama", ENGINES)
def engines_llama():
    """headprune against llama.cpp on a LLaMA-style 127 M model: prompt processing and decoding (bench/engines.py)."""
    e = load(ENGINES)["llama"]
    names = {"prompt128": "prompt 128 tokens", "prompt512": "prompt 512 tokens", "decode": "decode 128 after 128"}
    lines = ["| precision | workload | headprune tokens/s | llama.cpp tokens/s | headprune / llama.cpp |", "|---|---|---:|---:|---:|"]
    for r in e["rows"]:
        lines.append("| %s | %s | %s | %s | **%s** |" % (
            r["precision"], names[r["workload"]], thousands(r["headprune_tokens_per_s"]),
            thousands(r["llamacpp_tokens_per_s"]), fmt(r["ratio"], 2)))
    return lines


@table("engines_checks", ENGINES)
def engines_checks():
    """The engines' outputs compared before any timing, and against a float64 evaluation (bench/engines.py)."""
    e = load(ENGINES)
    sci = lambda v: "%.1e" % v
    lines = ["| model | weights | compared | what | largest difference |", "|---|---|---|---|---:|",
             "| BERT-base, 1 x 32 | N(0, 0.02²) | ONNX Runtime and headprune | logits | %s |"
             % sci(e["bert"]["logits_check"]["max_abs_diff"])]
    for part in ("llama", "llama_check"):
        if part not in e:
            continue
        l = e[part]["logprobs_check"]
        x = l["exact"]
        r = l.get("initializer_range")
        weights = "N(0, %s²)" % r if r else "N(0, 0.2²), embeddings N(0, 0.5²)"
        model = "LLaMA-style 127 M, 1 x 128, F32 (largest logit %s)" % fmt(x["max_abs_logit"], 1)
        pairs = [("llama.cpp and headprune", l), ("headprune and float64", x["headprune"])]
        if "pytorch_float32" in x:
            pairs.append(("PyTorch %s float32 and float64" % x["pytorch_float32"]["version"], x["pytorch_float32"]))
        pairs.append(("llama.cpp and float64", x["llama.cpp"]))
        for who, d in pairs:
            lines.append("| %s | %s | %s | log-probabilities (probabilities) | %s (%s) |" % (
                model, weights, who, sci(d["max_abs_logprob_diff"]), sci(d["max_abs_prob_diff"])))
    return lines


@table("engines_kv", ENGINES)
def engines_kv():
    """Decoding at a 2k context, unpruned and with half the key/value groups removed, in both engines (bench/engines.py)."""
    e = load(ENGINES)["kv"]
    lines = ["| precision | model | KV cache MiB (counted) | headprune tokens/s | speed-up (FLOP-ideal) | llama.cpp tokens/s | speed-up |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in e["rows"]:
        lines.append("| %s | %s | %s (%s) | %s | x%s (x%s) | %s | x%s |" % (
            r["precision"], r["model"], fmt(r["headprune_kv_cache_bytes"] / 2**20, 1),
            fmt(r["counted_kv_cache_bytes"] / 2**20, 1), thousands(r["headprune_tokens_per_s"]),
            fmt(r["headprune_speedup"], 2), fmt(r["flop_ideal"], 2), thousands(r["llamacpp_tokens_per_s"]),
            fmt(r["llamacpp_speedup"], 2)))
    return lines
