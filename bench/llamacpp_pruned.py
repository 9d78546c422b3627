#!/usr/bin/env python3
"""Pruned against unpruned inside llama.cpp (issue 54): a LLaMA-style model of ~127 M parameters
(random weights in HF's layout around Mistral's tokenizer: 12 layers, hidden 768, 16 query heads of 48,
8 key/value heads, SwiGLU 2048, vocabulary 32,000, untied), pruned by headprune in four ways, exported
with `headprune export --gguf` in F32 and BF16, and timed in llama.cpp (node-llama-cpp 3.21.1's
prebuilt CPU build, tests/clients/gguf_check.mjs speed): prompt processing of 128 and 512 tokens and
decoding 128 greedy tokens after a 128-token prompt, the median of --reps runs after one untimed,
each model in its own process, the models interleaved round by round (--rounds; the best round's
median is kept). The FLOP-ideal speedup is the ratio of multiply-adds per token (projections, attention
over the context, feed-forward, output layer) of the unpruned and the pruned shapes as headprune keeps
them (a deci file that repeats key/value heads to even its groups computes more than that).

  base            unpruned (arch llama)
  groups25        2 of 8 key/value groups removed in every layer (12 / 6 heads; llama)
  groups50        4 of 8 groups removed (8 / 4; llama)
  heads50         one query head of every group removed (8 / 8; llama)
  heads25_uneven  query heads 1, 3, 5, 7 removed (groups keep 1 or 2 heads: deci, 12 / 12 after evening)

Never in CI. Usage:
  /usr/bin/python3 bench/llamacpp_pruned.py [--work DIR] [--hp build/headprune] [--threads 2] [--reps 5]
                                            [--rounds 2] [--out bench/results/llamacpp_pruned.json]
"""
import argparse
import json
import os
import sys
import time

from bench_common import cpu_name, pruned_variant, random_llama, run, write_json  # noqa: E402  (bench/, the script's directory)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLIENTS = os.path.join(ROOT, "tests", "clients")

C, L, H, G, D, F, V = 768, 12, 16, 8, 48, 2048, 32000
VARIANTS = {
    "base": [],
    "groups25": list(range(0, 4)),
    "groups50": list(range(0, 8)),
    "heads50": list(range(1, 16, 2)),
    "heads25_uneven": [1, 3, 5, 7],
}


def flops_per_token(removed, context):
    """Multiply-adds x 2 of one token with `context` keys, the model as headprune keeps it."""
    kept = [h for h in range(H) if h not in removed]
    q = len(kept) * D
    kv = len({h // (H // G) for h in kept}) * D
    layer = 2 * C * q + 2 * 2 * C * kv + 2 * q * C + 2 * 2 * q * context + 2 * 3 * C * F
    return L * layer + 2 * C * V


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/headprune_llamacpp_bench")
    ap.add_argument("--hp", default=os.path.join(ROOT, "build", "headprune"))
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "..", "shared", "tokenizers", "mistral-7b-v0.1"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "llamacpp_pruned.json"))
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    base = random_llama(a.work, a.tokenizer, {"hidden_size": C, "num_hidden_layers": L, "num_attention_heads": H,
                                               "num_key_value_heads": G, "head_dim": D, "intermediate_size": F,
                                               "max_position_embeddings": 2048}, CLIENTS)
    hp = lambda *args: run([a.hp, "--log-level", "warn", *args])
    files = {}
    for name, removed in VARIANTS.items():
        src = base
        if removed:
            src = pruned_variant(a.hp, base, os.path.join(a.work, name),
                                 [f"decoder_self:{l}:{h}" for l in range(L) for h in removed])
        for dtype in ("f32", "bf16"):
            path = os.path.join(a.work, f"{name}.{dtype}.gguf")
            line = hp("export", src, "--gguf", path, "--dtype", dtype)
            files[(name, dtype)] = (path, line.strip())
    results = {}
    for rnd in range(a.rounds):
        for (name, dtype), (path, _) in files.items():
            t0 = time.time()
            r = json.loads(run(["node", os.path.join(CLIENTS, "gguf_check.mjs"), "speed", path, str(a.threads),
                                "128,512", "128", str(a.reps)]))
            key = f"{name}.{dtype}"
            prev = results.get(key)
            if prev is None:
                results[key] = r
            else:  # the best round's medians
                for n in r["prompt"]:
                    if r["prompt"][n]["tokens_per_s"] > prev["prompt"][n]["tokens_per_s"]:
                        prev["prompt"][n] = r["prompt"][n]
                if r["decode"]["tokens_per_s"] > prev["decode"]["tokens_per_s"]:
                    prev["decode"] = r["decode"]
            print(f"round {rnd + 1} {key}: {time.time() - t0:.1f} s", file=sys.stderr)
    rows = []
    for (name, dtype), (path, line) in files.items():
        r, b = results[f"{name}.{dtype}"], results[f"base.{dtype}"]
        removed = VARIANTS[name]
        row = {"model": name, "dtype": dtype, "export": line, "gguf_bytes": os.path.getsize(path)}
        for n in ("128", "512"):
            row[f"prompt{n}_tokens_per_s"] = r["prompt"][n]["tokens_per_s"]
            row[f"prompt{n}_speedup"] = r["prompt"][n]["tokens_per_s"] / b["prompt"][n]["tokens_per_s"]
            row[f"prompt{n}_flop_ideal"] = flops_per_token([], int(n)) / flops_per_token(removed, int(n))
        row["decode_tokens_per_s"] = r["decode"]["tokens_per_s"]
        row["decode_speedup"] = r["decode"]["tokens_per_s"] / b["decode"]["tokens_per_s"]
        row["decode_flop_ideal"] = flops_per_token([], 192) / flops_per_token(removed, 192)
        rows.append(row)
    out = {"format": "headprune-bench-llamacpp/1", "date": time.strftime("%Y-%m-%d"),
           "cpu": cpu_name(), "threads": a.threads, "reps": a.reps, "rounds": a.rounds,
           "llama_cpp": "node-llama-cpp 3.21.1 prebuilt CPU build (llama.cpp binaries release v0.4.0)",
           "model": {"hidden": C, "layers": L, "heads": H, "kv_heads": G, "head_dim": D, "ffn": F, "vocab": V},
           "command": " ".join(["/usr/bin/python3", "bench/llamacpp_pruned.py"] + sys.argv[1:]),
           "rows": rows}
    write_json(a.out, out)
    print(f"{'model':16} {'dtype':5} {'pp128':>14} {'pp512':>14} {'decode':>14}")
    for r in rows:
        cell = lambda k: f"x{r[k + '_speedup']:.2f} ({r[k + '_flop_ideal']:.2f})"
        print(f"{r['model']:16} {r['dtype']:5} {cell('prompt128'):>14} {cell('prompt512'):>14} {cell('decode'):>14}")


if __name__ == "__main__":
    main()
