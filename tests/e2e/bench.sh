#!/usr/bin/env bash
# Speed and precision through the binary: the demo's translation model against the one `prune` saved;
# lower precision and the plain-LibTorch baseline side by side; eval in int8.
#   tests/e2e/bench.sh MODE HEADPRUNE E2E_DIR
# MODE (the test's name without e2e_; tests/CMakeLists.txt holds the expected output):
#   bench            unpruned and pruned translation models at batch 1 and 4 (needs e2e_prune's model)
#   bench_precision  the classifier in fp32, bf16 and int8, and the textbook nn::Linear model
#   eval_int8        eval of the classifier in int8
set -euo pipefail
. "$(dirname "$0")/modes.sh"  # mode, hp, e2e; unknown_mode
cls=$e2e/demo/encoder_classifier/train/best
case $mode in
  bench)
    exec "$hp" --threads 2 bench "$e2e/demo/encoder_decoder/train/best" "$e2e/prune/model" --batch 1 --batch 4 \
      --seq 16 --reps 3 --json "$e2e/bench.json" ;;
  bench_precision)
    exec "$hp" --threads 2 bench "$cls" --precision fp32 --precision bf16 --precision int8 --textbook --batch 2 --seq 8 \
      --reps 2 --warmup 1 ;;
  eval_int8) exec "$hp" --threads 2 eval "$cls" --precision int8 ;;
  *) unknown_mode ;;
esac
