#!/usr/bin/env bash
# The budget planner's benchmark (issue 55): for a LLaMA-style decoder (bench/budget_llama.json,
# ~64 M parameters, GQA) and a BERT-style encoder (bench/budget_bert.json), random weights in
# headprune's layout, `headprune prune --budget latency=SHARE` at batch 1 and 16 x 128 tokens: the
# latency table is measured, the knapsack chooses, the chosen model is saved, reloaded and timed beside
# the unpruned one. Also the counted budgets (params, kv-cache, memory) on the decoder. Writes
# bench/results/budget.json (each run's summary "budget" block, the plan's shape, the environment).
#
#   bench/budget.sh [WORK_DIR] [OUT.json]        (defaults: /tmp/hp_budget, bench/results/budget.json)
# Environment: HP=path/to/headprune (default build/headprune), THREADS (default 2), SHARE (default 0.85x),
# REPS (default 15).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/hp_budget}
out=${2:-bench/results/budget.json}
hp=${HP:-build/headprune}
threads=${THREADS:-2}
share=${SHARE:-0.85x}
reps=${REPS:-15}
mkdir -p "$work"
run() {  # NAME CHECKPOINT BUDGET BATCH
  "$hp" --threads "$threads" --log-level warn prune "$2" --budget "$3" --budget-batch "$4" --budget-len 128 \
    --budget-context 2048 --budget-reps "$reps" --method magnitude --out "$work/$1" --overwrite > "$work/$1.txt"
  echo "$1: $(grep '^budget' "$work/$1.txt")"
}
[ -d "$work/llama" ] || "$hp" init --config bench/budget_llama.json --out "$work/llama" > /dev/null
[ -d "$work/bert" ] || "$hp" init --config bench/budget_bert.json --out "$work/bert" > /dev/null
names=()
for b in 1 16; do
  run "llama-latency-b$b" "$work/llama" "latency=$share" "$b"; names+=("llama-latency-b$b")
  run "bert-latency-b$b" "$work/bert" "latency=$share" "$b"; names+=("bert-latency-b$b")
done
for budget in params=0.8x kv-cache=0.5x memory=0.9x; do
  name="llama-${budget%%=*}"
  run "$name" "$work/llama" "$budget" 1; names+=("$name")
done
COMMAND="bench/budget.sh $work $out (THREADS=$threads SHARE=$share REPS=$reps)" \
python3 - "$work" "$out" "${names[@]}" <<'PY'
import json, os, subprocess, sys, tempfile
work, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = []
env = None
for n in names:
    s = json.load(open(os.path.join(work, n, "summary.json")))
    b = dict(s["budget"])
    env = b.pop("environment", env)
    info = s["plan"]["info"]
    runs.append({"run": n, "budget": info["budget"]["text"], "heads_removed": len(s["plan"]["heads"]),
                 "kept_groups": info["kept_groups"], "aimed_at": info.get("aimed_at"), **b})
doc = {"command": os.environ["COMMAND"], "environment": env, "runs": runs}
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(doc, f, indent=1)
os.replace(tmp, out)
for r in runs:
    extra = f", share predicted {r['predicted_share']:.3f} measured {r['measured_share']:.3f}" if "measured_share" in r else ""
    print(f"{r['run']}: predicted {r['predicted']:.4g} measured {r['measured']:.4g} {r['unit']} "
          f"(error {100 * r['error']:+.1f} %){extra}, met {r['met']}")
PY
