#!/usr/bin/env python3
"""PyTorch eager baseline for `headprune bench`: the same checkpoint's weights in a plain PyTorch
module written as HuggingFace's BertModel eager path (separate query/key/value nn.Linear, scores,
softmax, context), timed at the same shapes, threads and BLAS kernels.

Not part of the product: Debian's python3-torch (1.13) only, no transformers. Reads headprune's
checkpoint directory (config.json + model.safetensors) with its own safetensors reader.

  python3 bench/eager/eager.py CKPT --batch 1 16 --seq 32 128 --threads 2 --json out.json
  python3 bench/eager/eager.py CKPT --check io.safetensors   # logits equal to headprune's?
  python3 bench/eager/eager.py CKPT --train ...              # forward + backward + AdamW step
  python3 bench/eager/eager.py CKPT --device cuda --dtype bf16 ...   # on a GPU (docs/gpu.md)

Supported: encoder_classifier checkpoints (BERT-style: learned positions, post-LayerNorm, biases on
every projection, gelu/gelu_tanh/relu), unpruned or with heads removed (any number per layer, none
included: the layer's attention is then its output bias, as in headprune); not head masks.
On Debian's python3-torch (1.13, CPU) and on PyTorch 2.x with CUDA.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from benchio import write_json

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        buf = bytearray(data[base + b:base + en])
        t = torch.frombuffer(buf, dtype=DTYPES[e["dtype"]]) if en > b else torch.empty(0, dtype=DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"]).clone()
    return out


class Layer(nn.Module):
    def __init__(self, c, heads, head_dim, d_ff, eps, act, dropout, attn_dropout, act_dropout):
        super().__init__()
        self.h, self.d = heads, head_dim
        w = heads * head_dim
        self.query, self.key, self.value = nn.Linear(c, w), nn.Linear(c, w), nn.Linear(c, w)
        self.out = nn.Linear(w, c)
        self.norm1 = nn.LayerNorm(c, eps=eps)
        self.fc1, self.fc2 = nn.Linear(c, d_ff), nn.Linear(d_ff, c)
        self.norm2 = nn.LayerNorm(c, eps=eps)
        self.drop, self.attn_drop = nn.Dropout(dropout), nn.Dropout(attn_dropout)
        # headprune's activation_dropout (after the activation, before fc2); HF BERT has none (0).
        self.act_drop = nn.Dropout(act_dropout)
        self.act = act

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.h, self.d).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        if self.h == 0:  # every head removed: the attention block adds its output bias only
            return self.ffn(self.norm1(x + self.drop(self.out.bias)))
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d) + mask
        probs = self.attn_drop(torch.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(ctx.shape[0], ctx.shape[1], self.h * self.d)
        return self.ffn(self.norm1(x + self.drop(self.out(ctx))))

    def ffn(self, h):
        f = self.fc1(h)
        f = F.relu(f) if self.act == "relu" else F.gelu(f, approximate="tanh" if self.act == "gelu_tanh" else "none")
        return self.norm2(h + self.drop(self.fc2(self.act_drop(f))))


class Classifier(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["d_model"]
        eps = cfg.get("layer_norm_eps", 1e-5)
        self.tokens = nn.Embedding(cfg["vocab_size"], c)
        self.positions = nn.Embedding(cfg["max_positions"], c)
        self.segments = nn.Embedding(cfg["n_segments"], c) if cfg.get("n_segments", 0) > 0 else None
        self.embed_norm = nn.LayerNorm(c, eps=eps)
        self.drop = nn.Dropout(cfg.get("dropout", 0.1))
        head_dim = cfg.get("head_dim", c // cfg["n_heads"])
        kept = cfg.get("heads", {}).get("encoder_self") or [list(range(cfg["n_heads"]))] * cfg["n_encoder_layers"]
        self.layers = nn.ModuleList(Layer(c, len(kept[l]), head_dim, cfg["d_ff"], eps, cfg.get("activation", "gelu"),
                                          cfg.get("dropout", 0.1), cfg.get("attention_dropout", 0.1),
                                          cfg.get("activation_dropout", cfg.get("dropout", 0.1)))
                                    for l in range(cfg["n_encoder_layers"]))
        self.pooler, self.classifier = nn.Linear(c, c), nn.Linear(c, cfg["n_classes"])
        self.pad_id = cfg.get("pad_id", 0)

    def forward(self, ids, keep=None):
        t = ids.shape[1]
        x = self.tokens(ids) + self.positions(torch.arange(t, device=ids.device)).unsqueeze(0)
        if self.segments is not None:
            x = x + self.segments(torch.zeros_like(ids))
        x = self.drop(self.embed_norm(x))
        keep = ids.ne(self.pad_id) if keep is None else keep
        mask = torch.zeros(ids.shape[0], 1, 1, t, device=ids.device, dtype=x.dtype).masked_fill(
            keep.eq(0).view(ids.shape[0], 1, 1, t), -1e9)
        for layer in self.layers:
            x = layer(x, mask)
        return self.classifier(self.drop(torch.tanh(self.pooler(x[:, 0]))))


def load(ckpt):
    with open(os.path.join(ckpt, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("arch") != "encoder_classifier" or cfg.get("norm", "post") != "post" or \
            cfg.get("positional", "learned") != "learned" or not cfg.get("embed_layer_norm", True):
        sys.exit(f"{ckpt}: only BERT-style encoder_classifier checkpoints (post-LN, learned positions)")
    if cfg.get("n_kv_heads", cfg["n_heads"]) != cfg["n_heads"] or not cfg.get("qkv_bias", True) or \
            not cfg.get("o_bias", True):
        sys.exit(f"{ckpt}: only multi-head attention with biases")
    t = read_safetensors(os.path.join(ckpt, "model.safetensors"))
    masks = [n for n, v in t.items() if n.endswith(".head_mask") and not bool((v == 1).all())]
    if masks:
        sys.exit(f"{ckpt}: head masks ({masks[0]} ...) are not modelled here; remove the heads (prune without --mask-only)")
    m = Classifier(cfg)
    names = {"tokens.weight": "encoder.embed_tokens.weight", "positions.weight": "encoder.embed_positions.weight",
             "segments.weight": "encoder.embed_segments.weight", "embed_norm.weight": "encoder.embed_norm.weight",
             "embed_norm.bias": "encoder.embed_norm.bias"}
    for l in range(cfg["n_encoder_layers"]):
        for mine, theirs in (("query", "self_attn.q_proj"), ("key", "self_attn.k_proj"), ("value", "self_attn.v_proj"),
                             ("out", "self_attn.o_proj"), ("fc1", "ffn.fc1"), ("fc2", "ffn.fc2"),
                             ("norm1", "self_attn_norm"), ("norm2", "ffn_norm")):
            for p in ("weight", "bias"):
                names[f"layers.{l}.{mine}.{p}"] = f"encoder.layers.{l}.{theirs}.{p}"
    for p in ("weight", "bias"):
        names[f"pooler.{p}"] = f"pooler.{p}"
        names[f"classifier.{p}"] = f"classifier.{p}"
    state = {mine: t[theirs] for mine, theirs in names.items() if theirs in t}
    missing, unexpected = m.load_state_dict(state, strict=False)
    if missing or unexpected:
        sys.exit(f"{ckpt}: weights do not fit: missing {missing}, unexpected {unexpected}")
    return m, cfg


def quantile(v, q):
    v = sorted(v)
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--seq", type=int, nargs="+", default=[128])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="0 = all cores")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32",
                    help="inference precision: every parameter and activation in this type (headprune's --precision)")
    ap.add_argument("--train", action="store_true", help="time a training step (forward, backward, AdamW)")
    ap.add_argument("--check", help="safetensors file from `headprune bench --save-io`: compare logits")
    ap.add_argument("--json", help="write the records here")
    ap.add_argument("--profile", help="record the timed repetitions op by op (torch.autograd.profiler) and write a "
                                      "Chrome trace here (bench/eager/profile_ops.py)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads if args.threads > 0 else os.cpu_count())
    torch.manual_seed(1)
    device = torch.device(args.device)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    if args.train and dtype != torch.float32:
        sys.exit("--train runs in fp32")
    model, cfg = load(args.checkpoint)
    model.to(device=device, dtype=dtype)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    if args.check:
        io = read_safetensors(args.check)
        model.eval()
        with torch.inference_mode():
            logits = model(io["input_ids"].to(device), io["attention_mask"].to(device)).float().cpu()
        diff = (logits - io["logits"]).abs().max().item()
        scale = io["logits"].abs().max().item()
        print(json.dumps({"check": args.check, "max_abs_diff": diff, "max_abs_logit": scale}))
        tolerance = (2e-2 if dtype == torch.bfloat16 else 1e-4) * max(1.0, scale)
        if not diff <= tolerance:
            sys.exit(f"logits differ from headprune's by {diff}")
        if args.reps == 0:
            return
    records = []
    prof = None
    gen = torch.Generator().manual_seed(1)
    if args.train:
        model.train()
        decay = [p for n, p in model.named_parameters() if not (n.endswith(".bias") or "norm" in n)]
        rest = [p for n, p in model.named_parameters() if n.endswith(".bias") or "norm" in n]
        opt = torch.optim.AdamW([{"params": decay}, {"params": rest, "weight_decay": 0.0}], lr=1e-4,
                                betas=(0.9, 0.98), eps=1e-8, weight_decay=0.01)
    else:
        model.eval()
    for t in args.seq:
        for b in args.batch:
            ids = torch.randint(4, cfg["vocab_size"], (b, t), generator=gen).to(device)
            keep = torch.ones(b, t, dtype=torch.long, device=device)
            labels = torch.randint(0, cfg["n_classes"], (b,), generator=gen).to(device)
            ms = []
            for r in range(args.warmup + args.reps):
                if args.profile and r == args.warmup and prof is None:  # like headprune: from the first timed rep on
                    prof = torch.autograd.profiler.profile()
                    prof.__enter__()
                sync()
                t0 = time.perf_counter()
                if args.train:
                    loss = F.cross_entropy(model(ids, keep), labels)
                    loss.backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                else:
                    with torch.inference_mode():
                        model(ids, keep)
                sync()  # the clock stops when the device has finished
                e = (time.perf_counter() - t0) * 1000
                if r >= args.warmup:
                    ms.append(e)
            records.append({"model": "pytorch eager", "checkpoint": args.checkpoint, "precision": args.dtype,
                            "mode": "train" if args.train else "inference", "batch": b,
                            "seq_len": t, "median_ms": quantile(ms, 0.5), "p10_ms": quantile(ms, 0.1),
                            "p90_ms": quantile(ms, 0.9)})
            print(f"pytorch eager {'train' if args.train else 'inference'} batch {b} seq {t}: "
                  f"median {records[-1]['median_ms']:.2f} ms", file=sys.stderr)
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(args.profile + ".tmp")
        os.replace(args.profile + ".tmp", args.profile)
    out = {"environment": {"torch": torch.__version__, "threads": torch.get_num_threads(), "device": str(device),
                           "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                           "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE")}, "records": records}
    if args.json:
        write_json(args.json, out)
    else:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
