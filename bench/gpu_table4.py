#!/usr/bin/env python3
"""Michel et al.'s Table 4 on a GPU, from the runs of `scripts/gpu.sh table4`: one JSON with, per
precision (fp32, bf16) and batch size (length 128), headprune's time for the unpruned BERT-base
shape, 50 % of its heads masked, removed uniformly and removed as whole layers; the FLOP-ideal and
measured speedups; PyTorch eager's time on the same weights; and the ratio headprune / eager. Where
the run replayed the models from CUDA graphs too (headprune_graphs_<precision>.json), each model also
gets graphs_ms and graphs_measured_speedup, and the replayed logits are compared with the eager ones.
Prints the same as a Markdown table.

  python3 bench/gpu_table4.py WORK --out RESULTS.json
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "eager"))
from benchio import write_json  # noqa: E402

MODELS = ("base", "masked50", "uniform50", "layers50")


def model_key(path):
    for m in MODELS:
        if f"/{m}" in path:
            return m
    raise SystemExit(f"unknown model {path}")


def graphs_cell(row):
    b, u = row["base"], row["uniform50"]
    if "graphs_ms" not in b:
        return "-"
    return f"{b['graphs_ms']:.2f}, {u['graphs_ms']:.2f} (x{u['graphs_measured_speedup']:.2f})"


def graphs_logits_check(work):
    """The unpruned model's logits replayed from a CUDA graph against its eager ones (the --save-io
    files of the same inputs): the largest absolute difference, or None without the files."""
    a, b = os.path.join(work, "io_base.safetensors"), os.path.join(work, "io_graphs.safetensors")
    if not (os.path.exists(a) and os.path.exists(b)):
        return None
    from safetensors.torch import load_file  # the GPU machine's PyTorch image has it
    x, y = load_file(a), load_file(b)
    if not bool((x["input_ids"] == y["input_ids"]).all()):
        raise SystemExit("graphs check: the two --save-io files hold different inputs")
    d = (x["logits"].double() - y["logits"].double()).abs().max().item()
    return {"max_abs_diff": d, "within_1e-4": d <= 1e-4}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("work")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rows, env = [], {}
    for p in ("fp32", "bf16"):
        with open(os.path.join(args.work, f"headprune_{p}.json")) as f:
            hp = json.load(f)
        env["headprune"] = hp["environment"]
        env["reps"], env["warmup"] = hp["reps"], hp["warmup"]
        eager = {}
        for m in ("base", "uniform50", "layers50"):
            with open(os.path.join(args.work, f"eager_{p}_{m}.json")) as f:
                e = json.load(f)
            env["eager"] = e["environment"]
            for r in e["records"]:
                eager[(m, r["batch"])] = r["median_ms"]
        by = {}
        for r in hp["records"]:
            by[(model_key(r["model"]), r["batch"])] = r
        graphs = {}
        gpath = os.path.join(args.work, f"headprune_graphs_{p}.json")
        if os.path.exists(gpath):
            with open(gpath) as f:
                for r in json.load(f)["records"]:
                    graphs[(model_key(r["model"]), r["batch"])] = r
        for b in sorted({k[1] for k in by}):
            base = by[("base", b)]
            row = {"precision": p, "batch": b, "seq_len": base["seq_len"]}
            for m in MODELS:
                r = by[(m, b)]
                row[m] = {"median_ms": r["median_ms"], "p10_ms": r["p10_ms"], "p90_ms": r["p90_ms"],
                          "ideal_speedup": r["ideal_speedup"], "measured_speedup": r["measured_speedup"],
                          "paired_speedup": r["paired_speedup"], "heads": r["heads"],
                          "gpu_peak_mib": r.get("device_peak_mib", 0.0)}
                if (m, b) in graphs:
                    g = graphs[(m, b)]
                    row[m].update({"graphs_ms": g["median_ms"], "graphs_p10_ms": g["p10_ms"], "graphs_p90_ms": g["p90_ms"],
                                   "graphs_measured_speedup": g["measured_speedup"],
                                   "graphs_paired_speedup": g["paired_speedup"],
                                   "graphs_over_eager_headprune": g["median_ms"] / r["median_ms"]})
                if (m, b) in eager:
                    row[m]["eager_ms"] = eager[(m, b)]
                    row[m]["headprune_over_eager"] = r["median_ms"] / eager[(m, b)]
            rows.append(row)
    checks = {}
    for m in ("base", "uniform50", "layers50"):
        path = os.path.join(args.work, f"check_{m}.json")
        if os.path.exists(path):
            with open(path) as f:
                checks[m] = json.loads(f.read().strip().splitlines()[-1])
    graphs_check = graphs_logits_check(args.work)
    if graphs_check:
        checks["graphs"] = graphs_check
    out = {"study": "gpu_table4", "command": "bash scripts/gpu.sh table4", "environment": env,
           "logit_checks_fp32": checks, "rows": rows}
    write_json(args.out, out)
    print("| precision | batch | unpruned ms | eager ms | masked 50% ms | uniform 50% ms (ideal, measured, vs eager) "
          "| layers 50% ms (ideal, measured, vs eager) | CUDA graphs: unpruned ms, uniform 50% ms (measured) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        def cell(m):
            c = r[m]
            return (f"{c['median_ms']:.2f} (x{c['ideal_speedup']:.2f}, x{c['measured_speedup']:.2f}, "
                    f"{c.get('headprune_over_eager', float('nan')):.2f})")
        print(f"| {r['precision']} | {r['batch']} | {r['base']['median_ms']:.2f} | {r['base'].get('eager_ms', float('nan')):.2f} "
              f"| {r['masked50']['median_ms']:.2f} | {cell('uniform50')} | {cell('layers50')} | {graphs_cell(r)} |")


if __name__ == "__main__":
    main()
