#!/usr/bin/env bash
# How much of the CPU headprune uses, and how it compares with PyTorch eager (docs/benchmarks.md,
# "Using the whole CPU"). Everything in one run, on one machine:
#   1. OpenBLAS kernel sets: for the environment as given, with OPENBLAS_CORETYPE unset (headprune
#      chooses, src/util/blas.cc) and with each x86-64 kernel set forced, the fp32 GEMM probe and a
#      BERT-base forward at batch 16 x 128 (GFLOP/s and share of the best probe); unset and Prescott
#      again with the linear layers on OpenBLAS instead of oneDNN
#                                                   -> RESULTS/blas_kernels.json
#   2. BERT-base inference, headprune / PyTorch eager, batch 1/4/16/64 x length 32/128, same weights,
#      threads and kernels (bench/eager/compare.py)  -> RESULTS/eager_bert_base.json
#      and again with headprune's fp32 linear layers on OpenBLAS instead of oneDNN (HP_FP32_GEMM=openblas,
#      src/util/gemm.cc), batch 1/16 x 32/128      -> RESULTS/eager_bert_base_openblas.json
#   3. a training step (forward, backward, AdamW) on the SST-2 model's shape, the same way
#                                                   -> RESULTS/eager_train_sst2.json
#      and with the linear layers on OpenBLAS      -> RESULTS/eager_train_sst2_openblas.json
#   4. 50 % of BERT-base's heads removed (heads 6-11 of every layer) against the unpruned model, fp32
#      and int8, batch 1 and 16 x 128, and the SST-2-shaped model in fp32 / int8 at batch 1 x 32
#                                                   -> RESULTS/cpu_pruned_int8.json
# Steps 2-4 run with OPENBLAS_CORETYPE unset, as a new user runs headprune.
#
#   bench/cpu_speed.sh [WORKDIR] [RESULTS]     (defaults: runs/bert_base, bench/results)
# Environment: HP (default build/headprune), THREADS (default: all cores), REPS (default 10; step 4:
# PRUNED_REPS, default 30, as the pruned/unpruned ratio is compared with the FLOP-ideal to a few %),
# STEPS (default "1 2 3 4": the steps to run; the others' results files are left as they are).
set -euo pipefail
work=${1:-runs/bert_base}
results=${2:-bench/results}
hp=${HP:-build/headprune}
threads=${THREADS:-$(nproc)}
reps=${REPS:-10}
pruned_reps=${PRUNED_REPS:-30}
steps=" ${STEPS:-1 2 3 4} "
step() { [[ $steps == *" $1 "* ]]; }
py=/usr/bin/python3
mkdir -p "$work" "$results"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[[ -f $work/base/model.safetensors ]] || "$hp" --seed 1 init --config configs/bert_base.json --out "$work/base"
heads=$(for l in $(seq 0 11); do for h in $(seq 6 11); do printf 'encoder_self:%d:%d,' "$l" "$h"; done; done)
[[ -d $work/uniform50/model ]] || "$hp" --threads "$threads" --log-level warn prune "$work/base" --max-examples 32 \
  --strategy manual --heads "${heads%,}" --out "$work/uniform50" > /dev/null
# The SST-2 model of configs/sst2.json with its trained vocabulary's size (8,000), random weights.
cat > "$tmp/sst2_model.json" <<'JSON'
{"arch": "encoder_classifier", "vocab_size": 8000, "d_model": 256, "d_ff": 1024, "n_heads": 8, "n_encoder_layers": 4,
 "n_classes": 2, "n_segments": 2, "max_positions": 128, "dropout": 0.2, "attention_dropout": 0.1,
 "norm": "post", "activation": "gelu", "layer_norm_eps": 1e-12}
JSON
[[ -f $work/sst2_shape/model.safetensors ]] || "$hp" --seed 1 init --config "$tmp/sst2_model.json" --out "$work/sst2_shape"

if step 1; then
echo "== 1. kernel sets" >&2
kernel_run() {  # NAME then env arguments
  local name=$1; shift
  env "$@" "$hp" --threads "$threads" bench "$work/base" --batch 16 --seq 128 --reps 3 --warmup 1 \
    --json "$tmp/k_$name.json" > /dev/null
  echo "$name" >> "$tmp/kernels"
}
: > "$tmp/kernels"
kernel_run as_given
kernel_run unset -u OPENBLAS_CORETYPE
for core in Prescott Sandybridge Haswell Zen SkylakeX Cooperlake; do
  kernel_run "$core" OPENBLAS_CORETYPE="$core"
done
# The same with the linear layers on OpenBLAS too (HP_FP32_GEMM=openblas): what the kernel set alone does.
kernel_run unset+openblas_linear -u OPENBLAS_CORETYPE HP_FP32_GEMM=openblas
kernel_run Prescott+openblas_linear OPENBLAS_CORETYPE=Prescott HP_FP32_GEMM=openblas
fi

if step 2; then
echo "== 2. inference against eager" >&2
env -u OPENBLAS_CORETYPE $py bench/eager/compare.py --headprune "$hp" --checkpoint "$work/base" --threads "$threads" \
  --reps "$reps" --json "$results/eager_bert_base.json"
env -u OPENBLAS_CORETYPE HP_FP32_GEMM=openblas $py bench/eager/compare.py --headprune "$hp" --checkpoint "$work/base" \
  --threads "$threads" --batch 1 16 --reps "$reps" --json "$results/eager_bert_base_openblas.json"
fi
if step 3; then
echo "== 3. a training step against eager" >&2
env -u OPENBLAS_CORETYPE $py bench/eager/compare.py --headprune "$hp" --checkpoint "$work/sst2_shape" --threads "$threads" \
  --train --batch 32 --seq 64 --reps "$reps" --json "$results/eager_train_sst2.json"
env -u OPENBLAS_CORETYPE HP_FP32_GEMM=openblas $py bench/eager/compare.py --headprune "$hp" --checkpoint "$work/sst2_shape" \
  --threads "$threads" --train --batch 32 --seq 64 --reps "$reps" --json "$results/eager_train_sst2_openblas.json"
fi
if step 4; then
echo "== 4. pruned and int8" >&2
env -u OPENBLAS_CORETYPE "$hp" --threads "$threads" bench "$work/base" "$work/uniform50/model" --precision fp32 \
  --precision int8 --batch 1 --batch 16 --seq 128 --reps "$pruned_reps" --warmup 2 --json "$tmp/pruned.json" > /dev/null
env -u OPENBLAS_CORETYPE "$hp" --threads "$threads" bench "$work/sst2_shape" --precision fp32 --precision int8 \
  --batch 1 --batch 32 --seq 32 --reps "$reps" --warmup 2 --json "$tmp/sst2_int8.json" > /dev/null
fi

$py - "$tmp" "$results" <<'PY'
import json, os, sys
tmp, results = sys.argv[1], sys.argv[2]
def write(name, obj):
    path = os.path.join(results, name)
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print("wrote", path)
if os.path.exists(os.path.join(tmp, "kernels")):  # step 1 ran
    rows = []
    for name in open(os.path.join(tmp, "kernels")).read().split():
        j = json.load(open(os.path.join(tmp, f"k_{name}.json")))
        r = j["records"][0]
        rows.append({"setting": name, "blas": j["environment"]["blas"], "fp32_gemm": j["environment"].get("fp32_gemm"),
                     "gemm_peak_gflop_per_s": j["environment"].get("gemm_peak_gflop_per_s"),
                     "model_median_ms": r["median_ms"], "model_gflop_per_s": r["gflop_per_s"]})
    best = max(x["gemm_peak_gflop_per_s"] or 0 for x in rows)
    for x in rows:
        x["model_share_of_best_peak"] = x["model_gflop_per_s"] / best
    env = json.load(open(os.path.join(tmp, "k_as_given.json")))["environment"]
    write("blas_kernels.json", {"command": "bench/cpu_speed.sh", "cpu": env.get("cpu"), "threads": env.get("threads"),
                                "best_gemm_peak_gflop_per_s": best, "shape": "BERT-base forward, batch 16 x 128",
                                "rows": rows})
if os.path.exists(os.path.join(tmp, "pruned.json")):  # step 4 ran
    write("cpu_pruned_int8.json", {"command": "bench/cpu_speed.sh",
                                   "bert_base": json.load(open(os.path.join(tmp, "pruned.json"))),
                                   "sst2_shape": json.load(open(os.path.join(tmp, "sst2_int8.json")))})
PY
