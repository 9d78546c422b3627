#!/usr/bin/env bash
# An HF translation directory as a user has one runs end to end: MarianMT (config.json,
# model.safetensors, source.spm, target.spm, vocab.json, tokenizer_config.json of an opus-mt model) or
# T5 (tokenizer.json of t5-small): info, translate a sentence, BLEU on Multi30k sentences with greedy
# and beam search, head importance of all three attention types, prune heads of each type, export to HF
# again (the tokenizer goes along) and score the export as the native pruned checkpoint scores. The
# weights are random (no pretrained weights here), in the exact HF layout: headprune init with the
# family's shape, exported as MarianMTModel or T5ForConditionalGeneration.
# Usage: hf_seq2seq.sh marian|t5 HEADPRUNE_BINARY TOKENIZER_DIR DATA_ROOT WORK_DIR   (exit 77: no tokenizer)
set -euo pipefail
family=$1
bin=$2
tok=$3
data=$4
work=$5
case $family in
  marian) files="source.spm target.spm vocab.json tokenizer_config.json" ;;
  t5) files="tokenizer.json tokenizer_config.json" ;;
  *) echo "unknown family $family" >&2; exit 2 ;;
esac
for f in $files; do
  if [ ! -f "$tok/$f" ]; then echo "skipped: $tok/$f is missing"; exit 77; fi
done
if [ ! -f "$data/multi30k/test_2016_flickr.en.gz" ]; then echo "skipped: $data/multi30k is missing"; exit 77; fi
rm -rf "$work"
mkdir -p "$work"
if [ "$family" = marian ]; then
  vocab=$(/usr/bin/python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$tok/vocab.json")
  pad=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['<pad>'])" "$tok/vocab.json")
  eos=0
  cat > "$work/model.json" <<JSON
{"arch": "encoder_decoder", "vocab_size": $vocab, "d_model": 32, "d_ff": 64, "n_heads": 4,
 "n_encoder_layers": 2, "n_decoder_layers": 2, "max_positions": 128, "positional": "sinusoidal",
 "split_sinusoid": true, "norm": "post", "embed_layer_norm": false, "activation": "silu",
 "logits_bias": true, "tie_embeddings": true, "share_embeddings": true, "pad_id": $pad, "layer_norm_eps": 1e-5,
 "dropout": 0.1, "attention_dropout": 0.0, "activation_dropout": 0.0}
JSON
else
  pad=0
  eos=1
  scale=$(/usr/bin/python3 -c "print(repr(32 ** -0.5))")
  cat > "$work/model.json" <<JSON
{"arch": "encoder_decoder", "vocab_size": 32128, "d_model": 32, "d_ff": 64, "n_heads": 4, "head_dim": 12,
 "n_encoder_layers": 2, "n_decoder_layers": 3, "max_positions": 512, "positional": "relative",
 "relative_buckets": 32, "relative_max_distance": 128, "norm": "pre", "norm_kind": "rms_norm",
 "embed_layer_norm": false, "activation": "gelu_tanh", "gated_ffn": true, "qkv_bias": false, "o_bias": false,
 "mlp_bias": false, "scaled_attention": false, "output_scale": $scale, "tie_embeddings": true,
 "share_embeddings": true, "pad_id": 0,
 "layer_norm_eps": 1e-6, "dropout": 0.1, "attention_dropout": 0.1, "activation_dropout": 0.1}
JSON
fi
cat > "$work/data.json" <<JSON
{"data": {"kind": "parallel", "train": ["multi30k/val.en.gz", "multi30k/val.de.gz"],
          "valid": ["multi30k/val.en.gz", "multi30k/val.de.gz"],
          "test": ["multi30k/test_2016_flickr.en.gz", "multi30k/test_2016_flickr.de.gz"], "max_len": 60}}
JSON
"$bin" --log-level warn --seed 5 init --config "$work/model.json" --out "$work/init" > /dev/null
"$bin" --log-level warn export "$work/init" --hf "$work/marian" > /dev/null
for f in $files; do cp "$tok/$f" "$work/marian/"; done
grep -q "\"model_type\": \"$family\"" "$work/marian/config.json"
"$bin" info "$work/marian" > "$work/info.txt"
if [ "$family" = marian ]; then grep -q "sin | cos halves" "$work/info.txt"; grep -q "logits bias" "$work/info.txt"; fi
if [ "$family" = t5 ]; then grep -q "buckets up to distance 128" "$work/info.txt"; fi

# Translate one sentence: decoding starts from the padding id and never emits it.
"$bin" --log-level warn generate "$work/marian" --prompt "A dog runs through the park." --max-new 12 --beam 2 --json \
  > "$work/generate.json"
/usr/bin/python3 - "$work/generate.json" "$pad" "$eos" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
pad, eos = int(sys.argv[2]), int(sys.argv[3])
assert r["prompt_ids"][-1] == eos, r["prompt_ids"]  # </s> closes the source
assert 0 < len(r["ids"]) <= 12 and pad not in r["ids"], r["ids"]
assert r["text"].strip(), r
PY

# BLEU with greedy and beam search on 16 test sentences.
"$bin" --log-level warn eval "$work/marian" --config "$work/data.json" --data-root "$data" --split test \
  --max-examples 16 --beam 1 2 --hyps "$work/hyps.txt" > "$work/eval.json"
/usr/bin/python3 - "$work/eval.json" "$work/hyps.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for beam in ("beam1", "beam2"):
    b = r["bleu"][beam]
    assert 0 <= b["score"] <= 100 and "signature" in b, b
assert len(open(sys.argv[2]).read().splitlines()) == 16
PY

# Importance of every head of the three attention types, then prune one head of each type.
"$bin" --log-level warn importance "$work/marian" --config "$work/data.json" --data-root "$data" --split test \
  --max-examples 8 --method gradient --out "$work/importance" > /dev/null
/usr/bin/python3 - "$work/importance/importance.json" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
for t in ("encoder_self", "decoder_self", "cross"):
    assert t in text, t
PY
"$bin" --log-level warn prune "$work/marian" --strategy manual --heads encoder_self:0:1,decoder_self:1:0,cross:0:3 \
  --config "$work/data.json" --data-root "$data" --split test --max-examples 8 --out "$work/pruned" > /dev/null
"$bin" --log-level warn export "$work/pruned/model" --hf "$work/hf" > /dev/null
grep -q "\"model_type\": \"$family\"" "$work/hf/config.json"
for f in $files; do cmp "$tok/$f" "$work/hf/$f"; done
# The export is the pruned model: the same loss and BLEU from the HF directory as from the native checkpoint.
for m in pruned/model hf; do
  "$bin" --log-level warn eval "$work/$m" --config "$work/data.json" --data-root "$data" --split test \
    --max-examples 16 --beam 1 > "$work/eval_$(basename "$m").json"
done
/usr/bin/python3 - "$work/eval_model.json" "$work/eval_hf.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert abs(a["loss"] - b["loss"]) < 1e-4, (a["loss"], b["loss"])
assert a["bleu"]["beam1"]["score"] == b["bleu"]["beam1"]["score"], (a["bleu"], b["bleu"])
PY

if [ "$family" = t5 ]; then
  # A uniform plan (--shape uniform): T5 has one head count (num_heads) for every stack and one relative
  # bias table per stack read by head id, so the same count in every stack and the same head ids in every
  # self-attention layer; the HF export is then the smaller standard T5 (num_heads 2, d_kv as it was,
  # the bias tables' kept columns). The export gives the pruned model's loss, and T5's math written apart
  # (tests/fixtures/hf/make_t5_fixtures.py's reference forward) computes on it the logits that the
  # unpruned file computes with the removed heads gated off.
  "$bin" --log-level warn prune "$work/marian" --strategy score --method magnitude --shape uniform --target 0.5 \
    --config "$work/data.json" --data-root "$data" --split test --max-examples 8 --out "$work/uniform" > /dev/null
  "$bin" --log-level warn export "$work/uniform/model" --hf "$work/uniform_hf" | tee "$work/uniform_export.txt"
  grep -q "t5, native: 2 heads of 12 channels in every layer of every stack" "$work/uniform_export.txt"
  "$bin" info "$work/uniform_hf" 2> /dev/null | grep -q "decoder_self heads  6/6 kept: 2 x 3 layers"
  for m in uniform/model uniform_hf; do
    "$bin" --log-level warn eval "$work/$m" --config "$work/data.json" --data-root "$data" --split test \
      --max-examples 16 --beam 1 > "$work/eval_u_$(basename "$m").json"
  done
  /usr/bin/python3 - "$work" "$(dirname "$0")/../fixtures/hf" <<'PY'
import json, sys
import torch

sys.path.insert(0, sys.argv[2])
from make_hf_fixtures import read_safetensors as load_file
from make_t5_fixtures import forward
work = sys.argv[1]
a, b = (json.load(open(f"{work}/eval_u_{m}.json")) for m in ("model", "uniform_hf"))
assert abs(a["loss"] - b["loss"]) < 1e-4, (a["loss"], b["loss"])
full_cfg, cfg = (json.load(open(f"{work}/{d}/config.json")) for d in ("marian", "uniform_hf"))
assert cfg["num_heads"] == 2 and cfg["d_kv"] == full_cfg["d_kv"] == 12, cfg
full_w, w = load_file(f"{work}/marian/model.safetensors"), load_file(f"{work}/uniform_hf/model.safetensors")
for n in ("encoder.block.1.layer.0.SelfAttention.q.weight", "decoder.block.2.layer.1.EncDecAttention.o.weight",
          "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"):
    assert w[n].numel() * 2 == full_w[n].numel(), (n, w[n].shape, full_w[n].shape)
plan = json.load(open(f"{work}/uniform/plan.json"))
names = {"encoder_self": "enc", "decoder_self": "dec", "cross": "cross"}
layers = {"enc": full_cfg["num_layers"], "dec": full_cfg["num_decoder_layers"], "cross": full_cfg["num_decoder_layers"]}
gates = {k: [torch.ones(full_cfg["num_heads"]) for _ in range(n)] for k, n in layers.items()}
for h in plan["heads"]:
    t, l, i = h.split(":") if isinstance(h, str) else (h["type"], h["layer"], h["head"])
    gates[names[t]][int(l)][int(i)] = 0.0
ones = {k: [torch.ones(2) for _ in range(n)] for k, n in layers.items()}
g = torch.Generator().manual_seed(3)
ids = torch.randint(2, 32000, (2, 9), generator=g)
dec = torch.randint(2, 32000, (2, 7), generator=g)
dec[:, 0] = 0
keep, dec_keep = torch.ones(2, 9, dtype=torch.long), torch.ones(2, 7, dtype=torch.long)
keep[1, 6:] = 0
with torch.no_grad():
    ref = forward(full_cfg, full_w, ids, keep, dec, dec_keep, gates)
    got = forward(cfg, w, ids, keep, dec, dec_keep, ones)
d = (ref - got).abs().max().item()
print(f"t5 native export: reference forward max |logit diff| vs the gated full model {d:.2e}; loss {a['loss']:.5f} = {b['loss']:.5f}")
assert d < 1e-4, d
PY
fi
echo "hf $family OK"
