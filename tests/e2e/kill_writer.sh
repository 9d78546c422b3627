#!/usr/bin/env bash
# Kills `prune --overwrite` with SIGKILL at several points while it writes into an existing output
# directory, and checks after each kill that the directory is either the earlier complete result or
# absent (never half-written), that a second writer is refused while one runs, and that a run after
# the kills completes (the stale staging directory and lock of a killed run do not block it).
# Usage: kill_writer.sh HEADPRUNE_BINARY CHECKPOINT WORK_DIR
set -euo pipefail
bin=$1
ckpt=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
out=$work/out
lock=$work/.out.headprune-lock  # io/outputs.h: PathLock
args=(--threads 1 --log-level error prune "$ckpt" --strategy random --target 0.5 --synthetic 64
      --finetune-steps 30 --synthetic-train 300 --overwrite --out "$out")

complete() {  # the output is a finished result: its summary and a loadable model
  [ -f "$out/summary.json" ] && "$bin" info "$out/model" > /dev/null
}

"$bin" "${args[@]}" > /dev/null
complete || { echo "first run incomplete"; exit 1; }
for delay in 0.3 1 2 3 4; do
  "$bin" "${args[@]}" > /dev/null 2>&1 &
  pid=$!
  # Wait until it holds the lock: the lock file names its pid (a killed run's lock file stays behind,
  # unlocked, so its mere existence proves nothing).
  for _ in $(seq 600); do [ "$(cat "$lock" 2>/dev/null)" = "$pid" ] && break; sleep 0.05; done
  if kill -0 "$pid" 2>/dev/null; then  # a second writer is refused at once, naming the lock holder
    if "$bin" "${args[@]}" > /dev/null 2> "$work/second.err"; then echo "second writer was not refused"; exit 1; fi
    grep -q "another process (pid $pid) is writing it" "$work/second.err" || { cat "$work/second.err"; exit 1; }
  fi
  sleep "$delay"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ -e "$out" ]; then
    complete || { echo "killed after ${delay}s: $out is half-written"; ls -R "$out"; exit 1; }
  fi
  echo "killed after ${delay}s: output $( [ -e "$out" ] && echo complete || echo absent)"
done
"$bin" "${args[@]}" > /dev/null
complete
# The killed runs' staging directories are removed by the next run (their processes are gone); the lock
# goes with the run that holds it.
left=$(cd "$work" && ls -A | grep -v '^out$\|^second.err$' || true)
[ -z "$left" ] || { echo "stale staging or lock left behind: $left"; exit 1; }
echo "kill writer OK"
