#!/usr/bin/env bash
# headprune's ONNX files in a real ONNX Runtime (onnxruntime-node 1.30.0, tests/clients/onnx_check.mjs):
# the HF fixtures of every single-stack family, unpruned and pruned unevenly (an emptied layer, uneven
# key/value groups), exported with `export --onnx`; ONNX Runtime's logits must equal headprune's within
# 1e-4 (batch 2, all graph optimizations), appended masked padding must not move them, and a BERT-style
# layer must stay one fused Attention node after ONNX Runtime's optimizations.
# Usage: onnx.sh HEADPRUNE_BINARY FIXTURES_DIR WORK_DIR   (exit 77: the client is missing)
set -euo pipefail
bin=$1
fixtures=$2
work=$3
clients=$(cd "$(dirname "$0")/../clients" && pwd)
if [ ! -d "$clients/node_modules/onnxruntime-node" ]; then
  echo "skipped: onnxruntime-node is not installed (scripts/setup.sh runs npm ci in tests/clients)"; exit 77
fi
rm -rf "$work"
mkdir -p "$work"
cd "$work"
hp() { "$bin" --log-level warn "$@"; }
# NAME MODEL [export options...]: export, save headprune's logits, compare in ONNX Runtime.
check() {
  local name=$1 model=$2
  shift 2
  hp export "$model" --onnx "$name.onnx" "$@" | tee "$name.export.txt"
  hp bench "$model" --batch 2 --seq 16 --reps 1 --warmup 0 --no-gemm-probe --save-io "$name.io.safetensors" > /dev/null
  node "$clients/onnx_check.mjs" logits "$name.onnx" "$name.io.safetensors" > "$name.json"
  /usr/bin/python3 - "$name" <<'PY'
import json, sys
name = sys.argv[1]
r = json.load(open(name + ".json"))
assert r["max_abs_diff"] <= 1e-4, f"{name}: ONNX Runtime's logits differ by {r['max_abs_diff']}"
assert r["padding"] <= 1e-5, f"{name}: masked padding moved the logits by {r['padding']}"
fused = r["optimized_ops"].get("Attention", 0)
print(f"{name}: ONNX Runtime's logits within {r['max_abs_diff']:.1e} of headprune's, padding {r['padding']:.1e}, "
      f"fused Attention nodes after optimization: {fused}")
open(name + ".fused", "w").write(str(fused))
PY
}
fused() { [ "$(cat "$1.fused")" = "$2" ] || { echo "$1: $(cat "$1.fused") fused Attention nodes, expected $2"; exit 1; }; }

# BERT-style classifier (post-LN, GELU, segments): fused Attention, then standard ops.
check bert "$fixtures/hf/bert"
grep -q "2 layers as ONNX Runtime's fused Attention, 0 in standard ops" bert.export.txt
fused bert 2
check bert_standard "$fixtures/hf/bert" --onnx-attention standard
grep -q "0 layers as ONNX Runtime's fused Attention, 2 in standard ops" bert_standard.export.txt
# Pruned unevenly: layer 0 keeps 2 of 4 heads, layer 1 none.
hp prune "$fixtures/hf/bert" --strategy manual \
  --heads encoder_self:0:0,encoder_self:0:2,encoder_self:1:0,encoder_self:1:1,encoder_self:1:2,encoder_self:1:3 \
  --synthetic 16 --out bert_pruned > /dev/null
check bert_pruned bert_pruned/model
grep -q "1 layers as ONNX Runtime's fused Attention, 0 in standard ops, 1 without heads" bert_pruned.export.txt
fused bert_pruned 1

# Decoders: GPT-2 (learned positions, tanh GELU, tied output), Llama (GQA, llama3 rope), Mistral (sliding
# window 3 < 16 positions), Qwen2 (q/k/v biases, tied), Qwen3 (q/k norms), Phi-3 (partial rotary).
for f in gpt2 llama_gqa mistral_window qwen2_tied qwen3_qk_norm phi3_partial_rotary; do check "$f" "$fixtures/hf/$f"; done
# Llama pruned: layer 0 loses query head 1 (groups keep 1 and 2 heads), layer 1 its key/value group 1.
hp prune "$fixtures/hf/llama_gqa" --strategy manual --heads decoder_self:0:1,decoder_self:1:2,decoder_self:1:3 \
  --calibration random --calibration-length 16 --out llama_pruned > /dev/null
check llama_pruned llama_pruned/model
# GPT-2 with a layer emptied.
hp prune "$fixtures/hf/gpt2" --strategy manual --heads decoder_self:0:0,decoder_self:0:1,decoder_self:0:2,decoder_self:0:3,decoder_self:1:1 \
  --calibration random --calibration-length 16 --out gpt2_pruned > /dev/null
check gpt2_pruned gpt2_pruned/model
grep -q "1 without heads" gpt2_pruned.export.txt

# Bad input: clear errors, nothing written, a user's file untouched.
if hp export "$fixtures/hf/llama_gqa" --onnx x.onnx --onnx-attention fused 2> err.txt; then echo "fused a rotary layer"; exit 1; fi
grep -q "cannot be ONNX Runtime's fused Attention" err.txt && [ ! -e x.onnx ]
if hp export "$fixtures/hf/marian_tiny" --onnx x.onnx 2> err.txt; then echo "wrote an encoder-decoder"; exit 1; fi
grep -q "encoder-decoders are not written to ONNX" err.txt && [ ! -e x.onnx ]
echo "user data" > users.onnx
if hp export "$fixtures/hf/bert" --onnx users.onnx 2> err.txt; then echo "overwrote a user's file"; exit 1; fi
grep -q "users.onnx" err.txt && [ "$(cat users.onnx)" = "user data" ]
echo "onnx OK"
