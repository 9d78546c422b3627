#!/usr/bin/env bash
# The built-in synthetic tasks' runs behind the README's demo table and docs/training.md's
# translation table (no data files needed):
#   1. `headprune demo`: each family trained, one layer and then the least important heads removed
#      (half of all heads), fine-tuned and timed;
#   2. the encoder-decoder trained alone as the user would (`train --family encoder_decoder`), then
#      evaluated greedy and with beam 4.
#
#   studies/synthetic.sh [RUN_DIR [RESULTS_DIR]]   (defaults: runs/synthetic, bench/results)
#
# Writes RESULTS_DIR/demo.json (the demo's own --json, with the command and machine added) and
# RESULTS_DIR/synthetic_mt.json. Both runs take about 3 minutes on 2 cores, so every call trains
# anew (RUN_DIR's demo/ and mt/ are replaced). Environment: HP, THREADS (studies/lib.sh), SEED
# (default 1234, headprune's own default), DEMO_ARGS and MT_ARGS (extra options for `demo` and
# `train`; run_all.sh --quick passes toy step counts).
set -euo pipefail
cd "$(dirname "$0")/.."
source studies/lib.sh
run=${1:-runs/synthetic}
out=${2:-bench/results}
export SEED=${SEED:-1234}
mkdir -p "$run" "$out"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
machine="\"cpu\": \"${cpu:-unknown}\", \"threads\": $threads, \"openblas_coretype\": \"${OPENBLAS_CORETYPE:-unset}\", \"date\": \"$(date -u +%Y-%m-%d)\""

stage "demo"
# shellcheck disable=SC2086  # DEMO_ARGS and MT_ARGS are lists of options
h demo --overwrite --out "$run/demo" ${DEMO_ARGS:-} --json "$run/demo.json" > "$run/demo.txt"
collect "$run" "$out/demo.json" "{\"command\": \"studies/synthetic.sh $run $out\", \"seed\": $SEED, $machine}" .=demo.json

stage "translation: train"
# shellcheck disable=SC2086
h train --family encoder_decoder --overwrite ${MT_ARGS:-} --out "$run/mt" > "$run/mt_train.json"
stage "translation: eval"
h eval "$run/mt/best" --beam 1 --beam 4 > "$run/mt_eval.json"
collect "$run" "$out/synthetic_mt.json" \
  "{\"command\": \"studies/synthetic.sh $run $out\", \"commands\": [\"headprune --threads $threads --seed $SEED train --family encoder_decoder ${MT_ARGS:+$MT_ARGS }--out $run/mt\", \"headprune --threads $threads --seed $SEED eval $run/mt/best --beam 1 --beam 4\"], \"seed\": $SEED, $machine}" \
  train=mt_train.json eval=mt_eval.json
