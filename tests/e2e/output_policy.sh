#!/usr/bin/env bash
# The output policy (docs/reliability.md, "What a command writes") end to end: every subcommand that
# writes runs against the places a user's bytes may be — an existing directory of theirs, siblings
# named OUT.old / OUT.tmp / OUT.partial / OUT.lock, the command's own input, a path inside it, a
# device, a FIFO, a symbolic link, a read-only and a full file system (small tmpfs mounts, when this
# process may mount; skipped otherwise) — and checks each time that the command exits non-zero, its
# error names the path, and no byte of the user's files changed. Then each writes where it may, and the
# user's siblings are still intact.
# Usage: output_policy.sh HEADPRUNE_BINARY FIXTURES_DIR WORK_DIR
set -uo pipefail
bin=$1
fixtures=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
fail=0
h() { "$bin" --threads 1 --log-level error "$@"; }

# The user's files: a directory of theirs, the siblings, a link to their file, a FIFO, a checkpoint and
# result files the commands read. Their fingerprint: every entry with its type and bytes.
u=$work/user
mkdir -p "$u/mine"
echo "years of work" > "$u/mine/thesis.tex"
echo "notes" > "$u/notes.json"
ln -s "$u/notes.json" "$u/link"
ln -s "$u/mine" "$u/dirlink"
mkfifo "$u/fifo"
h init --config "$fixtures/tiny_bert.json" --out "$u/ckpt" > /dev/null || { echo "setup: init failed"; exit 1; }
h importance "$u/ckpt" --method magnitude --out "$u/imp" > /dev/null || { echo "setup: importance failed"; exit 1; }
h bench "$u/ckpt" --batch 1 --seq 8 --reps 1 --warmup 0 --json "$u/bench.json" > /dev/null || { echo "setup: bench failed"; exit 1; }
for name in out file; do
  for s in .old .tmp .partial .lock; do mkdir -p "$u/$name$s"; echo "user $s" > "$u/$name$s/keep.txt"; done
done
fingerprint() {
  (cd "$u" && find . -mindepth 1 \( -type p -printf 'fifo %p\n' \) -o \( -type l -printf 'link %p -> %l\n' \) \
     -o \( -type d -printf 'dir %p\n' \) -o \( -type f -printf 'file %p ' -exec sha256sum {} \; \) | sort)
  stat -c 'dev %F %n' /dev/null
}
baseline=$(fingerprint)

# expect_refused LABEL PATH_IN_ERROR COMMAND...: non-zero exit, the path named, nothing of the user's changed.
expect_refused() {
  local label=$1 path=$2
  shift 2
  local err rc
  err=$(h "$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -eq 0 ]; then echo "FAIL $label: exit 0 (expected a refusal)"; fail=1; fi
  if ! grep -qF -- "$path" <<<"$err"; then echo "FAIL $label: the error does not name $path: $err"; fail=1; fi
  if grep -q "frame #\|std::bad_alloc\|terminate called" <<<"$err"; then echo "FAIL $label: crash-like error: $err"; fail=1; fi
  if [ "$(fingerprint)" != "$baseline" ]; then
    echo "FAIL $label: the user's files changed"; diff <(echo "$baseline") <(fingerprint) | head; fail=1
    baseline=$(fingerprint)
  fi
}

C=$u/ckpt
# The writers of output directories: NAME and the command with OUT where the output goes, and what
# each reads (IN).
declare -A dir_cmds=(
  [init]="init --config $fixtures/tiny_bert.json --out OUT"
  [train]="train --family encoder_classifier --max-steps 2 --eval-every 2 --out OUT"
  [prune]="prune $C --strategy random --target 0.5 --synthetic 8 --out OUT"
  [curve]="curve $C --strategy random:uniform --fractions 0 0.5 --synthetic 8 --out OUT"
  [gates]="gates $C --method hard_concrete --coef 0.05 --steps 2 --period 1 --synthetic 8 --synthetic-train 16 --out OUT"
  [importance]="importance $C --method magnitude --out OUT"
  [roles]="roles $C --out OUT"
  [export_hf]="export $C --hf OUT"
  [export_native]="export $C --native OUT"
  [plot]="plot $u/imp/importance.json --format svg --out OUT"
  [demo]="demo --family encoder_classifier --train-steps 2 --finetune-steps 1 --out OUT"
)
declare -A dir_inputs=([prune]=$C [curve]=$C [gates]=$C [importance]=$C [roles]=$C [export_hf]=$C
                       [export_native]=$C [plot]=$u/imp/importance.json)
for name in $(printf '%s\n' "${!dir_cmds[@]}" | sort); do
  cmd=${dir_cmds[$name]}
  in=${dir_inputs[$name]:-}
  run() { local out=$1; shift; expect_refused "$name ${*:-} -> $out" "$out" ${cmd//OUT/$out} "$@"; }
  run "$u/mine"                       # a user's directory ...
  run "$u/mine" --overwrite           # ... even with --overwrite
  if [ -n "$in" ]; then
    run "$in"                         # the command's own input
    run "$in" --overwrite
    run "$in/sub"                     # a path inside it
  fi
  run "$u/dirlink" --overwrite        # a symbolic link to a directory
  run "$u/link" --overwrite           # a symbolic link to a file
  run "$u/fifo" --overwrite           # a FIFO
  run "/dev/null" --overwrite         # a device
  run "$u/notes.json" --overwrite     # a regular file
  if [ "$name" = importance ]; then run "$C" --overwrite; else run "$u/imp" --overwrite; fi  # another kind of output
  run "$u" --overwrite                # a directory holding the input (or a user's directory)
done
# The inputs of issue 50 that a sibling's name once destroyed: they are read, and stay.
sib=$work/sib
mkdir -p "$sib"
cp -r "$C" "$sib/model.old"
cp -r "$C" "$sib/ck2.partial"
sums() { (cd "$sib" && find model.old ck2.partial -type f -exec sha256sum {} \; | sort); }
before=$(sums)
h export "$sib/model.old" --native "$sib/model" > /dev/null || { echo "FAIL export model.old --native model"; fail=1; }
h prune "$sib/ck2.partial" --strategy random --target 0.5 --synthetic 8 --out "$sib/ck2" > /dev/null ||
  { echo "FAIL prune ck2.partial --out ck2"; fail=1; }
[ "$(sums)" = "$before" ] || { echo "FAIL: model.old or ck2.partial changed"; fail=1; }
# Inputs nested the other way: the output holds what the command reads.
expect_refused "export --hf X --native X" "$work/x" export "$C" --hf "$work/x" --native "$work/x"

# Single-file outputs.
declare -A file_cmds=(
  [bench_json]="bench $C --batch 1 --seq 8 --reps 1 --warmup 0 --json FILE"
  [bench_io]="bench $C --batch 1 --seq 8 --reps 1 --warmup 0 --save-io FILE"
  [bench_profile]="bench $C --batch 1 --seq 8 --reps 1 --warmup 0 --profile FILE"
  [eval_hyps]="eval $C --synthetic 8 --hyps FILE"
  [demo_json]="demo --family encoder_classifier --train-steps 2 --finetune-steps 1 --out $work/demo_out --json FILE"
  [report]="report $u/imp --out FILE"
)
for name in $(printf '%s\n' "${!file_cmds[@]}" | sort); do
  cmd=${file_cmds[$name]}
  run() { local f=$1; shift; expect_refused "$name ${*:-} -> $f" "$f" ${cmd//FILE/$f} "$@"; }
  run "$u/notes.json"                 # a user's file
  run "$u/link"                       # a symbolic link
  run "$u/fifo"                       # a FIFO
  run "/dev/null"                     # a device
  run "$u/mine"                       # a directory
  run "$C/model.safetensors"          # the command's own input (bench, eval, report read it)
  [ "$name" = bench_json ] || run "$u/bench.json"  # a headprune result of another kind
done

# Read-only and full file systems, where a tmpfs can be mounted here.
ro=$work/ro full=$work/full
mkdir -p "$ro" "$full"
if mount -t tmpfs -o size=1m tmpfs "$ro" 2>/dev/null && mount -o remount,ro "$ro" && mount -t tmpfs -o size=16k tmpfs "$full"; then
  expect_refused "prune -> read-only" "$ro/out" prune "$C" --strategy random --target 0.5 --synthetic 8 --out "$ro/out"
  expect_refused "bench --json -> read-only" "$ro/b.json" bench "$C" --batch 1 --seq 8 --reps 1 --warmup 0 --json "$ro/b.json"
  expect_refused "train -> read-only" "$ro/run" train --family encoder_classifier --max-steps 2 --out "$ro/run"
  # The checkpoint (~40 kB of weights) and a large profile do not fit in 16 kB.
  expect_refused "export -> full" "$full/ck" export "$C" --native "$full/ck"
  expect_refused "prune -> full" "$full/p" prune "$C" --strategy random --target 0.5 --synthetic 8 --out "$full/p"
  expect_refused "bench --profile -> full" "$full/t.json" bench "$C" --batch 1 2 4 --seq 8 16 32 --reps 20 --warmup 0 --profile "$full/t.json"
  left=$(ls -A "$full")
  [ -z "$left" ] || { echo "FAIL full file system: left behind: $left"; fail=1; }
  umount "$ro" "$full"
else
  echo "read-only and full file systems: skipped (cannot mount a tmpfs here)"
  umount "$ro" 2>/dev/null || true
fi

# Where each may write: a fresh path beside the user's siblings (twice: the second replaces its own
# earlier output, with --overwrite where the command is a directory writer).
for name in $(printf '%s\n' "${!dir_cmds[@]}" | sort); do
  [ "$name" = roles ] && continue  # needs a model with a tokenizer and the treebank
  cmd=${dir_cmds[$name]}
  for round in 1 2; do
    extra=""; [ $round = 2 ] && extra=--overwrite
    if ! h ${cmd//OUT/$u/out} $extra > /dev/null 2> "$work/err"; then
      echo "FAIL $name round $round: $(cat "$work/err")"; fail=1
    fi
  done
  [ -f "$u/out/.headprune-output" ] || { echo "FAIL $name: no marker in its output"; fail=1; }
  rm -rf "$u/out"
done
for name in $(printf '%s\n' "${!file_cmds[@]}" | sort); do
  cmd=${file_cmds[$name]}
  for round in 1 2; do
    extra=""; [ "$name" = eval_hyps ] && [ $round = 2 ] && extra=--overwrite  # plain text: replaced on request
    if ! h ${cmd//FILE/$u/file} $extra > /dev/null 2> "$work/err"; then
      echo "FAIL $name round $round: $(cat "$work/err")"; fail=1
    fi
  done
  rm -rf "$u/file" "$work/demo_out"
done
if [ "$(fingerprint)" != "$baseline" ]; then echo "FAIL: the user's files changed"; diff <(echo "$baseline") <(fingerprint) | head; fail=1; fi
leftover=$(cd "$u" && ls -A | grep headprune || true)
[ -z "$leftover" ] || { echo "FAIL: scratch or locks left behind: $leftover"; fail=1; }
[ $fail = 0 ] && echo "output policy OK"
exit $fail
