#!/usr/bin/env bash
# The SST-2 study behind the figures of docs/importance.md, pruning.md, gates.md and benchmarks.md:
# the BERT-style encoder of configs/sst2.json trained from scratch, then on the dev set
#   1. head importance: gradient, single-head ablation and confidence,
#   2. accuracy vs heads pruned: gradient (one shot), iterative gradient and random heads, no fine-tuning,
#   3. learned gates to exactly half the heads: PASS and PASSCONC (GATE_STEPS steps each),
#   4. the speed of the full model, the 50 % gradient plan and both gated models,
# collected in one results JSON (every part as headprune wrote it; `headprune plot` reads them with
# FILE#/pointer, see scripts/figures.sh).
#
#   studies/sst2.sh [RUN_DIR] [OUT.json]
#     defaults: runs/sst2_study_s<STEPS> bench/results/sst2_study.json
# Needs ../shared/data (GLUE SST-2). Environment: HP (default build/headprune), THREADS (default 2),
# STEPS (training steps, default 1200 as in the config), GATE_STEPS (default 300), GATE_PERIOD (steps per
# gate period, default 50), GATE_ARGS (more `gates` options), REPS (default 10).
# Each stage is skipped when its output exists (rerun after an interruption); delete RUN_DIR to
# start over. About 25 minutes on 2 cores.
# Note: selection of the best checkpoint and every score here use the dev set (a held-out
# selection split is issue 32's work), so the accuracies are optimistic for the full model.
set -euo pipefail
steps=${STEPS:-1200}
run=${1:-runs/sst2_study_s$steps}
out=${2:-bench/results/sst2_study.json}
gate_steps=${GATE_STEPS:-300}
gate_period=${GATE_PERIOD:-50}
cfg=configs/sst2.json
source "$(dirname "$0")/lib.sh"
train_once "$cfg" "$steps" "$run"
model=$run/train/best

[ -f "$run/importance/importance.json" ] ||
  h importance "$model" --config "$cfg" --method gradient --method ablation --method confidence \
    --out "$run/importance" > "$run/importance.txt"

[ -f "$run/curve/curve.json" ] ||
  h curve "$model" --config "$cfg" --strategy gradient --strategy iterative:gradient --strategy random:uniform \
    --fractions 0 0.125 0.25 0.375 0.5 0.625 0.75 0.875 --out "$run/curve" > "$run/curve.txt"

for m in pass passconc; do gates_to 0.5 "$model" "$m" "$run/$m" --config "$cfg"; done

[ -f "$run/p50/summary.json" ] ||
  h prune "$model" --config "$cfg" --strategy score --method gradient --target 0.5 --out "$run/p50" > "$run/p50.txt"
[ -f "$run/bench.json" ] ||
  h bench "$model" "$run/p50/model" "$run/pass/model" "$run/passconc/model" --batch 1 --batch 16 --seq 64 \
    --reps "$reps" --warmup 2 --json "$run/bench.json" > "$run/bench.txt"

collect "$run" "$out" "{\"command\": \"studies/sst2.sh $run $out\", \"config\": \"$cfg\", \"train_steps\": $steps, \"gate_steps\": $gate_steps}" \
  train=train.json importance=importance/importance.json curve=curve/curve.json pass=pass/gates.json passconc=passconc/gates.json prune_50=p50/summary.json bench=bench.json
