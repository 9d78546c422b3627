#!/usr/bin/env bash
# The language-model comparisons over seeds (docs/results.md): the GPT-2-style decoder of
# configs/shakespeare_heldout.json and the LLaMA-style decoder with grouped-query attention of
# configs/shakespeare_llama_heldout.json, each trained once per seed on Tiny Shakespeare (checkpoint
# chosen on the valid half of the held-out text, perplexity reported on the other half), and the
# GPT-2-style decoder trained alike on WikiText-2 (configs/wikitext.json: checkpoint chosen on held-out
# lines of wiki.valid.raw, perplexity reported on wiki.test.raw), then
#   1. test perplexity vs heads pruned, heads chosen on the valid split: gradient importance (one
#      shot), iterative gradient, and random heads under Budhraja et al.'s layer strategies
#      (uniform, avoid_consecutive, top, bottom); the LLaMA model also by whole key/value groups
#      (gradient:group), no fine-tuning,
#   2. learned gates to exactly half the heads: PASS, PASSCONC and Hard Concrete (GATES),
#   3. half the heads removed by gradient importance and by random heads under each layer strategy
#      (and whole groups for LLaMA), each then fine-tuned FT_STEPS steps (Budhraja et al.), and the
#      unpruned model fine-tuned alike (the baseline those are compared with),
#   4. in domain vs out of domain (Michel et al.'s importance across data sets): gradient importance
#      on held-out text of the model's own corpus and on the other corpus (WikiText-2's test file
#      for the Shakespeare models, all of Tiny Shakespeare for the WikiText-2 one), their agreement,
#      and perplexity on the other corpus with heads pruned as chosen on either.
# Stages run model by model, seed after seed; each step is skipped when its output exists (rerun to
# go on). One results JSON per model, OUT_DIR/lm_seeds_<model>.json, written when that model's seeds
# are done, holds every run's outputs as headprune wrote them (gates without their per-period log);
# scripts/doc_tables.py computes the means and spreads.
#
#   studies/lm_seeds.sh [RUN_ROOT] [OUT_DIR]
#     defaults: runs/lm_seeds  bench/results; model M, seed N in RUN_ROOT/M/seedN
# Needs ../shared/data (Tiny Shakespeare, WikiText-2). Environment: SEEDS (default "1 2 3"), MODELS
# (default "gpt llama wikitext"), STEPS (training steps; default each config's own), GATE_STEPS
# (default 300; as many again if the count is not exact), GATE_PERIOD (default 50), GATE_ARGS, GATES
# (default "pass passconc hard_concrete"; hard_concrete's λ search gets HC_EXTRA_STEPS extra steps,
# default twice GATE_STEPS, as in the SST-2 studies), FT_STEPS (default 100), MAX_EXAMPLES (score,
# report and select on only the first N blocks of each split; default all: the quick mode's toy
# size), HP, THREADS.
set -euo pipefail
seeds=${SEEDS:-1 2 3}
models=${MODELS:-gpt llama wikitext}
root=${1:-runs/lm_seeds}
outdir=${2:-bench/results}
gate_steps=${GATE_STEPS:-300}
gate_period=${GATE_PERIOD:-50}
ft=${FT_STEPS:-100}
gates=${GATES:-pass passconc hard_concrete}
hc_extra=${HC_EXTRA_STEPS:-$((2 * gate_steps))}
source "$(dirname "$0")/lib.sh"
limit=()
[ -n "${MAX_EXAMPLES:-}" ] && limit=(--max-examples "$MAX_EXAMPLES")
random=(--strategy random:uniform --strategy random:avoid_consecutive --strategy random:top --strategy random:bottom)

config_of() { case $1 in gpt) echo configs/shakespeare_heldout.json ;; llama) echo configs/shakespeare_llama_heldout.json ;;
              wikitext) echo configs/wikitext.json ;;
              *) echo "lm_seeds.sh: unknown model '$1' (gpt, llama or wikitext)" >&2; exit 2 ;; esac; }
other_of() {  # the out-of-domain config: its valid split is held-out text of the model's own corpus
  case $1 in wikitext) echo configs/wikitext_on_shakespeare.json ;; *) echo configs/shakespeare_on_wikitext.json ;; esac; }
steps_of() {  # STEPS, or the config's own max_steps
  [ -n "${STEPS:-}" ] && { echo "$STEPS"; return; }
  sed 's|//.*||' "$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["train"]["max_steps"])'
}
stage() { echo "== $(date +%H:%M:%S) $m seed $SEED: $1" >&2; }

for m in $models; do
  parts=()
  cfg=$(config_of "$m")
  other=$(other_of "$m")
  steps=$(steps_of "$cfg")
  report=(--config "$cfg" --split test --score-split valid "${limit[@]}")
  extra=()
  [ "$m" = llama ] && extra=(--strategy gradient:group)
  for SEED in $seeds; do
    export SEED
    run=$root/$m/seed$SEED
    stage train
    train_once "$cfg" "$steps" "$run"
    [ -f "$run/curve/curve.json" ] || { stage curve;
      h curve "$run/train/best" "${report[@]}" --strategy gradient --strategy iterative:gradient "${extra[@]}" \
        "${random[@]}" --fractions 0 0.125 0.25 0.375 0.5 0.625 0.75 0.875 --out "$run/curve" > "$run/curve.txt"; }
    for g in $gates; do
      [ -f "$run/${g}_g$gate_steps/gates.json" ] || { stage "$g";
        gates_to 0.5 "$run/train/best" "$g" "$run/${g}_g$gate_steps" --config "$cfg" --split test "${limit[@]}"; }
    done
    [ -f "$run/curve_ft$ft/curve.json" ] || { stage "fine-tuned curve";
      h curve "$run/train/best" "${report[@]}" --strategy gradient "${extra[@]}" "${random[@]}" --fractions 0.5 \
        --finetune-steps "$ft" --out "$run/curve_ft$ft" > "$run/curve_ft$ft.txt"; }
    [ -f "$run/unpruned_ft$ft/curve.json" ] || { stage "unpruned, fine-tuned";
      h curve "$run/train/best" "${report[@]}" --strategy gradient --fractions 0 --finetune-steps "$ft" \
        --out "$run/unpruned_ft$ft" > "$run/unpruned_ft$ft.txt"; }
    stage "in domain vs out of domain"
    for s in valid test; do
      [ -f "$run/importance_domain_$s/importance.json" ] ||
        h importance "$run/train/best" --config "$other" --split "$s" --method gradient "${limit[@]}" \
          --out "$run/importance_domain_$s" > "$run/importance_domain_$s.txt"
    done
    once "$run/agreement_domains.json" \
      h agreement "$run/importance_domain_valid/importance.json" "$run/importance_domain_test/importance.json"
    for s in valid test; do  # perplexity on the other corpus, heads chosen in domain (valid) or on it (test)
      [ -f "$run/curve_other_by_$s/curve.json" ] ||
        h curve "$run/train/best" --config "$other" --split test --score-split "$s" --strategy gradient "${limit[@]}" \
          --fractions 0 0.25 0.5 0.75 --out "$run/curve_other_by_$s" > "$run/curve_other_by_$s.txt"
    done
    parts+=("seeds/$SEED/train=$m/seed$SEED/train.json" "seeds/$SEED/curve=$m/seed$SEED/curve/curve.json"
            "seeds/$SEED/curve_finetuned=$m/seed$SEED/curve_ft$ft/curve.json"
            "seeds/$SEED/unpruned_finetuned=$m/seed$SEED/unpruned_ft$ft/curve.json"
            "seeds/$SEED/agreement_domains=$m/seed$SEED/agreement_domains.json"
            "seeds/$SEED/curve_other_by_valid=$m/seed$SEED/curve_other_by_valid/curve.json"
            "seeds/$SEED/curve_other_by_other=$m/seed$SEED/curve_other_by_test/curve.json")
    for g in $gates; do parts+=("seeds/$SEED/$g=$m/seed$SEED/${g}_g$gate_steps/gates.json"); done
  done
  DROP=log collect "$root" "$outdir/lm_seeds_$m.json" "{\"command\": \"MODELS='$m' SEEDS='$seeds' GATES='$gates' studies/lm_seeds.sh $root $outdir\", \"model\": \"$m\", \"config\": \"$cfg\", \"other_config\": \"$other\", \"train_steps\": $steps, \"gate_steps\": $gate_steps, \"hc_extra_steps\": $hc_extra, \"finetune_steps\": $ft, \"gates\": \"$gates\"}" \
    "${parts[@]}"
done
