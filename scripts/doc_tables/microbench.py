"""bench/results/linear_engines.json, attention_core.json, attention_micro.json (Google Benchmark JSON
of bench/linear_bench.cc, bench/attention_bench.cc) and gemm_engines.json (bench/eager/gemm_engines.py):
the kernel micro-benchmarks.

docs/benchmarks.md: linear_engines, attention_core, attention_micro, gemm_engines.
"""
from .core import fmt, load, table


LINEAR = "bench/results/linear_engines.json"
ATTENTION_CORE = "bench/results/attention_core.json"


@table("linear_engines", LINEAR)
def linear_engines():
    """fp32 GFLOP/s of one linear layer on three engines (bench/linear_bench.cc, Google Benchmark JSON)."""
    rows = {}
    for b in load(LINEAR)["benchmarks"]:
        name, m, n, k = b["name"].split("/")[:4]
        rows.setdefault((int(m), int(k), int(n)), {})[name] = b["GFLOP/s"]
    lines = ["| rows × inputs × outputs | OpenBLAS (`torch::linear`) | oneDNN sgemm | oneDNN matmul, packed weights |",
             "|---|---:|---:|---:|"]
    for (m, k, n), r in sorted(rows.items()):
        lines.append("| %d × %d × %d | %s | %s | %s |" % (m, k, n, fmt(r["BM_Linear"], 1), fmt(r["BM_OneDnnSgemm"], 1),
                                                       fmt(r["BM_PackedMatmul"], 1)))
    return lines


def benchmark_ms(path):
    """(name parts, real time in ms) of each run of a Google Benchmark JSON file; where it holds
    repetitions (aggregates only), their medians."""
    runs = load(path)["benchmarks"]
    if any(b.get("run_type") == "aggregate" for b in runs):
        runs = [b for b in runs if b.get("aggregate_name") == "median"]
    out = []
    for b in runs:
        assert b["time_unit"] == "ms", b["name"]
        out.append((b.get("run_name", b["name"]).split("/"), b["real_time"]))
    return out


@table("attention_core", ATTENTION_CORE)
def attention_core():
    """The attention core (12 heads x 128 x 64 per sequence) three ways (bench/attention_bench.cc)."""
    ms = {}
    for parts, t in benchmark_ms(ATTENTION_CORE):
        ms.setdefault(int(parts[1]), {})[parts[0]] = t
    lines = ["| batch | ATen batched matmul ms | one GEMM per head ms | oneDNN ms | ATen / oneDNN |", "|---:|---:|---:|---:|---:|"]
    for batch, r in sorted(ms.items()):
        a, h, o = r["BM_AttentionCoreBatched"], r["BM_AttentionCorePerHead"], r["BM_AttentionCoreOneDnn"]
        lines.append("| %d | %s | %s | %s | ×%s |" % (batch, fmt(a, 2), fmt(h, 2), fmt(o, 2), fmt(a / o, 1)))
    return lines


ATTENTION_MICRO = "bench/results/attention_micro.json"
GEMM_ENGINES = "bench/results/gemm_engines.json"


def ms3(v):
    """A time in ms to about three significant digits (0.010, 4.60, 69.6, 171)."""
    return fmt(v, 3 if v < 0.1 else 2 if v < 10 else 1 if v < 100 else 0)


@table("attention_micro", ATTENTION_MICRO)
def attention_micro():
    """One attention block at BERT-base width, length 128, by heads kept (bench/attention_bench.cc); the
    median of the repetitions where the file has several."""
    ms = {}
    for parts, t in benchmark_ms(ATTENTION_MICRO):
        if parts[0] == "BM_AttentionForward":
            ms[(int(parts[2]), str(int(parts[1])))] = t
        else:
            ms[(int(parts[1]), parts[0])] = t
    kept = [("12", "12"), ("9", "9"), ("6", "6"), ("3", "3"), ("0", "0 (skipped)"),
            ("BM_AttentionHalfMasked", "12, 6 masked"), ("BM_AttentionUnfusedProjections", "12, unfused Q/K/V")]
    batches = sorted({b for b, _ in ms})
    lines = ["| kept heads | " + " | ".join(name for _, name in kept) + " |", "|---|" + "---:|" * len(kept)]
    for b in batches:
        lines.append("| batch %d, ms | %s |" % (b, " | ".join(ms3(ms[(b, k)]) for k, _ in kept)))
    lines.append("")
    ratio = lambda k, b: fmt(ms[(b, k)] / ms[(b, "12")], 2)
    lines.append("Against all 12 heads kept: 6 kept ×%s (batch 1) and ×%s (batch 16), 6 masked ×%s and ×%s, "
                 "the three projections unfused ×%s and ×%s." % (
                     ratio("6", 1), ratio("6", 16), ratio("BM_AttentionHalfMasked", 1), ratio("BM_AttentionHalfMasked", 16),
                     ratio("BM_AttentionUnfusedProjections", 1), ratio("BM_AttentionUnfusedProjections", 16)))
    return lines


@table("gemm_engines", GEMM_ENGINES)
def gemm_engines():
    """oneDNN's sgemm over OpenBLAS on a Transformer's linear-layer products (bench/eager/gemm_engines.py),
    the cells where headprune's `auto` training rule picks oneDNN in bold."""
    t = load(GEMM_ENGINES)
    shapes = []
    for r in t["rows"]:
        if (r["inner"], r["outputs"]) not in shapes:
            shapes.append((r["inner"], r["outputs"]))
    cell = {(r["rows"], r["inner"], r["outputs"]): r["onednn_over_openblas"] for r in t["rows"]}
    lines = ["| rows | " + " | ".join("%d → %d" % s for s in shapes) + " |", "|---:|" + "---:|" * len(shapes)]
    onednn = lambda m, k: m >= 2048 or k <= 256  # src/util/gemm.cc's training rule
    for m in sorted({r["rows"] for r in t["rows"]}):
        cells = []
        for k, n in shapes:
            v = fmt(cell[(m, k, n)], 2)
            cells.append("**%s**" % v if onednn(m, k) else v)
        lines.append("| %d | %s |" % (m, " | ".join(cells)))
    bold = [v for (m, k, n), v in cell.items() if onednn(m, k)]
    rest = [v for (m, k, n), v in cell.items() if not onednn(m, k)]
    lines.append("")
    lines.append("Where the rule picks oneDNN its time is %s–%s of OpenBLAS's; elsewhere %s–%s. %s, %d threads, "
                 "OpenBLAS kernels: %s, median of %d products (`%s`)." % (
                     fmt(min(bold), 2), fmt(max(bold), 2), fmt(min(rest), 2), fmt(max(rest), 2),
                     t.get("cpu", "CPU not recorded"), t["threads"], t.get("OPENBLAS_CORETYPE") or "its own choice",
                     t.get("reps", 30), t["command"]))
    return lines
