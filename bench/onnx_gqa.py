#!/usr/bin/env python3
"""ONNX Runtime's fused GroupQueryAttention against standard ops in a cached decoder (issue 79: "ONNX
Runtime's fused ops where they make it faster"). The models of bench/decode_runtimes.py (the ~127 M
LLaMA-style model and its uniform half-groups prune, made once in --work), each exported twice with
`export --onnx-dir`: --onnx-attention standard (what auto writes for a cached decoder) and fused
(com.microsoft GroupQueryAttention in every layer). onnxruntime-node 1.30.0 decodes NEW greedy tokens after
a PROMPT-token prompt, batch 1 (tests/clients/onnx_decoder_check.mjs speed: the median of --reps runs
after one untimed); the four folders interleaved round by round, every round kept in the JSON.

Never in CI. Usage:
  /usr/bin/python3 bench/onnx_gqa.py [--work DIR] [--hp build/headprune] [--threads 2] [--prompt 128]
                                     [--new 64] [--reps 3] [--rounds 4] [--out bench/results/onnx_gqa.json]
"""
import json
import os
import statistics
import sys
import time

from bench_common import cpu_name, pruned_variant, run, write_json  # noqa: E402  (bench/)
from decode_runtimes import CLIENTS, VARIANTS, L, base_model, parse_args  # noqa: E402  (one model definition)


def main():
    a = parse_args(__doc__, 64, 4, "onnx_gqa.json")
    base = base_model(a)
    folders, exports = {}, {}
    for name, removed in VARIANTS.items():
        src = base if not removed else pruned_variant(
            a.hp, base, os.path.join(a.work, name), [f"decoder_self:{l}:{h}" for l in range(L) for h in removed])
        for attention in ("standard", "fused"):
            folder = os.path.join(a.work, f"{name}.{attention}.onnx")
            exports[(name, attention)] = run([a.hp, "--log-level", "warn", "export", src, "--onnx-dir", folder,
                                              "--onnx-attention", attention, "--overwrite"]).strip()
            folders[(name, attention)] = folder
    results = {}
    for rnd in range(a.rounds):
        for key, folder in folders.items():
            r = json.loads(run(["node", os.path.join(CLIENTS, "onnx_decoder_check.mjs"), "speed", folder,
                                str(a.prompt), str(a.new), str(a.reps), str(a.threads)]))
            results.setdefault(key, []).append({"decode_tokens_per_s": r["decode_tokens_per_s"], "prompt_s": r["prompt_s"]})
        print(f"round {rnd + 1}: " + ", ".join(f"{n}/{t} {v[-1]['decode_tokens_per_s']:.1f}" for (n, t), v in results.items()),
              file=sys.stderr)
    rows = []
    for name in VARIANTS:
        med = {t: statistics.median(x["decode_tokens_per_s"] for x in results[(name, t)]) for t in ("standard", "fused")}
        pre = {t: statistics.median(x["prompt_s"] for x in results[(name, t)]) for t in ("standard", "fused")}
        # Per round, fused over standard (the two ran back to back): the spread of the ratio itself.
        paired = [f["decode_tokens_per_s"] / s["decode_tokens_per_s"]
                  for s, f in zip(results[(name, "standard")], results[(name, "fused")])]
        rows.append({"model": name, "decode_tokens_per_s": med, "prompt_s": pre,
                     "fused_over_standard": med["fused"] / med["standard"],
                     "paired_ratios": paired, "rounds": {t: results[(name, t)] for t in ("standard", "fused")},
                     "exports": {t: exports[(name, t)] for t in ("standard", "fused")}})
    out = {"format": "headprune-bench-onnx-gqa/1", "date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(),
           "threads": a.threads, "prompt": a.prompt, "new_tokens": a.new, "reps": a.reps, "rounds": a.rounds,
           "runtime": "onnxruntime-node 1.30.0",
           "command": " ".join(["/usr/bin/python3", "bench/onnx_gqa.py"] + sys.argv[1:]), "rows": rows}
    write_json(a.out, out)
    for r in rows:
        print(f"{r['model']:10} standard {r['decode_tokens_per_s']['standard']:6.1f} tok/s, GroupQueryAttention "
              f"{r['decode_tokens_per_s']['fused']:6.1f} (x{r['fused_over_standard']:.3f}; per round "
              f"{min(r['paired_ratios']):.3f}..{max(r['paired_ratios']):.3f})")


if __name__ == "__main__":
    main()
