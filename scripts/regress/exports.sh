#!/usr/bin/env bash
# Exports every HF fixture (tests/fixtures/hf) and the demo's checkpoints with one headprune binary in
# each format it takes (HF, native, GGUF f32/q8_0, ONNX file, ONNX folder), keeping the files, stdout
# and exit code under OUT/exports: run with two binaries and compare with diff_outputs.py (files of
# .gguf/.onnx byte for byte). A format a model cannot be written in is kept as its refusal (rc != 0).
# Usage: exports.sh HEADPRUNE_BINARY OUT [CKPT_DIR]
set -uo pipefail
BIN=$1; OUT=$2/exports; C=${3:-}
FIX=$(cd "$(dirname "$0")/../../tests/fixtures/hf" && pwd)
mkdir -p "$OUT"
run() { local name=$1; shift; echo "== $name: $*" >&2; "$BIN" --threads 2 --log-level warn "$@" > "$OUT/$name.stdout" 2> "$OUT/$name.stderr"; echo "rc=$?" >> "$OUT/$name.stdout"; }
models=()
for d in "$FIX"/*/; do models+=("$(basename "$d")=$d"); done
if [ -n "$C" ]; then
  for m in encoder_decoder encoder_classifier decoder_lm; do models+=("demo_$m=$C/demo/$m/train/best"); done
fi
for entry in "${models[@]}"; do
  name=${entry%%=*}; dir=${entry#*=}
  run "${name}_hf" export "$dir" --hf "$OUT/$name/hf"
  run "${name}_native" export "$dir" --native "$OUT/$name/native"
  run "${name}_gguf" export "$dir" --gguf "$OUT/$name/model.gguf"
  run "${name}_gguf_q8" export "$dir" --gguf "$OUT/$name/model_q8_0.gguf" --dtype q8_0
  run "${name}_onnx" export "$dir" --onnx "$OUT/$name/model.onnx"
  run "${name}_onnx_dir" export "$dir" --onnx-dir "$OUT/$name/onnx_dir"
done
echo done >&2
