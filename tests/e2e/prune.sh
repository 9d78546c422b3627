#!/usr/bin/env bash
# Pruning end to end on the demo's models: plan, remove, fine-tune, save; a saved plan given back;
# curves; bad plans.
#   tests/e2e/prune.sh MODE HEADPRUNE E2E_DIR
# MODE (the test's name without e2e_; tests/CMakeLists.txt holds the expected output or WILL_FAIL):
#   prune                half the translation model's heads by gradient score, fine-tuned (pruned_ckpt)
#   prune_plan_file      --plan FILE (the plan `prune` wrote) implies the plan strategy...
#   prune_plan_conflict  ... and contradicts any other
#   prune_info           info on the model `prune` saved
#   curve                the classifier's curve for three strategies at fractions 0 and 0.5
#   prune_bad_head       a head that does not exist fails
#   prune_bad_fraction   a fraction above 1 fails
set -euo pipefail
. "$(dirname "$0")/modes.sh"  # mode, hp, e2e; unknown_mode
mt=$e2e/demo/encoder_decoder/train/best
case $mode in
  prune)
    exec "$hp" --threads 2 --log-level warn prune "$mt" --strategy score --method gradient --target 0.5 --metric loss \
      --synthetic 64 --finetune-steps 5 --synthetic-train 200 --overwrite --out "$e2e/prune" ;;
  prune_plan_file)
    exec "$hp" --threads 2 --log-level warn prune "$mt" --plan "$e2e/prune/plan.json" --metric loss --synthetic 16 \
      --overwrite --out "$e2e/prune_plan" ;;
  prune_plan_conflict)
    exec "$hp" prune "$mt" --strategy random --target 2 --plan "$e2e/prune/plan.json" --out "$e2e/prune_bad" ;;
  prune_info) exec "$hp" info "$e2e/prune/model" ;;
  curve)
    exec "$hp" --threads 2 curve "$e2e/demo/encoder_classifier/train/best" \
      --strategy gradient --strategy iterative:gradient --strategy random:avoid_consecutive --fractions 0 --fractions 0.5 \
      --synthetic 64 --overwrite --out "$e2e/curve" ;;
  prune_bad_head) exec "$hp" prune "$mt" --strategy manual --heads cross:9:0 --out "$e2e/prune_bad" ;;
  prune_bad_fraction) exec "$hp" prune "$mt" --strategy random --target 1.5 --out "$e2e/prune_bad" ;;
  *) unknown_mode ;;
esac
