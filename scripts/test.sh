#!/usr/bin/env bash
# Fresh-machine tests: install dependencies, build, run the whole CTest suite (unit and
# end-to-end; tests that read ../shared/data skip themselves when it is absent), then the library
# under ASan + UBSan and a short fixed-seed run of every parser fuzzer.
# Extra arguments go to ctest, e.g. scripts/test.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd build
# Serially: tests that train use every core, and two OpenMP processes sharing the cores slow
# each other down many times over.
ctest --output-on-failure "$@"
cd ..
# Installed as a library (a consumer built against the install) and as a Debian package
# (scripts/package_check.sh). HP_PACKAGE_CHECK=0 skips it.
if [ "${HP_PACKAGE_CHECK:-1}" != 0 ]; then bash scripts/package_check.sh; fi
# The sanitizer build (clang-14, ASan + UBSan): the unit tests (all but three slow training suites,
# which `scripts/fuzz.sh tests` adds), then every parser fuzzer for 4000 fixed-seed executions on its
# seed corpus (scripts/fuzz.sh, docs/reliability.md). HP_SANITIZERS=0 skips it.
if [ "${HP_SANITIZERS:-1}" != 0 ]; then bash scripts/fuzz.sh ci; fi
