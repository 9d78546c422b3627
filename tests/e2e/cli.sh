#!/usr/bin/env bash
# The everyday commands as a user types them (train, eval, init, info, roles), and the errors of a
# wrong path, option or config.
#   tests/e2e/cli.sh MODE HEADPRUNE E2E_DIR
# MODE (the test's name without e2e_; tests/CMakeLists.txt holds the expected output or WILL_FAIL):
#   train_eval             train the translation model on its synthetic task, then eval it with beams 1 and 3
#   info_missing           info on a path that does not exist fails
#   bad_option             an unknown option fails
#   init                   init from tests/fixtures/tiny_model.json, then info on it
#   init_needs_vocab       init from a run config (configs/sst2.json) instead of a model config is refused
#   roles_needs_tokenizer  roles on a checkpoint without a tokenizer is refused (needs the demo)
set -euo pipefail
. "$(dirname "$0")/modes.sh"  # mode, hp, e2e; unknown_mode
src=$(cd "$(dirname "$0")/../.." && pwd)
case $mode in
  train_eval)
    "$hp" --threads 2 --log-level warn train --family encoder_decoder --max-steps 80 --eval-every 40 --overwrite \
      --out "$e2e/train_mt"
    exec "$hp" --threads 2 eval "$e2e/train_mt/best" --beam 1 --beam 3 --synthetic 64 ;;
  info_missing) exec "$hp" info "$e2e/does-not-exist" ;;
  bad_option) exec "$hp" info --no-such-option x ;;
  init)
    "$hp" --seed 3 init --config "$src/tests/fixtures/tiny_model.json" --overwrite --out "$e2e/init"
    exec "$hp" info "$e2e/init" ;;
  init_needs_vocab) exec "$hp" init --config "$src/configs/sst2.json" --out "$e2e/init_bad" ;;
  roles_needs_tokenizer) exec "$hp" roles "$e2e/demo/encoder_decoder/train/best" ;;
  *) unknown_mode ;;
esac
