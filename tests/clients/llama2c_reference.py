#!/usr/bin/python3
"""Independent reference forward pass of llama2.c's stories260K (/work/shared/models/stories260K).

What: plain PyTorch (Debian's python3-torch, nothing else) implementation of the math of Karpathy's
llama2.c (run.c / model.py): RMSNorm, grouped-query causal attention with interleaved RoPE, SwiGLU FFN,
tied embeddings. It samples token sequences from the model, scores given sequences (logits) and
continues a prompt greedily, so headprune's own forward can be compared against it.

Why independent: the folder stores q_proj/k_proj rows permuted into HF's rotate-half convention. This
reference UNDOES that permutation to recover llama2.c's original rows and applies llama2.c's INTERLEAVED
RoPE (channel pairs (2i, 2i+1)), a different computation from the project's rotate-half path. It has its
own safetensors reader. There is NO attention mask beyond causality: every token is real, EOS (id 2)
inside a sequence included; nothing is treated as padding. `selfcheck` also runs the rotate-half
formulation on the stored rows and asserts both agree within 1e-5 (in float64; float32 rounding alone
differs by ~5e-5 on logits of size ~17, and is printed for information).

Usage (run with /usr/bin/python3; all outputs are JSON, written atomically):
  llama2c_reference.py sample    --model DIR --n N --length L --seed S --out F.json [--temperature 1.0]
                                 (BOS=1 then L-1 samples; never stops at EOS; temperature 0 = argmax)
  llama2c_reference.py logits    --model DIR --ids IDS.json --out F.json [--float64] [--ggml-round q8_0|q4_0]
                                 (IDS: {"sequences": [[...]]}; --ggml-round: the weights as a GGUF of that
                                 block format holds them, from ggml's definitions)
  llama2c_reference.py greedy    --model DIR --prompt 1,5,8 --new N --out F.json
  llama2c_reference.py selfcheck --model DIR
Importable: load(dir) -> (weights, cfg); forward(weights, cfg, ids[B,T]) -> logits[B,T,V] float32;
sample(weights, cfg, n, length, seed, temperature); greedy(weights, cfg, prompt, new).
"""
import argparse
import json
import math
import os
import struct
import sys
import tempfile

import torch

BOS, EOS = 1, 2
DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64, "I64": torch.int64}


def read_safetensors(path):
    """name -> float32 tensor. Format: u64 LE header length, JSON header, raw little-endian data."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=dtype) if b > a else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(info["shape"]).to(torch.float32)
    return out


def unpermute_rows(w, n_heads, head_dim):
    """Inverse of HF's w.view(h, hd/2, 2, d).transpose(1, 2).reshape(h*hd, d): back to llama2.c rows."""
    d = w.shape[1]
    return w.reshape(n_heads, 2, head_dim // 2, d).transpose(1, 2).reshape(n_heads * head_dim, d).contiguous()


def load(model_dir):
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        c = json.load(f)
    cfg = {"dim": c["hidden_size"], "n_layers": c["num_hidden_layers"], "n_heads": c["num_attention_heads"],
           "n_kv": c.get("num_key_value_heads", c["num_attention_heads"]), "vocab": c["vocab_size"],
           "eps": c["rms_norm_eps"], "theta": c.get("rope_theta", 10000.0), "max_pos": c["max_position_embeddings"]}
    cfg["head_dim"] = c.get("head_dim") or cfg["dim"] // cfg["n_heads"]
    t = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    hd, H, K = cfg["head_dim"], cfg["n_heads"], cfg["n_kv"]
    w = {"embed": t["model.embed_tokens.weight"], "norm": t["model.norm.weight"],
         "out": t.get("lm_head.weight", t["model.embed_tokens.weight"]), "keys": sorted(t), "layers": []}
    for i in range(cfg["n_layers"]):
        p = "model.layers.%d." % i
        wq, wk = t[p + "self_attn.q_proj.weight"], t[p + "self_attn.k_proj.weight"]
        w["layers"].append({
            "attn_norm": t[p + "input_layernorm.weight"], "ffn_norm": t[p + "post_attention_layernorm.weight"],
            "wq": unpermute_rows(wq, H, hd), "wk": unpermute_rows(wk, K, hd),  # llama2.c's original rows
            "wq_hf": wq, "wk_hf": wk,  # stored (rotate-half) rows, for selfcheck only
            "wv": t[p + "self_attn.v_proj.weight"], "wo": t[p + "self_attn.o_proj.weight"],
            "w1": t[p + "mlp.gate_proj.weight"], "w3": t[p + "mlp.up_proj.weight"], "w2": t[p + "mlp.down_proj.weight"]})
    return w, cfg


def rmsnorm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rope_tables(cfg, pos0, T):
    hd = cfg["head_dim"]
    freq = 1.0 / (cfg["theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))  # theta^(-2i/hd)
    ang = torch.arange(pos0, pos0 + T, dtype=torch.float64)[:, None] * freq[None, :]  # [T, hd/2]
    return ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]  # [1, T, 1, hd/2], float64


def rope_interleaved(x, cos, sin):
    """llama2.c: rotate channel pairs (2i, 2i+1) of each head by angle pos * freq_i. x: [B, T, heads, hd]."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


def rope_half(x, cos, sin):
    """HF: rotate channel pairs (i, i + hd/2)."""
    h = x.shape[-1] // 2
    x0, x1 = x[..., :h], x[..., h:]
    return torch.cat((x0 * cos - x1 * sin, x1 * cos + x0 * sin), dim=-1)


def _forward(w, cfg, ids, pos0=0, cache=None, rope="interleaved"):
    """ids [B, T] at positions pos0.. ; cache: list of per-layer (k, v) or None. Returns logits [B, T, V]."""
    B, T = ids.shape
    H, K, hd = cfg["n_heads"], cfg["n_kv"], cfg["head_dim"]
    x = w["embed"][ids]
    cos, sin = (t.to(x.dtype) for t in rope_tables(cfg, pos0, T))
    rot = rope_interleaved if rope == "interleaved" else rope_half
    for li, L in enumerate(w["layers"]):
        h = rmsnorm(x, L["attn_norm"], cfg["eps"])
        wq, wk = (L["wq"], L["wk"]) if rope == "interleaved" else (L["wq_hf"], L["wk_hf"])
        q = rot((h @ wq.T).view(B, T, H, hd), cos, sin)
        k = rot((h @ wk.T).view(B, T, K, hd), cos, sin)
        v = (h @ L["wv"].T).view(B, T, K, hd)
        if cache is not None:
            if len(cache) > li:
                k, v = torch.cat((cache[li][0], k), 1), torch.cat((cache[li][1], v), 1)
                cache[li] = (k, v)
            else:
                cache.append((k, v))
        S = k.shape[1]  # keys at positions 0..S-1; queries at S-T..S-1
        k = k.repeat_interleave(H // K, dim=2)  # query head j reads kv head j // (H/K)
        v = v.repeat_interleave(H // K, dim=2)
        scores = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(hd)
        qpos = torch.arange(S - T, S)[:, None]
        scores = scores.masked_fill(torch.arange(S)[None, :] > qpos, float("-inf"))  # causal only, no padding
        att = torch.einsum("bhts,bshd->bthd", scores.softmax(-1), v).reshape(B, T, H * hd)
        x = x + att @ L["wo"].T
        h = rmsnorm(x, L["ffn_norm"], cfg["eps"])
        x = x + (torch.nn.functional.silu(h @ L["w1"].T) * (h @ L["w3"].T)) @ L["w2"].T
    return rmsnorm(x, w["norm"], cfg["eps"]) @ w["out"].T


@torch.no_grad()
def forward(weights, cfg, ids, rope="interleaved"):
    return _forward(weights, cfg, torch.as_tensor(ids, dtype=torch.long), rope=rope).float()


@torch.no_grad()
def sample(weights, cfg, n, length, seed, temperature=1.0):
    """n sequences of exactly `length` tokens: BOS then samples (past EOS too). Returns list of lists."""
    g = torch.Generator().manual_seed(seed)
    seqs = torch.full((n, 1), BOS, dtype=torch.long)
    cache, nxt = [], seqs
    for pos in range(length - 1):
        logits = _forward(weights, cfg, nxt, pos0=pos, cache=cache)[:, -1]
        if temperature == 0:
            nxt = logits.argmax(-1, keepdim=True)
        else:
            nxt = torch.multinomial((logits / temperature).softmax(-1), 1, generator=g)
        seqs = torch.cat((seqs, nxt), 1)
    return seqs.tolist()


@torch.no_grad()
def greedy(weights, cfg, prompt, new):
    """Argmax continuation of `prompt` by `new` tokens (EOS does not stop it); returns the continuation."""
    cache, out = [], []
    logits = _forward(weights, cfg, torch.tensor([prompt]), pos0=0, cache=cache)
    pos = len(prompt)
    for _ in range(new):
        tok = int(logits[0, -1].argmax())
        out.append(tok)
        logits = _forward(weights, cfg, torch.tensor([[tok]]), pos0=pos, cache=cache)
        pos += 1
    return out


def cast(weights, dtype):
    """A copy of the weights in another dtype (selfcheck runs in float64 to separate math from rounding)."""
    c = lambda v: v.to(dtype) if torch.is_tensor(v) else v  # noqa: E731
    return {k: [{n: c(t) for n, t in L.items()} for L in v] if k == "layers" else c(v) for k, v in weights.items()}


def write_json(path, obj):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def selfcheck(weights, cfg, T=64, seed=0):
    """Interleaved RoPE on llama2.c rows vs rotate-half on stored rows, on a sequence with EOS in the middle;
    also the KV-cached path vs the full one and a prefix vs the full sequence (causality). Run in float64,
    where the conventions must agree to ~1e-12 (float32 rounding alone gives ~5e-5 on logits of size ~17)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, cfg["vocab"], (2, T), generator=g)
    ids[:, 0], ids[:, T // 2] = BOS, EOS
    print("keys: %s" % ", ".join(weights["keys"]))
    worst = 0.0
    for dtype in (torch.float32, torch.float64):
        w = cast(weights, dtype)
        with torch.no_grad():
            a, b = _forward(w, cfg, ids), _forward(w, cfg, ids, rope="half")
            cache = []
            inc = torch.cat([_forward(w, cfg, ids[:, p:p + 1], pos0=p, cache=cache) for p in range(T)], 1)
            pre = _forward(w, cfg, ids[:, :T // 2 + 1])
        d = [float((a - b).abs().max()), float((a - inc).abs().max()), float((a[:, :T // 2 + 1] - pre).abs().max())]
        print("%s: max |interleaved - rotate_half| = %.3g, |full - kv-cached| = %.3g, |prefix - full| = %.3g"
              % (str(dtype).replace("torch.", ""), *d))
        if dtype == torch.float64:
            worst = max(d)
    print("selfcheck %s (float64 max difference %.3g, limit 1e-5)" % ("ok" if worst <= 1e-5 else "FAILED", worst))
    return worst


def ggml_round(w, fmt, output_fmt=None):
    """The weights as a GGUF file in ggml's block format `fmt` holds them, written from ggml's definitions
    (ggml-common.h, ggml-quants.c's reference quantizers) independently of headprune's writer: rows in
    blocks of 32 values with a float16 scale d; Q8_0: d = max|x|/127, q = round(x/d) (half away from
    zero); Q4_0: m = the value of largest magnitude, d = m/-8, q = min(15, trunc(x/d + 8.5)), x = (q-8)d.
    A matrix whose rows are not whole blocks is rounded to float16. The output (here the tied embedding)
    is `output_fmt`, by default a step up as headprune writes it: float16 under q8_0, q8_0 under q4_0.
    Norms stay float32."""
    def blocks(x, kind):
        if kind == "f16" or x.shape[1] % 32:
            return x.half().float()
        b = x.reshape(-1, 32)
        if kind == "q8_0":
            d = b.abs().amax(1, keepdim=True) / 127
            inv = torch.where(d == 0, torch.zeros_like(d), 1 / d)
            q = (b * inv).abs().add(0.5).floor() * (b * inv).sign()
            return (q * d.half().float()).reshape(x.shape)
        m = b.gather(1, b.abs().argmax(1, keepdim=True))
        d = m / -8
        inv = torch.where(d == 0, torch.zeros_like(d), 1 / d)
        q = (b * inv + 8.5).trunc().clamp(max=15)
        return ((q - 8) * d.half().float()).reshape(x.shape)
    out = dict(w)
    tied = w["out"] is w["embed"]
    output_fmt = output_fmt or {"q8_0": "f16", "q4_0": "q8_0"}[fmt]
    out["embed"] = blocks(w["embed"], output_fmt if tied else fmt)
    out["out"] = out["embed"] if tied else blocks(w["out"], output_fmt)
    mats = ("wq", "wk", "wv", "wo", "w1", "w2", "w3")
    out["layers"] = [{k: (blocks(v, fmt) if k in mats else v) for k, v in layer.items()} for layer in w["layers"]]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--n", type=int, required=True)
    s.add_argument("--length", type=int, required=True)
    s.add_argument("--seed", type=int, required=True)
    s.add_argument("--temperature", type=float, default=1.0)
    s.add_argument("--no-stop", action="store_true", help="accepted for clarity; sampling never stops at EOS")
    s.add_argument("--out", required=True)
    lg = sub.add_parser("logits")
    lg.add_argument("--ids", required=True)
    lg.add_argument("--out", required=True)
    lg.add_argument("--float64", action="store_true",
                    help="compute in float64 (a comparison then sees only the other side's float32 rounding)")
    lg.add_argument("--ggml-round", choices=("q8_0", "q4_0"),
                    help="weights rounded as a GGUF file of that block format holds them (ggml_round)")
    lg.add_argument("--ggml-output", choices=("f16", "q8_0", "q4_0"),
                    help="with --ggml-round: the output projection's format (default: a step above)")
    gr = sub.add_parser("greedy")
    gr.add_argument("--prompt", required=True)
    gr.add_argument("--new", type=int, required=True)
    gr.add_argument("--out", required=True)
    sub.add_parser("selfcheck")
    for p in (s, lg, gr, sub.choices["selfcheck"]):
        p.add_argument("--model", required=True)
    a = ap.parse_args(argv)
    weights, cfg = load(a.model)
    if a.cmd == "sample":
        seqs = sample(weights, cfg, a.n, a.length, a.seed, a.temperature)
        write_json(a.out, {"model": a.model, "seed": a.seed, "temperature": a.temperature, "sequences": seqs})
    elif a.cmd == "logits":
        with open(a.ids, encoding="utf-8") as f:
            seqs = json.load(f)["sequences"]
        w = ggml_round(weights, a.ggml_round, a.ggml_output) if a.ggml_round else weights
        w = cast(w, torch.float64) if a.float64 else w
        logits = _forward(w, cfg, torch.tensor(seqs, dtype=torch.long)) if a.float64 else forward(w, cfg, seqs)
        write_json(a.out, {"logits": logits.tolist()})
    elif a.cmd == "greedy":
        prompt = [int(t) for t in a.prompt.split(",") if t.strip()]
        write_json(a.out, {"prompt": prompt, "ids": greedy(weights, cfg, prompt, a.new)})
    else:
        return 1 if selfcheck(weights, cfg) > 1e-5 else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
