#!/usr/bin/env bash
# Michel et al.'s Table 4 on a BERT-base-shaped encoder (random weights: speed does not depend on
# them), plus the comparison with a plain-LibTorch forward of the same architecture.
#
#   bench/bert_base_speed.sh [WORKDIR] [RESULTS_DIR]      (defaults: runs/bert_base, bench/results)
#
# Builds four checkpoints: the unpruned model; 50 % of the heads masked (gates at 0, every head
# still computed); 50 % removed uniformly (heads 6-11 of every layer); 50 % removed as whole
# attention layers (layers 1, 3, ..., 11 emptied, as PASSCONC does). Then, side by side in one run:
#   1. batch 1, 4, 16, 64 at length 128 for the four   -> RESULTS_DIR/bert_base_table4.json
#   2. the unpruned model against `--textbook` at (1, 32), (16, 32), (1, 128), (16, 128)
#                                                       -> RESULTS_DIR/bert_base_textbook.json
# Environment: HP (default build/headprune), THREADS (default 2), REPS (default 8), CHECKPOINTS_ONLY=1
# (build the four checkpoints and stop: scripts/gpu.sh times them on a GPU).
set -euo pipefail
work=${1:-runs/bert_base}
results=${2:-bench/results}
hp=${HP:-build/headprune}
threads=${THREADS:-2}
reps=${REPS:-8}
mkdir -p "$work" "$results"
heads=$(for l in $(seq 0 11); do for h in $(seq 6 11); do printf 'encoder_self:%d:%d,' "$l" "$h"; done; done)
heads=${heads%,}
layers=$(for l in 1 3 5 7 9 11; do printf 'encoder_self:%d,' "$l"; done)
layers=${layers%,}
[[ -f $work/base/model.safetensors ]] || "$hp" --seed 1 init --config configs/bert_base.json --out "$work/base"
prune() { "$hp" --threads "$threads" --log-level warn prune "$work/base" --max-examples 32 "$@" > /dev/null; }
[[ -d $work/masked50/model ]] || prune --strategy manual --heads "$heads" --mask-only --out "$work/masked50"
[[ -d $work/uniform50/model ]] || prune --strategy manual --heads "$heads" --out "$work/uniform50"
[[ -d $work/layers50/model ]] || prune --strategy layers --layers "$layers" --out "$work/layers50"
[[ ${CHECKPOINTS_ONLY:-0} == 1 ]] && exit 0
"$hp" --threads "$threads" bench "$work/base" "$work/masked50/model" "$work/uniform50/model" "$work/layers50/model" \
  --batch 1 --batch 4 --batch 16 --batch 64 --seq 128 --reps "$reps" --warmup 1 --json "$results/bert_base_table4.json"
"$hp" --threads "$threads" bench "$work/base" --textbook --batch 1 --batch 16 --seq 32 --seq 128 --reps "$reps" \
  --warmup 1 --json "$results/bert_base_textbook.json"
