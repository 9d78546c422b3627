#!/usr/bin/env bash
# Fresh-machine demo: install dependencies, build, and run `headprune demo` on the
# built-in synthetic task (no data files needed). Extra arguments go to `headprune demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
./build/headprune demo --out runs/demo --json runs/demo/summary.json "$@"
echo "[demo] pruned checkpoints in runs/demo/; try: ./build/headprune info runs/demo/encoder_decoder/pruned/model" >&2
