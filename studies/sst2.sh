#!/usr/bin/env bash
# The single-seed SST-2 study behind the SST-2 sections of docs/training.md, importance.md,
# pruning.md, gates.md, roles.md and benchmarks.md, and their figures: the BERT-style encoder of
# configs/sst2_heldout.json (configs/sst2.json with the checkpoint chosen on 5 % of the training rows
# held out; GLUE's dev set is the test split and chooses nothing), trained once -- the same run
# directory and model as seed SEED of studies/sst2_seeds.sh, whichever script runs first trains it --
# then, reported on the dev set (--split test) with heads chosen on the held-out rows where a choice
# is made (--score-split valid):
#   1. head importance on dev: gradient, single-head ablation (paired bootstrap), all-but-one,
#      confidence, entropy, output norm, LRP, magnitude; gradient and LRP also on the held-out rows and
#      on 2,000 training sentences, and their agreement (Michel 3.4),
#   2. accuracy vs heads pruned: gradient (one shot), iterative gradient, random heads (uniform and
#      avoiding the middle layers), no fine-tuning; gradient and random again with FT_STEPS steps of
#      fine-tuning at every point,
#   3. half the heads removed by gradient importance, fine-tuned FT_STEPS steps, with the compensation
#      analysis,
#   4. learned gates to exactly 16 and 8 of the 32 heads: GATES (default PASS, PASSCONC and Hard
#      Concrete), each fine-tuned FT_STEPS steps after; a run that misses its count is kept, its
#      "reached_target" false,
#   5. Voita's head roles on UD English-EWT, joined with importance and the 50 % plan,
#   6. the speed of the full model and every pruned one, batch 1 and 16, 64 tokens,
# collected in one results JSON (every part as headprune wrote it; `headprune plot` reads them with
# FILE#/pointer, see scripts/figures.sh; scripts/doc_tables.py makes the docs' tables from it).
#
#   studies/sst2.sh [RUN_DIR] [OUT.json]
#     defaults: runs/sst2_heldout_s<STEPS>/seed<SEED> bench/results/sst2_study.json
# Needs ../shared/data (GLUE SST-2, UD English-EWT). Environment: HP (default build/headprune),
# THREADS (default 2), SEED (default 1), STEPS (training steps, default 1200 as in the config),
# GATE_STEPS (default 300; as many again while the count is not exact, twice as many for Hard
# Concrete, whose λ search needs more periods: HC_EXTRA_STEPS), GATE_PERIOD (default 50),
# GATE_ARGS (more `gates` options), GATES (default "pass passconc hard_concrete"), FT_STEPS (default
# 100), REPS (bench repetitions, default 10).
# Each stage is skipped when its output exists (rerun after an interruption); delete RUN_DIR to
# start over. The bench stage times the models side by side: run it with nothing else on the cores.
set -euo pipefail
export SEED=${SEED:-1}
steps=${STEPS:-1200}
run=${1:-runs/sst2_heldout_s$steps/seed$SEED}
out=${2:-bench/results/sst2_study.json}
gate_steps=${GATE_STEPS:-300}
gate_period=${GATE_PERIOD:-50}
gates=${GATES:-pass passconc hard_concrete}
hc_extra=${HC_EXTRA_STEPS:-$((2 * gate_steps))}
ft=${FT_STEPS:-100}
cfg=configs/sst2_heldout.json
source "$(dirname "$0")/lib.sh"
report=(--config "$cfg" --split test --score-split valid)  # choose on the held-out rows, report on dev

stage train
train_once "$cfg" "$steps" "$run"
model=$run/train/best

stage importance
[ -f "$run/importance/importance.json" ] ||
  h importance "$model" --config "$cfg" --split test --method gradient --method ablation --method all_but_one \
    --method confidence --method entropy --method output_norm --method lrp --method magnitude \
    --out "$run/importance" > "$run/importance.txt"
[ -f "$run/importance_valid/importance.json" ] ||
  h importance "$model" --config "$cfg" --split valid --method gradient --method lrp \
    --out "$run/importance_valid" > "$run/importance_valid.txt"
[ -f "$run/importance_train/importance.json" ] ||
  h importance "$model" --config "$cfg" --split train --max-examples 2000 --method gradient --method lrp \
    --out "$run/importance_train" > "$run/importance_train.txt"
once "$run/agreement_test_train.json" \
  h agreement "$run/importance/importance.json" "$run/importance_train/importance.json"
once "$run/agreement_test_valid.json" \
  h agreement "$run/importance/importance.json" "$run/importance_valid/importance.json"

stage curve
[ -f "$run/curve_detail/curve.json" ] ||
  h curve "$model" "${report[@]}" --strategy gradient --strategy iterative:gradient --strategy random:uniform \
    --strategy random:avoid_middle --fractions 0 0.125 0.25 0.375 0.5 0.625 0.75 0.875 \
    --out "$run/curve_detail" > "$run/curve_detail.txt"
[ -f "$run/curve_ft$ft/curve.json" ] ||
  h curve "$model" "${report[@]}" --strategy gradient --strategy random:uniform --fractions 0 0.5 0.8125 \
    --finetune-steps "$ft" --out "$run/curve_ft$ft" > "$run/curve_ft$ft.txt"

stage "prune 50 %"
[ -f "$run/p50_ft$ft/summary.json" ] ||
  h prune "$model" "${report[@]}" --strategy score --method gradient --target 0.5 --finetune-steps "$ft" \
    --out "$run/p50_ft$ft" > "$run/p50_ft$ft.txt"

gated=()  # the gate runs' directories under RUN_DIR
for keep in 16 8; do
  for m in $gates; do
    stage "$m to $keep heads"
    gates_to $((32 - keep)) "$model" "$m" "$run/gates_keep$keep/$m" --config "$cfg" --split test --finetune-steps "$ft"
    gated+=("gates_keep$keep/$m")
  done
done

stage roles
[ -f "$run/roles/roles.json" ] ||
  h roles "$model" --importance "$run/importance/importance.json" --plan "$run/p50_ft$ft/plan.json" \
    --out "$run/roles" > "$run/roles.txt"

stage bench
models=("$model" "$run/p50_ft$ft/model")
for g in "${gated[@]}"; do models+=("$run/$g/model"); done
[ -f "$run/bench.json" ] ||
  h bench "${models[@]}" --batch 1 --batch 16 --seq 64 --reps "$reps" --warmup 2 --json "$run/bench.json" > "$run/bench.txt"

parts=(train=train.json importance=importance/importance.json importance_valid=importance_valid/importance.json
       importance_train=importance_train/importance.json agreement_test_train=agreement_test_train.json
       agreement_test_valid=agreement_test_valid.json curve=curve_detail/curve.json
       curve_finetuned=curve_ft$ft/curve.json prune_50=p50_ft$ft/summary.json roles=roles/roles.json bench=bench.json)
for g in "${gated[@]}"; do parts+=("$g=$g/gates.json"); done
collect "$run" "$out" "{\"command\": \"studies/sst2.sh $run $out\", \"config\": \"$cfg\", \"seed\": $SEED, \"train_steps\": $steps, \"gate_steps\": $gate_steps, \"gate_period\": $gate_period, \"hc_extra_steps\": $hc_extra, \"finetune_steps\": $ft, \"gates\": \"$gates\", \"reps\": $reps}" \
  "${parts[@]}"
