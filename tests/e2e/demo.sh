#!/usr/bin/env bash
# The demo as the README runs it (defaults), and `info` on one of the models it pruned.
#   tests/e2e/demo.sh MODE HEADPRUNE E2E_DIR
# MODE (the test's name without e2e_; tests/CMakeLists.txt holds the expected output):
#   demo         the demo into E2E_DIR/demo (the demo_ckpt fixture every later test reads)
#   info_pruned  info on the classifier the demo pruned: layer 1 keeps no head
set -euo pipefail
. "$(dirname "$0")/modes.sh"  # mode, hp, e2e; unknown_mode
case $mode in
  demo) exec "$hp" --threads 2 --log-level warn demo --out "$e2e/demo" --json "$e2e/demo.json" ;;
  info_pruned) exec "$hp" info "$e2e/demo/encoder_classifier/pruned/model" ;;
  *) unknown_mode ;;
esac
