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
echo "hf $family OK"
