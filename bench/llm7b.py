#!/usr/bin/env python3
"""A 7B-class checkpoint through headprune on one machine (issue 51): writes a Mistral-7B-shaped
`LlamaForCausalLM` directory with random bf16 weights in HF's exact layout (shards of about 5 GB and
model.safetensors.index.json, as HF ships them), then runs the whole path and records the time and the
peak resident memory of each step:

  info          headers and config only
  importance    gradient importance of every query head and key/value group over 16 x 128 tokens
                (one pass gives both maps; layer by layer when the whole graph does not fit)
  prune         25 % of the key/value groups removed by that map, saved (with its checks: masked vs
                removed logits, the saved checkpoint reloaded)
  info_pruned   the pruned checkpoint
  export        the pruned model as an HF directory (dense, the config's head counts)

Never in CI. Usage (the machine needs ~30 GB of free disk and the memory the issue names):

  /usr/bin/python3 bench/llm7b.py [--work DIR] [--layers 32] [--hp build/headprune] [--device cpu]
                                  [--out bench/results/llm7b.json] [--keep]

--layers N cuts the model to N layers (a quick check of the path); --keep leaves the checkpoint for
the next run (it is rewritten only when its shape differs).
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))

# Mistral-7B-v0.1's shape (its config.json), as a LlamaForCausalLM.
SHAPE = dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
             num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=32768,
             rms_norm_eps=1e-5, rope_theta=10000.0)
SHARD_BYTES = 5 * 10**9


def tensors_of(cfg):
    """(name, shape) in HF's order."""
    C, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H, G, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    out = [("model.embed_tokens.weight", [V, C])]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out += [(p + "self_attn.q_proj.weight", [H * D, C]), (p + "self_attn.k_proj.weight", [G * D, C]),
                (p + "self_attn.v_proj.weight", [G * D, C]), (p + "self_attn.o_proj.weight", [C, H * D]),
                (p + "mlp.gate_proj.weight", [F, C]), (p + "mlp.up_proj.weight", [F, C]),
                (p + "mlp.down_proj.weight", [C, F]), (p + "input_layernorm.weight", [C]),
                (p + "post_attention_layernorm.weight", [C])]
    out += [("model.norm.weight", [C]), ("lm_head.weight", [V, C])]
    return out


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def write_checkpoint(d, cfg, seed=1, tiled=False):
    """Random bf16 weights (normal, std 0.02; norms at 1), streamed tensor by tensor into ~5 GB shards.
    tiled: every tensor cut from one random block of 2^24 values (seconds instead of minutes; for speed
    and memory only)."""
    os.makedirs(d, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    block = torch.empty(1 << 24).normal_(0.0, 0.02, generator=gen).to(torch.bfloat16) if tiled else None
    shards, cur, size = [], [], 0
    for name, shape in tensors_of(cfg):
        b = numel(shape) * 2
        if cur and size + b > SHARD_BYTES:
            shards.append(cur)
            cur, size = [], 0
        cur.append((name, shape))
        size += b
    shards.append(cur)
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        header, off = {"__metadata__": {"format": "pt"}}, 0
        for name, shape in shard:
            header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + numel(shape) * 2]}
            off += numel(shape) * 2
            weight_map[name] = fname
        h = json.dumps(header).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        with open(os.path.join(d, fname), "wb") as f:
            f.write(len(h).to_bytes(8, "little"))
            f.write(h)
            for name, shape in shard:
                if name.endswith("norm.weight"):
                    t = torch.ones(shape, dtype=torch.bfloat16)
                elif tiled:
                    n = numel(shape)
                    t = block.repeat((n + block.numel() - 1) // block.numel())[:n]
                else:
                    t = torch.empty(shape, dtype=torch.float32).normal_(0.0, 0.02, generator=gen).to(torch.bfloat16)
                f.write(t.view(torch.int16).numpy().tobytes())
                total += numel(shape) * 2
        print(f"[llm7b] wrote {fname} ({off / 1e9:.2f} GB)", file=sys.stderr, flush=True)
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    config = dict(cfg, model_type="llama", architectures=["LlamaForCausalLM"], hidden_act="silu",
                  tie_word_embeddings=False, attention_bias=False, mlp_bias=False, bos_token_id=1,
                  eos_token_id=2, torch_dtype="bfloat16")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    return total


def step(name, cmd, log):
    """Runs one headprune command; its wall time and peak RSS. The RSS is GNU time's report of its child:
    a child forked from this Python process (torch loaded, a checkpoint just written) would count this
    process's resident memory in its own ru_maxrss, which Linux keeps across exec."""
    print(f"[llm7b] {name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    rss_file = log + ".maxrss"
    t0 = time.time()
    with open(log, "w") as out:
        rc = subprocess.call(["/usr/bin/time", "-f", "%M", "-o", rss_file] + cmd, stdout=out, stderr=subprocess.STDOUT)
    wall = time.time() - t0
    lines = [l for l in open(rss_file).read().split("\n") if l.strip()]
    rss_kb = int(lines[-1])  # "Command exited with non-zero status N" comes first on failure
    os.remove(rss_file)
    rec = {"step": name, "command": cmd, "seconds": round(wall, 2), "peak_rss_bytes": rss_kb * 1024,
           "exit_code": rc, "log": log}
    print(f"[llm7b] {name}: {wall:.1f} s, peak RSS {rss_kb / 2**20:.2f} GiB, exit {rc}", file=sys.stderr,
          flush=True)
    if rc != 0:
        print(open(log).read()[-3000:], file=sys.stderr)
    return rec


def meminfo(key):
    for line in open("/proc/meminfo"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="runs/llm7b")
    ap.add_argument("--layers", type=int, default=SHAPE["num_hidden_layers"])
    ap.add_argument("--hp", default=os.path.join(HERE, "..", "build", "headprune"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "llm7b.json"))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--write-only", action="store_true", help="write the checkpoint and stop")
    ap.add_argument("--tiled", action="store_true", help="weights cut from one random block (fast to write)")
    a = ap.parse_args()
    cfg = dict(SHAPE, num_hidden_layers=a.layers)
    ck = os.path.join(a.work, "mistral7b_shape")
    stamp = os.path.join(ck, "shape.json")
    if not (os.path.exists(stamp) and json.load(open(stamp)) == cfg):
        shutil.rmtree(ck, ignore_errors=True)
        t0 = time.time()
        write_checkpoint(ck, cfg, tiled=a.tiled)
        json.dump(cfg, open(stamp, "w"))
        print(f"[llm7b] checkpoint written in {time.time() - t0:.0f} s", file=sys.stderr)
    if a.write_only:
        return 0
    ck_bytes = sum(os.path.getsize(os.path.join(ck, f)) for f in os.listdir(ck) if f.endswith(".safetensors"))
    n_params = sum(numel(s) for _, s in tensors_of(cfg))
    hp = [a.hp, "--device", a.device, "--threads", str(a.threads)]
    for d in ("imp", "pruned", "hf"):
        shutil.rmtree(os.path.join(a.work, d), ignore_errors=True)
    calib = ["--calibration", "random", "--calibration-length", str(a.length), "--calibration-samples", str(a.samples)]
    logs = lambda n: os.path.join(a.work, n + ".log")
    steps = [
        step("info", hp + ["info", ck], logs("info")),
        step("importance", hp + ["importance", ck, "--method", "gradient", "--unit", "head", "--unit", "kv_group"] +
             calib + ["--out", os.path.join(a.work, "imp")], logs("importance")),
        # The prune job's own checks (masked vs removed, the saved checkpoint reloaded) on 2 x 64 tokens.
        step("prune", hp + ["prune", ck, "--strategy", "score", "--method", "gradient", "--unit", "group",
                            "--target", "0.25", "--scores", os.path.join(a.work, "imp", "importance.json"),
                            "--calibration", "random", "--calibration-length", "64", "--calibration-samples", "2",
                            "--out", os.path.join(a.work, "pruned")], logs("prune")),
        step("info_pruned", hp + ["info", os.path.join(a.work, "pruned", "model")], logs("info_pruned")),
        step("export", hp + ["export", os.path.join(a.work, "pruned", "model"), "--hf", os.path.join(a.work, "hf")],
             logs("export")),
    ]
    summary = {}
    ip = os.path.join(a.work, "imp", "importance.json")
    if os.path.exists(ip):
        j = json.load(open(ip))
        steps[1]["maps"] = [{"unit": m.get("unit", "head"), "heads": len(m["heads"]), "info": m.get("info")} for m in j["maps"]]
        for k in ("dtype", "device_peak_bytes", "peak_rss_bytes"):
            if k in j:
                steps[1][k if k != "peak_rss_bytes" else "job_peak_rss_bytes"] = j[k]
    sp = os.path.join(a.work, "pruned", "summary.json")
    if os.path.exists(sp):
        s = json.load(open(sp))
        summary = {"checks": s.get("checks"), "bytes_before": s.get("bytes_before"), "bytes_after": s.get("bytes_after"),
                   "heads_removed": len(s.get("plan", {}).get("heads", [])), "stages": s.get("stages")}
    cpu = "unknown"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    res = {
        "what": "Mistral-7B-shaped LlamaForCausalLM, random bf16 weights in HF's sharded layout, through headprune",
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": {"cpu": cpu, "cores": os.cpu_count(), "memory_bytes": meminfo("MemTotal"),
                    "available_at_start_bytes": meminfo("MemAvailable"), "kernel": platform.release(),
                    "threads": a.threads or os.cpu_count(), "device": a.device,
                    "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "")},
        "model": dict(cfg, parameters=n_params),
        "checkpoint_bytes": ck_bytes,
        "calibration": {"samples": a.samples, "length": a.length},
        "weights": "tiled from one random block" if a.tiled else "normal(0, 0.02), norms 1",
        "steps": steps,
        "pruned": summary,
    }
    for r in steps:
        r["rss_over_checkpoint"] = round(r["peak_rss_bytes"] / ck_bytes, 3)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=2)
        f.write("\n")
    os.replace(tmp, a.out)
    print(json.dumps({r["step"]: [r["seconds"], r["rss_over_checkpoint"], r["exit_code"]] for r in steps}), file=sys.stderr)
    if not a.keep:
        shutil.rmtree(ck, ignore_errors=True)
    return 0 if all(r["exit_code"] == 0 for r in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
