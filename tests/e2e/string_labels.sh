#!/usr/bin/env bash
# GLUE-style data whose label column names its classes (RTE, QNLI, MNLI: "entailment", ...) trains
# and evaluates from a run config alone, with the class names in the data section; a label the
# config does not name is an error naming the file and line.
#   tests/e2e/string_labels.sh HEADPRUNE WORK_DIR
set -euo pipefail
hp=$1
w=$2
rm -rf "$w"
mkdir -p "$w/data"
python3 - "$w/data" <<'PY'
import gzip, random, sys
d = sys.argv[1]
rng = random.Random(3)
pos, neg = ["great", "good", "lovely", "fine"], ["awful", "bad", "dull", "poor"]
def rows(n):
    out = ["sentence1\tsentence2\tlabel"]
    for _ in range(n):
        a = " ".join(rng.choice(pos + neg) for _ in range(4))
        yes = rng.random() < 0.5
        b = rng.choice(pos if yes else neg) + " film"
        out.append("%s\t%s\t%s" % (a, b, "entailment" if yes else "not_entailment"))
    return "\n".join(out) + "\n"
with gzip.open(d + "/train.tsv.gz", "wt") as f: f.write(rows(400))
with open(d + "/dev.tsv", "w") as f: f.write(rows(60))
with open(d + "/other.tsv", "w") as f: f.write("sentence1\tsentence2\tlabel\na b\tc d\tneutral\n")
PY
cat > "$w/rte_like.json" <<'JSON'
{
  "model": {"arch": "encoder_classifier", "d_model": 32, "d_ff": 64, "n_heads": 4, "n_encoder_layers": 2,
            "n_classes": 2, "n_segments": 2, "max_positions": 32},
  "data": {"kind": "tsv", "train": "train.tsv.gz", "valid": "dev.tsv", "text_a": "sentence1", "text_b": "sentence2",
           "label": "label", "labels": ["entailment", "not_entailment"], "vocab_size": 60, "max_len": 24},
  "train": {"max_steps": 20, "batch_tokens": 1024, "lr": 1e-3, "eval_every": 10, "log_every": 10}
}
JSON
"$hp" --threads 2 --log-level warn train --config "$w/rte_like.json" --data-root "$w/data" --out "$w/run" > "$w/train.json"
"$hp" --threads 2 eval "$w/run/best" --config "$w/rte_like.json" --data-root "$w/data" --split valid > "$w/eval.txt"
grep -q accuracy "$w/eval.txt" || { echo "FAIL: no accuracy in eval"; cat "$w/eval.txt"; exit 1; }
sed 's#"valid": "dev.tsv"#"valid": "other.tsv"#' "$w/rte_like.json" > "$w/other.json"
if "$hp" eval "$w/run/best" --config "$w/other.json" --data-root "$w/data" --split valid > /dev/null 2> "$w/err.txt"; then
  echo "FAIL: an unnamed label was accepted"; exit 1
fi
grep -q "other.tsv:2: label 'neutral' in column 'label' is not one of the data spec's labels" "$w/err.txt" ||
  { echo "FAIL: unclear error: $(cat "$w/err.txt")"; exit 1; }
echo "refused: $(tail -1 "$w/err.txt")"
echo "string labels OK"
