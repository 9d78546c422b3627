#!/usr/bin/env bash
# OpenBLAS kernel selection at start-up (src/util/blas.cc):
#  1. a user's OPENBLAS_CORETYPE is never overridden (Haswell set -> Haswell runs);
#  2. with the variable unset, what runs is at the CPU's level, and the log says why;
#  3. a core below what the CPU supports is replaced by restarting with better kernels (simulated with
#     HP_BLAS_TREAT_AS_DETECTED=1: a preset Prescott stands for OpenBLAS's own generic choice), and
#     HP_BLAS_AUTO=0 turns that off with a warning;
#  4. the choice is the launcher's (headprune, cli/start.cc), and headprune-core started directly makes
#     the same choice by restarting itself; a launcher without its program says where it looked.
# Usage: blas_kernels.sh HEADPRUNE_BINARY FIXTURES_DIR WORK_DIR
set -euo pipefail
bin=$1; fixtures=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
run() {  # the [blas] log line of one command, under the environment given as arguments
  env "$@" "${exe:-$bin}" --threads 1 --log-level info init --config "$fixtures/tiny_model.json" --overwrite \
    --out "$work/m" 2>&1 >/dev/null | grep '\[blas\]'
}

line=$(run OPENBLAS_CORETYPE=Haswell)
echo "$line"
grep -q "OpenBLAS runs Haswell kernels: OPENBLAS_CORETYPE=Haswell was set by the user" <<<"$line"

line=$(run -u OPENBLAS_CORETYPE)
echo "$line"
grep -q "OpenBLAS runs .* kernels, its own choice for this CPU\|chosen by headprune" <<<"$line"
level=$(grep -o 'CPU ([a-z0-9]*' <<<"$line" | grep -o 'avx512\|avx2\|avx\|sse3' || true)
echo "CPU level: ${level:-unknown}"

case "$level" in
  avx512) want="SkylakeX" ;;
  avx2) want="Haswell" ;;
  avx) want="Sandybridge" ;;
  *) want="" ;;
esac
if [ -n "$want" ]; then
  line=$(run OPENBLAS_CORETYPE=Prescott HP_BLAS_TREAT_AS_DETECTED=1)
  echo "$line"
  grep -q "OpenBLAS runs $want kernels, chosen by headprune: OpenBLAS picked Prescott on this CPU ($level" <<<"$line"
  line=$(run OPENBLAS_CORETYPE=Prescott HP_BLAS_TREAT_AS_DETECTED=1 HP_BLAS_AUTO=0)
  echo "$line"
  grep -q "OpenBLAS runs Prescott kernels on a CPU with $level; $want would be faster" <<<"$line"
  grep -q "HP_BLAS_AUTO=0 keeps headprune from choosing" <<<"$line"
  line=$(exe="$(dirname "$bin")/headprune-core" run OPENBLAS_CORETYPE=Prescott HP_BLAS_TREAT_AS_DETECTED=1)
  echo "headprune-core: $line"
  grep -q "OpenBLAS runs $want kernels, chosen by headprune: OpenBLAS picked Prescott on this CPU ($level" <<<"$line"
fi
mkdir -p "$work/alone"
cp "$bin" "$work/alone/headprune"
if "$work/alone/headprune" --version > "$work/alone.txt" 2>&1; then echo "a launcher without headprune-core ran"; exit 1; fi
cat "$work/alone.txt"
grep -q "headprune-core is neither at $work/alone/headprune-core nor at" "$work/alone.txt"
echo "blas kernels OK"
