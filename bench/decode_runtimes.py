#!/usr/bin/env python3
"""Decoding speed of a uniformly pruned model against the unpruned one, in the runtimes users deploy
with (issue 79): llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU build; GGUF f32 and q8_0), ONNX Runtime
(onnxruntime-node 1.30.0; `export --onnx-dir`, optimum's key/value cache, fed back call by call) and
headprune itself (`bench --generate`), on the LLaMA-style model of bench/llamacpp_pruned.py (~127 M
parameters, random weights in HF's layout around Mistral's tokenizer: 12 layers, hidden 768, 16 query
heads of 48 in 8 key/value groups, SwiGLU 2048, vocabulary 32,000, untied).

  base       unpruned
  uniform50  `prune --strategy manual`: key/value groups 4..7 removed in every layer (8 query heads in 4
             groups per layer: uniform, so `export --hf` writes it natively and the GGUF is arch llama)

Each runtime decodes NEW greedy tokens after a PROMPT-token prompt (batch 1), the median of --reps runs
after one untimed; the models interleaved round by round (--rounds; the best round kept). Beside each
speedup, two ideals: FLOPs (multiply-adds per decoded token at the mean context, the model as kept) and
bytes (what a decoding step reads: the weights in the runtime's format, plus the key/value cache at the
mean context in f32) — decoding at batch 1 is bound by memory traffic, so the byte ideal is the one to
read it against.

Never in CI. Usage:
  /usr/bin/python3 bench/decode_runtimes.py [--work DIR] [--hp build/headprune] [--threads 2] [--prompt 128]
                                            [--new 128] [--reps 3] [--rounds 2] [--out bench/results/decode_runtimes.json]
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
VARIANTS = {"base": [], "uniform50": list(range(8, 16))}  # query heads 8..15 = groups 4..7


def shape(removed):
    kept = [h for h in range(H) if h not in removed]
    return len(kept), len({h // (H // G) for h in kept})


def flops_per_token(removed, context):
    q, g = shape(removed)
    layer = 2 * C * q * D + 2 * 2 * C * g * D + 2 * q * D * C + 2 * 2 * q * D * context + 2 * 3 * C * F
    return L * layer + 2 * C * V


def bytes_per_token(removed, context, weight_bytes):
    """Weight bytes per parameter (f32 4, q8_0 34/32), the embedding row aside; the cache in f32."""
    q, g = shape(removed)
    params = L * (C * q * D + 2 * C * g * D + q * D * C + 3 * C * F) + C * V
    return params * weight_bytes + L * 2 * g * D * context * 4


def parse_args(doc, new, rounds, out):
    """The options this script and bench/onnx_gqa.py share (their defaults: NEW tokens, ROUNDS, OUT)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/headprune_decode_bench")
    ap.add_argument("--hp", default=os.path.join(ROOT, "build", "headprune"))
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "..", "shared", "tokenizers", "mistral-7b-v0.1"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=new)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--out", default=os.path.join(HERE, "results", out))
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    return a


def base_model(a):
    """The unpruned model in a.work (made once)."""
    return random_llama(a.work, a.tokenizer, {"hidden_size": C, "num_hidden_layers": L, "num_attention_heads": H,
                                              "num_key_value_heads": G, "head_dim": D, "intermediate_size": F,
                                              "max_position_embeddings": 2048}, CLIENTS)


def main():
    a = parse_args(__doc__, 128, 2, "decode_runtimes.json")
    base = base_model(a)
    hp = lambda *args: run([a.hp, "--log-level", "warn", *args])  # noqa: E731
    models, exports = {}, {}
    for name, removed in VARIANTS.items():
        src = base
        if removed:
            src = pruned_variant(a.hp, base, os.path.join(a.work, name),
                                 [f"decoder_self:{layer}:{h}" for layer in range(L) for h in removed])
        models[name] = src
        for dtype in ("f32", "q8_0"):
            path = os.path.join(a.work, f"{name}.{dtype}.gguf")
            # Every 2-D weight in q8_0 blocks, the output too (llama.cpp's own quantizer; the byte ideal below
            # counts 34/32 bytes per weight): export's default keeps the output f16 under q8_0.
            out_type = ["--gguf-output-dtype", dtype] if dtype == "q8_0" else []
            exports[(name, "llama.cpp " + dtype)] = hp("export", src, "--gguf", path, "--dtype", dtype, *out_type,
                                                       "--overwrite").strip()
        folder = os.path.join(a.work, f"{name}.onnx")
        exports[(name, "onnxruntime")] = hp("export", src, "--onnx-dir", folder, "--overwrite").strip()
    mean_context = a.prompt + a.new // 2
    results = {}
    for rnd in range(a.rounds):
        for name in VARIANTS:
            t0 = time.time()
            got = {}
            for dtype in ("f32", "q8_0"):
                r = json.loads(run(["node", os.path.join(CLIENTS, "gguf_check.mjs"), "speed",
                                    os.path.join(a.work, f"{name}.{dtype}.gguf"), str(a.threads), str(a.prompt),
                                    str(a.new), str(a.reps), str(a.prompt)]))
                got["llama.cpp " + dtype] = r["decode"]["tokens_per_s"]
            r = json.loads(run(["node", os.path.join(CLIENTS, "onnx_decoder_check.mjs"), "speed",
                                os.path.join(a.work, f"{name}.onnx"), str(a.prompt), str(a.new), str(a.reps),
                                str(a.threads)]))
            got["onnxruntime"] = r["decode_tokens_per_s"]
            bench_json = os.path.join(a.work, f"{name}.bench.json")
            run([a.hp, "--log-level", "warn", "--threads", str(a.threads), "bench", models[name], "--generate",
                 "--batch", "1", "--seq", str(a.prompt), "--decode-after", str(a.prompt), "--new-tokens", str(a.new),
                 "--reps", str(a.reps), "--no-gemm-probe", "--json", bench_json])
            rec = next(x for x in json.load(open(bench_json))["records"] if x["mode"] == "decode")
            got["headprune"] = rec["tokens_per_s"]
            for k, v in got.items():
                results.setdefault((name, k), []).append(v)
            print(f"round {rnd + 1} {name}: {time.time() - t0:.1f} s {got}", file=sys.stderr)
    rows = []
    weight_bytes = {"llama.cpp f32": 4.0, "llama.cpp q8_0": 34 / 32, "onnxruntime": 4.0, "headprune": 4.0}
    for runtime in weight_bytes:
        b = max(results[("base", runtime)])
        for name, removed in VARIANTS.items():
            t = max(results[(name, runtime)])
            rows.append({"runtime": runtime, "model": name, "heads": shape(removed)[0], "kv_heads": shape(removed)[1],
                         "decode_tokens_per_s": t, "rounds": results[(name, runtime)], "speedup": t / b,
                         "flop_ideal": flops_per_token([], mean_context) / flops_per_token(removed, mean_context),
                         "byte_ideal": bytes_per_token([], mean_context, weight_bytes[runtime]) /
                                       bytes_per_token(removed, mean_context, weight_bytes[runtime]),
                         "export": exports.get((name, runtime), "")})
    out = {"format": "headprune-bench-decode-runtimes/1", "date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(),
           "threads": a.threads, "prompt": a.prompt, "new_tokens": a.new, "reps": a.reps, "rounds": a.rounds,
           "model": {"hidden": C, "layers": L, "heads": H, "kv_heads": G, "head_dim": D, "ffn": F, "vocab": V},
           "runtimes": {"llama.cpp": "node-llama-cpp 3.21.1 prebuilt CPU build", "onnxruntime": "onnxruntime-node 1.30.0",
                        "headprune": "bench --generate"},
           "command": " ".join(["/usr/bin/python3", "bench/decode_runtimes.py"] + sys.argv[1:]), "rows": rows}
    write_json(a.out, out)
    for r in rows:
        print(f"{r['runtime']:15} {r['model']:10} {r['decode_tokens_per_s']:8.1f} tok/s  x{r['speedup']:.2f} "
              f"(FLOP ideal x{r['flop_ideal']:.2f}, byte ideal x{r['byte_ideal']:.2f})")


if __name__ == "__main__":
    main()
