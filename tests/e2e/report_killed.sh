#!/usr/bin/env bash
# A killed `report` leaves nothing in the temp directory (issue 50, 7b): it draws its figures into a
# scratch directory of its own beside the page (.OUT.headprune-figures.PID.RANDOM), which the next report
# to OUT removes. The "gnuplot" here kills the
# report that runs it (SIGKILL: no handler runs, as with kill -9 or the OOM killer).
#   tests/e2e/report_killed.sh HEADPRUNE WORK_DIR
set -euo pipefail
hp=$1
w=$2
rm -rf "$w"
mkdir -p "$w/run" "$w/tmp"
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > "$w/run/history.json" <<'JSON'
[{"step": 1, "train_loss": 2.0, "loss": 2.1, "accuracy": 0.5},
 {"step": 2, "train_loss": 1.5, "loss": 1.8, "accuracy": 0.6}]
JSON
printf '#!/bin/sh\nkill -KILL "$PPID"\n' > "$w/killer.sh"
chmod +x "$w/killer.sh"

if TMPDIR="$w/tmp" HP_GNUPLOT="$w/killer.sh" "$hp" report "$w/run" --out "$w/report.html" > "$w/killed.txt" 2>&1; then
  fail "the report was not killed"
fi
[ -z "$(ls -A "$w/tmp")" ] || fail "a killed report left files in TMPDIR: $(ls -A "$w/tmp")"
[ ! -e "$w/report.html" ] || fail "a killed report left a page"
ls -d "$w"/.report.html.headprune-figures.* > /dev/null 2>&1 || fail "the killed report's figures are not beside the page"

TMPDIR="$w/tmp" "$hp" report "$w/run" --out "$w/report.html" > /dev/null
[ -s "$w/report.html" ] || fail "the next report wrote no page"
grep -q '<figure ' "$w/report.html" || fail "the next report has no figure"
left=$(cd "$w" && ls -A | grep headprune || true)
[ -z "$left" ] || fail "the killed report's scratch or lock survived the next report: $left"
[ -z "$(ls -A "$w/tmp")" ] || fail "report left files in TMPDIR: $(ls -A "$w/tmp")"
echo "report_killed OK"
