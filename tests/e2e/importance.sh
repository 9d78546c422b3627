#!/usr/bin/env bash
# Head importance on the demo's pruned translation model, every method at once, and the agreement of
# the map with itself.
#   tests/e2e/importance.sh MODE HEADPRUNE E2E_DIR
# MODE (the test's name without e2e_; tests/CMakeLists.txt holds the expected output or WILL_FAIL):
#   importance             every method into E2E_DIR/importance (the importance_maps fixture)
#   agreement              that map against itself, by attention type: Spearman 1.0
#   importance_bad_method  an unknown method fails
set -euo pipefail
. "$(dirname "$0")/modes.sh"  # mode, hp, e2e; unknown_mode
model=$e2e/demo/encoder_decoder/pruned/model
case $mode in
  importance)
    exec "$hp" --threads 2 importance "$model" \
      --method gradient --method ablation --method all-but-one --method confidence --method entropy --method magnitude \
      --method output_norm --method lrp --method random --metric loss --bootstrap 100 --synthetic 64 --cost \
      --overwrite --out "$e2e/importance" ;;
  agreement)
    exec "$hp" agreement "$e2e/importance/importance.json" "$e2e/importance/importance.json" \
      --method gradient --by-type ;;
  importance_bad_method) exec "$hp" importance "$model" --method sixteen ;;
  *) unknown_mode ;;
esac
