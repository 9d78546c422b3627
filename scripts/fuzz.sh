#!/usr/bin/env bash
# The sanitizer build (clang-14, ASan + UBSan, libFuzzer coverage) in ./build-fuzz: the unit tests and
# one libFuzzer harness per parser (fuzz/). Usage:
#   scripts/fuzz.sh build              configure and build
#   scripts/fuzz.sh tests [ctest args] the unit tests under ASan + UBSan (default: ctest -L unit)
#   scripts/fuzz.sh smoke [RUNS]       every harness for RUNS executions (default 4000) on the committed
#                                      corpus with a fixed seed: the same binary always tries the same
#                                      inputs, so a green run stays green and a finding always reproduces
#   scripts/fuzz.sh campaign SECONDS [HARNESS...]
#                                      a long run of each harness: SECONDS or HP_FUZZ_RUNS executions
#                                      (default 1000000), whichever comes first; new inputs go to
#                                      build-fuzz/corpus/NAME, findings to build-fuzz/findings/NAME;
#                                      a summary line per harness. HP_FUZZ_TIMEOUT (seconds, default 20)
#                                      raises the per-input limit on a busy machine
#   scripts/fuzz.sh ci                 what .ci/run runs: the build, the unit tests under the sanitizers
#                                      except the three suites that train for minutes under ASan (Jobs,
#                                      GateTraining, Families.DeadHeads: `scripts/fuzz.sh tests` runs
#                                      them too), then smoke
# Any crash, sanitizer report, leak of a foreign exception or unnamed error (fuzz/fuzz_util.h) exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bdir=$root/build-fuzz
harnesses=(safetensors model_config run_config plan importance hf_model tokenizer_json gpt2_bpe
           wordpiece tsv parallel conllu gzip figures sentencepiece hf_tokenizer)
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
export CCACHE_NOHASHDIR=1
# LibTorch's static registries are never freed: leak reports would be noise. Everything else aborts.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:detect_odr_violation=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

build() {  # [ON|OFF]: build the unit tests too (default ON)
  local tests=${1:-ON}
  if [ ! -f "$bdir/CMakeCache.txt" ]; then
    CXX=clang++-14 CC=clang-14 cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DHP_SANITIZE=address,undefined -DHP_FUZZ=ON -DHP_BUILD_TESTS="$tests" -DHP_BUILD_BENCH=OFF -DHP_PYTHON=OFF
  else
    cmake -S . -B "$bdir" -DHP_BUILD_TESTS="$tests" >/dev/null
  fi
  cmake --build "$bdir" --parallel "$(nproc)"
}

run_harness() {  # NAME SECONDS CORPUS_DIRS...
  local name=$1 secs=$2; shift 2
  local out=$bdir/findings/$name log=$bdir/logs/$name.log
  mkdir -p "$out" "$bdir/logs"
  local dict=()
  if [ -f "fuzz/dict/$name.dict" ]; then dict=(-dict="fuzz/dict/$name.dict"); fi
  local rc=0
  local runs=()
  if [ "$cmd" = campaign ]; then runs=(-runs="${HP_FUZZ_RUNS:-1000000}"); else runs=(-seed=1 -runs="$smoke_runs"); fi
  local t0=$SECONDS
  HP_FUZZ_TMP="${HP_FUZZ_TMP:-}" "$bdir/fuzz/fuzz_$name" -max_total_time="$secs" "${runs[@]}" -rss_limit_mb=2048 \
    -malloc_limit_mb=1024 -max_len=65536 -timeout="${HP_FUZZ_TIMEOUT:-20}" -print_final_stats=1 -artifact_prefix="$out/" \
    "${dict[@]}" "$@" >"$log" 2>&1 || rc=$?
  local execs cov
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 | grep -o '[0-9]*' || echo "?")
  printf '%-15s rc=%d executions=%s coverage=%s seconds=%d (%s)\n' "$name" "$rc" "$execs" "$cov" $((SECONDS - t0)) "$log"
  if [ "$rc" -ne 0 ]; then
    grep -E 'FINDING|ERROR|SUMMARY|runtime error' "$log" | head -n 5 >&2 || true
    return 1
  fi
}

# Suites that train models for a minute or more under ASan; CI leaves them to the ordinary build.
slow_under_asan='Jobs|GateTraining|Families[.]DeadHeads'

cmd=${1:-ci}; shift || true
case "$cmd" in
  build) build ;;
  tests)
    build
    cd "$bdir"
    if [ $# -eq 0 ]; then set -- -L unit; fi
    ctest --output-on-failure "$@" ;;
  smoke|campaign)
    if [ "$cmd" = smoke ]; then smoke_runs=${1:-4000}; secs=600; else secs=${1:-1800}; fi
    shift || true
    if [ $# -gt 0 ]; then harnesses=("$@"); fi
    failed=0
    for h in "${harnesses[@]}"; do
      # libFuzzer adds what it finds to the first directory: never the committed seed corpus.
      if [ "$cmd" = campaign ]; then
        mkdir -p "$bdir/corpus/$h"
        dirs=("$bdir/corpus/$h" "fuzz/corpus/$h")
      else
        rm -rf "$bdir/smoke-corpus/$h" && mkdir -p "$bdir/smoke-corpus/$h"
        dirs=("$bdir/smoke-corpus/$h" "fuzz/corpus/$h")
      fi
      run_harness "$h" "$secs" "${dirs[@]}" || failed=1
    done
    exit $failed ;;
  ci)
    build
    (cd "$bdir" && ctest --output-on-failure -L unit -E "^(${slow_under_asan})\$")
    "$0" smoke ;;
  *) echo "usage: scripts/fuzz.sh build|tests|smoke [RUNS]|campaign SECONDS [HARNESS...]|ci" >&2; exit 2 ;;
esac
