#!/usr/bin/env python3
"""A real HF client for headprune's exports: transformers (5.x on the GPU machine) loads what
`headprune export --hf` writes and must give the logits headprune gives for the same inputs.

For each HF fixture (tests/fixtures/hf: BERT, GPT-2, LLaMA with grouped-query attention, Qwen2 with
tied embeddings and q/k/v biases, Mistral with a sliding window):
  1. the fixture itself, against its golden outputs (written by a plain-torch reference here);
  2. headprune prunes heads of it (for the LLaMA family a whole key/value group too), then exports
     the pruned model dense (every transformers version) and, for BERT and GPT-2, in HF v4's
     pruned_heads form; transformers loads each export and its logits are compared with those of
     headprune's pruned checkpoint (`headprune bench --save-io`, same device).
A pruned_heads export that transformers refuses is recorded as refused (v5 dropped head pruning).

  python3 tests/gpu/hf_client.py --headprune build-gpu/headprune --work runs/gpu/hf --out hf_client.json
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "hf")
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "eager"))
from benchio import write_json  # noqa: E402
from eager import read_safetensors as load_file  # noqa: E402  (headprune's own reader: no extra package)

# Heads to prune per fixture: (attention type, layer, head). LLaMA's 4 query heads share 2 key/value
# heads (0-1, 2-3): removing heads 0 and 1 of layer 1 removes key/value head 0 there; Mistral's 4
# share one; Qwen2's 6 share 2 (0-2, 3-5).
CASES = {
    "bert": ("encoder_self", [(0, 1), (0, 3), (1, 0)]),
    "gpt2": ("decoder_self", [(0, 2), (1, 0), (1, 3)]),
    "llama_gqa": ("decoder_self", [(0, 2), (1, 0), (1, 1)]),
    "qwen2_tied": ("decoder_self", [(0, 1), (1, 3), (1, 4), (1, 5)]),
    "mistral_window": ("decoder_self", [(0, 0), (1, 2)]),
}


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} -> rc {p.returncode}: {p.stderr.strip()[-800:]}")
    return p.stdout


def hf_logits(directory, ids, mask, segments, device):
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification
    cfg = AutoConfig.from_pretrained(directory)
    cls = AutoModelForSequenceClassification if cfg.model_type == "bert" else AutoModelForCausalLM
    try:
        m = cls.from_pretrained(directory, dtype=torch.float32)
    except TypeError:  # transformers 4 names it torch_dtype
        m = cls.from_pretrained(directory, torch_dtype=torch.float32)
    m = m.to(device).eval()
    extra = {} if segments is None else {"token_type_ids": segments.to(device)}
    with torch.inference_mode():
        out = m(input_ids=ids.to(device), attention_mask=mask.to(device), **extra).logits.float().cpu()
    return out, type(m).__name__, transformers.__version__


def compare(name, directory, ref_ids, ref_mask, ref_logits, device, layout, segments=None):
    """Logits compared where they are defined: every row of a classifier's, the real (unpadded)
    positions of a language model's."""
    rec = {"case": name, "dir": directory, "layout": layout}
    try:
        got, cls, version = hf_logits(directory, ref_ids, ref_mask, segments, device)
        rec.update(loaded=True, hf_class=cls, transformers=version)
        if got.shape != ref_logits.shape:
            rec.update(ok=False, error=f"logits shape {list(got.shape)} vs headprune's {list(ref_logits.shape)}")
            return rec
        if got.dim() == 3:
            keep = ref_mask.bool()
            got, ref_logits = got[keep], ref_logits[keep]
        diff = (got - ref_logits).abs().max().item()
        scale = ref_logits.abs().max().item()
        rec.update(max_abs_diff=diff, max_abs_logit=scale, ok=bool(diff <= 1e-4 * max(1.0, scale)))
    except Exception as e:  # noqa: BLE001 - a refusal is a result here
        rec.update(loaded=False, ok=False, error=f"{type(e).__name__}: {str(e)[:400]}")
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--headprune", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    hp = [args.headprune, "--device", args.device, "--log-level", "warn"]
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    records = []
    for fixture, (attn, heads) in CASES.items():
        src = os.path.join(FIXTURES, fixture)
        print(f"[hf_client] {fixture}", file=sys.stderr)
        # 1. The fixture against its golden outputs.
        golden = load_file(os.path.join(src, "golden.safetensors"))
        gold_logits = golden.get("logits")
        if gold_logits is not None and "input_ids" in golden:
            mask = golden.get("attention_mask", torch.ones_like(golden["input_ids"]))
            records.append(compare(f"{fixture}: fixture vs its golden outputs", src, golden["input_ids"], mask,
                                   gold_logits.float(), args.device, "as written", golden.get("token_type_ids")))
        # 2. Pruned by headprune, exported, loaded by transformers.
        w = os.path.join(args.work, fixture)
        spec = ",".join(f"{attn}:{l}:{h}" for l, h in heads)
        try:
            run(hp + ["prune", src, "--strategy", "manual", "--heads", spec, "--synthetic", "8", "--out", w + "/pruned"])
            model = w + "/pruned/model"
            run(hp + ["bench", model, "--batch", "2", "--seq", "8", "--reps", "1", "--warmup", "0",
                      "--save-io", w + "/io.safetensors"])
        except RuntimeError as e:
            records.append({"case": f"{fixture}: pruned by headprune", "ok": False, "error": str(e)})
            continue
        io = load_file(w + "/io.safetensors")
        layouts = ["dense", "pruned_heads"] if fixture in ("bert", "gpt2") else ["dense"]
        for layout in layouts:
            out = f"{w}/hf_{layout}"
            try:
                run(hp + ["export", model, "--hf", out, "--hf-layout", layout])
            except RuntimeError as e:
                records.append({"case": f"{fixture}: export {layout}", "ok": False, "error": str(e)})
                continue
            records.append(compare(f"{fixture} pruned ({spec}): {layout} export", out, io["input_ids"],
                                   io["attention_mask"], io["logits"].float(), args.device, layout))
    for r in records:
        state = "ok" if r.get("ok") else ("REFUSED" if not r.get("loaded", True) else "DIFFERS")
        print(f"{state:8} {r['case']}: {r.get('max_abs_diff', r.get('error', ''))}", file=sys.stderr)
    dense_ok = all(r.get("ok") for r in records if r.get("layout") in ("dense", "as written"))
    write_json(args.out, {"study": "hf_client", "command": "bash scripts/gpu.sh hf", "device": args.device,
                          "torch": torch.__version__, "all_dense_and_fixtures_match": dense_ok, "records": records})
    sys.exit(0 if dense_ok else 1)


if __name__ == "__main__":
    main()
