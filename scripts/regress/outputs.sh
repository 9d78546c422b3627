#!/usr/bin/env bash
# Runs the same importance / prune / curve / gates / roles / eval commands with one headprune binary,
# on the checkpoints of make_checkpoints.sh, and keeps every output file (and stdout, stderr, exit
# code) under OUT. Run it with two binaries and compare with diff_outputs.py: a refactor that should
# change no result must leave every file equal.
# Usage: outputs.sh HEADPRUNE_BINARY OUT CKPT_DIR [DATA_ROOT]
set -uo pipefail
BIN=$1; OUT=$2; C=$3
D=${4:-$(cd "$(dirname "$0")/../../.." && pwd)/shared/data}
CFG=$(cd "$(dirname "$0")" && pwd)/sst2_small.json
mkdir -p $OUT
ED=$C/demo/encoder_decoder/train/best; EC=$C/demo/encoder_classifier/train/best; LM=$C/demo/decoder_lm/train/best
SST=$C/sst2/best
run() { local name=$1; shift; echo "== $name: $*" >&2; "$BIN" --threads 2 --log-level warn "$@" > $OUT/$name.stdout 2> $OUT/$name.stderr; echo "rc=$?" >> $OUT/$name.stdout; }
run imp_ed importance $ED --method gradient --method ablation --method all-but-one --method confidence --method entropy --method magnitude --method output_norm --method lrp --method random --metric loss --bootstrap 100 --synthetic 64 --out $OUT/imp_ed
run imp_ec importance $EC --method gradient --method ablation --method lrp --bootstrap 200 --synthetic 128 --out $OUT/imp_ec
run imp_lm importance $LM --method gradient --granularity token --method entropy --method confidence --synthetic 64 --out $OUT/imp_lm
run imp_ed_bleu importance $ED --method ablation --metric bleu --bootstrap 50 --synthetic 32 --out $OUT/imp_ed_bleu
run prune_ed prune $ED --strategy score --method gradient --target 0.5 --metric loss --synthetic 64 --finetune-steps 5 --synthetic-train 200 --out $OUT/prune_ed
run prune_ec_iter prune $EC --strategy iterative --method gradient --target 0.5 --step 0.25 --synthetic 128 --out $OUT/prune_ec_iter
run prune_lm_random prune $LM --strategy random --layer-strategy avoid_middle --target 0.25 --synthetic 64 --finetune-steps 10 --synthetic-train 300 --out $OUT/prune_lm_random
run prune_ec_manual prune $EC --strategy manual --heads encoder_self:0:1,encoder_self:1:2 --synthetic 64 --mask-only --out $OUT/prune_ec_manual
run prune_ed_layers prune $ED --strategy layers --layers cross:1,decoder_self:0 --synthetic 64 --metric bleu --out $OUT/prune_ed_layers
run prune_ec_perlayer prune $EC --strategy score --method entropy --per-layer --target 0.5 --synthetic 64 --out $OUT/prune_ec_perlayer
run curve_ec curve $EC --strategy gradient --strategy iterative:gradient --strategy random:avoid_consecutive --strategy ablation:per_layer --fractions 0 --fractions 0.25 --fractions 0.5 --synthetic 64 --finetune-steps 5 --synthetic-train 200 --out $OUT/curve_ec
run curve_ed curve $ED --strategy gradient@cross --strategy magnitude@encoder_self+decoder_self --strategy random:top --fractions 0 --fractions 0.5 --fractions 0.75 --metric loss --synthetic 64 --out $OUT/curve_ed
run gates_ed gates $ED --method passconc --target 0.5 --steps 40 --period 10 --extra-steps 400 --metric loss --synthetic 64 --synthetic-train 300 --out $OUT/gates_ed
run gates_ec_hc gates $EC --method hard_concrete --target 0.5 --steps 60 --period 10 --extra-steps 200 --synthetic 64 --synthetic-train 300 --out $OUT/gates_ec_hc
run gates_lm_pass gates $LM --method pass --target 0.25 --steps 40 --period 10 --extra-steps 200 --synthetic 64 --synthetic-train 300 --finetune-steps 5 --out $OUT/gates_lm_pass
run gates_ec_scratch gates $EC --method pass --target 4 --steps 50 --period 10 --extra-steps 200 --from-scratch --synthetic 64 --synthetic-train 300 --out $OUT/gates_ec_scratch
run gates_ec_hcq gates $EC --method hard_concrete --target 0.5 --hc-target quadratic --steps 30 --period 10 --synthetic 64 --synthetic-train 300 --out $OUT/gates_ec_hcq
run eval_ed eval $ED --synthetic 64 --beam 1 --beam 3
run eval_lm eval $LM --synthetic 64 --unigram-baseline
run eval_ec_int8 eval $EC --synthetic 64 --precision int8
# ../shared/data: SST-2
run sst_imp importance $SST --config $CFG --data-root $D --max-examples 200 --method gradient --method ablation --method confidence --method entropy --method magnitude --method lrp --bootstrap 100 --out $OUT/sst_imp
run sst_prune prune $SST --config $CFG --data-root $D --max-examples 200 --strategy score --method gradient --target 0.5 --finetune-steps 20 --out $OUT/sst_prune
run sst_curve curve $SST --config $CFG --data-root $D --max-examples 200 --strategy gradient --strategy random:uniform --strategy iterative:gradient --fractions 0 --fractions 0.25 --fractions 0.5 --fractions 0.75 --out $OUT/sst_curve
run sst_gates gates $SST --config $CFG --data-root $D --max-examples 200 --method passconc --target 0.5 --steps 60 --period 20 --extra-steps 400 --out $OUT/sst_gates
run sst_roles roles $SST --data-root $D --max-sentences 300 --importance $OUT/sst_imp/importance.json --plan $OUT/sst_prune/plan.json --out $OUT/sst_roles
run sst_eval eval $SST --config $CFG --data-root $D
echo done >&2
