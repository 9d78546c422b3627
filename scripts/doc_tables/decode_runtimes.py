"""bench/results/decode_runtimes.json (bench/decode_runtimes.py): decoding speed of the pruned
model in llama.cpp, ONNX Runtime and headprune.

docs/deploy.md: decode_runtimes.
"""
from .core import load, table


DECODE_RUNTIMES = "bench/results/decode_runtimes.json"


@table("decode_runtimes", DECODE_RUNTIMES)
def decode_runtimes():
    """Decoding tokens/s of the uniformly pruned model against the unpruned one in llama.cpp (f32, q8_0),
    ONNX Runtime with the key/value cache and headprune (bench/decode_runtimes.py)."""
    t = load(DECODE_RUNTIMES)
    lines = ["| runtime | model | query / key-value heads per layer | decode tok/s | speedup | FLOP ideal | byte ideal |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in t["rows"]:
        lines.append("| %s | %s | %d / %d | %.1f | ×%.2f | ×%.2f | ×%.2f |" % (
            r["runtime"], r["model"], r["heads"], r["kv_heads"], r["decode_tokens_per_s"], r["speedup"],
            r["flop_ideal"], r["byte_ideal"]))
    lines.append("")
    lines.append("`%s` (%s, %d threads, %s): batch 1, %d greedy tokens after a %d-token prompt, median of %d runs, "
                 "best of %d rounds." % (t["command"], t["cpu"], t["threads"], t["date"], t["new_tokens"], t["prompt"],
                                         t["reps"], t["rounds"]))
    return lines
