#!/usr/bin/env bash
# Pruning to a budget through the binary: a counted budget on the decoder LM demo model (met, exact
# prediction), a latency budget with distillation on the encoder-decoder (timed, checked after saving),
# a budget below every layer emptied and an unknown kind.
#   tests/e2e/budget.sh MODE HEADPRUNE E2E_DIR
# MODE (the test's name without e2e_; tests/CMakeLists.txt holds the expected output):
#   prune_budget_params    params=0.9x on the decoder LM
#   prune_budget_latency   latency=0.9x on the encoder-decoder, fine-tuned with distillation
#   prune_budget_floor     params=100, below the model with every attention layer emptied
#   prune_budget_bad_kind  speed=0.5x, a kind that does not exist
set -euo pipefail
. "$(dirname "$0")/modes.sh"  # mode, hp, e2e; unknown_mode
lm=$e2e/demo/decoder_lm/train/best
case $mode in
  prune_budget_params)
    exec "$hp" --threads 2 --log-level warn prune "$lm" --budget params=0.9x --metric loss --synthetic 32 --overwrite \
      --out "$e2e/prune_budget" ;;
  prune_budget_latency)
    exec "$hp" --threads 2 --log-level warn prune "$e2e/demo/encoder_decoder/train/best" --budget latency=0.9x \
      --budget-batch 2 --budget-len 16 --budget-reps 3 --budget-min-time 0.1 --metric loss --synthetic 32 \
      --synthetic-train 100 --finetune-steps 3 --distill-weight 0.5 --distill-hidden 1 \
      --overwrite --out "$e2e/prune_budget_latency" ;;
  prune_budget_floor) exec "$hp" prune "$lm" --budget params=100 --synthetic 8 --out "$e2e/prune_bad" ;;
  prune_budget_bad_kind) exec "$hp" prune "$lm" --budget speed=0.5x --synthetic 8 --out "$e2e/prune_bad" ;;
  *) unknown_mode ;;
esac
