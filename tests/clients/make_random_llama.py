#!/usr/bin/python3
"""Writes a random LLaMA-family checkpoint in HF's layout around a real tokenizer, for the GGUF and
llama.cpp tests (tests/e2e/gguf.sh). Weights from make_llama_fixtures.make_weights (seeded).

Usage: make_random_llama.py OUT_DIR TOKENIZER_DIR [JSON_CONFIG_OVERRIDES]
The vocabulary is the tokenizer's size (tokenizer.json's vocab and added tokens, or tokenizer.model's
pieces), unless the overrides give a larger vocab_size; the tokenizer files are copied along.
TOKENIZER_DIR "-": no tokenizer (a benchmark feeding token ids), the overrides' vocab_size.
"""
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures", "hf"))
from make_hf_fixtures import write_json, write_safetensors  # noqa: E402
from make_llama_fixtures import make_weights  # noqa: E402

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json")


def tokenizer_size(d):
    if os.path.exists(os.path.join(d, "tokenizer.json")):
        t = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
        ids = list(t["model"]["vocab"].values()) + [a["id"] for a in t.get("added_tokens", [])]
        return max(ids) + 1
    import sentencepiece  # Debian's python3-sentencepiece
    return sentencepiece.SentencePieceProcessor(model_file=os.path.join(d, "tokenizer.model")).vocab_size()


def main():
    out, tok = sys.argv[1], sys.argv[2]
    over = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 96,
           "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 8,
           "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "hidden_act": "silu", "rope_theta": 10000.0,
           "rope_scaling": None, "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
           "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}
    cfg.update(over)
    seed = cfg.pop("seed", 7)
    if tok == "-":
        if not cfg.get("vocab_size"):
            raise SystemExit("make_random_llama.py: without a tokenizer the overrides must give vocab_size")
    else:
        cfg["vocab_size"] = max(cfg.get("vocab_size", 0), tokenizer_size(tok))
    os.makedirs(out, exist_ok=True)
    write_json(os.path.join(out, "config.json"), cfg)
    write_safetensors(os.path.join(out, "model.safetensors"), make_weights(cfg, seed=seed))
    for f in TOKENIZER_FILES if tok != "-" else ():
        if os.path.exists(os.path.join(tok, f)):
            shutil.copyfile(os.path.join(tok, f), os.path.join(out, f))


if __name__ == "__main__":
    main()
