#!/usr/bin/env bash
# Pruning composed with lower precision on SST-2: the unpruned and a 50 %-pruned model in fp32,
# bf16 and int8 (dynamic int8 linear layers) -- dev accuracy of each (`eval --precision`) and
# latency of all six side by side in one run (`bench --precision`).
#
#   bench/precision_sst2.sh [UNPRUNED] [PRUNED] [OUT.json]
#     defaults: the SST-2 study's model and its 50 %-pruned, fine-tuned version (studies/sst2.sh:
#     runs/sst2_heldout_s1200/seed1/train/best and .../p50_ft100/model), bench/results/sst2_precision.json
# Needs ../shared/data (SST-2 dev). Environment: HP (default build/headprune), THREADS (default 2),
# REPS (default 10), CONFIG (default configs/sst2_heldout.json, whose test split is GLUE's dev set),
# SPLIT (default test).
set -euo pipefail
study=runs/sst2_heldout_s1200/seed1
full=${1:-$study/train/best}
pruned=${2:-$study/p50_ft100/model}
out=${3:-bench/results/sst2_precision.json}
hp=${HP:-build/headprune}
threads=${THREADS:-2}
reps=${REPS:-10}
cfg=${CONFIG:-configs/sst2_heldout.json}
split=${SPLIT:-test}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for m in "$full" "$pruned"; do
  for p in fp32 bf16 int8; do
    "$hp" --threads "$threads" --log-level warn eval "$m" --config "$cfg" --split "$split" --precision "$p" \
      > "$tmp/eval_$(echo "$m" | tr / _)_$p.json"
  done
done
"$hp" --threads "$threads" bench "$full" "$pruned" --precision fp32 --precision bf16 --precision int8 \
  --batch 1 --batch 32 --seq 32 --seq 64 --reps "$reps" --warmup 2 --json "$tmp/bench.json"
COMMAND="bench/precision_sst2.sh $full $pruned $out" CONFIG="$cfg" SPLIT="$split" \
python3 - "$tmp" "$out" <<'PY'
import glob, json, os, sys
tmp, out = sys.argv[1], sys.argv[2]
evals = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(tmp, "eval_*.json")))]
bench = json.load(open(os.path.join(tmp, "bench.json")))
res = {"command": os.environ["COMMAND"], "config": os.environ["CONFIG"], "split": os.environ["SPLIT"],
       "environment": bench["environment"], "reps": bench["reps"], "warmup": bench["warmup"],
       "eval": [{k: e.get(k) for k in ("checkpoint", "precision", "n_examples", "loss", "accuracy")} for e in evals],
       "records": bench["records"]}
tmp_out = out + ".tmp"
with open(tmp_out, "w") as f:
    json.dump(res, f, indent=2)
    f.write("\n")
os.replace(tmp_out, out)
print("%-28s %-5s %9s %8s" % ("checkpoint", "prec", "accuracy", "loss"))
for e in res["eval"]:
    print("%-28s %-5s %9.4f %8.4f" % (e["checkpoint"], e["precision"], e["accuracy"] or float("nan"), e["loss"]))
PY
