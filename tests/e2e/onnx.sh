#!/usr/bin/env bash
# headprune's ONNX files in a real ONNX Runtime (onnxruntime-node 1.30.0, tests/clients/onnx_check.mjs):
# the HF fixtures of every single-stack family, unpruned and pruned unevenly (an emptied layer, uneven
# key/value groups), exported with `export --onnx`; ONNX Runtime's logits must equal headprune's within
# 1e-4 (batch 2, all graph optimizations), appended masked padding must not move them, and a BERT-style
# layer must stay one fused Attention node after ONNX Runtime's optimizations.
# The decoders again as `export --onnx-dir` folders with optimum's key/value cache
# (tests/clients/onnx_decoder_check.mjs): ONNX Runtime run step by step, each call's present.* fed back,
# within 1e-4 of headprune's logits of the whole sequence at every step, left-padded rows too (with
# --onnx-attention fused, ONNX Runtime's GroupQueryAttention, every step but no left padding); and on
# llama2.c's stories260K (when ../shared has it) pruned uniformly, transformers.js 4.3.1's own generate()
# on the folder (external data) gives headprune generate's 64 greedy tokens.
# Usage: onnx.sh HEADPRUNE_BINARY FIXTURES_DIR WORK_DIR [STORIES260K_DIR]   (exit 77: the client is missing)
set -euo pipefail
bin=$1
fixtures=$2
work=$3
clients=$(cd "$(dirname "$0")/../clients" && pwd)
stories=${4:-$clients/../../../shared/models/stories260K}
stories=$(cd "$stories" 2>/dev/null && pwd || echo "$stories")
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

# Decoders with a key/value cache (export --onnx-dir): NAME MODEL [export options...].
steps() {
  local name=$1 model=$2
  shift 2
  hp export "$model" --onnx-dir "$name.kv" "$@" | tee "$name.kv.export.txt"
  hp bench "$model" --batch 2 --seq 16 --reps 1 --warmup 0 --no-gemm-probe --save-io "$name.kv.io.safetensors" > /dev/null
  node "$clients/onnx_decoder_check.mjs" steps "$PWD/$name.kv" "$name.kv.io.safetensors" 5 > "$name.kv.json"
  /usr/bin/python3 - "$name" "$*" <<'PY'
import json, sys
name, options = sys.argv[1], sys.argv[2]
r = json.load(open(name + ".kv.json"))
assert r["max_abs_diff"] <= 1e-4, f"{name}: step-by-step logits differ by {r['max_abs_diff']}"
# GroupQueryAttention (--onnx-attention fused) reads each row's length from the mask: right padding only.
if "fused" not in options:
    assert r["left_padded"] <= 1e-4, f"{name}: left-padded logits differ by {r['left_padded']}"
print(f"{name}: ONNX Runtime with the cache, {r['calls']} calls: within {r['max_abs_diff']:.1e} of headprune's, "
      f"left-padded {r['left_padded']:.1e}; key/value heads per cached layer {[s[1] for n, s in r['cache_inputs'] if n.endswith('key')]}")
PY
}
for f in gpt2 llama_gqa mistral_window qwen2_tied qwen3_qk_norm phi3_partial_rotary; do steps "$f" "$fixtures/hf/$f"; done
steps llama_pruned llama_pruned/model
# ONNX Runtime's fused GroupQueryAttention (com.microsoft) in every layer, on request: grouped heads, a
# sliding window (local_window_size), per-head norms and partial rotary applied before it.
for f in llama_gqa mistral_window qwen3_qk_norm phi3_partial_rotary; do
  steps "$f.fused" "$fixtures/hf/$f" --onnx-attention fused
  grep -q "2 layers as ONNX Runtime's fused GroupQueryAttention, 0 in standard ops" "$f.fused.kv.export.txt"
done
steps gpt2_pruned gpt2_pruned/model
grep -q "key/value cache in 1 layers" gpt2_pruned.kv.export.txt
[ -f gpt2.kv/config.json ] && [ -f gpt2.kv/generation_config.json ] && [ -f gpt2.kv/onnx/model.onnx ]

if [ -f "$stories/model.safetensors" ] && /usr/bin/python3 -c "import torch" 2>/dev/null; then
  # stories260K (5 layers of 8 query heads in 4 key/value groups), a prompt sampled from the model itself.
  /usr/bin/python3 "$clients/llama2c_reference.py" sample --model "$stories" --n 1 --length 12 --seed 5 --out prompt.json
  ids=$(/usr/bin/python3 -c "import json, sys; print(' '.join(map(str, json.load(open(sys.argv[1]))['sequences'][0])))" prompt.json)
  # Uniform (groups 1 and 3 of every layer removed): the folder's config is the smaller model's, its
  # weights external data, and transformers.js's generate() continues as headprune's does.
  heads=$(/usr/bin/python3 -c "print(','.join(f'decoder_self:{l}:{h}' for l in range(5) for h in range(8) if h // 2 in (1, 3)))")
  hp prune "$stories" --strategy manual --heads "$heads" --calibration random --mask-only --out stories_uniform > /dev/null
  hp export stories_uniform/model --onnx-dir stories_uniform.kv --onnx-external-data | tee stories_uniform.export.txt
  grep -q "weights in model.onnx_data" stories_uniform.export.txt
  /usr/bin/python3 - stories_uniform.kv/config.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert (c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]) == (4, 2, 8), c
assert c["transformers.js_config"]["use_external_data_format"] == {"model.onnx": 1}, c
PY
  hp generate stories_uniform/model --ids $ids --max-new 64 --json > hp_gen.json
  node "$clients/onnx_decoder_check.mjs" generate "$PWD/stories_uniform.kv" "${ids// /,}" 64 > js_gen.json
  # ... and with GroupQueryAttention in every layer.
  hp export stories_uniform/model --onnx-dir stories_uniform.gqa --onnx-attention fused | grep -q "5 layers as ONNX Runtime's fused GroupQueryAttention"
  node "$clients/onnx_decoder_check.mjs" generate "$PWD/stories_uniform.gqa" "${ids// /,}" 64 > js_gen_gqa.json
  /usr/bin/python3 - <<'PY'
import json
hp = json.load(open("hp_gen.json"))["ids"]
for f in ("js_gen.json", "js_gen_gqa.json"):
    js = json.load(open(f))["new_ids"]
    assert hp == js, f"{f}: transformers.js generated {js}, headprune {hp}"
print(f"stories260K uniform: transformers.js generate() gives headprune's {len(hp)} tokens (standard ops and GroupQueryAttention)")
PY
  # Per layer: layer 0 loses query heads 1, 2, 5; layer 2 is emptied; layer 3 loses group 1 (heads 2, 3).
  hp prune "$stories" --strategy manual --heads decoder_self:0:1,decoder_self:0:2,decoder_self:0:5,$(
    /usr/bin/python3 -c "print(','.join(f'decoder_self:2:{h}' for h in range(8)))"),decoder_self:3:2,decoder_self:3:3 \
    --calibration random --mask-only --out stories_uneven > /dev/null
  steps stories_uneven stories_uneven/model
  # Uneven layers fused: layer 3's remaining groups serve the same number of heads, layer 0's do not.
  if hp export stories_uneven/model --onnx-dir x.kv --onnx-attention fused 2> err.txt; then echo "fused uneven groups"; exit 1; fi
  grep -q "layer 0 cannot be ONNX Runtime's fused GroupQueryAttention" err.txt && [ ! -e x.kv ]
  grep -q "1 without heads; key/value cache in 4 layers" stories_uneven.kv.export.txt
else
  echo "stories260K or python3-torch absent: its key/value cache checks skipped"
fi
if hp export "$fixtures/hf/bert" --onnx x.onnx --onnx-external-data > /dev/null && [ -f x.onnx_data ]; then
  node "$clients/onnx_check.mjs" ops x.onnx > /dev/null  # ONNX Runtime opens the file with its data beside it
  rm x.onnx x.onnx_data
else
  echo "--onnx-external-data wrote no x.onnx_data"; exit 1
fi

# Bad input: clear errors, nothing written, a user's file untouched.
if hp export "$fixtures/hf/llama_gqa" --onnx x.onnx --onnx-attention fused 2> err.txt; then echo "fused a rotary layer"; exit 1; fi
grep -q "cannot be ONNX Runtime's fused Attention" err.txt && [ ! -e x.onnx ]
if hp export "$fixtures/hf/marian_tiny" --onnx x.onnx 2> err.txt; then echo "wrote an encoder-decoder"; exit 1; fi
grep -q "encoder-decoders are not written to ONNX" err.txt && [ ! -e x.onnx ]
echo "user data" > users.onnx
if hp export "$fixtures/hf/bert" --onnx users.onnx 2> err.txt; then echo "overwrote a user's file"; exit 1; fi
grep -q "users.onnx" err.txt && [ "$(cat users.onnx)" = "user data" ]
echo "onnx OK"
