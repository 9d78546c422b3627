#!/usr/bin/env bash
# Fresh-machine tests: install dependencies, build, run the whole CTest suite (unit and
# end-to-end; tests that read ../shared/data skip themselves when it is absent).
# Extra arguments go to ctest, e.g. scripts/test.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd build
# Serially: tests that train use every core, and two OpenMP processes sharing the cores slow
# each other down many times over.
ctest --output-on-failure "$@"
