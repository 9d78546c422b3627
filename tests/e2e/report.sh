#!/usr/bin/env bash
# headprune plot and report end to end, on the demo's encoder classifier (the e2e demo fixture):
# importance, a pruning curve, gates, a pruned model and a bench file are written, then
#   - `plot` draws every figure as SVG (valid XML), PNG and PDF, with its gnuplot program;
#   - `report` writes one HTML page; headless Chromium renders it: the screenshot is not blank and
#     the page's own check counts every figure drawn (naturalWidth > 0) against the figures present;
#   - a result of the wrong kind, of a newer version, or not a result at all is refused, naming the file.
#   tests/e2e/report.sh HEADPRUNE E2E_DIR   (E2E_DIR holds demo/ from the e2e_demo test)
set -euo pipefail
hp=$1
e2e=$(cd "$2" && pwd)
w=$e2e/report
rm -rf "$w"
mkdir -p "$w/run"
C=$e2e/demo/encoder_classifier/train/best
h() { "$hp" --threads 2 --log-level warn "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

h importance "$C" --method gradient --method ablation --method confidence --out "$w/run/importance" > /dev/null
h curve "$C" --strategy gradient --strategy random:uniform --fractions 0 0.25 0.5 0.75 --out "$w/run/curve" > /dev/null
h gates "$C" --method hard_concrete --coef 0.05 --steps 100 --period 25 --out "$w/run/gates" > /dev/null
h prune "$C" --strategy score --method gradient --target 0.5 --out "$w/run/p50" > /dev/null
h bench "$C" "$w/run/p50/model" "$w/run/gates/model" --batch 1 --batch 4 --seq 16 --reps 3 --warmup 1 \
  --no-gemm-probe --json "$w/run/bench.json" > /dev/null

# plot: every figure in three formats
h plot "$w/run/importance/importance.json" "$w/run/curve/curve.json" "$w/run/gates/gates.json" \
  "$w/run/p50/summary.json" "$w/run/bench.json" "$e2e/demo/encoder_classifier/train/history.json" \
  --format svg --format png --format pdf --out "$w/figs" > "$w/plot.txt"
/usr/bin/python3 - "$w/figs" <<'PY'
import json, os, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
figs = json.load(open(os.path.join(d, "figures.json")))["figures"]
names = sorted(f["name"] for f in figs)
want = ["bench", "curve", "gates", "history", "importance_ablation", "importance_confidence", "importance_gradient", "pareto"]
assert names == want, names
for f in figs:
    n = f["name"]
    root = ET.parse(os.path.join(d, n + ".svg")).getroot()   # valid XML or this throws
    assert root.tag.endswith("svg"), (n, root.tag)
    assert len(list(root.iter())) > 50, (n, "too few SVG elements")
    png = open(os.path.join(d, n + ".png"), "rb").read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000, (n, len(png))
    assert open(os.path.join(d, n + ".pdf"), "rb").read(5) == b"%PDF-", n
    assert os.path.getsize(os.path.join(d, n + ".gp")) > 100, n
print("plot: %d figures, SVG/PNG/PDF/gp each" % len(figs))
PY

# report: the run written above and the demo's run directory, compared
h report "$w/run" "$e2e/demo/encoder_classifier" --out "$w/report.html" > "$w/report.txt"
grep -q "figures" "$w/report.txt" || fail "report printed no summary"
! grep -qE 'src="(http|https|file):|<link |<script src' "$w/report.html" || fail "report.html refers to outside files"
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || fail "chromium not found (scripts/setup.sh installs it)"
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run --disable-dev-shm-usage
       --user-data-dir="$w/chromium-profile")
"$browser" "${flags[@]}" --window-size=1280,4000 --screenshot="$w/report.png" "file://$w/report.html" > "$w/chromium.log" 2>&1 ||
  fail "chromium screenshot failed: $(tail -3 "$w/chromium.log")"
[ -s "$w/report.png" ] || fail "chromium wrote no screenshot: $(grep -v dbus "$w/chromium.log" | tail -3)"
"$browser" "${flags[@]}" --virtual-time-budget=10000 --dump-dom "file://$w/report.html" > "$w/dom.html" 2>> "$w/chromium.log" ||
  fail "chromium --dump-dom failed"
/usr/bin/python3 - "$w/report.html" "$w/dom.html" "$w/report.png" <<'PY'
import re, sys
from PIL import Image
html, dom, shot = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
n = len(re.findall(r"<figure ", html))
assert n >= 9, "only %d figures in the report" % n
m = re.search(r'data-figures="(\d+)/(\d+)"', dom)
assert m, "the page's figure check did not run"
drawn, total = int(m.group(1)), int(m.group(2))
assert total == n and drawn == n, "browser drew %d of %d figures (%d in the HTML)" % (drawn, total, n)
img = Image.open(shot).convert("RGB")
w, h = img.size
small = img.resize((w // 4, h // 4))
px = list(small.getdata())
non_white = sum(1 for p in px if sum(p) < 720) / len(px)
colours = len(set(px))
assert non_white > 0.03, "screenshot is blank (%.4f non-white)" % non_white
assert colours > 50, "screenshot has only %d colours" % colours
print("report: %d figures drawn by chromium; screenshot %dx%d, %.1f%% non-white, %d colours" % (n, w, h, 100 * non_white, colours))
PY

# a pointer into a larger JSON
/usr/bin/python3 -c "import json,sys; json.dump({'study': {'curve': json.load(open(sys.argv[1]))}}, open(sys.argv[2], 'w'))" \
  "$w/run/curve/curve.json" "$w/study.json"
h plot "$w/study.json#/study/curve" --kind curve --format svg --out "$w/figs_ptr" > /dev/null
[ -f "$w/figs_ptr/curve.svg" ] || fail "no curve from a JSON pointer"

# refusals name the file
expect_error() {  # expect_error PATTERN ARGS...
  local pat=$1; shift
  if h "$@" > "$w/err.out" 2> "$w/err.txt"; then fail "accepted: $*"; fi
  grep -q -- "$pat" "$w/err.txt" || fail "error for '$*' lacks '$pat': $(cat "$w/err.txt")"
  echo "refused: $(head -1 "$w/err.txt")"
}
expect_error "curve.json: expected a headprune importance result" plot "$w/run/curve/curve.json" --kind importance --out "$w/x1"
sed 's#"headprune-curve/1"#"headprune-curve/99"#' "$w/run/curve/curve.json" > "$w/newer.json"
expect_error "newer.json: format headprune-curve/99 is not readable" plot "$w/newer.json" --out "$w/x2"
expect_error "config.json: not a headprune result" plot "$C/config.json" --out "$w/x3"
echo '{"maps": [' > "$w/broken.json"
expect_error "broken.json: not valid JSON" plot "$w/broken.json" --out "$w/x4"
expect_error "study.json#/nope: nothing at /nope" plot "$w/study.json#/nope" --out "$w/x5"
[ ! -e "$w/x1" ] && [ ! -e "$w/x2" ] || fail "a refused plot left an output directory"
echo "report OK"
