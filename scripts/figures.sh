#!/usr/bin/env bash
# Draws every figure in docs/ from committed results (bench/results/*.json), with `headprune plot`:
#   scripts/figures.sh [OUT_DIR]      default docs/figures; OUT_DIR/<doc>/<figure>.svg
#   scripts/figures.sh --check        draw them into a temporary directory and fail when any differs
#                                     from docs/figures (CTest docs_figures, label lint, runs this)
# Run it after a study rewrites its results JSON, and commit the SVGs with it.
# Environment: HP (default build/headprune), RESULTS (default bench/results: where the JSON is read;
# studies/run_all.sh --quick points it at its scratch results).
set -euo pipefail
cd "$(dirname "$0")/.."
hp=${HP:-build/headprune}
if [ "${1:-}" = "--check" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  bash "$0" "$tmp/figures" > /dev/null
  if ! diff -r docs/figures "$tmp/figures" > "$tmp/diff.txt"; then
    head -20 "$tmp/diff.txt" >&2
    echo "figures: docs/figures differs from what scripts/figures.sh draws from bench/results (rerun it and commit)" >&2
    exit 1
  fi
  echo "figures OK: $(find docs/figures -name '*.svg' | wc -l) figures in docs/figures match their results"
  exit 0
fi
out=${1:-docs/figures}
results=${RESULTS:-bench/results}
S=$results/sst2_study.json   # studies/sst2.sh
L=$results/llama_gqa.json    # studies/llama_gqa.sh
B=$results/bert_base_table4.json  # docs/benchmarks.md, Michel's Table 4
p() {  # p DIR RESULTS... [options]
  local dir=$1; shift
  "$hp" plot "$@" --format svg --no-scripts --overwrite --out "$out/$dir" > /dev/null
}
mkdir -p "$out"
p importance "$S#/importance" "$L#/importance" --label SST-2 --label LLaMA-GQA
p pruning_sst2 "$S#/curve" --label SST-2
p pruning_llama "$L#/curve" "$L#/curve_finetuned" --label "LLaMA-GQA" --label "LLaMA-GQA, 100 steps fine-tuning"
p gates "$S#/gates_keep16/pass" "$S#/gates_keep16/passconc" "$L#/passconc" --label "SST-2 PASS" --label "SST-2 PASSCONC" --label "LLaMA-GQA PASSCONC"
p pareto_sst2 "$S#/bench" "$S#/prune_50" "$S#/gates_keep16/pass" "$S#/gates_keep16/passconc" "$S#/gates_keep8/pass" \
  "$S#/gates_keep8/passconc" --label "SST-2" --label "gradient 50%, fine-tuned" --label "PASS 16 heads" \
  --label "PASSCONC 16 heads" --label "PASS 8 heads" --label "PASSCONC 8 heads" --only pareto --batch 16
p bench_bert_base "$B" --label "BERT-base, Michel Table 4"
M=$results/methods_full.json  # studies/methods.sh (full size): every method at half the heads, seed 1
methods_pareto() {  # methods_pareto DIR MODEL LABEL: each method's model beside the unpruned one
  local m=("$M#/$2/1/bench") ml=(--label "$3 unpruned")
  for k in plain/score_gradient plain/score_taylor plain/score_activation plain/score_magnitude plain/score_layer_drop \
    plain/gates_passconc plain/gates_dsp plain/gates_cofi plain/budget kd/score_gradient kd/gates_cofi kd/budget; do
    m+=("$M#/$2/1/$k") ml+=(--label "${k//\// }")
  done
  p "$1" "${m[@]}" "${ml[@]}" --only pareto --batch 16
}
methods_pareto pareto_methods sst2 SST-2
methods_pareto pareto_methods_llama llama "LLaMA LM"
p history "$S#/train/history" "$L#/train/history" --label "SST-2" --label "LLaMA-GQA" --kind history
# figures.json names the tool's version; the figures themselves are what the docs show
echo "figures in $out: $(find "$out" -name '*.svg' | wc -l)"
