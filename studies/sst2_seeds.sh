#!/usr/bin/env bash
# The SST-2 comparisons with a selection split and several seeds (docs/results.md): the encoder of
# configs/sst2_heldout.json -- configs/sst2.json with the checkpoint chosen on 5 % of the training
# rows held out, so GLUE's dev set is reported as the test split and chooses nothing -- trained once
# per seed, then for each model
#   1. test accuracy vs heads pruned, heads chosen on the selection split (--score-split valid):
#      gradient importance (one shot), iterative gradient, and random heads under Budhraja et al.'s
#      layer strategies (uniform, avoid_consecutive, top, bottom), no fine-tuning,
#   2. learned gates to exactly half the heads: PASS, PASSCONC and Hard Concrete (GATES), each
#      fine-tuned FT_STEPS steps after; a gate run that misses the count is kept and goes on, its
#      "reached_target" false. The runs are those studies/sst2.sh makes for 16 heads kept (same
#      directories, same options), so the seed shared with it runs them once,
#   3. Budhraja et al.: half the heads removed by gradient and by each random strategy, then FT_STEPS
#      steps of fine-tuning (in p50_strategies_ft<FT_STEPS>: sst2.sh's curve_ft<FT_STEPS> is another
#      curve), and the unpruned model fine-tuned alike (the baseline those are compared with).
# Stages run seed after seed, stage by stage, so an interrupted run has whole stages for the first
# seeds; each step is skipped when its output exists (rerun to go on). The results JSON holds every
# seed's outputs as headprune wrote them (the gates without their per-period log);
# scripts/doc_tables.py computes the means and spreads.
#
#   studies/sst2_seeds.sh [RUN_ROOT] [OUT.json]
#     defaults: runs/sst2_heldout_s<STEPS>  bench/results/sst2_seeds.json; seed N in RUN_ROOT/seedN
# Needs ../shared/data (GLUE SST-2). Environment: SEEDS (default "1 2 3"), STEPS (training steps,
# default 1200 as in the config), GATE_STEPS (default 300; as many again if the count is not exact,
# twice as many for Hard Concrete: HC_EXTRA_STEPS), GATE_PERIOD (default 50), GATE_ARGS (more `gates`
# options), GATES (default "pass passconc hard_concrete"), FT_STEPS (default 100), HP, THREADS.
set -euo pipefail
seeds=${SEEDS:-1 2 3}
steps=${STEPS:-1200}
root=${1:-runs/sst2_heldout_s$steps}
out=${2:-bench/results/sst2_seeds.json}
gate_steps=${GATE_STEPS:-300}
gate_period=${GATE_PERIOD:-50}
ft=${FT_STEPS:-100}
gates=${GATES:-pass passconc hard_concrete}
hc_extra=${HC_EXTRA_STEPS:-$((2 * gate_steps))}
cfg=configs/sst2_heldout.json
source "$(dirname "$0")/lib.sh"
report=(--config "$cfg" --split test --score-split valid)  # choose on the held-out rows, report on dev
random=(--strategy random:uniform --strategy random:avoid_consecutive --strategy random:top --strategy random:bottom)

stage() { echo "== $(date +%H:%M:%S) seed $SEED: $1" >&2; }

for SEED in $seeds; do
  export SEED
  stage train
  train_once "$cfg" "$steps" "$root/seed$SEED"
  run=$root/seed$SEED
  [ -f "$run/curve/curve.json" ] || { stage curve;
    h curve "$run/train/best" "${report[@]}" --strategy gradient --strategy iterative:gradient "${random[@]}" \
      --fractions 0 0.125 0.25 0.375 0.5 0.625 0.75 0.875 --out "$run/curve" > "$run/curve.txt"; }
done
for SEED in $seeds; do
  export SEED
  run=$root/seed$SEED
  for m in $gates; do
    [ -f "$run/gates_keep16/$m/gates.json" ] || { stage "$m";
      gates_to 16 "$run/train/best" "$m" "$run/gates_keep16/$m" --config "$cfg" --split test --finetune-steps "$ft"; }
  done
done
for SEED in $seeds; do
  export SEED
  run=$root/seed$SEED
  [ -f "$run/p50_strategies_ft$ft/curve.json" ] || { stage "half the heads by each strategy, fine-tuned";
    h curve "$run/train/best" "${report[@]}" --strategy gradient "${random[@]}" --fractions 0.5 \
      --finetune-steps "$ft" --out "$run/p50_strategies_ft$ft" > "$run/p50_strategies_ft$ft.txt"; }
  [ -f "$run/unpruned_ft$ft/curve.json" ] || { stage "unpruned, fine-tuned";
    h curve "$run/train/best" "${report[@]}" --strategy gradient --fractions 0 --finetune-steps "$ft" \
      --out "$run/unpruned_ft$ft" > "$run/unpruned_ft$ft.txt"; }
done

parts=()
for s in $seeds; do
  parts+=("seeds/$s/train=seed$s/train.json" "seeds/$s/curve=seed$s/curve/curve.json"
          "seeds/$s/curve_finetuned=seed$s/p50_strategies_ft$ft/curve.json"
          "seeds/$s/unpruned_finetuned=seed$s/unpruned_ft$ft/curve.json")
  for m in $gates; do parts+=("seeds/$s/$m=seed$s/gates_keep16/$m/gates.json"); done
done
DROP=log collect "$root" "$out" "{\"command\": \"studies/sst2_seeds.sh $root $out\", \"config\": \"$cfg\", \"train_steps\": $steps, \"gate_steps\": $gate_steps, \"gate_period\": $gate_period, \"hc_extra_steps\": $hc_extra, \"finetune_steps\": $ft, \"gates\": \"$gates\"}" \
  "${parts[@]}"
