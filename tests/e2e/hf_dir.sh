#!/usr/bin/env bash
# HuggingFace directories: info reads one directly; export writes the HF layout and a native checkpoint.
#   tests/e2e/hf_dir.sh MODE HEADPRUNE E2E_DIR
# MODE (the test's name without e2e_; tests/CMakeLists.txt holds the expected output):
#   hf_info    info on tests/fixtures/hf/bert_pruned
#   hf_export  tests/fixtures/hf/gpt2_pruned exported with pruned_heads, and as a headprune checkpoint
set -euo pipefail
. "$(dirname "$0")/modes.sh"  # mode, hp, e2e; unknown_mode
fixtures=$(cd "$(dirname "$0")/.." && pwd)/fixtures
case $mode in
  hf_info) exec "$hp" info "$fixtures/hf/bert_pruned" ;;
  hf_export)
    exec "$hp" export "$fixtures/hf/gpt2_pruned" --overwrite --hf "$e2e/export/hf" --hf-layout pruned_heads \
      --native "$e2e/export/native" ;;
  *) unknown_mode ;;
esac
