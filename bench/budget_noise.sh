#!/usr/bin/env bash
# How much one model's time moves between processes on this machine (docs/pruning.md, "Budget
# planner"): `headprune bench UNPRUNED CHOSEN` at the budget benchmark's batch-1 encoder shape, N
# processes one after another, each timing every model for at least MIN_TIME seconds. Writes the
# unpruned model's median and the pair's share per process.
#
#   bench/budget_noise.sh WORK_DIR OUT.json      (WORK_DIR: a bench/budget.sh work directory)
# Environment: HP (default build/headprune), N (default 6), MIN_TIME (default 2), THREADS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$1
out=$2
hp=${HP:-build/headprune}
n=${N:-6}
min_time=${MIN_TIME:-2}
threads=${THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq "$n"); do
  "$hp" --threads "$threads" --log-level warn bench "$work/bert" "$work/bert-latency-b1/model" --batch 1 --seq 128 \
    --min-time "$min_time" --no-gemm-probe --json "$tmp/$i.json" > /dev/null
done
COMMAND="bench/budget_noise.sh $work $out (N=$n MIN_TIME=$min_time THREADS=$threads)" python3 - "$tmp" "$n" "$out" <<'PY'
import json, os, sys
tmp, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = []
env = None
for i in range(1, n + 1):
    d = json.load(open(os.path.join(tmp, "%d.json" % i)))
    r = d["records"]
    env = d.get("environment", env)
    rows.append({"process": i, "unpruned_ms": r[0]["median_ms"], "chosen_ms": r[1]["median_ms"],
                 "share": 1 / r[1]["paired_speedup"], "reps": r[0]["reps"]})
doc = {"command": os.environ["COMMAND"], "environment": env, "processes": rows}
with open(out + ".tmp", "w") as f:
    json.dump(doc, f, indent=1)
os.replace(out + ".tmp", out)
for r in rows:
    print("process %d: unpruned %.3f ms, chosen %.3f ms, share %.3f (%d rounds)" % (
        r["process"], r["unpruned_ms"], r["chosen_ms"], r["share"], r["reps"]))
PY
