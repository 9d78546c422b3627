#!/usr/bin/env python3
"""Pruned against unpruned inside ONNX Runtime (issue 54): BERT-base's shape (configs/bert_base.json,
random weights), exported with `headprune export --onnx`, timed by onnxruntime-node 1.30.0 (CPU, all
graph optimizations, tests/clients/onnx_check.mjs speed) at 1 x 32, 1 x 128 and 16 x 128: the median of
--reps runs after two untimed, the models interleaved round by round (--rounds; the best round kept).

  base           unpruned, fused Attention (auto)
  base_std       unpruned, default-domain ops only (--onnx-attention standard)
  uniform50      heads 6-11 of every layer removed, fused Attention with num_heads 6
  uniform50_std  the same, default-domain ops only
  layers50       layers 1, 3, ..., 11 emptied (PASSCONC's whole layers), the rest fused

The FLOP-ideal speedup is the ratio of multiply-adds of the unpruned and pruned shapes (projections,
scores and weighted values, feed-forward), as `headprune bench` counts them. The fused-op count is of
the graph ONNX Runtime optimized. Never in CI. Usage:
  /usr/bin/python3 bench/onnx_pruned.py [--work DIR] [--hp build/headprune] [--threads 2] [--reps 5] [--rounds 2]
                                        [--out bench/results/onnx_pruned.json]
"""
import argparse
import json
import os
import subprocess
import sys
import time

from bench_common import write_json  # noqa: E402  (bench/, the script's directory)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLIENT = os.path.join(ROOT, "tests", "clients", "onnx_check.mjs")
C, L, H, D, F = 768, 12, 12, 64, 3072
SHAPES = [(1, 32), (1, 128), (16, 128)]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return r.stdout


def flops(heads_per_layer, b, t):
    total = 0
    for h in heads_per_layer:
        w = h * D
        total += 2 * b * t * C * 4 * w + 2 * 2 * b * t * t * w + 2 * b * t * 2 * C * F
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/headprune_onnx_bench")
    ap.add_argument("--hp", default=os.path.join(ROOT, "build", "headprune"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "onnx_pruned.json"))
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    hp = lambda *args: run([a.hp, "--log-level", "warn", "--threads", str(a.threads), *args])
    w = lambda *p: os.path.join(a.work, *p)
    if not os.path.exists(w("base", "model.safetensors")):
        hp("--seed", "1", "init", "--config", os.path.join(ROOT, "configs", "bert_base.json"), "--out", w("base"))
    uniform = ",".join(f"encoder_self:{l}:{h}" for l in range(L) for h in range(6, 12))
    if not os.path.exists(w("uniform50", "model", "config.json")):
        hp("prune", w("base"), "--max-examples", "32", "--strategy", "manual", "--heads", uniform, "--out", w("uniform50"))
    if not os.path.exists(w("layers50", "model", "config.json")):
        hp("prune", w("base"), "--max-examples", "32", "--strategy", "layers",
           "--layers", ",".join(f"encoder_self:{l}" for l in range(1, 12, 2)), "--out", w("layers50"))
    models = {"base": (w("base"), "auto", [H] * L), "base_std": (w("base"), "standard", [H] * L),
              "uniform50": (w("uniform50", "model"), "auto", [6] * L),
              "uniform50_std": (w("uniform50", "model"), "standard", [6] * L),
              "layers50": (w("layers50", "model"), "auto", [H if l % 2 == 0 else 0 for l in range(L)])}
    info = {}
    for name, (src, attn, _) in models.items():
        path = w(name + ".onnx")
        line = hp("export", src, "--onnx", path, "--onnx-attention", attn).strip()
        info[name] = {"export": line, "onnx_bytes": os.path.getsize(path), **json.loads(run(["node", CLIENT, "ops", path]))}
    best = {}
    for rnd in range(a.rounds):
        for b, t in SHAPES:
            for name in models:
                r = json.loads(run(["node", CLIENT, "speed", w(name + ".onnx"), str(b), str(t), str(a.reps), str(a.threads)]))
                key = (name, b, t)
                best[key] = min(best.get(key, r["seconds"]), r["seconds"])
        print(f"round {rnd + 1} done", file=sys.stderr)
    rows = []
    for name, (_, attn, heads) in models.items():
        base_name = "base" if attn == "auto" else "base_std"
        for b, t in SHAPES:
            s, s0 = best[(name, b, t)], best[(base_name, b, t)]
            rows.append({"model": name, "attention": attn, "batch": b, "length": t, "seconds": s,
                         "speedup": s0 / s, "flop_ideal": flops([H] * L, b, t) / flops(heads, b, t),
                         "fused_attention_nodes": info[name]["optimized_ops"].get("Attention", 0)})
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
    out = {"format": "headprune-bench-onnx/1", "date": time.strftime("%Y-%m-%d"), "cpu": cpu, "threads": a.threads,
           "reps": a.reps, "rounds": a.rounds, "onnxruntime": "onnxruntime-node 1.30.0 (CPU execution provider)",
           "command": " ".join(["/usr/bin/python3", "bench/onnx_pruned.py"] + sys.argv[1:]), "models": info, "rows": rows}
    write_json(a.out, out)
    for r in rows:
        print(f"{r['model']:14} {r['batch']:3} x {r['length']:<4} {r['seconds'] * 1000:8.2f} ms  x{r['speedup']:.2f} "
              f"(FLOP-ideal x{r['flop_ideal']:.2f})  fused Attention: {r['fused_attention_nodes']}")


if __name__ == "__main__":
    main()
