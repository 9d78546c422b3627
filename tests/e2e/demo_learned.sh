#!/usr/bin/env bash
# The demo's trained models have learned their synthetic tasks: the classifier's validation accuracy
# is above 0.95, the language model's perplexity below 4 (the task's 29 content tokens give 29 for
# guessing), and the translation model's greedy BLEU above 90.
# Usage: demo_learned.sh HEADPRUNE_BINARY DEMO_DIR
set -euo pipefail
bin=$1
demo=$2
value() {  # value FAMILY KEY: the number after "KEY": in `headprune eval` of the family's trained model
  "$bin" --threads 2 --log-level warn eval "$demo/$1/train/best" --beam 1 | grep -o "\"$2\": [-0-9.e+]*" | head -n1 |
    awk '{print $2}'
}
acc=$(value encoder_classifier accuracy)
ppl=$(value decoder_lm perplexity)
bleu=$(value encoder_decoder score)
echo "encoder_classifier accuracy $acc, decoder_lm perplexity $ppl, encoder_decoder greedy BLEU $bleu"
awk -v a="$acc" -v p="$ppl" -v b="$bleu" 'BEGIN { exit !(a > 0.95 && p < 4 && b > 90) }'
# The pruned models' summaries name the paths they have now, not the demo's staging directory.
for f in "$demo"/*/pruned/summary.json; do
  if grep -q "headprune-partial" "$f"; then echo "$f names the staging directory:"; grep "headprune-partial" "$f"; exit 1; fi
  grep -q "\"model\": \".*/pruned/model\"" "$f"
done
echo "demo learned OK"
