#!/usr/bin/env bash
# Training throughput of one process against two on this machine (docs/distributed.md):
# the same run config, steps and seed, as
#   1 process x 1 thread, 1 process x ALL threads, and NPROC processes x 1 thread (headprune launch),
# for two workloads: the SST-2 model of configs/sst2.json (needs ../shared/data; skipped without
# it) and the tiny synthetic translation model (built in). Each row: the trainer's own timing of
# its steps (forward, backward, gradient exchange, update; evaluation excluded), in padded tokens/s
# and ms/step, and the final training loss.
#
#   bench/distributed.sh [RESULTS]     (default bench/results -> RESULTS/distributed.json)
# Environment: HP (default build/headprune), STEPS (default 60), NPROC (default: all cores).
set -euo pipefail
results=${1:-bench/results}
hp=${HP:-build/headprune}
steps=${STEPS:-60}
nproc=${NPROC:-$(nproc)}
all=$(nproc)
mkdir -p "$results"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

workloads=("synthetic_mt|--family encoder_decoder")
if [[ -f ../shared/data/glue/SST-2/train.tsv.gz ]]; then workloads=("sst2|--config configs/sst2.json" "${workloads[@]}"); fi
rows=()
for w in "${workloads[@]}"; do
  name=${w%%|*}
  read -r -a args <<< "${w#*|}"
  for setup in "1x1" "1x$all" "${nproc}x1"; do
    p=${setup%x*}
    t=${setup#*x}
    run=(--threads "$t" --seed 1 --log-level warn train "${args[@]}" --max-steps "$steps" --eval-every "$steps"
         --out "$tmp/$name-$setup")
    echo "$name: $p process(es) x $t thread(s)" >&2
    if [[ $p == 1 ]]; then "$hp" "${run[@]}" > "$tmp/$name-$setup.json"
    else "$hp" launch --nproc "$p" -- "${run[@]}" > "$tmp/$name-$setup.json"; fi
    rows+=("$name|$p|$t|$tmp/$name-$setup.json")
  done
done

/usr/bin/python3 - "$results/distributed.json" "$hp" "$steps" "${rows[@]}" <<'PY'
import json, os, subprocess, sys, datetime
sys.path.insert(0, "bench/eager")
from benchio import write_json
out, hp, steps, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
res = {"command": "bench/distributed.sh", "date": datetime.date.today().isoformat(), "cpu": cpu,
       "cores": os.cpu_count(), "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
       "steps": steps, "rows": []}
base = {}
for r in rows:
    name, p, t, path = r.split("|")
    j = json.load(open(path))
    row = {"workload": name, "processes": int(p), "threads_per_process": int(t),
           "tokens_per_s": j["train_tokens_per_s"], "step_ms": j["train_step_ms"], "last_train_loss": j["last_train_loss"]}
    base.setdefault(name, row["tokens_per_s"])
    row["vs_1x1"] = row["tokens_per_s"] / base[name]
    res["rows"].append(row)
    print(f'{name:14s} {p} x {t}: {row["tokens_per_s"]:9.0f} tok/s  {row["step_ms"]:8.1f} ms/step  '
          f'x{row["vs_1x1"]:.2f}  loss {row["last_train_loss"]:.4f}')
write_json(out, res)
PY
