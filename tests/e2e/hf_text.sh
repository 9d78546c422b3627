#!/usr/bin/env bash
# An HF BERT directory with a vocab.txt runs on text through its own WordPiece vocabulary: eval on a
# small TSV, prune two heads, export to HF again (the vocabulary goes along), eval the export and
# check it scores as the native pruned checkpoint does.
# Usage: hf_text.sh HEADPRUNE_BINARY FIXTURES_DIR WORK_DIR
set -euo pipefail
bin=$1
fixtures=$2
work=$3
rm -rf "$work"
mkdir -p "$work/bert"
cp "$fixtures/hf/bert/config.json" "$fixtures/hf/bert/model.safetensors" "$work/bert/"
{
  printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' the movie '##s' was great bad '!' a film
  for i in $(seq 13 39); do echo "[unused$i]"; done
} > "$work/bert/vocab.txt"
printf 'sentence\tlabel\nthe movie was great !\t1\na bad film\t0\nthe movies were bad\t0\ngreat film\t1\n' > "$work/dev.tsv"
cat > "$work/data.json" <<JSON
{"data": {"kind": "tsv", "train": "dev.tsv", "valid": "dev.tsv", "text_a": "sentence", "label": "label", "max_len": 20}}
JSON
"$bin" --log-level warn eval "$work/bert" --config "$work/data.json" --data-root "$work" > "$work/eval.json"
grep -q "\"n_examples\": 4" "$work/eval.json"
"$bin" --log-level warn prune "$work/bert" --strategy manual --heads encoder_self:0:1,encoder_self:1:2 \
  --config "$work/data.json" --data-root "$work" --out "$work/pruned" > /dev/null
"$bin" --log-level warn export "$work/pruned/model" --hf "$work/hf" > /dev/null
cmp "$work/bert/vocab.txt" "$work/hf/vocab.txt"
"$bin" --log-level warn eval "$work/hf" --config "$work/data.json" --data-root "$work" > "$work/eval_pruned.json"
grep -q "\"n_examples\": 4" "$work/eval_pruned.json"
# The export is the pruned model: the same loss from the HF directory as from the native checkpoint.
"$bin" --log-level warn eval "$work/pruned/model" --config "$work/data.json" --data-root "$work" > "$work/eval_native.json"
loss() { grep -o '"loss": [-0-9.e]*' "$1"; }
[ "$(loss "$work/eval_native.json")" = "$(loss "$work/eval_pruned.json")" ]
echo "hf text OK"
