#!/usr/bin/env python3
"""headprune beside the engines users deploy with (issue 56), on the same weights, in one run:

  bert   BERT-base's shape (configs/bert_base.json, random weights): headprune (`headprune bench`) against
         ONNX Runtime (onnxruntime-node 1.30.0, CPU, all graph optimizations, on `headprune export
         --onnx` of the same checkpoint: fused Attention) at 1 x 32, 1 x 128 and 16 x 128; headprune's
         pruned models (6 of 12 heads removed in every layer; every second layer emptied) beside the
         unpruned one: paired speed-up against the FLOP-ideal one.
  llama  A LLaMA-style model of ~127 M parameters (random weights in HF's layout, drawn as HF
         initialises a model, around Mistral's tokenizer: 12 layers, hidden 768, 16 query heads of 48, 8 key/value heads, SwiGLU 2048, vocabulary
         32,000) against llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU build, on `headprune export
         --gguf`) in fp32 and bf16: prompt processing of 128 and 512 tokens (tokens/s) and decoding 128
         greedy tokens after a 128-token prompt (tokens/s). headprune runs `bench --generate` (the
         key/value-cached path of `generate`).
  kv     The same model with 4 of its 8 key/value groups removed in every layer beside the unpruned one:
         decoding 128 tokens after a 2,048-token prompt, tokens/s and the key/value cache's bytes, in both
         engines.

Before any timing the outputs are compared on the same ids: ONNX Runtime's logits with headprune's
(`bench --save-io`, 1 x 32), llama.cpp's next-token log-probabilities with headprune's (1 x 128, f32), and both with a float64
evaluation of the same weights (how far each float32 engine is from exact).

Engines run one after the other, never at once, each with --threads threads; each round runs every
engine and shape once (--reps timed repetitions after warm-up, the median), the rounds interleave the
engines, and the best round's median is kept. The CPU, BLAS kernels and threads go into the JSON. Never
in CI. Usage:
  /usr/bin/python3 bench/engines.py [--work DIR] [--hp build/headprune] [--threads 2] [--reps 5]
                                    [--rounds 2] [--parts bert,llama,kv] [--out bench/results/engines.json]
                                    [--initializer-range 0.02]
(--parts reruns some parts: the others keep their results in --out, with their own "command".)
"""
import argparse
import json
import math
import os
import sys
import time

from bench_common import cpu_name, run  # noqa: E402  (bench/, the script's directory)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLIENTS = os.path.join(ROOT, "tests", "clients")
BERT_SHAPES = [(1, 32), (1, 128), (16, 128)]
BERT_L, BERT_H = 12, 12
LLAMA = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 16, "num_key_value_heads": 8,
         "head_dim": 48, "intermediate_size": 2048, "max_position_embeddings": 4096}
PROMPTS = (128, 512)
NEW_TOKENS, DECODE_AFTER, LONG_CONTEXT = 128, 128, 2048


def node(script, *args):
    return json.loads(run(["node", os.path.join(CLIENTS, script), *map(str, args)]).strip().splitlines()[-1])


class Bench:
    def __init__(self, a):
        self.a = a
        os.makedirs(a.work, exist_ok=True)
        self.environment = None

    def w(self, *p):
        return os.path.join(self.a.work, *p)

    def hp(self, *args):
        return run([self.a.hp, "--log-level", "warn", "--threads", str(self.a.threads), *map(str, args)])

    def hp_bench(self, models, *args):
        """`headprune bench` of the models; its records (and the environment it reports, kept)."""
        out = self.w("hp_bench.json")
        if os.path.exists(out):
            os.remove(out)
        self.hp("bench", *models, "--reps", self.a.reps, "--no-gemm-probe", "--json", out, *args)
        j = json.load(open(out))
        self.environment = j["environment"]
        return j["records"]


def keep_best(best, key, value, better):
    if key not in best or better(value, best[key]):
        best[key] = value


def bert(b):
    a = b.a
    if not os.path.exists(b.w("bert", "model.safetensors")):
        b.hp("--seed", "1", "init", "--config", os.path.join(ROOT, "configs", "bert_base.json"), "--out", b.w("bert"))
    variants = {"uniform50": ["--strategy", "manual", "--heads",
                              ",".join(f"encoder_self:{l}:{h}" for l in range(BERT_L) for h in range(6, 12))],
                "layers50": ["--strategy", "layers", "--layers", ",".join(f"encoder_self:{l}" for l in range(1, 12, 2))]}
    for name, how in variants.items():
        if not os.path.exists(b.w(name, "model", "config.json")):
            b.hp("prune", b.w("bert"), "--max-examples", "32", *how, "--out", b.w(name), "--overwrite")
    onnx = b.w("bert.onnx")
    export = b.hp("export", b.w("bert"), "--onnx", onnx).strip()
    b.hp("bench", b.w("bert"), "--batch", 1, "--seq", 32, "--reps", 1, "--warmup", 0, "--no-gemm-probe",
         "--save-io", b.w("bert_io.safetensors"))
    check = node("onnx_check.mjs", "logits", onnx, b.w("bert_io.safetensors"))
    print(f"bert: ONNX Runtime's logits within {check['max_abs_diff']:.2e} of headprune's", file=sys.stderr)
    models = [b.w("bert"), b.w("uniform50", "model"), b.w("layers50", "model")]
    best = {}
    for rnd in range(a.rounds):
        for bs, t in BERT_SHAPES:
            recs = b.hp_bench(models, "--batch", bs, "--seq", t)
            for r in recs:
                keep_best(best, ("headprune", r["model"], bs, t), r, lambda x, y: x["median_ms"] < y["median_ms"])
            o = node("onnx_check.mjs", "speed", onnx, bs, t, a.reps, a.threads)
            keep_best(best, ("ort", bs, t), o["seconds"] * 1000, lambda x, y: x < y)
        print(f"bert: round {rnd + 1} done", file=sys.stderr)
    rows = []
    for bs, t in BERT_SHAPES:
        base = best[("headprune", models[0], bs, t)]
        row = {"batch": bs, "length": t, "headprune_ms": base["median_ms"], "onnxruntime_ms": best[("ort", bs, t)]}
        row["ratio"] = row["headprune_ms"] / row["onnxruntime_ms"]
        for name, m in zip(("uniform50", "layers50"), models[1:]):
            r = best[("headprune", m, bs, t)]
            row[name] = {"ms": r["median_ms"], "paired_speedup": r["paired_speedup"], "flop_ideal": r["ideal_speedup"],
                         "of_ideal": r["paired_speedup"] / r["ideal_speedup"]}
        rows.append(row)
    return {"export": export, "logits_check": check, "rows": rows}


def llama_models(b):
    base = b.w("llama")
    if not os.path.exists(os.path.join(base, "model.safetensors")):
        cfg = dict(LLAMA)
        if b.a.initializer_range > 0:
            cfg["initializer_range"] = b.a.initializer_range
        run(["/usr/bin/python3", os.path.join(CLIENTS, "make_random_llama.py"), base, b.a.tokenizer, json.dumps(cfg)])
    pruned = b.w("groups50")
    if not os.path.exists(os.path.join(pruned, "model", "config.json")):
        heads = ",".join(f"decoder_self:{l}:{h}" for l in range(LLAMA["num_hidden_layers"]) for h in range(8))
        b.hp("prune", base, "--strategy", "manual", "--heads", heads, "--calibration", "random", "--out", pruned,
             "--overwrite")
    ggufs = {}
    for name, src in (("base", base), ("groups50", os.path.join(pruned, "model"))):
        for dtype in ("f32", "bf16"):
            path = b.w(f"{name}.{dtype}.gguf")
            if not os.path.exists(path):
                b.hp("export", src, "--gguf", path, "--dtype", dtype)
            ggufs[(name, dtype)] = path
    return base, os.path.join(pruned, "model"), ggufs


def exact_check(b, model_dir, gguf):
    """Both engines against a float64 evaluation of the same weights and ids (the fixtures' reference
    forward pass, tests/fixtures/hf/make_llama_fixtures.py): how far each float32 engine is from exact;
    the same reference in PyTorch's float32 as a third float32 engine."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures", "hf"))
    from make_hf_fixtures import read_safetensors, write_safetensors
    from make_llama_fixtures import forward
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    w = {k: v.double() for k, v in read_safetensors(os.path.join(model_dir, "model.safetensors")).items()}
    io = read_safetensors(b.w("llama_io.safetensors"))
    head_mask = torch.ones(cfg["num_hidden_layers"], cfg["num_attention_heads"], dtype=torch.float64)
    with torch.no_grad():
        exact = forward(cfg, w, io["input_ids"], io["attention_mask"], head_mask)
        w = {k: v.float() for k, v in w.items()}
        torch32 = forward(cfg, w, io["input_ids"], io["attention_mask"], head_mask.float()).double()
    del w
    le, lh = torch.log_softmax(exact, -1), torch.log_softmax(io["logits"].double(), -1)
    lt = torch.log_softmax(torch32, -1)
    seen = le > math.log(1e-30)  # as gguf_check.mjs: log-probabilities of p > 1e-30
    path = b.w("llama_io_fp64.safetensors")
    write_safetensors(path, {"input_ids": io["input_ids"], "attention_mask": io["attention_mask"],
                             "logits": exact.float()})
    out = {"headprune": {"max_abs_logprob_diff": (le - lh)[seen].abs().max().item(),
                         "max_abs_prob_diff": (le.exp() - lh.exp())[seen].abs().max().item()},
           "pytorch_float32": {"max_abs_logprob_diff": (le - lt)[seen].abs().max().item(),
                               "max_abs_prob_diff": (le.exp() - lt.exp())[seen].abs().max().item(),
                               "version": torch.__version__},
           "llama.cpp": node("gguf_check.mjs", "logprobs", gguf, path), "max_abs_logit": exact.abs().max().item()}
    print(f"llama: against float64, headprune's log-probabilities within "
          f"{out['headprune']['max_abs_logprob_diff']:.2e}, llama.cpp's within "
          f"{out['llama.cpp']['max_abs_logprob_diff']:.2e}", file=sys.stderr)
    return out


def llama_check(b, base=None, ggufs=None):
    """llama.cpp's log-probabilities against headprune's, and both against float64, on the model in --work
    (the part llama_check runs only this: e.g. on weights drawn at another --initializer-range)."""
    if base is None:
        base, _, ggufs = llama_models(b)
    b.hp("bench", base, "--batch", 1, "--seq", 128, "--reps", 1, "--warmup", 0, "--no-gemm-probe",
         "--save-io", b.w("llama_io.safetensors"))
    check = node("gguf_check.mjs", "logprobs", ggufs[("base", "f32")], b.w("llama_io.safetensors"))
    print(f"llama: llama.cpp's log-probabilities within {check['max_abs_logprob_diff']:.2e} of headprune's, "
          f"probabilities within {check['max_abs_prob_diff']:.2e}", file=sys.stderr)
    check["exact"] = exact_check(b, base, ggufs[("base", "f32")])
    check["initializer_range"] = json.load(open(os.path.join(base, "config.json"))).get("initializer_range")
    return {"logprobs_check": check}


def llama(b):
    a = b.a
    base, _, ggufs = llama_models(b)
    check = llama_check(b, base, ggufs)["logprobs_check"]
    best = {}
    more = lambda x, y: x > y
    for rnd in range(a.rounds):
        recs = b.hp_bench([base], "--generate", "--precision", "fp32", "bf16", "--batch", 1,
                          "--seq", *PROMPTS, "--new-tokens", NEW_TOKENS, "--decode-after", DECODE_AFTER)
        for r in recs:
            what = f"prompt{r['seq_len']}" if r["mode"] == "prompt" else "decode"
            keep_best(best, ("headprune", r["precision"], what), r["tokens_per_s"], more)
        for dtype, precision in (("f32", "fp32"), ("bf16", "bf16")):
            o = node("gguf_check.mjs", "speed", ggufs[("base", dtype)], a.threads, ",".join(map(str, PROMPTS)),
                     NEW_TOKENS, a.reps, DECODE_AFTER, "F32" if dtype == "f32" else "F16")
            for n in PROMPTS:
                keep_best(best, ("llama.cpp", precision, f"prompt{n}"), o["prompt"][str(n)]["tokens_per_s"], more)
            keep_best(best, ("llama.cpp", precision, "decode"), o["decode"]["tokens_per_s"], more)
        print(f"llama: round {rnd + 1} done", file=sys.stderr)
    rows = []
    for precision in ("fp32", "bf16"):
        for what in [f"prompt{n}" for n in PROMPTS] + ["decode"]:
            h, l = best[("headprune", precision, what)], best[("llama.cpp", precision, what)]
            rows.append({"precision": precision, "workload": what, "headprune_tokens_per_s": h,
                         "llamacpp_tokens_per_s": l, "ratio": h / l})
    return {"logprobs_check": check, "rows": rows}


def kv(b):
    a = b.a
    base, pruned, ggufs = llama_models(b)
    best = {}
    more = lambda x, y: x > y
    for rnd in range(a.rounds):
        recs = b.hp_bench([base, pruned], "--generate", "--precision", "fp32", "bf16", "--batch", 1, "--seq", 128,
                          "--new-tokens", NEW_TOKENS, "--decode-after", LONG_CONTEXT, "--warmup", 1)
        for r in recs:
            if r["mode"] == "decode":
                name = "base" if r["model"].startswith(base) else "groups50"
                keep_best(best, ("headprune", name, r["precision"]), r, lambda x, y: x["tokens_per_s"] > y["tokens_per_s"])
        for (name, dtype), path in ggufs.items():
            o = node("gguf_check.mjs", "speed", path, a.threads, 128, NEW_TOKENS, a.reps, LONG_CONTEXT,
                     "F32" if dtype == "f32" else "F16")
            keep_best(best, ("llama.cpp", name, "fp32" if dtype == "f32" else "bf16"), o["decode"]["tokens_per_s"], more)
        print(f"kv: round {rnd + 1} done", file=sys.stderr)
    rows = []
    g, d, layers = LLAMA["num_key_value_heads"], LLAMA["head_dim"], LLAMA["num_hidden_layers"]
    for precision in ("fp32", "bf16"):
        for name, groups in (("base", g), ("groups50", g // 2)):
            r = best[("headprune", name, precision)]
            positions = LONG_CONTEXT + NEW_TOKENS
            rows.append({"model": name, "precision": precision, "context": positions,
                         "headprune_tokens_per_s": r["tokens_per_s"], "headprune_kv_cache_bytes": r["kv_cache_bytes"],
                         "counted_kv_cache_bytes": 2 * layers * groups * d * positions * (4 if precision == "fp32" else 2),
                         "llamacpp_tokens_per_s": best[("llama.cpp", name, precision)],
                         "flop_ideal": r["ideal_speedup"]})
    # Speed-ups against the unpruned model at the same precision, as ratios of the best rounds' tokens/s
    # (bench's paired column compares with its first model, the fp32 one).
    for row in rows:
        base_row = next(x for x in rows if x["precision"] == row["precision"] and x["model"] == "base")
        for engine in ("headprune", "llamacpp"):
            row[f"{engine}_speedup"] = row[f"{engine}_tokens_per_s"] / base_row[f"{engine}_tokens_per_s"]
    return {"rows": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/headprune_engines")
    ap.add_argument("--hp", default=os.path.join(ROOT, "build", "headprune"))
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "..", "shared", "tokenizers", "mistral-7b-v0.1"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--parts", default="bert,llama,kv", help="any of bert, llama, kv, llama_check")
    ap.add_argument("--initializer-range", type=float, default=0.02,
                    help="the LLaMA-style model's weights: N(0, this²) as HF initialises a model; 0: the test "
                         "fixtures' scale (0.2; embeddings 0.5), which saturates every softmax at this width")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "engines.json"))
    a = ap.parse_args()
    b = Bench(a)
    parts = {"bert": bert, "llama": llama, "kv": kv, "llama_check": llama_check}
    out = {"format": "headprune-bench-engines/1", "date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(),
           "threads": a.threads, "reps": a.reps, "rounds": a.rounds,
           "engines": {"onnxruntime": "onnxruntime-node 1.30.0 (CPU execution provider)",
                       "llama.cpp": "node-llama-cpp 3.21.1 prebuilt CPU build"},
           "command": " ".join(["/usr/bin/python3", "bench/engines.py"] + sys.argv[1:])}
    if os.path.exists(a.out):  # parts not rerun keep their earlier results
        earlier = json.load(open(a.out))
        for name in parts:
            if name in earlier and name not in a.parts.split(","):
                out[name] = earlier[name]
    for name in a.parts.split(","):
        t0 = time.time()
        out[name] = parts[name](b)
        out[name]["seconds"] = time.time() - t0
        out[name]["command"] = out["command"]
        out[name]["date"] = out["date"]
    out["headprune_environment"] = b.environment
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.out)
    print(json.dumps({k: out[k] for k in a.parts.split(",")}, indent=1))


if __name__ == "__main__":
    main()
