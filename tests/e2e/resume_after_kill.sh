#!/usr/bin/env bash
# Kills a training run with SIGKILL once it has saved a resume point, resumes it, and checks
# that it ends with the same final training loss as an uninterrupted run (same seed/threads).
# Usage: resume_after_kill.sh HEADPRUNE_BINARY WORK_DIR
set -euo pipefail
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
args=(--threads 2 --seed 7 --log-level warn train --family encoder_decoder --max-steps 120 --eval-every 20)

"$bin" "${args[@]}" --out "$work/full" > "$work/full.json"

"$bin" "${args[@]}" --out "$work/cut" > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  [ -f "$work/cut/last/trainer_state.json" ] && break
  sleep 0.1
done
kill -9 "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
step=$(grep -o '"step": [0-9]*' "$work/cut/last/trainer_state.json" | head -n1 || true)
echo "killed after the resume point ($step)"

"$bin" "${args[@]}" --out "$work/cut" --resume > "$work/resumed.json"
full=$(grep -o '"last_train_loss": [-0-9.e]*' "$work/full.json" | awk '{print $2}')
resumed=$(grep -o '"last_train_loss": [-0-9.e]*' "$work/resumed.json" | awk '{print $2}')
echo "uninterrupted final loss $full, resumed final loss $resumed"
awk -v a="$full" -v b="$resumed" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-6) }'
echo "resume OK"
