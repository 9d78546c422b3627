#!/usr/bin/env bash
# Cost of the head-importance scorers as multiples of one forward pass and of one forward +
# backward pass (every parameter's gradient) over the same examples, measured side by side in
# one process (`headprune importance --cost`), repeated; prints the median of each ratio and
# writes the records as JSON. Gradient importance must stay within 1.3x a forward+backward pass.
#
#   bench/importance_cost.sh CHECKPOINT [OUT.json] [-- extra importance options]
#   e.g. bench/importance_cost.sh runs/sst2_heldout_s1200/seed1/train/best bench/results/importance_cost_sst2.json -- \
#          --config configs/sst2_heldout.json --split test
# Environment: HP=path/to/headprune (default build/headprune), REPEATS (default 3),
# THREADS (default 2), METHODS (default "gradient ablation lrp confidence output_norm").
set -euo pipefail
ckpt=${1:?usage: bench/importance_cost.sh CHECKPOINT [OUT.json] [-- importance options]}
shift
out=""
if [[ $# -gt 0 && $1 != "--" ]]; then out=$1; shift; fi
[[ $# -gt 0 && $1 == "--" ]] && shift
hp=${HP:-build/headprune}
repeats=${REPEATS:-3}
threads=${THREADS:-2}
methods=${METHODS:-gradient ablation lrp confidence output_norm}
margs=()
for m in $methods; do margs+=(--method "$m"); done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((r = 1; r <= repeats; r++)); do
  "$hp" --threads "$threads" --log-level warn importance "$ckpt" "${margs[@]}" --cost --json "$@" > "$tmp/run$r.json" 2> "$tmp/err$r.txt" \
    || { cat "$tmp/err$r.txt" >&2; exit 1; }
done
COMMAND="REPEATS=$repeats METHODS=\"$methods\" bench/importance_cost.sh $ckpt $out -- $*" \
python3 - "$tmp" "$repeats" "$threads" "$ckpt" "$out" <<'PY'
import json, os, statistics, subprocess, sys
tmp, repeats, threads, ckpt, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
runs = [json.load(open(os.path.join(tmp, f"run{r}.json"))) for r in range(1, repeats + 1)]
rows = {}
for run in runs:
    for m in run["maps"]:
        c = m["info"].get("cost")
        if c:
            rows.setdefault(m["method"], []).append(c)
env = {k: os.environ.get(k, "(unset)") for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
summary = {"command": os.environ["COMMAND"], "checkpoint": ckpt, "threads": threads, "repeats": repeats,
           "examples": runs[0]["maps"][0]["info"].get("examples"), "data": runs[0].get("data"), "blas_env": env,
           "forward_s": statistics.median(r[0]["forward_s"] for r in rows.values()),
           "forward_backward_s": statistics.median(r[0]["forward_backward_s"] for r in rows.values()), "methods": {}}
print(f"{'method':<14}{'x forward':>12}{'x fwd+bwd':>12}{'seconds':>10}   (median of {repeats}; "
      f"forward {summary['forward_s']:.3f} s, fwd+bwd {summary['forward_backward_s']:.3f} s)")
for m, cs in rows.items():
    xf = statistics.median(c["x_forward"] for c in cs)
    xfb = statistics.median(c["x_forward_backward"] for c in cs)
    sec = statistics.median(c["x_forward"] * c["forward_s"] for c in cs)
    summary["methods"][m] = {"x_forward": xf, "x_forward_backward": xfb, "seconds": sec,
                             "all_x_forward_backward": [c["x_forward_backward"] for c in cs]}
    print(f"{m:<14}{xf:>12.3f}{xfb:>12.3f}{sec:>10.3f}")
print("OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s" % (env["OPENBLAS_CORETYPE"], env["OPENBLAS_L2_SIZE"]))
if out:
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out + ".tmp", "w") as f:
        json.dump(summary, f, indent=2)
    os.replace(out + ".tmp", out)
    print("wrote", out)
g = summary["methods"].get("gradient")
if g and g["x_forward_backward"] > 1.3:
    print(f"FAIL: gradient importance costs {g['x_forward_backward']:.2f}x a forward+backward pass (target <= 1.3)")
    sys.exit(1)
PY
