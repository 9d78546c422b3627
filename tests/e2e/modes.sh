# Sourced by the scripts under tests/e2e that hold several tests: their arguments are
# MODE HEADPRUNE E2E_DIR, MODE being the test's name without e2e_ (tests/CMakeLists.txt).
# Sets mode, hp and e2e; unknown_mode ends a script given a MODE it does not have.

# By a signal, not an exit code: CTest counts a crash as a failure even for a test that must fail
# (WILL_FAIL), so a wrong call cannot pass as the expected error.
bad_call() {
  echo "$0: $*" >&2
  kill -s ABRT $$
}
unknown_mode() { bad_call "unknown mode '$mode'"; }

[ $# -eq 3 ] || bad_call "usage: $0 MODE HEADPRUNE E2E_DIR"
mode=$1
hp=$2
e2e=$3
