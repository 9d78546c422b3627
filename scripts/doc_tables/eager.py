"""bench/results/blas_kernels.json, eager_bert_base.json, eager_bert_base_openblas.json,
eager_train_sst2.json and eager_train_sst2_openblas.json (bench/cpu_speed.sh, bench/eager/compare.py):
headprune against PyTorch eager, and the OpenBLAS kernel sets.

docs/benchmarks.md: cpu_kernel_sets, eager_inference, eager_training.
"""
import re

from .core import fmt, load, table


KERNELS = "bench/results/blas_kernels.json"
EAGER = "bench/results/eager_bert_base.json"
EAGER_OPENBLAS = "bench/results/eager_bert_base_openblas.json"
TRAIN = "bench/results/eager_train_sst2.json"
TRAIN_OPENBLAS = "bench/results/eager_train_sst2_openblas.json"


def linear_engine(fp32_gemm):
    return "OpenBLAS" if fp32_gemm.startswith("OpenBLAS") else "auto"


@table("cpu_kernel_sets", KERNELS)
def cpu_kernel_sets():
    """The fp32 GEMM probe and a BERT-base forward under each OPENBLAS_CORETYPE (bench/cpu_speed.sh)."""
    k = load(KERNELS)
    lines = ["| `OPENBLAS_CORETYPE` | linear layers | kernels that ran | probe GFLOP/s | BERT-base 16 × 128 ms "
             "| model GFLOP/s | share of best peak |",
             "|---|---|---|---:|---:|---:|---:|"]
    for r in k["rows"]:
        setting = r["setting"].split("+")[0]
        setting = {"as_given": "as given", "unset": "unset (new user)"}.get(setting, setting)
        core = re.search(r"core=(\w+)", r["blas"])
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            setting, linear_engine(r["fp32_gemm"]), core.group(1) if core else "?", fmt(r["gemm_peak_gflop_per_s"], 1),
            "{:,.1f}".format(r["model_median_ms"]), fmt(r["model_gflop_per_s"], 1),
            fmt(r["model_share_of_best_peak"], 2)))
    return lines


@table("eager_inference", EAGER)
def eager_inference():
    """BERT-base inference, headprune / PyTorch eager (bench/eager/compare.py), and with OpenBLAS only."""
    e, o = load(EAGER), load(EAGER_OPENBLAS)
    peak = e["gemm_peak_gflop_per_s"]
    openblas = {(r["batch"], r["seq_len"]): r["ratio"] for r in o["rows"]}
    lines = ["| batch | length | headprune ms (`auto`) | eager ms | headprune / eager | GFLOP/s (share of probe) "
             "| OpenBLAS only: headprune / eager |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(e["rows"], key=lambda r: (r["seq_len"], r["batch"])):
        ob = openblas.get((r["batch"], r["seq_len"]))
        lines.append("| %d | %d | %s | %s | %s | %s (%s) | %s |" % (
            r["batch"], r["seq_len"], "{:,.2f}".format(r["headprune_ms"]), "{:,.2f}".format(r["eager_ms"]),
            fmt(r["ratio"], 3), fmt(r["headprune_gflop_per_s"], 1), fmt(r["headprune_gflop_per_s"] / peak, 2),
            fmt(ob, 3) if ob is not None else "—"))
    return lines


@table("eager_training", TRAIN)
def eager_training():
    """A training step on the SST-2 model's shape, headprune / eager, with the default engines and OpenBLAS."""
    lines = ["| linear layers | headprune ms | eager ms | headprune / eager (rounds) |", "|---|---:|---:|---:|"]
    for label, path in [("`auto`", TRAIN), ("OpenBLAS", TRAIN_OPENBLAS)]:
        for r in load(path)["rows"]:
            lines.append("| %s | %s | %s | %s (%s) |" % (label, fmt(r["headprune_ms"], 1), fmt(r["eager_ms"], 1),
                                                       fmt(r["ratio"], 3),
                                                       ", ".join(fmt(x, 2) for x in r["ratios"])))
    return lines
