#!/usr/bin/env bash
# The Multi30k En->De study (docs/results.md): the encoder-decoder of configs/multi30k.json (3 + 3
# layers x 8 heads x encoder self / decoder self / cross attention = 72 heads) trained its configured
# STEPS with a snapshot every 250 steps, the checkpoint chosen on the validation set, then
#   1. BLEU on the in-domain test_2016_flickr and the out-of-domain test_2017_mscoco (greedy, beam 4),
#   2. head importance on the validation set: gradient (Michel), single-head ablation and all-but-one
#      ablation per attention layer (BLEU, paired bootstrap significance), confidence and LRP (Voita),
#      all-but-one on test too (Michel: each layer's best head chosen on validation, BLEU on test),
#      and gradient and ablation on MSCOCO -- their agreement, in domain vs out of domain,
#   3. test BLEU vs heads pruned, heads chosen on the validation set: gradient (one shot), iterative
#      gradient and random heads; gradient within one attention type at a time; MSCOCO BLEU with
#      heads chosen on the validation set vs on MSCOCO,
#   4. learned gates to 36 and to 18 heads kept: PASS, PASSCONC and Hard Concrete (its lambda search),
#      and Michel's iterative plans at the same counts with as many fine-tuning steps,
#   5. Voita's head roles (positional, syntactic, rare-word) of the encoder on UD English-EWT, joined
#      with the importance maps and the PASSCONC plan keeping 36,
#   6. half the heads removed by gradient and by random heads (uniform, avoid_consecutive), then
#      FT_STEPS fine-tuning steps (Budhraja et al.),
#   7. the gradient curve of 3 on the snapshots every 500 steps (importance over training, Michel 6),
#   8. Hard Concrete at 29 and 13 heads kept too: with 36 and 18, Voita's four sparsity points
#      (75, 58, 36 and 26 of 144 heads kept, scaled to 72),
#   9. the latency of the PASS and PASSCONC models beside the unpruned one (same head count, PASSCONC
#      with more attention layers emptied), batch 1 and 16, source and target 32 tokens, REPS each.
# Gates and fine-tuning use batches of FT_BATCH_TOKENS tokens. Every step is skipped when its output
# exists, so an interrupted run -- the training too -- goes on where it stopped when run again.
#
#   studies/multi30k.sh [RUN_ROOT] [OUT.json]
#     defaults: runs/multi30k_s<STEPS>  bench/results/multi30k.json; the model in RUN_ROOT/seed<SEED>
# Needs ../shared/data (Multi30k, UD English-EWT). Environment: SEED (default 1), STEPS (default
# 4000, the config's), KEEP_EVERY (snapshot interval, default 250), OVER_TRAINING (snapshot steps for
# stage 7, default every 500), GATE_STEPS (default 200), GATE_EXTRA_STEPS (up to this many more
# while the count is not exact; default 600), GATE_PERIOD (default 50), GATE_ARGS, FT_STEPS
# (default 100), FT_BATCH_TOKENS (default 2000), MAX_SENTENCES (only the first N sentences of every
# split scored or reported, for quick runs; default all), REPS (latency repetitions, default 200),
# HP, THREADS.
set -euo pipefail
export SEED=${SEED:-1}
REPS=${REPS:-200}
steps=${STEPS:-4000}
keep=${KEEP_EVERY:-250}
root=${1:-runs/multi30k_s$steps}
out=${2:-bench/results/multi30k.json}
gate_steps=${GATE_STEPS:-200}
gate_period=${GATE_PERIOD:-50}
gate_extra=${GATE_EXTRA_STEPS:-600}
ftb=${FT_BATCH_TOKENS:-2000}
ft=${FT_STEPS:-100}
cfg=configs/multi30k.json
coco=configs/multi30k_mscoco.json  # the same data with MSCOCO as the test split
source "$(dirname "$0")/lib.sh"
run=$root/seed$SEED
model=$run/train/best
limit=(--max-sentences "${MAX_SENTENCES:-0}")
bleu=(--metric bleu "${limit[@]}")
over=${OVER_TRAINING:-$(seq -s ' ' 500 500 "$steps")}


stage train
train_once "$cfg" "$steps" "$run" --keep-every "$keep"

stage "test BLEU"
once "$run/eval_flickr.json" h eval "$model" --config "$cfg" --split test --beam 1 --beam 4 "${limit[@]}"
once "$run/eval_mscoco.json" h eval "$model" --config "$coco" --split test --beam 1 --beam 4 "${limit[@]}"

stage importance
[ -f "$run/importance_valid/importance.json" ] ||
  h importance "$model" --config "$cfg" --split valid --method gradient --method ablation --method all_but_one \
    --method confidence --method lrp "${bleu[@]}" --out "$run/importance_valid" > "$run/importance_valid.txt"
[ -f "$run/importance_mscoco/importance.json" ] ||
  h importance "$model" --config "$coco" --split test --method gradient --method ablation "${bleu[@]}" \
    --out "$run/importance_mscoco" > "$run/importance_mscoco.txt"
[ -f "$run/importance_test/importance.json" ] ||  # Michel 3.3: each layer's best head chosen on valid, BLEU on test
  h importance "$model" --config "$cfg" --split test --method all_but_one "${bleu[@]}" \
    --out "$run/importance_test" > "$run/importance_test.txt"
once "$run/agreement_valid_mscoco.json" \
  h agreement "$run/importance_valid/importance.json" "$run/importance_mscoco/importance.json" --by-type

stage curves
fr=(0 0.125 0.25 0.375 0.5 0.625 0.75 0.875)
[ -f "$run/curve/curve.json" ] ||
  h curve "$model" --config "$cfg" --split test --score-split valid --strategy gradient --strategy iterative:gradient \
    --strategy random:uniform --fractions "${fr[@]}" "${bleu[@]}" --out "$run/curve" > "$run/curve.txt"
[ -f "$run/curve_by_type/curve.json" ] ||  # one attention type at a time (Michel 5): fractions of its 24 heads
  h curve "$model" --config "$cfg" --split test --score-split valid --strategy gradient@encoder_self \
    --strategy gradient@decoder_self --strategy gradient@cross --fractions 0 0.25 0.5 0.75 1 "${bleu[@]}" \
    --out "$run/curve_by_type" > "$run/curve_by_type.txt"
for s in valid test; do  # MSCOCO BLEU, heads chosen in domain (valid) or on MSCOCO itself (test)
  [ -f "$run/curve_mscoco_by_$s/curve.json" ] ||
    h curve "$model" --config "$coco" --split test --score-split "$s" --strategy gradient \
      --fractions 0 0.25 0.5 0.75 "${bleu[@]}" --out "$run/curve_mscoco_by_$s" > "$run/curve_mscoco_by_$s.txt"
done

stage gates
gate() {  # KEPT METHOD: gates to KEPT of the 72 heads
  gates_to "$((72 - $1))" "$model" "$2" "$run/gates_keep$1/$2" --config "$cfg" --split test \
    --finetune-batch-tokens "$ftb" "${bleu[@]}"
}
for k in 36 18; do for m in pass passconc hard_concrete; do gate "$k" "$m"; done; done
[ -f "$run/curve_ft/curve.json" ] ||  # Michel's plans, then about as many steps as a gate run takes
  h curve "$model" --config "$cfg" --split test --score-split valid --strategy iterative:gradient \
    --fractions 0.5 0.75 --finetune-steps "$((2 * gate_steps))" --finetune-batch-tokens "$ftb" "${bleu[@]}" \
    --out "$run/curve_ft" > "$run/curve_ft.txt"

stage roles
[ -f "$run/roles/roles.json" ] ||
  h roles "$model" --importance "$run/importance_valid/importance.json" \
    --plan "$run/gates_keep36/passconc/plan.json" --out "$run/roles" > "$run/roles.txt"

stage "random heads and fine-tuning (Budhraja)"
[ -f "$run/curve_ft$ft/curve.json" ] ||
  h curve "$model" --config "$cfg" --split test --score-split valid --strategy gradient --strategy random:uniform \
    --strategy random:avoid_consecutive --fractions 0.5 --finetune-steps "$ft" --finetune-batch-tokens "$ftb" \
    "${bleu[@]}" --out "$run/curve_ft$ft" > "$run/curve_ft$ft.txt"

stage "over training"
mkdir -p "$run/over_training"
for s in $over; do
  snap=$run/train/$(printf 'step-%06d' "$s")
  [ -d "$snap" ] || { echo "multi30k.sh: no snapshot $snap (KEEP_EVERY must divide $s)" >&2; exit 1; }
  [ -f "$run/over_training/$s/curve.json" ] ||
    h curve "$snap" --config "$cfg" --split test --score-split valid --strategy gradient \
      --fractions 0 0.25 0.5 0.75 "${bleu[@]}" --out "$run/over_training/$s" > "$run/over_training/$s.txt"
done

stage "Hard Concrete at Voita's other two sparsity points"
for k in 29 13; do gate "$k" hard_concrete; done

stage "latency of the gate-pruned models"
[ -f "$run/bench.json" ] ||
  h bench "$model" "$run"/gates_keep{36,18}/{pass,passconc}/model --batch 1 --batch 16 --seq 32 --reps "$reps" \
    --warmup 10 --json "$run/bench.json" > "$run/bench.txt"

parts=(train=train.json eval_flickr=eval_flickr.json eval_mscoco=eval_mscoco.json
       importance_valid=importance_valid/importance.json importance_mscoco=importance_mscoco/importance.json
       importance_test=importance_test/importance.json
       agreement_valid_mscoco=agreement_valid_mscoco.json curve=curve/curve.json curve_finetuned=curve_ft/curve.json
       curve_mscoco_by_valid=curve_mscoco_by_valid/curve.json curve_mscoco_by_mscoco=curve_mscoco_by_test/curve.json
       curve_by_type=curve_by_type/curve.json curve_finetuned_$ft=curve_ft$ft/curve.json roles=roles/roles.json
       bench=bench.json)
for s in $over; do parts+=("over_training/$s=over_training/$s/curve.json"); done
for k in 36 18; do for m in pass passconc; do parts+=("gates_keep$k/$m=gates_keep$k/$m/gates.json"); done; done
for k in 36 29 18 13; do parts+=("gates_keep$k/hard_concrete=gates_keep$k/hard_concrete/gates.json"); done
DROP=log collect "$run" "$out" "{\"command\": \"studies/multi30k.sh $root $out\", \"config\": \"$cfg\", \"seed\": $SEED, \"train_steps\": $steps, \"gate_steps\": $gate_steps, \"gate_extra_steps\": $gate_extra, \"finetune_batch_tokens\": $ftb, \"finetune_steps\": $ft, \"max_sentences\": ${MAX_SENTENCES:-0}}" \
  "${parts[@]}"
