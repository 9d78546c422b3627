#!/usr/bin/env bash
# Learned gates on the demo's translation model through the binary: exact head counts, all three
# attention types gated; DSP (straight-through) and CoFi with distillation while they train; bad targets
# and options.
#   tests/e2e/gates.sh MODE HEADPRUNE E2E_DIR
# MODE (the test's name without e2e_; tests/CMakeLists.txt holds the expected output):
#   gates_dsp_cofi            DSP to half the heads, then CoFi to 6 pruned with distillation
#   gates                     PASS with the concentrator to half the heads
#   gates_every_head          a target of every head is refused
#   gates_bad_concentrator    a concentrator that is neither 'adaptive' nor a number is refused
set -euo pipefail
. "$(dirname "$0")/modes.sh"  # mode, hp, e2e; unknown_mode
mt=$e2e/demo/encoder_decoder/train/best
case $mode in
  gates_dsp_cofi)
    "$hp" --threads 2 --log-level warn gates "$mt" --method dsp --straight-through --target 0.5 --steps 20 --period 10 \
      --metric loss --synthetic 32 --synthetic-train 200 --overwrite --out "$e2e/gates_dsp"
    exec "$hp" --threads 2 --log-level warn gates "$mt" --method cofi --target 6 --steps 20 --period 10 \
      --gate-distill-weight 0.5 --gate-distill-hidden 1 --metric loss --synthetic 32 --synthetic-train 200 --overwrite \
      --out "$e2e/gates_cofi" ;;
  gates)
    exec "$hp" --threads 2 --log-level warn gates "$mt" --method passconc --target 0.5 --steps 40 --period 10 \
      --extra-steps 400 --metric loss --synthetic 64 --synthetic-train 300 --overwrite --out "$e2e/gates" ;;
  gates_every_head) exec "$hp" gates "$mt" --method pass --target 1.0 --out "$e2e/gates_bad" ;;
  gates_bad_concentrator)
    exec "$hp" gates "$mt" --method passconc --target 0.5 --concentrator strong --out "$e2e/gates_bad" ;;
  *) unknown_mode ;;
esac
