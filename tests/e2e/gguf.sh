#!/usr/bin/env bash
# headprune's GGUF files in a real llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU build,
# tests/clients/gguf_check.mjs): random LLaMA-family models around real tokenizers, unpruned and
# pruned (uneven heads per layer, an emptied layer, an emptied layer 0, a removed key/value group),
# exported with `export --gguf`; llama.cpp's next-token log-probabilities at every position must equal
# headprune's within 1e-4, and its token ids for the tokenizer test texts headprune's.
# llama2.c's stories260K goes as f32, q8_0 and q4_0: its per-token loss in llama.cpp on sampled text
# beside an independent forward (stories_quantized.json in WORK_DIR).
# Usage: gguf.sh HEADPRUNE_BINARY WORK_DIR [TOKENIZERS_DIR [STORIES260K_DIR]]
#        (exit 77: clients, tokenizers or stories260K missing)
set -euo pipefail
bin=$1
work=$2
here=$(cd "$(dirname "$0")/.." && pwd)
tokdir=${3:-$here/../../shared/tokenizers}
stories=${4:-$here/../../shared/models/stories260K}
clients=$here/clients
texts=$here/fixtures/tokenizer_texts.txt
if [ ! -d "$clients/node_modules/node-llama-cpp" ]; then
  echo "skipped: node-llama-cpp is not installed (scripts/setup.sh runs npm ci in tests/clients)"; exit 77
fi
if [ ! -f "$tokdir/mistral-7b-v0.1/tokenizer.model" ] || [ ! -f "$tokdir/phi-2/tokenizer.json" ]; then
  echo "skipped: no tokenizers at $tokdir"; exit 77
fi
if [ ! -f "$stories/model.safetensors" ]; then echo "skipped: no stories260K at $stories"; exit 77; fi
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

# 5. A model someone else trained, quantized: llama2.c's stories260K as f32, q8_0 and q4_0 (ggml's blocks;
#    its feed-forward down rows, 172 values, are not whole blocks and stay f16; the output projection, here
#    the tied embedding, a step up by default: f16 under q8_0, q8_0 under q4_0), and q8_0 with a q8_0
#    output as llama.cpp's own quantizer writes it (q8_0_out). llama.cpp's per-token loss on text sampled
#    from the model, beside an independent PyTorch forward of llama2.c's math (llama2c_reference.py).
#    stories260K has no tokenizer and a GGUF carries one: its copy here gets a stand-in vocabulary of its
#    512 ids (llama2.c's layout: 3 specials, 256 bytes, 253 pieces); the ids are fed as they are, so the
#    pieces' text does not matter.
mkdir -p stories
cp "$stories/config.json" "$stories/model.safetensors" stories/
/usr/bin/python3 - stories/tokenizer.json <<'PY'
import json, sys
vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
vocab.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
vocab.update({chr(0x4E00 + i): 259 + i for i in range(253)})
specials = [{"id": i, "content": t, "special": True} for t, i in list(vocab.items())[:3]]
json.dump({"model": {"type": "BPE", "byte_fallback": True, "unk_token": "<unk>", "vocab": vocab, "merges": []},
           "added_tokens": specials}, open(sys.argv[1], "w"), ensure_ascii=False)
PY
/usr/bin/python3 "$clients/llama2c_reference.py" sample --model "$stories" --n 4 --length 128 --seed 3 --out held.json
ref() { /usr/bin/python3 "$clients/llama2c_reference.py" logits --model "$stories" --ids held.json --out "held_ref_$1.json" "${@:2}"; }
ref f32
ref q8_0 --ggml-round q8_0
ref q4_0 --ggml-round q4_0
ref q8_0_out --ggml-round q8_0 --ggml-output q8_0
for q in f32 q8_0 q4_0; do
  hp export stories --gguf "stories_$q.gguf" --dtype "$q" | tee export.txt
  grep -q "gguf llama, $q" export.txt
  check nll "stories_$q.gguf" held.json > "nll_$q.json"
done
grep -q "output projection q8_0; 5 weights kept f16, their rows not whole q4_0 blocks of 32 (blk.0.ffn_down.weight" export.txt
hp export stories --gguf stories_q8_0_out.gguf --dtype q8_0 --gguf-output-dtype q8_0 | tee export.txt
grep -q "gguf llama, q8_0: .*; 5 weights kept f16" export.txt
if grep -q "output projection" export.txt; then echo "--gguf-output-dtype q8_0 was not the output's type" >&2; exit 1; fi
check nll stories_q8_0_out.gguf held.json > nll_q8_0_out.json
/usr/bin/python3 - held.json <<'PY'
import json, math, os, sys
import torch
ids = json.load(open(sys.argv[1]))["sequences"]
target = torch.tensor(ids)[:, 1:, None]
rows = {}
for q in ("f32", "q8_0", "q4_0", "q8_0_out"):
    # The reference: llama2.c's math in PyTorch on the weights as ggml's blocks hold them (f32: as trained).
    logp = torch.tensor(json.load(open(f"held_ref_{q}.json"))["logits"], dtype=torch.float64).log_softmax(-1)
    ref = (-logp[:, :-1].gather(2, target)).flatten().tolist()
    r = json.load(open(f"nll_{q}.json"))
    assert r["tokens"] == len(ref) and all(math.isfinite(x) for x in r["per_token"]), q
    rows[q] = {"llama_cpp_mean_loss": r["mean_nll"], "llama_cpp_perplexity": r["perplexity"],
               "reference_mean_loss": sum(ref) / len(ref), "tokens": len(ref),
               "max_abs_token_loss_diff_vs_reference": max(abs(a - b) for a, b in zip(r["per_token"], ref)),
               "bytes": os.path.getsize(f"stories_{q}.gguf")}
f32 = rows["f32"]["llama_cpp_mean_loss"]
for q, r in rows.items():
    r["loss_vs_f32"] = r["llama_cpp_mean_loss"] / f32 - 1
    print(f"stories260K {q:8s} llama.cpp mean loss {r['llama_cpp_mean_loss']:.5f} (perplexity {r['llama_cpp_perplexity']:.3f}, "
          f"{r['loss_vs_f32']:+.2%} vs f32), reference {r['reference_mean_loss']:.5f}, {r['bytes']} bytes, {r['tokens']} tokens")
json.dump(rows, open("stories_quantized.json", "w"), indent=1)
# f32: the file computes llama2.c's model. q8_0 / q4_0: llama.cpp on the file's blocks agrees with the
# reference on the same rounded weights (llama.cpp also rounds activations to q8_0 blocks in its
# quantized products: the rest of the gap), and q8_0 (its output f16) stays within 1 % of f32.
assert rows["f32"]["max_abs_token_loss_diff_vs_reference"] <= 1e-3, "the f32 GGUF disagrees with the reference forward"
for q in ("q8_0", "q4_0", "q8_0_out"):
    r = rows[q]
    assert abs(r["llama_cpp_mean_loss"] / r["reference_mean_loss"] - 1) <= 0.02, f"{q}: llama.cpp is not the reference on ggml's blocks"
assert rows["q8_0"]["loss_vs_f32"] <= 0.01, "q8_0's mean loss is more than 1 % above f32's"
assert rows["q8_0_out"]["loss_vs_f32"] <= 0.02, "q8_0 with a q8_0 output: mean loss more than 2 % above f32's"
sizes = [rows[q]["bytes"] for q in ("f32", "q8_0", "q4_0")]
assert sizes[1] < 0.4 * sizes[0] and sizes[2] < sizes[1] and rows["q8_0_out"]["bytes"] < sizes[1], sizes
PY

# Uniform plans on stories260K (8 query heads in 4 key/value groups per layer): (q) one of the two query
# heads of every group removed in every layer; (kv) groups 1 and 3 of every layer removed. The HF export
# is the smaller standard model (num_attention_heads, num_key_value_heads, head_dim), headprune reads it
# back with the masked model's logits, and its GGUF is arch llama within 1e-4 in llama.cpp.
for case in q kv; do
  heads=$(/usr/bin/python3 -c "import sys; q = sys.argv[1] == 'q'; print(','.join(f'decoder_self:{l}:{h}' for l in range(5) for h in range(8) if (h % 2 == 1 if q else h // 2 in (1, 3))))" "$case")
  hp prune stories --strategy manual --heads "$heads" --calibration random --mask-only --out "masked_$case" > /dev/null
  hp export "masked_$case/model" --hf "native_$case" | tee export.txt
  if [ "$case" = q ]; then kv=4; else kv=2; fi
  grep -q "llama, native: 4 query heads, $kv key/value heads of 8 channels in every layer" export.txt
  hp bench "masked_$case/model" --batch 1 --seq 48 --reps 1 --warmup 0 --no-gemm-probe --save-io "masked_$case.io.safetensors" > /dev/null
  hp bench "native_$case" --batch 1 --seq 48 --reps 1 --warmup 0 --no-gemm-probe --save-io "native_$case.io.safetensors" > /dev/null
  /usr/bin/python3 - "$case" "$kv" "$stories" "$clients" <<'PY'
import json, os, sys
case, kv, stories, clients = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path.insert(0, clients)
from llama2c_reference import read_safetensors
cfg = json.load(open(f"native_{case}/config.json"))
assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["hidden_size"]) == (4, kv, 8, 64), cfg
assert "pruned_heads" not in cfg
t, o = read_safetensors(f"native_{case}/model.safetensors"), read_safetensors(f"{stories}/model.safetensors")
attn = lambda w: sum(v.numel() for k, v in w.items() if ".self_attn." in k)
for l in range(5):
    p = f"model.layers.{l}.self_attn."
    assert tuple(t[p + "q_proj.weight"].shape) == (32, 64) and tuple(t[p + "k_proj.weight"].shape) == (kv * 8, 64)
    assert tuple(t[p + "o_proj.weight"].shape) == (64, 32)
a, b = read_safetensors(f"masked_{case}.io.safetensors"), read_safetensors(f"native_{case}.io.safetensors")
assert a["input_ids"].equal(b["input_ids"])
d = (a["logits"] - b["logits"]).abs().max().item()
assert d <= 1e-5, f"the native export's logits differ from the masked model's by {d}"
print(f"uniform {case}: HF config 4 query / {kv} key-value heads of 8; attention weights {attn(t)} of {attn(o)} "
      f"({attn(t) / attn(o):.3f}); logits within {d:.1e} of the masked model's")
PY
  hp export "native_$case" --gguf "native_$case.gguf" | grep -q "gguf llama, f32: query heads per layer \[4,4,4,4,4\]"
  logprobs "native_$case" "native_$case" "native_$case.gguf" 1e-4
done

# A uniform plan chosen by importance (--shape uniform): 20 of the 40 heads go, the same in every layer,
# and the export is native.
hp prune stories --strategy score --method magnitude --shape uniform --target 20 --calibration random --out uniform_mag > /dev/null
grep -q '"shape": "uniform"' uniform_mag/plan.json
hp export uniform_mag/model --hf uniform_mag_hf | grep -q "llama, native: 4 query heads"
# Iterative re-scoring keeps the shape at every step.
hp prune stories --strategy iterative --method magnitude --step 0.25 --shape uniform --target 0.5 --calibration random \
  --out uniform_iter > /dev/null
grep -q '"strategy": "iterative:magnitude:uniform"' uniform_iter/plan.json
hp export uniform_iter/model --hf uniform_iter_hf | grep -q "llama, native:"
# Its baseline: a seeded random uniform plan (the shape and the heads drawn at random), native too.
hp prune stories --strategy random --shape uniform --target 20 --calibration random --out uniform_rnd > /dev/null
grep -q '"strategy": "random:shape_uniform"' uniform_rnd/plan.json
hp export uniform_rnd/model --hf uniform_rnd_hf | grep -q "llama, native:"
# A budget met uniformly: whole key/value groups, as many in every layer (the most important ones).
hp prune stories --strategy budget --budget params=0.96x --method magnitude --shape uniform --calibration random \
  --out uniform_budget > /dev/null
grep -q '"strategy": "budget:params:magnitude:uniform"' uniform_budget/plan.json
hp export uniform_budget/model --hf uniform_budget_hf | grep -q "llama, native:"
# Gates trained to a uniform shape (every layer's gates to the same count, then the same groups and
# heads per group by the gates' values); 22 to remove is no uniform shape: 20 go, and the output says so.
hp gates stories --method dsp --shape uniform --target 22 --steps 20 --period 10 --calibration random \
  --metric loss --out uniform_gates 2> gates_err.txt | grep -q "kept 20/40 heads"
grep -q "22 heads to remove is no uniform shape; 20 are" gates_err.txt
grep -q '"strategy": "gates:dsp:uniform"' uniform_gates/plan.json
hp export uniform_gates/model --hf uniform_gates_hf | grep -q "llama, native:"

# 6. Bad input: clear errors, nothing written, a user's file untouched.
echo "user data" > users.gguf
if hp export llama --gguf users.gguf 2> err.txt; then echo "overwrote a user's file"; exit 1; fi
grep -q "users.gguf" err.txt && [ "$(cat users.gguf)" = "user data" ]
if hp export llama --gguf x.gguf --dtype q4_k 2> err.txt; then echo "accepted --dtype q4_k"; exit 1; fi
grep -q "dtype" err.txt && [ ! -e x.gguf ]
if hp export "$here/fixtures/hf/bert" --gguf bert.gguf 2> err.txt; then echo "wrote a BERT as GGUF"; exit 1; fi
grep -q "GGUF export: only decoder LMs of the LLaMA family" err.txt && [ ! -e bert.gguf ]
ls -a | grep -q "headprune-partial" && { echo "scratch left behind"; exit 1; }
echo "gguf OK"
