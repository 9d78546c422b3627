#!/usr/bin/env python3
"""headprune against PyTorch eager (bench/eager/eager.py) on the same weights, shapes, threads and BLAS
kernels, in one run: checks that both compute the same logits, then times both in alternating rounds
(headprune, eager, headprune, eager, ...) and reports each shape's median ratio.

  python3 bench/eager/compare.py                       # BERT-base, inference, batch 1/4/16/64 x 32/128
  python3 bench/eager/compare.py --train --checkpoint runs/sst2_shape --batch 32 --seq 64
  python3 bench/eager/compare.py --json bench/results/eager_bert_base.json

The headprune binary runs as users run it (it may restart itself with better OpenBLAS kernels,
src/util/blas.cc); eager.py gets exactly the OPENBLAS_CORETYPE that headprune reports it ran with,
so both use the same kernels. Nothing here is part of the product.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from benchio import write_json

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3"  # Debian's, with python3-torch


def run(cmd, env=None):
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--headprune", default=os.path.join(ROOT, "build", "headprune"))
    ap.add_argument("--checkpoint", help="default: a random-weight BERT-base (configs/bert_base.json), made once")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--seq", type=int, nargs="+", default=[32, 128])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds of both")
    ap.add_argument("--train", action="store_true", help="training steps instead of inference")
    ap.add_argument("--json", help="write the comparison here")
    args = ap.parse_args()

    hp = args.headprune
    ckpt = args.checkpoint or os.path.join(ROOT, "runs", "bert_base", "base")
    if not args.checkpoint and not os.path.exists(os.path.join(ckpt, "model.safetensors")):
        run([hp, "--seed", "1", "init", "--config", os.path.join(ROOT, "configs", "bert_base.json"), "--out", ckpt])
    common = ["--batch", *map(str, args.batch), "--seq", *map(str, args.seq), "--reps", str(args.reps),
              "--warmup", str(args.warmup)]
    mode = ["--train"] if args.train else []
    with tempfile.TemporaryDirectory() as tmp:
        io = os.path.join(tmp, "io.safetensors")
        run([hp, "--threads", str(args.threads), "bench", ckpt, "--batch", str(args.batch[0]), "--seq", str(args.seq[0]),
             "--reps", "1", "--warmup", "0", "--no-gemm-probe", "--save-io", io, "--json", os.path.join(tmp, "c.json")])
        env_hp = json.load(open(os.path.join(tmp, "c.json")))["environment"]
        # The kernel set headprune ran with, for eager too ("core=NAME" in its BLAS description).
        core = [w.split("=", 1)[1].rstrip(",") for w in env_hp["blas"].split() if w.startswith("core=")]
        env = dict(os.environ)
        if core:
            env["OPENBLAS_CORETYPE"] = core[0]
        check = json.loads(run([PY, os.path.join(ROOT, "bench", "eager", "eager.py"), ckpt, "--check", io, "--batch", "1",
                                "--seq", str(args.seq[0]), "--reps", "1", "--warmup", "0",
                                "--threads", str(args.threads)], env=env).stdout.splitlines()[0])
        print(f"same logits: max |diff| {check['max_abs_diff']:.2e} (largest logit {check['max_abs_logit']:.3f})", file=sys.stderr)
        rounds = []
        for r in range(args.rounds):
            hj, ej = os.path.join(tmp, f"hp{r}.json"), os.path.join(tmp, f"eager{r}.json")
            run([hp, "--threads", str(args.threads), "bench", ckpt, *common, *mode, "--json", hj])
            run([PY, os.path.join(ROOT, "bench", "eager", "eager.py"), ckpt, *common, *mode, "--threads", str(args.threads),
                 "--json", ej], env=env)
            rounds.append((json.load(open(hj)), json.load(open(ej))))
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    rows = []
    for t in args.seq:
        for b in args.batch:
            def pick(recs):
                return next(x for x in recs["records"] if x["batch"] == b and x["seq_len"] == t)
            h = [pick(hpj)["median_ms"] for hpj, _ in rounds]
            e = [pick(ej)["median_ms"] for _, ej in rounds]
            ratios = [a / c for a, c in zip(h, e)]
            rec = pick(rounds[0][0])
            rows.append({"batch": b, "seq_len": t, "headprune_ms": statistics.median(h), "eager_ms": statistics.median(e),
                         "ratio": statistics.median(ratios), "ratios": ratios, "gflops": rec["gflops"],
                         "headprune_gflop_per_s": rec["gflops"] / (statistics.median(h) / 1000),
                         "eager_gflop_per_s": rec["gflops"] / (statistics.median(e) / 1000)})
    out = {"checkpoint": ckpt, "mode": "train" if args.train else "inference", "threads": args.threads,
           "logits_check": check, "environment": rounds[0][0]["environment"],
           "gemm_peak_gflop_per_s": rounds[0][0]["environment"].get("gemm_peak_gflop_per_s"),
           "eager_environment": rounds[0][1]["environment"], "reps": args.reps, "rounds": args.rounds, "rows": rows}
    print(f"{out['environment']['cpu']}; {args.threads} threads; {out['environment']['blas']}")
    print(f"GEMM probe {out['gemm_peak_gflop_per_s']:.1f} GFLOP/s; {out['mode']}; median of {args.rounds} alternating rounds")
    print("| batch | seq | headprune ms | eager ms | headprune / eager | headprune GFLOP/s | eager GFLOP/s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['batch']} | {r['seq_len']} | {r['headprune_ms']:.2f} | {r['eager_ms']:.2f} | {r['ratio']:.3f} | "
              f"{r['headprune_gflop_per_s']:.1f} | {r['eager_gflop_per_s']:.1f} |")
    if args.json:
        write_json(args.json, out)


if __name__ == "__main__":
    main()
