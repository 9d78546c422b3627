#!/usr/bin/env bash
# The LLaMA/GQA study of docs/llama.md: a small LLaMA-style decoder (RMSNorm, rotary, SwiGLU, 8
# query heads sharing 2 key/value heads in each of 4 layers; configs/shakespeare_llama.json) trained
# from scratch on Tiny Shakespeare, then
#   1. importance of query heads and of key/value groups (gradient, and ablation of each unit),
#   2. validation perplexity vs heads pruned for three plan units -- query heads (gradient), whole
#      key/value groups (gradient:group) and balanced groups (gradient:balanced) -- and random query
#      heads, without fine-tuning,
#   3. the same for query heads vs groups with FT_STEPS steps of recovery fine-tuning per point,
#   4. PASSCONC gates to exactly half the query heads,
#   5. the speed of the 50 % models (query-head plan and group plan) beside the full one.
#
#   studies/llama_gqa.sh [RUN_DIR] [OUT.json]
#     defaults: runs/llama_gqa bench/results/llama_gqa.json
# Needs ../shared/data (Tiny Shakespeare). Environment: HP (default build/headprune), THREADS
# (default 2), STEPS (training steps, default 1500), FT_STEPS (default 100), GATE_STEPS (default 300;
# as many again if the head count is not exact by then), GATE_PERIOD (steps per gate period;
# default the command's), GATE_ARGS (more `gates` options), REPS (bench repetitions, default 10). Each stage is skipped when its output exists (rerun after an
# interruption); delete RUN_DIR to start over.
set -euo pipefail
run=${1:-runs/llama_gqa}
out=${2:-bench/results/llama_gqa.json}
steps=${STEPS:-1500}
ft=${FT_STEPS:-100}
gate_steps=${GATE_STEPS:-300}
gate_period=${GATE_PERIOD:-}  # default: the command's
cfg=configs/shakespeare_llama.json
source "$(dirname "$0")/lib.sh"
train_once "$cfg" "$steps" "$run"
model=$run/train/best

[ -f "$run/importance/importance.json" ] ||
  h importance "$model" --config "$cfg" --method gradient --method ablation --unit head --unit kv_group \
    --out "$run/importance" > "$run/importance.txt"

fractions=(0 0.25 0.5 0.75)
[ -f "$run/curve/curve.json" ] ||
  h curve "$model" --config "$cfg" --strategy gradient --strategy gradient:group --strategy gradient:balanced \
    --strategy random:uniform --fractions "${fractions[@]}" --out "$run/curve" > "$run/curve.txt"

[ -f "$run/curve_ft/curve.json" ] ||
  h curve "$model" --config "$cfg" --strategy gradient --strategy gradient:group --fractions 0 0.25 0.5 \
    --finetune-steps "$ft" --out "$run/curve_ft" > "$run/curve_ft.txt"

gates_to 0.5 "$model" passconc "$run/passconc" --config "$cfg"

[ -f "$run/p50_head/summary.json" ] ||
  h prune "$model" --config "$cfg" --strategy score --method gradient --unit head --target 0.5 \
    --out "$run/p50_head" > "$run/p50_head.txt"
[ -f "$run/p50_group/summary.json" ] ||
  h prune "$model" --config "$cfg" --strategy score --method gradient --unit group --target 4 \
    --out "$run/p50_group" > "$run/p50_group.txt"
[ -f "$run/bench.json" ] ||
  h bench "$model" "$run/p50_head/model" "$run/p50_group/model" --batch 1 --batch 16 --seq 128 \
    --reps "$reps" --warmup 2 --json "$run/bench.json" > "$run/bench.txt"

collect "$run" "$out" "{\"command\": \"studies/llama_gqa.sh $run $out\", \"config\": \"$cfg\", \"train_steps\": $steps, \"finetune_steps\": $ft, \"gate_steps\": $gate_steps}" \
  train=train.json importance=importance/importance.json curve=curve/curve.json curve_finetuned=curve_ft/curve.json passconc=passconc/gates.json prune_50_query_heads=p50_head/summary.json prune_50_kv_groups=p50_group/summary.json bench=bench.json
