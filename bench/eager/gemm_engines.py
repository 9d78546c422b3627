#!/usr/bin/env python3
"""OpenBLAS (torch.mm) against oneDNN's sgemm (libdnnl.so.2 through ctypes) on the products of a
Transformer's linear layers, x [M, K] times W [N, K]^T, at the given threads: the measurement behind
headprune's `auto` choice of fp32 engine (src/util/gemm.cc, docs/benchmarks.md).

  python3 bench/eager/gemm_engines.py --threads 2 --json bench/results/gemm_engines.json

Not part of the product. Median of 30 products after 3 warm-ups; both engines see the same arrays.
"""
import argparse
import ctypes
import json
import os
import time

import torch

from benchio import write_json


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    sgemm = ctypes.CDLL("libdnnl.so.2").dnnl_sgemm
    sgemm.argtypes = [ctypes.c_char, ctypes.c_char] + [ctypes.c_int64] * 3 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int64,
                                                                            ctypes.c_void_p, ctypes.c_int64, ctypes.c_float,
                                                                            ctypes.c_void_p, ctypes.c_int64]
    sgemm.restype = ctypes.c_int

    def median_s(fn):
        for _ in range(3):
            fn()
        ts = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return sorted(ts)[len(ts) // 2]

    rows = []
    for m in (32, 128, 512, 1024, 2048):
        for k, n in ((768, 2304), (768, 3072), (3072, 768), (256, 1024)):
            x, w, y = torch.randn(m, k), torch.randn(n, k), torch.empty(m, n)

            def onednn():
                assert sgemm(b"N", b"T", m, n, k, 1.0, x.data_ptr(), k, w.data_ptr(), k, 0.0, y.data_ptr(), n) == 0

            onednn()
            err = (y - x @ w.t()).abs().max().item()
            tb = median_s(lambda: torch.mm(x, w.t(), out=y))
            td = median_s(onednn)
            gflop = 2 * m * k * n / 1e9
            rows.append({"rows": m, "inner": k, "outputs": n, "openblas_ms": tb * 1e3, "onednn_ms": td * 1e3,
                         "openblas_gflop_per_s": gflop / tb, "onednn_gflop_per_s": gflop / td, "onednn_over_openblas": td / tb,
                         "max_abs_diff": err})
            print(f"{m:5d} x {k:4d} x {n:4d}: OpenBLAS {tb * 1e3:8.3f} ms  oneDNN {td * 1e3:8.3f} ms  ratio {td / tb:.2f}")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
    out = {"command": "python3 bench/eager/gemm_engines.py --threads %d --reps %d" % (a.threads, a.reps), "threads": a.threads,
           "reps": a.reps, "cpu": cpu, "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"), "torch": torch.__version__,
           "rows": rows}
    if a.json:
        write_json(a.json, out, indent=1)


if __name__ == "__main__":
    main()
