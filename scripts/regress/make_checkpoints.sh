#!/usr/bin/env bash
# Trains the checkpoints that outputs.sh runs on, with one headprune binary (the older one of a
# comparison): the demo's three synthetic models (150 steps) and a small SST-2 classifier.
# Usage: make_checkpoints.sh HEADPRUNE_BINARY CKPT_DIR [DATA_ROOT]
set -euo pipefail
bin=$1
ckpt=$2
data=${3:-$(cd "$(dirname "$0")/../../.." && pwd)/shared/data}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$ckpt"
"$bin" --threads 2 --log-level warn demo --train-steps 150 --finetune-steps 40 --out "$ckpt/demo" > /dev/null
"$bin" --threads 2 --log-level warn train --config "$here/sst2_small.json" --data-root "$data" --out "$ckpt/sst2" > /dev/null
echo "checkpoints in $ckpt"
