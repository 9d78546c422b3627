#!/usr/bin/env bash
# headprune's GGUF files in a real llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU build,
# tests/clients/gguf_check.mjs): random LLaMA-family models around real tokenizers, unpruned and
# pruned (uneven heads per layer, an emptied layer, an emptied layer 0, a removed key/value group),
# exported with `export --gguf`; llama.cpp's next-token log-probabilities at every position must equal
# headprune's within 1e-4, and its token ids for the tokenizer test texts headprune's.
# Usage: gguf.sh HEADPRUNE_BINARY WORK_DIR [TOKENIZERS_DIR]   (exit 77: clients or tokenizers missing)
set -euo pipefail
bin=$1
work=$2
here=$(cd "$(dirname "$0")/.." && pwd)
tokdir=${3:-$here/../../shared/tokenizers}
clients=$here/clients
texts=$here/fixtures/tokenizer_texts.txt
if [ ! -d "$clients/node_modules/node-llama-cpp" ]; then
  echo "skipped: node-llama-cpp is not installed (scripts/setup.sh runs npm ci in tests/clients)"; exit 77
fi
if [ ! -f "$tokdir/mistral-7b-v0.1/tokenizer.model" ] || [ ! -f "$tokdir/phi-2/tokenizer.json" ]; then
  echo "skipped: no tokenizers at $tokdir"; exit 77
fi
if ! /usr/bin/python3 -c "import torch, sentencepiece" 2>/dev/null; then
  echo "skipped: python3-torch or python3-sentencepiece is not installed"; exit 77
fi
rm -rf "$work"
mkdir -p "$work"
cd "$work"
hp() { "$bin" --log-level warn "$@"; }
check() { node "$clients/gguf_check.mjs" "$@"; }
make_model() { /usr/bin/python3 "$clients/make_random_llama.py" "$@"; }
# llama.cpp's log-probabilities against headprune's logits on the same ids (bench --save-io).
logprobs() {  # NAME MODEL_DIR GGUF BOUND
  hp bench "$2" --batch 1 --seq 48 --reps 1 --warmup 0 --no-gemm-probe --save-io "$1.io.safetensors" > /dev/null
  check logprobs "$3" "$1.io.safetensors" | tee "$1.logprobs.json"
  /usr/bin/python3 - "$1.logprobs.json" "$4" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bound = float(sys.argv[2])
assert r["argmax_agree"], f"{sys.argv[3]}: the arg-max differs"
assert r["max_abs_logprob_diff"] <= bound, f"{sys.argv[3]}: max |diff| {r['max_abs_logprob_diff']} > {bound}"
print(f"{sys.argv[3]}: llama.cpp log-probabilities within {r['max_abs_logprob_diff']:.2e} of headprune's")
PY
}
same_ids() {  # A B WHAT
  if ! cmp -s "$1" "$2"; then echo "token ids differ ($3):"; diff "$1" "$2" | head -20; exit 1; fi
  echo "$3: the same token ids for $(wc -l < "$1") texts"
}

# 1. Llama with llama3 rope scaling, Mistral's SentencePiece tokenizer: arch llama, unpruned.
make_model llama "$tokdir/mistral-7b-v0.1" '{"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}'
hp export llama --gguf llama.gguf | tee export.txt
grep -q "gguf llama, f32" export.txt
logprobs llama llama llama.gguf 1e-4

# 2. Pruned: layer 0 and layer 3 emptied, layer 1 loses query heads 1, 2, 5 (its groups keep 1, 1, 1, 2
#    heads), layer 2 loses key/value group 1 (heads 2, 3): arch deci.
heads=$(/usr/bin/python3 -c "print(','.join([f'decoder_self:{l}:{h}' for l in (0, 3) for h in range(8)] + ['decoder_self:1:1', 'decoder_self:1:2', 'decoder_self:1:5', 'decoder_self:2:2', 'decoder_self:2:3']))")
hp prune llama --strategy manual --heads "$heads" --calibration random --out pruned > /dev/null
hp export pruned/model --gguf pruned.gguf | tee export.txt
grep -q "gguf deci, f32: query heads per layer \[1,5,6,0\], key/value heads \[1,5,3,0\]; emptied layers \[0\] keep a zero stand-in head" export.txt
logprobs pruned pruned/model pruned.gguf 1e-4
# The same heads masked, not removed: the file is the removed model's.
hp prune llama --strategy manual --heads "$heads" --calibration random --mask-only --out masked > /dev/null
hp export masked/model --gguf masked.gguf > /dev/null
logprobs masked masked/model masked.gguf 1e-4
# With attention biases an emptied layer still adds its output bias: a stand-in head carries it.
make_model biased "$tokdir/mistral-7b-v0.1" '{"attention_bias": true, "mlp_bias": true, "seed": 11}'
hp prune biased --strategy manual --heads decoder_self:2:0,decoder_self:2:1,decoder_self:2:2,decoder_self:2:3,decoder_self:2:4,decoder_self:2:5,decoder_self:2:6,decoder_self:2:7 \
  --calibration random --out biased_pruned > /dev/null
hp export biased_pruned/model --gguf biased.gguf | tee export.txt
grep -q "query heads per layer \[8,8,1,8\].*emptied layers \[2\] keep a zero stand-in head" export.txt
logprobs biased biased_pruned/model biased.gguf 1e-4
# F16 and BF16 weights load and run (compared loosely: the weights are rounded).
hp export pruned/model --gguf pruned_bf16.gguf --dtype bf16 | grep -q "gguf deci, bf16"
hp export pruned/model --gguf pruned_f16.gguf --dtype f16 | grep -q "gguf deci, f16"
check logprobs pruned_bf16.gguf pruned.io.safetensors
check logprobs pruned_f16.gguf pruned.io.safetensors

# 3. Tokenizers: llama.cpp reads Mistral's tokenizer.model from the GGUF as sentencepiece does (headprune
#    on tokenizer.model alone is checked against python3-sentencepiece by the tokenizer tests); a GGUF
#    built from tokenizer.json alone (pieces scored by merge rank) tokenizes the same.
mkdir -p spm json
cp "$tokdir/mistral-7b-v0.1/tokenizer.model" "$tokdir/mistral-7b-v0.1/tokenizer_config.json" spm/
cp llama/config.json llama/model.safetensors llama/tokenizer.json llama/tokenizer_config.json json/
hp export json --gguf json.gguf > /dev/null
hp tokenize spm --file "$texts" --no-special-tokens > spm.ids
check tokenize llama.gguf "$texts" > llama.ids
check tokenize json.gguf "$texts" > json.ids
same_ids spm.ids llama.ids "tokenizer.model in GGUF"
same_ids spm.ids json.ids "tokenizer.json (SentencePiece BPE) in GGUF"

# 4. Qwen2 with phi-2's byte-level BPE: arch qwen2 (rotate-half rope, q/k/v biases), merges in the file.
make_model qwen2 "$tokdir/phi-2" '{"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "num_key_value_heads": 2, "rope_theta": 1000000.0}'
hp export qwen2 --gguf qwen2.gguf | tee export.txt
grep -q "gguf qwen2, f32" export.txt
logprobs qwen2 qwen2 qwen2.gguf 1e-4
hp tokenize qwen2 --file "$texts" --no-special-tokens > qwen2_hp.ids
check tokenize qwen2.gguf "$texts" special > qwen2_lc.ids  # HF matches added tokens in text: so does this
same_ids qwen2_hp.ids qwen2_lc.ids "byte-level BPE (phi-2) in GGUF"
# Pruned unevenly, the Qwen2 model goes as deci (q/k permuted, their biases too).
hp prune qwen2 --strategy manual --heads decoder_self:0:0,decoder_self:0:1,decoder_self:2:5 --calibration random --out qwen2_pruned > /dev/null
hp export qwen2_pruned/model --gguf qwen2_pruned.gguf | grep -q "gguf deci"
logprobs qwen2_pruned qwen2_pruned/model qwen2_pruned.gguf 1e-4

# 5. Bad input: clear errors, nothing written, a user's file untouched.
echo "user data" > users.gguf
if hp export llama --gguf users.gguf 2> err.txt; then echo "overwrote a user's file"; exit 1; fi
grep -q "users.gguf" err.txt && [ "$(cat users.gguf)" = "user data" ]
if hp export llama --gguf x.gguf --dtype q4_0 2> err.txt; then echo "accepted --dtype q4_0"; exit 1; fi
grep -q "dtype" err.txt && [ ! -e x.gguf ]
if hp export "$here/fixtures/hf/bert" --gguf bert.gguf 2> err.txt; then echo "wrote a BERT as GGUF"; exit 1; fi
grep -q "GGUF export: only decoder LMs of the LLaMA family" err.txt && [ ! -e bert.gguf ]
ls -a | grep -q "headprune-partial" && { echo "scratch left behind"; exit 1; }
echo "gguf OK"
