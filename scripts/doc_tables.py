#!/usr/bin/env python3
"""Tables in README.md and docs/ generated from committed results JSON, so a doc table cannot drift
from its data.

A generated table sits between two marker lines in a Markdown file:

    <!-- table NAME (scripts/doc_tables.py; from FILE) -->
    | ... |
    <!-- end table -->

  python3 scripts/doc_tables.py          rewrite every marked table from its JSON
  python3 scripts/doc_tables.py --check  fail (exit 1, naming doc and table) when a table differs;
                                         CTest docs_tables (label lint) runs this in CI
  python3 scripts/doc_tables.py --results DIR --print
                                         print every table whose file DIR holds (bench/results/X read as
                                         DIR/X) and touch no doc: studies/run_all.sh --quick checks
                                         its scratch results this way (a file from an older version of
                                         its study that lacks a table's part is named, not printed)

Each NAME is a function below that reads its results file and returns the table's lines.
"""
import functools
import json
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SST2 = "bench/results/sst2_study.json"


RESULTS_OVERRIDE = None  # --results DIR


def resolve(path):
    if RESULTS_OVERRIDE and path.startswith("bench/results/"):
        return os.path.join(RESULTS_OVERRIDE, path[len("bench/results/"):])
    return os.path.join(ROOT, path)


def load(path):
    with open(resolve(path)) as f:
        return json.load(f)


def fmt(v, digits=4):
    return "%.*f" % (digits, v)


def bench_row(study, model, batch):
    for r in study["bench"]["records"]:
        if r["model"] == model and r["batch"] == batch:
            return r
    raise SystemExit("%s: no bench record for %s at batch %d" % (SST2, model, batch))


SST2_GATE_COUNTS = (16, 8)  # heads kept of 32 by the study's gate runs


def sst2_gate_runs(s):
    """(kept count, method, gates.json) for every gate run of the SST-2 study, in its order."""
    return [(k, m, s["gates_keep%d" % k][m]) for k in SST2_GATE_COUNTS
            for m in ("pass", "passconc", "hard_concrete") if m in s.get("gates_keep%d" % k, {})]


def stage(run, name):
    return next(x for x in run["stages"] if x["stage"] == name)


def per_layer(heads, n_layers=4):
    """'7 / 5 / 2 / 2': heads ('type:layer:head') per layer of a single attention type."""
    return " / ".join(str(sum(1 for h in heads if int(h.split(":")[1]) == l)) for l in range(n_layers))


def sst2_study_models():
    """The SST-2 study's models: heads, dev accuracy, latency side by side (studies/sst2.sh)."""
    s = load(SST2)
    p = s["prune_50"]
    runs = [("unpruned", p["checkpoint"], stage(p, "before"), []),
            ("gradient, 50 %% removed, %d fine-tuning steps" % s["finetune_steps"], p["model"], p["stages"][-1], [])]
    for kept, method, r in sst2_gate_runs(s):
        runs.append(("%s to %d heads" % (GATE_NAMES[method], kept), r["model"], r["stages"][-1], r.get("emptied_layers", [])))
    lines = ["| model | heads | emptied layers | dev accuracy | batch 1 ms | batch 16 ms | speedup at 1 / 16 | FLOP-ideal |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, model, st, emptied in runs:
        b1, b16 = bench_row(s, model, 1), bench_row(s, model, 16)
        lines.append("| %s | %d | %d | %s | %s | %s | ×%s / ×%s | ×%s |" % (
            label, st["heads"], len(emptied), fmt(st["metric"]), fmt(b1["median_ms"], 2), fmt(b16["median_ms"], 2),
            fmt(b1["measured_speedup"], 2), fmt(b16["measured_speedup"], 2), fmt(b16["ideal_speedup"], 2)))
    return lines


def sst2_study_curve():
    """Dev accuracy against the share of heads pruned, per strategy (no fine-tuning)."""
    c = load(SST2)["curve"]
    fractions = sorted({p["fraction"] for p in c["points"]})
    strategies = []
    for p in c["points"]:
        if p["strategy"] not in strategies:
            strategies.append(p["strategy"])
    acc = {(p["strategy"], p["fraction"]): p["metric"] for p in c["points"]}
    lines = ["| strategy | " + " | ".join("%g %%" % (100 * f) for f in fractions) + " |",
             "|---|" + "---:|" * len(fractions)]
    for st in strategies:
        lines.append("| %s | " % st + " | ".join(fmt(acc[(st, f)]) if (st, f) in acc else "" for f in fractions) + " |")
    return lines


def sst2_training():
    """The SST-2 model's training: held-out selection accuracy per evaluation, dev accuracy of the chosen one (studies/sst2.sh)."""
    s = load(SST2)
    t = s["train"]
    dev = curve_grid(s["curve"])["gradient"][0.0]
    chosen = next(h["step"] for h in t["history"] if h["accuracy"] == t["best_metric"])  # the first best
    lines = ["| step | held-out accuracy (selects) | held-out loss | training loss | note |", "|---:|---:|---:|---:|---|"]
    for h in t["history"]:
        note = "chosen; dev accuracy %s" % fmt(dev) if h["step"] == chosen else ""
        lines.append("| %s | %s | %s | %s | %s |" % ("{:,}".format(h["step"]), fmt(h["accuracy"]), fmt(h["loss"]),
                                                    fmt(h["train_loss"]), note))
    return lines


def sst2_importance_top():
    """The heads whose single removal changes dev accuracy most, and their rank under the other methods (studies/sst2.sh)."""
    return importance_top(load(SST2), "importance", ["ablation", "gradient", "lrp", "confidence", "output_norm"],
                          "accuracy change", 4, 8)


def sst2_all_but_one():
    """Each layer reduced to its best single head, dev accuracy (Michel §3.3; studies/sst2.sh)."""
    mp = imp_map(load(SST2), "importance", "all_but_one")
    lines = ["| layer | best single head | dev accuracy with only it | with the whole layer masked |", "|---:|---:|---:|---:|"]
    for r in mp["info"]["per_layer"]:
        lines.append("| %d | %d | %s | %s |" % (r["layer"], r["best_head"], fmt(r["best_head_metric"]), fmt(r["layer_masked_metric"])))
    lines.append("| all heads | | %s | |" % fmt(mp["info"]["base_metric"]))
    return lines


def sst2_agreement():
    """Importance on dev against importance on other data (Michel §3.4; studies/sst2.sh)."""
    s = load(SST2)
    lines = ["| method | dev vs held-out training rows: Spearman / Pearson | dev vs 2,000 training sentences: Spearman / Pearson |",
             "|---|---:|---:|"]
    by = {k: {r["a"]: r for r in s[k] if r["attn_type"] == "all"} for k in ("agreement_test_valid", "agreement_test_train")}
    for method in sorted(by["agreement_test_valid"]):
        lines.append("| %s | %s | %s |" % (method, " / ".join(fmt(by["agreement_test_valid"][method][k], 3) for k in ("spearman", "pearson")),
                                           " / ".join(fmt(by["agreement_test_train"][method][k], 3) for k in ("spearman", "pearson"))))
    return lines


def sst2_curve_finetuned():
    """Dev accuracy of pruned models before and after fine-tuning (Budhraja et al.; studies/sst2.sh)."""
    c = load(SST2)["curve_finetuned"]
    lines = ["| strategy | heads pruned of 32 | dev accuracy, pruned | after %d fine-tuning steps |" % c["finetune_steps"],
             "|---|---:|---:|---:|"]
    for p in c["points"]:
        lines.append("| %s | %d | %s | %s |" % (p["strategy"], len(p["pruned"]), fmt(p["metric"]), fmt(p["metric_finetuned"])))
    return lines


def sst2_prune50():
    """Half the heads removed by gradient importance, then fine-tuned: each stage (studies/sst2.sh)."""
    p = load(SST2)["prune_50"]
    lines = ["| stage | heads | parameters | dev accuracy | dev loss |", "|---|---:|---:|---:|---:|"]
    for st in p["stages"]:
        lines.append("| %s | %d | %s | %s | %s |" % (st["stage"], st["heads"], "{:,}".format(st["params"]), fmt(st["metric"]), fmt(st["loss"])))
    return lines


def sst2_compensation():
    """Gradient importance of the kept heads before and after fine-tuning, per layer (Budhraja et al.; studies/sst2.sh)."""
    c = load(SST2)["prune_50"]["compensation"]
    lines = ["| layer | heads kept | mean importance before | after fine-tuning | ratio |", "|---|---:|---:|---:|---:|"]
    for r in c["layers"]:
        lines.append("| %s %d | %d | %s | %s | ×%s |" % (r["attn_type"], r["layer"], r["kept_heads"], fmt(r["mean_before"]),
                                                      fmt(r["mean_after"]), fmt(r["ratio"], 2)))
    lines.append("| all kept heads | | | | ×%s (Spearman before/after %s) |" % (fmt(c["total_ratio"], 2), fmt(c["spearman"], 3)))
    return lines


def gate_run_cells(method, res):
    """A gate run's kept count ('10 (target 8, missed)' when it missed) and its method's name (Hard
    Concrete with its λ search's rollbacks and final λ)."""
    count = "%d" % res["n_kept"] if res["reached_target"] else "%d (target %d, missed)" % (res["n_kept"], res["target_kept"])
    name = GATE_NAMES[method]
    if method == "hard_concrete":
        name += " (λ search, %d rollbacks, final λ %s)" % (res["rollbacks"], "%.3g" % res["final_coef"])
    return count, name


def sst2_gates():
    """Learned gates to exact head counts beside importance and random plans (studies/sst2.sh)."""
    s = load(SST2)
    g = curve_grid(s["curve"])
    lines = ["| heads kept of 32 | method | kept per layer | emptied layers | steps | dev accuracy | after %d fine-tuning steps |"
             % s["finetune_steps"], "|---:|---|---|---:|---:|---:|---:|"]
    for kept, method, r in sst2_gate_runs(s):
        res = r["result"]
        count, name = gate_run_cells(method, res)
        lines.append("| %s | %s | %s | %d | %d | %s | %s |" % (
            count, name, per_layer(res["kept"]), len(r["emptied_layers"]), res["steps"],
            fmt(stage(r, "removed")["metric"]), fmt(r["stages"][-1]["metric"])))
    for kept in SST2_GATE_COUNTS:
        f = 1 - kept / 32.0
        lines.append("| %d | one shot, no training: gradient %s, iterative %s, random %s | | | – | | |" % (
            kept, fmt(g["gradient"][f]), fmt(g["iterative:gradient"][f]), fmt(g["random:uniform"][f])))
    return lines


def sst2_roles():
    """Voita's roles of the 32 heads on UD English-EWT, with importance and the 50 % plan (studies/sst2.sh)."""
    return roles_table(load(SST2)["roles"], "accuracy change", 4, "kept by the 50 % plan")


PRECISION = "bench/results/sst2_precision.json"


def sst2_precision():
    """The SST-2 model and its 50 %-pruned version in fp32, bf16 and int8: dev accuracy, latency (bench/precision_sst2.sh)."""
    d = load(PRECISION)
    full = d["records"][0]["model"].rsplit(" [", 1)[0]  # bench's first model: the unpruned one
    ev = {(e["checkpoint"], e["precision"]): e for e in d["eval"]}
    rec = {(r["model"], r["batch"], r["seq_len"]): r for r in d["records"]}
    lines = ["| model | precision | dev accuracy | loss | batch 1 × 32 ms | batch 32 × 32 ms | batch 32 × 64 ms | speedup at 32 × 64 |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for ckpt in sorted({c for c, _ in ev}, key=lambda c: c != full):
        for prec in ("fp32", "bf16", "int8"):
            e, m = ev[(ckpt, prec)], "%s [%s]" % (ckpt, prec)
            lines.append("| %s | %s | %s | %s | %s | %s | %s | ×%s |" % (
                "unpruned" if ckpt == full else "50 % pruned", prec, fmt(e["accuracy"]), fmt(e["loss"]),
                fmt(rec[(m, 1, 32)]["median_ms"], 2), fmt(rec[(m, 32, 32)]["median_ms"], 2),
                fmt(rec[(m, 32, 64)]["median_ms"], 2), fmt(rec[(m, 32, 64)]["measured_speedup"], 2)))
    return lines


IMPORTANCE_COST = "bench/results/importance_cost_sst2.json"


def importance_cost():
    """Each scorer's time as multiples of one forward and one forward + backward pass (bench/importance_cost.sh)."""
    d = load(IMPORTANCE_COST)
    lines = ["| method | × one forward pass | × one forward + backward pass | seconds |", "| --- | ---: | ---: | ---: |"]
    for m, r in d["methods"].items():
        lines.append("| %s | %s | %s | %s |" % (m, fmt(r["x_forward"], 2), fmt(r["x_forward_backward"], 2), fmt(r["seconds"], 2)))
    lines.append("| *reference passes* | forward %s s | forward + backward %s s | |" % (fmt(d["forward_s"], 2), fmt(d["forward_backward_s"], 2)))
    return lines


KERNELS = "bench/results/blas_kernels.json"
EAGER = "bench/results/eager_bert_base.json"
EAGER_OPENBLAS = "bench/results/eager_bert_base_openblas.json"
TRAIN = "bench/results/eager_train_sst2.json"
TRAIN_OPENBLAS = "bench/results/eager_train_sst2_openblas.json"
PRUNED_INT8 = "bench/results/cpu_pruned_int8.json"
LINEAR = "bench/results/linear_engines.json"
ATTENTION_CORE = "bench/results/attention_core.json"


def linear_engine(fp32_gemm):
    return "OpenBLAS" if fp32_gemm.startswith("OpenBLAS") else "auto"


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


def eager_training():
    """A training step on the SST-2 model's shape, headprune / eager, with the default engines and OpenBLAS."""
    lines = ["| linear layers | headprune ms | eager ms | headprune / eager (rounds) |", "|---|---:|---:|---:|"]
    for label, path in [("`auto`", TRAIN), ("OpenBLAS", TRAIN_OPENBLAS)]:
        for r in load(path)["rows"]:
            lines.append("| %s | %s | %s | %s (%s) |" % (label, fmt(r["headprune_ms"], 1), fmt(r["eager_ms"], 1),
                                                       fmt(r["ratio"], 3),
                                                       ", ".join(fmt(x, 2) for x in r["ratios"])))
    return lines


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


LLAMA = "bench/results/llama_gqa.json"
ONE_SEED = "one seed (over 3 seeds, on held-out text: the next section)"


def curve_grid(curve, key="metric"):
    grid = {}
    for p in curve["points"]:
        grid.setdefault(p["strategy"], {})[p["fraction"]] = p[key]
    return grid


SEEDS = "bench/results/sst2_seeds.json"
LAYER_STRATEGIES = ["random:uniform", "random:avoid_consecutive", "random:top", "random:bottom"]  # Budhraja et al.


def mean_sd(xs, digits=4):
    """'mean ± sample standard deviation' of a list of numbers ('(1 seed)' for one)."""
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return "%s (1 seed)" % fmt(m, digits)
    sd = (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5
    return "%s ± %s" % (fmt(m, digits), fmt(sd, digits))


def seed_runs(s):
    """The seeds' outputs in seed order."""
    return [s["seeds"][k] for k in sorted(s["seeds"], key=int)]


def seed_grids(s, part="curve", key="metric"):
    return [curve_grid(r[part], key) for r in seed_runs(s) if part in r]


def across(grids, strategy, fraction):
    return [g[strategy][fraction] for g in grids]


def seeds_spread(s):
    return "mean ± s.d. over %d seeds (%s)" % (len(s["seeds"]), ", ".join(sorted(s["seeds"], key=int)))


GATE_NAMES = {"pass": "PASS", "passconc": "PASSCONC", "hard_concrete": "Hard Concrete"}


def versus(grids, a, b, fractions, digits=4):
    """'at F %: mean ± s.d. of a vs of b (difference: the per-seed paired differences)' per fraction."""
    return "; ".join("at %g %%: %s vs %s (difference %s)" % (
        100 * f, mean_sd(across(grids, a, f), digits), mean_sd(across(grids, b, f), digits),
        mean_sd([x - y for x, y in zip(across(grids, a, f), across(grids, b, f))], digits)) for f in fractions)


def per_gate(gates, runs, value):
    """'PASS x, PASSCONC y': value(the seeds' runs of one gate method) for each method the study ran."""
    return ", ".join("%s %s" % (GATE_NAMES[m], value([r[m] for r in runs])) for m in gates)


def gates_finetuned(runs):
    """Whether every one of these gate runs ended with its fine-tuning stage."""
    return all(x["stages"][-1]["stage"] == "fine-tuned" for x in runs)


def gates_claim(claim, gates):
    """The gates' scorecard claim, naming Voita et al.'s Hard Concrete where the study ran it too."""
    return claim + (" (Voita et al.'s Hard Concrete gates beside them)" if "hard_concrete" in gates else "")


def gate_cells(gates, runs, digits=4):
    """Per gate method over the seeds: the pruned model's metric (mean ± s.d.; '→ y' the metric after
    fine-tuning where the runs fine-tuned), heads kept per seed (a seed's run that missed its count
    marked '(missed)'), attention layers emptied per seed."""
    def metric(g):
        cell = mean_sd([stage(x, "removed")["metric"] for x in g], digits)
        if gates_finetuned(g):
            cell += " → %s" % mean_sd([x["stages"][-1]["metric"] for x in g], digits)
        return cell

    def kept(x):
        return "%d" % x["stages"][-1]["heads"] + ("" if x["result"]["reached_target"] else " (missed)")

    return (per_gate(gates, runs, metric),
            per_gate(gates, runs, lambda g: "/".join(kept(x) for x in g)),
            per_gate(gates, runs, lambda g: "/".join(str(len(x["emptied_layers"])) for x in g)))


def scorecard_sst2():
    """Papers' claims against the SST-2 study with a selection split, over seeds (studies/sst2_seeds.sh)."""
    s = load(SEEDS)
    runs, grids = seed_runs(s), seed_grids(s)
    base = across(grids, "gradient", 0.0)

    def removable(g):  # the largest share removed by gradient importance within 1 point of unpruned
        return max(f for f, m in g["gradient"].items() if m >= g["gradient"][0.0] - 0.01)

    gates = s["gates"].split()  # the gate methods the study ran, in its order
    ft = seed_grids(s, "curve_finetuned", "metric_finetuned")
    layer = LAYER_STRATEGIES
    rows = [
        ("unpruned model (for the rows below)",
         "test %s; the selection split that chose it: %s" % (
             mean_sd(base), mean_sd([r["train"]["best_metric"] for r in runs]))),
        ("Michel et al. 2019: 20 % (WMT) to 40 % (BERT, MNLI) of heads removed by importance "
         "without a noticeable loss, no retraining",
         "share of 32 heads removed by gradient importance within 1 point of the seed's unpruned accuracy: %s"
         % ", ".join("%g %%" % (100 * removable(g)) for g in grids)),
        ("Michel et al. 2019: importance order beats removing heads at random",
         "gradient vs random: " + versus(grids, "gradient", "random:uniform", (0.5, 0.75, 0.875))),
        ("Michel et al. 2019: iterative pruning (rescoring after each step) against one-shot",
         "iterative vs one-shot: " + versus(grids, "iterative:gradient", "gradient", (0.5, 0.875))),
        (gates_claim("PASS/PASSCONC: gates reach the exact head count; the concentrator empties whole layers at "
                     "about PASS's accuracy", gates),
         "16 of 32 heads%s: %s; heads kept per seed: %s; layers emptied per seed: %s" % (
             " (→ after %d fine-tuning steps)" % s["finetune_steps"]
             if gates_finetuned([r[m] for r in runs for m in gates]) else "",
             *gate_cells(gates, runs))),
        ("Budhraja et al. 2020: random pruning with layer strategies, then fine-tuning, comes close to "
         "importance-based pruning",
         "half the heads removed, no fine-tuning: %s; after %d fine-tuning steps: %s, gradient %s%s" % (
             ", ".join("%s %s" % (st.split(":")[1], mean_sd(across(grids, st, 0.5))) for st in layer),
             s["finetune_steps"],
             ", ".join("%s %s" % (st.split(":")[1], mean_sd(across(ft, st, 0.5))) for st in layer),
             mean_sd(across(ft, "gradient", 0.5)), unpruned_finetuned(runs, 4))),
    ]
    lines = ["| claim (paper) | ours, SST-2 dev as test (encoder of %s, %d steps, chosen on held-out train rows) "
             "| spread | command |" % (s["config"], s["train_steps"]), "|---|---|---|---|"]
    lines += ["| %s | %s | %s | `bash studies/sst2_seeds.sh` |" % (c, o, seeds_spread(s)) for c, o in rows]
    return lines


def scorecard_speed():
    """Michel's Table 4 claim against the CPU study's pruned BERT-base (bench/cpu_speed.sh)."""
    recs = [r for r in load(PRUNED_INT8)["bert_base"]["records"] if r["precision"] == "fp32"]
    cells = []
    for batch in sorted({r["batch"] for r in recs}):
        full = [r for r in recs if r["batch"] == batch and "/base" in r["model"]][0]
        half = [r for r in recs if r["batch"] == batch and "/uniform50" in r["model"]][0]
        cells.append("batch %d: ×%s (FLOP-ideal ×%s)" % (batch, fmt(full["median_ms"] / half["median_ms"], 3),
                                                        fmt(half["ideal_speedup"], 3)))
    return ["| claim (paper) | ours, BERT-base shape, 50 % of heads removed, length 128, 2 CPU cores | spread | command |",
            "|---|---|---|---|",
            "| Michel et al. 2019, Table 4: up to +17.5 %% examples/s at batch 16–64 on a GPU, almost "
            "nothing at batch 1 | %s | 30 repetitions, median; paired ratios in the JSON | `bash bench/cpu_speed.sh` |"
            % "; ".join(cells)]


def llama_bench(l):
    """The LLaMA study's bench records by (model, batch): a pruned model by its run directory (p50_head,
    p50_group), the unpruned checkpoint by its own name (best)."""
    rec = {}
    for r in l["bench"]["records"]:
        parts = r["model"].split("/")
        rec[(parts[-2] if parts[-1] == "model" else parts[-1], r["batch"])] = r
    return rec


def scorecard_llama():
    """Grouped-query attention: query heads vs key/value groups (studies/llama_gqa.sh); no paper has it."""
    l = load(LLAMA)
    g, ft = curve_grid(l["curve"]), curve_grid(l["curve_finetuned"], "metric_finetuned")
    bench = llama_bench(l)
    return ["| question | ours, LLaMA-style decoder on Tiny Shakespeare (8 query heads / 2 key-value heads × 4 layers) "
            "| spread | command |", "|---|---|---|---|",
            "| at 50 %% of query heads, remove query heads or whole key/value groups? | validation perplexity "
            "(unpruned %s): query heads %s, groups %s, balanced %s, random %s; after %d fine-tuning steps: "
            "query heads %s, groups %s | %s | `bash studies/llama_gqa.sh` |" % (
                fmt(g["gradient"][0.0], 1), fmt(g["gradient"][0.5], 1), fmt(g["gradient:group"][0.5], 1),
                fmt(g["gradient:balanced"][0.5], 1), fmt(g["random:uniform"][0.5], 1), l["finetune_steps"],
                fmt(ft["gradient"][0.5], 1), fmt(ft["gradient:group"][0.5], 1), ONE_SEED),
            "| what does the group plan save? | batch 16 × %d latency: query-head plan ×%s (FLOP-ideal ×%s), "
            "group plan ×%s (×%s) | %d repetitions, median | `bash studies/llama_gqa.sh` |" % (
                bench[("p50_head", 16)]["seq_len"],
                fmt(bench[("p50_head", 16)]["measured_speedup"], 3), fmt(bench[("p50_head", 16)]["ideal_speedup"], 3),
                fmt(bench[("p50_group", 16)]["measured_speedup"], 3), fmt(bench[("p50_group", 16)]["ideal_speedup"], 3),
                l["bench"]["reps"])]


LLAMA_CURVE = ["gradient", "gradient:group", "gradient:balanced", "random:uniform"]


def llama_pruned_label(n, l):
    """'8 (2 groups)': query heads pruned and the whole groups they make (4 query heads per group here)."""
    group = l["curve"]["n_heads"] // 8  # 8 key/value groups in the study's model
    return "0 of %d" % l["curve"]["n_heads"] if n == 0 else "%d (%d groups)" % (n, n // group)


def llama_curve():
    """Validation perplexity against query heads pruned, four plans, no fine-tuning (studies/llama_gqa.sh)."""
    l = load(LLAMA)
    rows = {}
    for p in l["curve"]["points"]:
        rows.setdefault(p["n_pruned"], {})[p["strategy"]] = p["metric"]
    lines = ["| query heads pruned | gradient (query heads) | gradient:group | gradient:balanced | random:uniform |",
             "|---:|---:|---:|---:|---:|"]
    for n, r in sorted(rows.items()):
        lines.append("| %s | %s |" % (llama_pruned_label(n, l), " | ".join(thousands(r[s]) for s in LLAMA_CURVE)))
    return lines


def llama_curve_finetuned():
    """The same for query heads and whole groups, each point fine-tuned (studies/llama_gqa.sh)."""
    l = load(LLAMA)
    rows = {}
    for p in l["curve_finetuned"]["points"]:
        rows.setdefault(p["n_pruned"], {})[p["strategy"]] = p
    lines = ["| query heads pruned | gradient (query heads) | gradient:group |", "|---:|---:|---:|"]
    for n, r in sorted(rows.items()):
        lines.append("| %s | %s (from %s) | %s (from %s) |" % (
            llama_pruned_label(n, l), *(x for s in ("gradient", "gradient:group")
                                        for x in (thousands(r[s]["metric_finetuned"]), thousands(r[s]["metric"])))))
    return lines


def llama_speed():
    """The 50 % models' latency beside the unpruned one (studies/llama_gqa.sh's bench stage)."""
    l = load(LLAMA)
    names = {"best": "unpruned", "p50_head": "16 query heads pruned (gradient)",
             "p50_group": "4 groups pruned (gradient:group)"}
    rec = llama_bench(l)
    batches = sorted({r["batch"] for r in l["bench"]["records"]})
    seq = l["bench"]["records"][0]["seq_len"]
    lines = ["| model | parameters | " + " | ".join("batch %d × %d ms | speedup (FLOP-ideal)" % (b, seq) for b in batches)
             + " |", "|---|---:|" + "---:|---:|" * len(batches)]
    for key, name in names.items():
        r = {b: rec[(key, b)] for b in batches}
        cells = ["%s | ×%s (×%s)" % (fmt(r[b]["median_ms"], 2), fmt(r[b]["measured_speedup"], 3), fmt(r[b]["ideal_speedup"], 3))
                 for b in batches]
        lines.append("| %s | %s | %s |" % (name, thousands(r[batches[0]]["params"], 0), " | ".join(cells)))
    return lines


def pruned_int8():
    """Unpruned and 50 %-removed BERT-base, and the SST-2 shape, in fp32 and int8 (bench/cpu_speed.sh)."""
    j = load(PRUNED_INT8)
    lines = ["| model | precision | batch × length | ms | speedup | FLOP-ideal |", "|---|---|---|---:|---:|---:|"]
    for key, names in [("bert_base", {"base": "BERT-base", "uniform50": "BERT-base, 50 % removed"}),
                       ("sst2_shape", {"sst2_shape": "SST-2 shape"})]:
        recs = j[key]["records"]
        for r in sorted(recs, key=lambda r: r["batch"]):
            ref = [x for x in recs if x["batch"] == r["batch"] and x["precision"] == "fp32"][0]
            name = next(v for k, v in names.items() if "/%s" % k in r["model"])
            lines.append("| %s | %s | %d × %d | %s | ×%s | ×%s |" % (
                name, r["precision"], r["batch"], r["seq_len"], "{:,.2f}".format(r["median_ms"]),
                fmt(ref["median_ms"] / r["median_ms"], 3), fmt(r["ideal_speedup"], 3)))
    return lines

M30K = "bench/results/multi30k.json"
M30K_TYPES = [("encoder_self", "encoder self"), ("decoder_self", "decoder self"), ("cross", "cross")]


def m30k_bleu(e, beam):
    return e["bleu"]["beam%d" % beam]["score"]


def m30k_selected(m):
    """'valid loss L at step S': the training history entry that chose the checkpoint."""
    t = m["train"]
    step = next(h["step"] for h in t["history"] if h["loss"] == t["best_metric"])
    return "validation loss %s at step %s of %s" % (fmt(t["best_metric"], 3), "{:,}".format(step),
                                                    "{:,}".format(m["train_steps"]))


def imp_map(m, key, method):
    """One method's map from the importance.json stored under `key` in a study's results."""
    return next(x for x in m[key]["maps"] if x["method"] == method)


def head_name(h):
    return "%s:%d:%d" % (h["attn_type"], h["layer"], h["head"])


def per_type(heads):
    """'6 (0-4-2) / 13 (3-4-6) / 17 (3-6-8)': heads ('type:layer:head') per attention type, per layer."""
    cells = []
    for t, _ in M30K_TYPES:
        per = [sum(1 for h in heads if h.split(":")[0] == t and int(h.split(":")[1]) == l) for l in range(3)]
        cells.append("%d (%s)" % (sum(per), "-".join(str(n) for n in per)))
    return " / ".join(cells)


def all_heads():
    return ["%s:%d:%d" % (t, l, h) for t, _ in M30K_TYPES for l in range(3) for h in range(8)]


def share(x, of):
    """x as a percentage of `of` ('–' when `of` is 0, e.g. BLEU of an untrained snapshot)."""
    return fmt(100 * x / of, 0) + " %" if of else "–"


def m30k_gate_runs(m):
    """(kept count, method, gates.json) in the study's order: the count, then PASS, PASSCONC, Hard Concrete."""
    runs = []
    for key in sorted((k for k in m if k.startswith("gates_keep")), key=lambda k: -int(k[len("gates_keep"):])):
        for method in ("pass", "passconc", "hard_concrete"):
            if method in m[key]:
                runs.append((int(key[len("gates_keep"):]), method, m[key][method]))
    return runs


def scorecard_multi30k():
    """Papers' claims against the Multi30k study (studies/multi30k.sh): one model, one seed."""
    m = load(M30K)
    g = curve_grid(m["curve"])
    base = g["gradient"][0.0]
    abl = imp_map(m, "importance_valid", "ablation")
    abo = m30k_all_but_one(m)[0]
    sig = [head_name(h) for h in abl["heads"] if h["significant"]]
    worst = min(abl["heads"], key=lambda h: h["delta_metric"])
    worst_layer = min(abo, key=lambda r: r["test_delta"])
    others = [r["test_delta"] for r in abo if r is not worst_layer]
    agree = {(r["a"], r["attn_type"]): r for r in m["agreement_valid_mscoco"]}
    by_valid, by_coco = curve_grid(m["curve_mscoco_by_valid"]), curve_grid(m["curve_mscoco_by_mscoco"])
    removable = max(f for f, v in g["gradient"].items() if v >= base - 1)
    over = sorted((int(k), curve_grid(v)["gradient"]) for k, v in m["over_training"].items())
    ft_curve = m["curve_finetuned_%d" % m["finetune_steps"]]
    ft, before_ft = curve_grid(ft_curve, "metric_finetuned"), curve_grid(ft_curve)
    roles = m["roles"]
    role_heads = [h for h in roles["heads"] if h["positional"] or h["syntactic"] or h["rare"]]
    kept36 = {r[1]: r[2] for r in m30k_gate_runs(m) if r[0] == 36}

    def pair(a, b, fractions):
        return "; ".join("%g %%: %s vs %s" % (100 * f, fmt(a[f], 2), fmt(b[f], 2)) for f in fractions)

    def gate_cell(r):
        return "%d heads%s, %s BLEU, %d layer(s) emptied" % (
            r["result"]["n_kept"], "" if r["result"]["reached_target"] else " (target %d missed)" % r["result"]["target_kept"],
            fmt(r["stages"][-1]["metric"], 2), len(r["emptied_layers"]))

    rows = [
        ("unpruned model (for the rows below)",
         "test_2016_flickr BLEU %s greedy, %s beam 4; out of domain, test_2017_mscoco %s greedy, %s beam 4; "
         "chosen on the %s" % (fmt(m30k_bleu(m["eval_flickr"], 1), 2), fmt(m30k_bleu(m["eval_flickr"], 4), 2),
                               fmt(m30k_bleu(m["eval_mscoco"], 1), 2), fmt(m30k_bleu(m["eval_mscoco"], 4), 2),
                               m30k_selected(m))),
        ("Michel et al. 2019 §3.2: masking one head alone rarely matters (8 of 96 encoder heads of their WMT "
         "model change BLEU significantly, p < 0.01)",
         "%d of 72 heads change validation BLEU significantly when masked alone (paired bootstrap, p < %g): "
         "%s; the largest drop: %s, %s BLEU" % (
             len(sig), abl["info"]["significance_level"], per_type(sig), head_name(worst),
             fmt(worst["delta_metric"], 2))),
        ("Michel et al. 2019 §3.3: most layers can be reduced to their best single head; the exception is "
         "the last cross-attention layer (−13.5 BLEU)",
         "one layer at a time keeps only its best head (chosen on validation), test BLEU: the largest drop "
         "%s layer %d, %s; the other 8 layers %s to %s (table below)" % (
             dict(M30K_TYPES)[worst_layer["attn_type"]], worst_layer["layer"],
             fmt(worst_layer["test_delta"], 2), fmt(min(others), 2), fmt(max(others), 2))),
        ("Michel et al. 2019: 20 % of WMT heads removed by importance without a noticeable loss",
         "%g %% of the 72 heads removed by gradient importance (chosen on validation) within 1 BLEU of the "
         "unpruned test BLEU (%s vs %s)" % (100 * removable, fmt(g["gradient"][removable], 2), fmt(base, 2))),
        ("Michel et al. 2019: importance order beats removing heads at random",
         "test BLEU, gradient vs random: " + pair(g["gradient"], g["random:uniform"], (0.25, 0.5, 0.75))),
        ("Michel et al. 2019: iterative pruning (rescoring after each step) against one-shot",
         "iterative vs one-shot: " + pair(g["iterative:gradient"], g["gradient"], (0.5, 0.75, 0.875))),
        ("Michel et al. 2019 ask whether the important heads are the same on another data set; here: in "
         "domain (Multi30k validation) vs out of domain (MSCOCO)",
         "Spearman (Pearson) of the head maps, validation vs MSCOCO: gradient %s (%s), single-head ablation "
         "%s (%s); MSCOCO BLEU with heads chosen on validation vs on MSCOCO itself: %s" % (
             fmt(agree[("gradient", "all")]["spearman"], 2), fmt(agree[("gradient", "all")]["pearson"], 2),
             fmt(agree[("ablation", "all")]["spearman"], 2), fmt(agree[("ablation", "all")]["pearson"], 2),
             pair(by_valid["gradient"], by_coco["gradient"], (0.25, 0.5, 0.75)))),
        ("Michel et al. 2019 §6: the later in training, the more of a model's quality rests on a subset of heads",
         "test BLEU with 50 %% of heads removed by gradient, as a share of the snapshot's unpruned BLEU: %s" %
         ", ".join("step %s %s" % ("{:,}".format(step), share(c[0.5], c[0.0])) for step, c in over)),
        ("Budhraja et al. 2020: random heads removed, then fine-tuning, come close to importance-based pruning",
         "half the heads removed, test BLEU after %d fine-tuning steps (before them): %s" % (
             m["finetune_steps"], ", ".join("%s %s (%s)" % (st, fmt(ft[st][0.5], 2), fmt(before_ft[st][0.5], 2))
                                            for st in ft))),
        ("PASS/PASSCONC: gates reach the exact head count; the concentrator empties whole layers; Voita et "
         "al.'s Hard Concrete gates beside them",
         "36 of 72 heads: %s (gates table below)" % "; ".join(
             "%s %s" % (GATE_NAMES[k], gate_cell(v)) for k, v in kept36.items())),
        ("Voita et al. 2019: the heads that matter have roles: positional, syntactic, rare-word",
         "of the 24 encoder heads on %d UD English-EWT sentences: %d positional, %d syntactic, %d rare-word "
         "(%d with any role); share with a role among the heads PASSCONC kept: %s of %d, pruned: %s of %d" % (
             roles["sentences"], sum(h["positional"] for h in roles["heads"]),
             sum(h["syntactic"] for h in roles["heads"]), sum(h["rare"] for h in roles["heads"]), len(role_heads),
             fmt(roles["shares"]["kept"]["any"], 2), roles["shares"]["kept"]["heads"],
             fmt(roles["shares"]["pruned"]["any"], 2), roles["shares"]["pruned"]["heads"])),
    ]
    lines = ["| claim (paper) | ours, Multi30k En→De (%s, %s steps, 72 heads) | spread | command |" % (
        m["config"], "{:,}".format(m["train_steps"])), "|---|---|---|---|"]
    lines += ["| %s | %s | one seed | `bash studies/multi30k.sh` |" % (c, o) for c, o in rows]
    return lines


def multi30k_curve():
    """Test BLEU against the share of heads pruned, per strategy (studies/multi30k.sh)."""
    m = load(M30K)
    grids = [curve_grid(m["curve"]), curve_grid(m["curve_by_type"])]
    lines = []
    for grid, n in zip(grids, (72, 24)):
        fractions = sorted({f for st in grid.values() for f in st})
        lines += ["| strategy | " + " | ".join("%g %% (%d)" % (100 * f, round(f * n)) for f in fractions) + " |",
                  "|---|" + "---:|" * len(fractions)]
        for st, pts in grid.items():
            lines.append("| %s | %s |" % (st, " | ".join(fmt(pts[f], 2) if f in pts else "–" for f in fractions)))
        lines.append("")
    return lines[:-1]


def m30k_all_but_one(m):
    """Per attention layer (Michel §3.3): the head that alone keeps the most validation BLEU, and the
    test BLEU with only that head (the other 7 masked), beside the unpruned test BLEU."""
    valid = imp_map(m, "importance_valid", "all_but_one")
    test = imp_map(m, "importance_test", "all_but_one")
    test_score = {head_name(h): h["score"] for h in test["heads"]}
    rows = []
    for r in valid["info"]["per_layer"]:
        name = "%s:%d:%d" % (r["attn_type"], r["layer"], r["best_head"])
        rows.append(dict(r, test_metric=test_score[name], test_delta=test_score[name] - test["info"]["base_metric"]))
    return rows, valid["info"]["base_metric"], test["info"]["base_metric"]


def multi30k_all_but_one():
    """Each attention layer reduced to one head (Michel §3.3), chosen on validation (studies/multi30k.sh)."""
    rows, valid_base, test_base = m30k_all_but_one(load(M30K))
    lines = ["| attention | layer | best single head (validation) | validation BLEU with only it | test BLEU with only it "
             "| test difference |", "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %s | %d | %d | %s | %s | %s |" % (
            dict(M30K_TYPES)[r["attn_type"]], r["layer"], r["best_head"], fmt(r["best_head_metric"], 2),
            fmt(r["test_metric"], 2), fmt(r["test_delta"], 2)))
    lines.append("| all heads | | | %s | %s | |" % (fmt(valid_base, 2), fmt(test_base, 2)))
    return lines


def multi30k_gates():
    """Learned gates and Michel's plans at the same head counts, test BLEU (studies/multi30k.sh)."""
    m = load(M30K)
    g = curve_grid(m["curve"])
    # Michel's iterative plans at the gate counts come from the fine-tuned curve's own points (its
    # rescoring path runs through those fractions only, so they are not the main curve's heads).
    plans = {p["fraction"]: p for p in m["curve_finetuned"]["points"] if p["strategy"] == "iterative:gradient"}
    lines = ["| heads kept of 72 | method | encoder self / decoder self / cross (per layer) | emptied layers | steps | test BLEU |",
             "|---:|---|---|---|---:|---:|",
             "| 72 | unpruned | %s | – | – | %s |" % (per_type(all_heads()), fmt(g["gradient"][0.0], 2))]
    for kept, method, r in m30k_gate_runs(m):
        res = r["result"]
        count, name = gate_run_cells(method, res)
        lines.append("| %s | %s | %s | %s | %d | %s |" % (
            count, name, per_type(res["kept"]),
            ", ".join(r["emptied_layers"]) or "–", res["steps"], fmt(r["stages"][-1]["metric"], 2)))
        if method == "hard_concrete" and 1 - kept / 72.0 in plans:
            f = 1 - kept / 72.0
            heads = [h for h in all_heads() if h not in plans[f]["pruned"]]
            lines.append("| %d | iterative gradient (Michel) | %s | – | – | %s |" % (kept, per_type(heads), fmt(plans[f]["metric"], 2)))
            lines.append("| %d | iterative gradient + %d fine-tuning steps | the same | – | %d | %s |" % (
                kept, m["curve_finetuned"]["finetune_steps"], m["curve_finetuned"]["finetune_steps"],
                fmt(plans[f]["metric_finetuned"], 2)))
    return lines


def multi30k_over_training():
    """Test BLEU of snapshots with heads removed by gradient importance (Michel §6; studies/multi30k.sh)."""
    m = load(M30K)
    over = sorted((int(k), curve_grid(v)["gradient"]) for k, v in m["over_training"].items())
    fractions = sorted(over[0][1])
    lines = ["| heads pruned of 72 | " + " | ".join("step %s" % "{:,}".format(s) for s, _ in over) + " |",
             "|---:|" + "---:|" * len(over)]
    for f in fractions:
        lines.append("| %d (%g %%) | %s |" % (round(72 * f), 100 * f, " | ".join(
            "%s (%s)" % (fmt(c[f], 2), share(c[f], c[0.0])) for _, c in over)))
    return lines


def roles_table(roles, change, digits, plan):
    """One row per head: Voita's roles (positional, rare-word, the best syntactic relation against its
    baseline), gradient importance, the single-head ablation change, and whether `plan` kept it."""
    lines = ["| head | positional share @ offset | rare-word share | best relation: accuracy / baseline | role | "
             "gradient | single-head ablation (%s) | %s |" % (change, plan),
             "|---|---:|---:|---|---|---:|---:|:---:|"]
    for h in roles["heads"]:
        best = max(h["relations"], key=lambda r: r["accuracy"] - r["baseline"])
        role = ", ".join(n for n in ("positional", "syntactic", "rare") if h[n]) or "–"
        lines.append("| %s | %s %% @ %+d | %s %% | %s %s: %s %% / %s %% | %s | %s | %s | %s |" % (
            h["head"].split(":", 1)[1], fmt(100 * h["positional_share"], 1), h["positional_offset"],
            fmt(100 * h["rare_share"], 1), best["relation"], best["direction"].replace("->", "→"),
            fmt(100 * best["accuracy"], 1), fmt(100 * best["baseline"], 1), role, fmt(h["importance"]["gradient"], 3),
            fmt(0.0 - h["importance"]["ablation"], digits) if "ablation" in h["importance"] else "–",
            "–" if h["pruned"] else "kept"))
    kept = [h for h in roles["heads"] if not h["pruned"]]
    gone = [h for h in roles["heads"] if h["pruned"]]
    mean = lambda hs, k: fmt(100 * sum(h[k] for h in hs) / len(hs), 1) if hs else "–"
    lines.append("| mean, kept (%d) / removed (%d) | %s %% / %s %% | %s %% / %s %% | | | | | |" % (
        len(kept), len(gone), mean(kept, "positional_share"), mean(gone, "positional_share"),
        mean(kept, "rare_share"), mean(gone, "rare_share")))
    return lines


def multi30k_roles():
    """Voita's roles of the 24 encoder heads on UD English-EWT, with importance and the PASSCONC plan (studies/multi30k.sh)."""
    return roles_table(load(M30K)["roles"], "BLEU change", 2, "kept by PASSCONC (36 of 72)")


def multi30k_training():
    """The Multi30k model over training: validation loss (the selection rule) and each snapshot's test BLEU (studies/multi30k.sh)."""
    m = load(M30K)
    t = m["train"]
    bleu = {int(k): curve_grid(v)["gradient"][0.0] for k, v in m["over_training"].items()}
    lines = ["| step | validation loss | test_2016_flickr BLEU, greedy | note |", "|---:|---:|---:|---|"]
    for h in t["history"]:
        note = "chosen (lowest validation loss)" if h["loss"] == t["best_metric"] else ""
        lines.append("| %s | %s | %s | %s |" % ("{:,}".format(h["step"]), fmt(h["loss"], 3),
                                                fmt(bleu[h["step"]], 2) if h["step"] in bleu else "–", note))
    return lines


def multi30k_speed():
    """Latency of the PASS and PASSCONC models beside the unpruned one (studies/multi30k.sh)."""
    m = load(M30K)
    b = m["bench"]
    runs = {"unpruned": None}
    for k, method, g in m30k_gate_runs(m):
        if method in ("pass", "passconc"):
            runs["gates_keep%d/%s/model" % (k, method)] = (k, method, g)
    lines = ["| model | heads | emptied attention layers | batch 1, ms | batch 16, ms | FLOP-ideal | measured, batch 1 / 16 |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for key, run in runs.items():
        recs = {r["batch"]: r for r in b["records"]
                if (r["model"].endswith(key) if run else r["model"].endswith("/train/best"))}
        name = "unpruned" if run is None else "%s, %d heads" % (GATE_NAMES[run[1]], run[0])
        lines.append("| %s | %d | %d | %s | %s | ×%s | ×%s / ×%s |" % (
            name, recs[1]["heads"], 0 if run is None else len(run[2]["emptied_layers"]),
            fmt(recs[1]["median_ms"], 2), fmt(recs[16]["median_ms"], 2), fmt(recs[1]["ideal_speedup"], 2),
            fmt(recs[1]["measured_speedup"], 2), fmt(recs[16]["measured_speedup"], 2)))
    return lines


def importance_top(s, key, methods, change, digits, n):
    """The n heads whose single removal costs most (ablation), their change and significance, and their
    rank under each of `methods` (1 = most important)."""
    ranks = {}
    for method in methods:
        mp = imp_map(s, key, method)
        order = sorted(mp["heads"], key=lambda h: h["score"], reverse=mp["higher_is_important"])
        ranks[method] = {head_name(h): i + 1 for i, h in enumerate(order)}
    ablation = imp_map(s, key, "ablation")
    abl = {head_name(h): h for h in ablation["heads"]}
    top = sorted(abl, key=lambda n: ranks["ablation"][n])[:n]
    names = {"lrp": "LRP", "output_norm": "output norm"}
    lines = ["| head | %s when masked alone | significant (p < %g) | rank: %s |"
             % (change, ablation["info"]["significance_level"], " | ".join(names.get(m, m) for m in methods)),
             "|---|---:|---|" + "---:|" * len(methods)]
    for h in top:
        lines.append("| %s | %s | %s | %s |" % (h, fmt(abl[h]["delta_metric"], digits), "yes" if abl[h]["significant"] else "no",
                                               " | ".join(str(ranks[k][h]) for k in methods)))
    return lines


def multi30k_importance_top():
    """The heads whose single removal costs most, and their rank under the other methods (studies/multi30k.sh)."""
    return importance_top(load(M30K), "importance_valid", ["ablation", "gradient", "lrp", "confidence"], "BLEU change", 2, 8)


LM_SEEDS = {m: "bench/results/lm_seeds_%s.json" % m for m in ("gpt", "llama", "wikitext")}
LM_NAMES = {"gpt": "GPT-2-style decoder", "llama": "LLaMA-style decoder (grouped-query attention)",
            "wikitext": "GPT-2-style decoder on WikiText-2"}
# the corpus each study's out-of-domain config (studies/lm_seeds.sh) reports on
OTHER_CORPUS = {"configs/shakespeare_on_wikitext.json": "WikiText-2's test file",
                "configs/wikitext_on_shakespeare.json": "Tiny Shakespeare"}


def unpruned_finetuned(runs, digits):
    """'; the unpruned model fine-tuned alike: mean ± s.d.' where every seed's run measured it."""
    if not all("unpruned_finetuned" in r for r in runs):
        return ""
    return "; the unpruned model fine-tuned alike: %s" % mean_sd(
        [curve_grid(r["unpruned_finetuned"], "metric_finetuned")["gradient"][0.0] for r in runs], digits)


def domain_grids(runs):
    """Per seed: {"in domain": {fraction: perplexity}, "on it": ...}, perplexity on the other corpus with
    heads chosen on held-out text of the model's own corpus or on the other corpus itself."""
    return [{"in domain": curve_grid(r["curve_other_by_valid"])["gradient"],
             "on it": curve_grid(r["curve_other_by_other"])["gradient"]} for r in runs]


def domain_agreement(runs, key):
    return mean_sd([next(a[key] for a in r["agreement_domains"] if a["attn_type"] == "all") for r in runs], 3)


def domain_row(s, runs):
    """The scorecard's in-domain vs out-of-domain row, where every seed measured it (else none)."""
    if not all("agreement_domains" in r for r in runs):
        return []
    other = OTHER_CORPUS[s["other_config"]]
    grids = domain_grids(runs)
    return [("Michel et al. 2019 §3.4: important heads are the same across data sets (correlation above 0.5)",
             "gradient importance on held-out text of the training corpus vs on %s: Spearman %s, Pearson %s; "
             "perplexity on %s with half the heads removed, chosen in domain vs on it: %s vs %s (unpruned %s)" % (
                 other, domain_agreement(runs, "spearman"), domain_agreement(runs, "pearson"), other,
                 mean_sd([g["in domain"][0.5] for g in grids], 1), mean_sd([g["on it"][0.5] for g in grids], 1),
                 mean_sd([g["in domain"][0.0] for g in grids], 1)))]


def lm_domains(model):
    """Perplexity on the other corpus against the share of heads removed by gradient importance, chosen
    in domain or on the other corpus itself, mean ± s.d. over seeds (studies/lm_seeds.sh)."""
    s = load(LM_SEEDS[model])
    return grids_table(domain_grids(seed_runs(s)), "perplexity on %s, heads chosen" % OTHER_CORPUS[s["other_config"]],
                       {"in domain": "in domain (held-out text of the training corpus)",
                        "on it": "on the other corpus itself"}, 1)


def scorecard_lm(model):
    """Papers' claims against one language model over seeds (studies/lm_seeds.sh); perplexity, lower is better."""
    s = load(LM_SEEDS[model])
    gates = s["gates"].split()
    # the environment the results were made with ("MODELS='llama' SEEDS='1 2 3'"), then the script
    command = s["command"].split("studies/lm_seeds.sh")[0] + "bash studies/lm_seeds.sh"
    runs = seed_runs(s)
    grids = [curve_grid(r["curve"]) for r in runs]
    ft = [curve_grid(r["curve_finetuned"], "metric_finetuned") for r in runs]
    base = across(grids, "gradient", 0.0)

    def removable(g):  # the largest share removed by gradient importance within 5 % of unpruned perplexity
        return max(f for f, v in g["gradient"].items() if v <= 1.05 * g["gradient"][0.0])

    layer = LAYER_STRATEGIES + (["gradient:group"] if "gradient:group" in grids[0] else [])
    rows = [
        ("unpruned model (for the rows below)", "test %s; validation (chose the checkpoint) %s" % (
            mean_sd(base, 1), mean_sd([math.exp(r["train"]["best_metric"]) for r in runs], 1))),
        ("Michel et al. 2019: 20-40 % of heads removed by importance without a noticeable loss",
         "share of the heads removed by gradient importance with test perplexity within 5 %% of the "
         "seed's unpruned: %s" % ", ".join("%g %%" % (100 * removable(g)) for g in grids)),
        ("Michel et al. 2019: importance order beats removing heads at random",
         "gradient vs random: " + versus(grids, "gradient", "random:uniform", (0.25, 0.5, 0.75), 1)),
        ("Michel et al. 2019: iterative pruning against one-shot",
         "iterative vs one-shot: " + versus(grids, "iterative:gradient", "gradient", (0.5, 0.875), 1)),
        (gates_claim("PASS/PASSCONC: gates reach the exact head count; the concentrator empties whole layers", gates),
         "half the heads: %s; heads kept per seed: %s; layers emptied per seed: %s; one-shot gradient "
         "at 50 %%: %s" % (
             *gate_cells(gates, runs, 1),
             mean_sd(across(grids, "gradient", 0.5), 1))),
        ("Budhraja et al. 2020: random heads with layer strategies, fine-tuned, come close to importance",
         "half the heads removed, no fine-tuning: %s; after %d fine-tuning steps: %s, gradient %s%s" % (
             ", ".join("%s %s" % (st.split(":")[1], mean_sd(across(grids, st, 0.5), 1)) for st in layer),
             s["finetune_steps"],
             ", ".join("%s %s" % (st.split(":")[1], mean_sd(across(ft, st, 0.5), 1)) for st in layer),
             mean_sd(across(ft, "gradient", 0.5), 1), unpruned_finetuned(runs, 1))),
    ] + domain_row(s, runs)
    lines = ["| claim (paper) | ours: %s, `%s`, %d steps; test perplexity, held-out text that chose nothing "
             "(lower is better) | spread | command |" % (LM_NAMES.get(model, model), s["config"], s["train_steps"]),
             "|---|---|---|---|"]
    return lines + ["| %s | %s | %s | `%s` |" % (c, o, seeds_spread(s), command) for c, o in rows]


def seeds_curve(path, digits):
    """The metric against the share of heads pruned, mean ± s.d. over a seed study's seeds (– : the
    strategy cannot prune that many; its eligible layers hold fewer heads)."""
    grids = seed_grids(load(path))
    return grids_table(grids, "strategy", {st: st for st in grids[0]}, digits)


def grids_table(grids, first, rows, digits):
    """One row per key of rows (shown as its value), one column per fraction of the first row: mean ± s.d.
    over the seeds' grids ({row: {fraction: value}}; – where a seed lacks the fraction)."""
    fractions = sorted(grids[0][next(iter(rows))])
    lines = ["| %s | " % first + " | ".join("%g %%" % (100 * f) for f in fractions) + " |",
             "|---|" + "---:|" * len(fractions)]
    for key, name in rows.items():
        lines.append("| %s | %s |" % (name, " | ".join(
            mean_sd(across(grids, key, f), digits) if all(f in g[key] for g in grids) else "–" for f in fractions)))
    return lines


BERT_BASE = "bench/results/bert_base_table4.json"
BERT_TEXTBOOK = "bench/results/bert_base_textbook.json"


def thousands(v, digits=1):
    return "{:,.{d}f}".format(v, d=digits)


def bert_base_table4():
    """Michel's Table 4 on CPU: the BERT-base shape unpruned, masked and with half the heads removed two
    ways, examples/s per batch (bench/bert_base_speed.sh)."""
    t = load(BERT_BASE)
    models = [("base", "unpruned ex/s"), ("masked50", "masked 50 %"), ("uniform50", "uniform 50 % removed"),
              ("layers50", "6 layers emptied")]
    rec = {(r["model"].split("/")[2], r["batch"]): r for r in t["records"]}
    lines = ["| batch | " + " | ".join(name for _, name in models) + " |", "|---:|" + "---:|" * len(models)]
    for batch in sorted({r["batch"] for r in t["records"]}):
        base = rec[("base", batch)]
        cells = ["%s (%s ms)" % (fmt(base["examples_per_s"], 1), thousands(base["median_ms"]))]
        for m, _ in models[1:]:
            r = rec[(m, batch)]
            cells.append("%s (×%s; paired ×%s)" % (fmt(r["examples_per_s"], 1), fmt(r["measured_speedup"], 3),
                                                  fmt(r["paired_speedup"], 3)))
        lines.append("| %d | %s |" % (batch, " | ".join(cells)))
    lines.append("| FLOP-ideal | | %s |" % " | ".join("×" + fmt(rec[(m, batch)]["ideal_speedup"], 3) for m, _ in models[1:]))
    return lines


def bert_base_textbook():
    """The unpruned BERT-base shape against a plain LibTorch forward of the same weights (bench/bert_base_speed.sh)."""
    t = load(BERT_TEXTBOOK)
    rec = {(r["batch"], r["seq_len"], "textbook" in r["model"]): r for r in t["records"]}
    lines = ["| (batch, length) | headprune ms | textbook ms | textbook / headprune |", "|---|---:|---:|---:|"]
    for seq in sorted({r["seq_len"] for r in t["records"]}):
        for batch in sorted({r["batch"] for r in t["records"]}):
            ours, book = rec[(batch, seq, False)], rec[(batch, seq, True)]
            lines.append("| (%d, %d) | %s | %s | %s (paired %s) |" % (
                batch, seq, thousands(ours["median_ms"]), thousands(book["median_ms"]),
                fmt(book["median_ms"] / ours["median_ms"], 2),
                fmt(1 / book["paired_speedup"], 2)))
    return lines


DEMO = "bench/results/demo.json"
SYNTHETIC_MT = "bench/results/synthetic_mt.json"
DEMO_METRICS = {"accuracy": ("accuracy", 3), "perplexity": ("perplexity", 2), "bleu": ("greedy BLEU", 2)}


def minutes_seconds(s):
    s = int(round(s))
    return "%d min %d s" % (s // 60, s % 60) if s >= 60 else "%d s" % s


def demo():
    """`headprune demo` (README): each family trained, half its heads removed, fine-tuned and timed."""
    d = load(DEMO)
    lines = ["| family | metric | trained | half the heads removed | + fine-tuned | forward, batch 64 × 16 |",
             "| --- | --- | --- | --- | --- | --- |"]
    diffs = []
    for i, f in enumerate(d["families"]):
        name, digits = DEMO_METRICS[f["metric"]]
        st = {s["stage"]: s["metric"] for s in f["stages"]}
        sp = f["speed"]
        speed = ("×%s faster (FLOP-ideal ×%s)" if i == 0 else "×%s (×%s)") % (fmt(sp["paired_speedup"], 2),
                                                                              fmt(sp["ideal_speedup"], 2))
        lines.append("| %s | %s | %s | %s | %s | %s |" % (f["family"], name, fmt(st["before"], digits),
                                                          fmt(st["removed"], digits), fmt(st["fine-tuned"], digits), speed))
        diffs += [f["checks"]["masked_vs_removed_max_abs_diff"], f["checks"]["reloaded_max_abs_diff"]]
    env = d["environment"]
    lines.append("")
    lines.append("%s, %d threads, %s; %s in all%s. Masked and physically removed heads give the same outputs, "
                 "and each pruned checkpoint reloads to them: max |diff| %s over the families." % (
                     env["cpu"], env["threads"], env["blas_kernels"], minutes_seconds(d["wall_s"]),
                     ", " + d["date"] if "date" in d else "", "%g" % max(diffs)))
    return lines


def synthetic_mt():
    """The synthetic translation task trained alone (docs/training.md): validation loss, BLEU, time."""
    t = load(SYNTHETIC_MT)
    hist = t["train"]["history"]
    best = min(h["loss"] for h in hist)
    lines = ["| step | " + " | ".join(str(h["step"]) for h in hist) + " |", "| --- |" + " ---: |" * len(hist),
             "| valid loss | " + " | ".join(("**%s**" if h["loss"] == best else "%s") % fmt(h["loss"]) for h in hist) + " |"]
    bleu = t["eval"]["bleu"]
    lines.append("")
    lines.append("Greedy BLEU **%s**, beam 4 **%s** on the %d validation sequences; %s of training on the %s with "
                 "`--threads %d`, `OPENBLAS_CORETYPE` %s, %s." % (
                     fmt(bleu["beam1"]["score"], 2), fmt(bleu["beam4"]["score"], 2), t["eval"]["n_examples"],
                     minutes_seconds(t["train"]["wall_s"]), t["cpu"], t["threads"], t["openblas_coretype"], t["date"]))
    demo_mt = next(f for f in load(DEMO)["families"] if f["family"] == "encoder_decoder")
    trained = next(s for s in demo_mt["stages"] if s["stage"] == "before")
    lines.append("The demo trains the same configuration with the same seed (its run in `%s`: valid loss %s, "
                 "greedy BLEU %s before pruning)." % (DEMO, fmt(trained["loss"]), fmt(trained["metric"], 2)))
    return lines


DISTRIBUTED = "bench/results/distributed.json"
WORKLOADS = {"sst2": "SST-2 model (configs/sst2.json: 4 layers, d 256, bf16 autocast)",
             "synthetic_mt": "synthetic translation (d 64, 2+2 layers)"}


def distributed():
    """Training throughput of processes against threads (bench/distributed.sh); the machine in the file."""
    t = load(DISTRIBUTED)
    lines = ["| Workload | Processes × threads | Tokens/s | ms/step | vs 1 × 1 | Final training loss |",
             "|---|---|---:|---:|---:|---:|"]
    for r in t["rows"]:
        lines.append("| %s | %d × %d | %s | %s | ×%s | %s |" % (
            WORKLOADS.get(r["workload"], r["workload"]), r["processes"], r["threads_per_process"],
            thousands(r["tokens_per_s"], 0), fmt(r["step_ms"], 1), fmt(r["vs_1x1"], 2), fmt(r["last_train_loss"])))
    return lines


GPU_TABLE4 = "bench/results/gpu_table4.json"
HF_CLIENT = "bench/results/hf_client.json"


def gpu_table4():
    """Michel's Table 4 on a GPU: BERT-base shape, fp32 and bf16, headprune beside PyTorch eager (scripts/gpu.sh)."""
    t = load(GPU_TABLE4)
    lines = ["| precision | batch | unpruned ms | eager ms | headprune / eager | 50 % masked ms | 50 % removed ms "
             "(measured ×, FLOP-ideal ×) | eager, removed ms | 6 layers emptied ms (measured ×) | GPU peak MiB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in t["rows"]:
        b, m, u, l = r["base"], r["masked50"], r["uniform50"], r["layers50"]
        lines.append("| %s | %d | %s | %s | %s | %s | %s (×%s, ×%s) | %s | %s (×%s) | %s |" % (
            r["precision"], r["batch"], fmt(b["median_ms"], 2), fmt(b["eager_ms"], 2),
            fmt(b["headprune_over_eager"], 2), fmt(m["median_ms"], 2), fmt(u["median_ms"], 2),
            fmt(u["measured_speedup"], 3), fmt(u["ideal_speedup"], 3), fmt(u["eager_ms"], 2), fmt(l["median_ms"], 2),
            fmt(l["measured_speedup"], 3), fmt(b["gpu_peak_mib"], 0)))
    return lines


def scorecard_speed_gpu():
    """Michel's Table 4 claim against the GPU run (scripts/gpu.sh table4)."""
    t = load(GPU_TABLE4)
    gpu = t["environment"]["eager"].get("gpu", "GPU")
    cells = []
    for p in ("fp32", "bf16"):
        rows = [r for r in t["rows"] if r["precision"] == p]
        cells.append("%s: %s" % (p, ", ".join("batch %d ×%s" % (r["batch"], fmt(r["uniform50"]["measured_speedup"], 3))
                                              for r in rows)))
    ideal = t["rows"][0]["uniform50"]["ideal_speedup"]
    return ["| claim (paper) | ours, BERT-base shape, 50 %% of heads removed, length 128, one %s | spread | command |" % gpu,
            "|---|---|---|---|",
            "| Michel et al. 2019, Table 4: up to +17.5 %% examples/s at batch 16–64 on a GPU, almost "
            "nothing at batch 1 | %s (FLOP-ideal ×%s) | %d repetitions, median | `bash scripts/gpu.sh table4` |"
            % ("; ".join(cells), fmt(ideal, 3), t["environment"]["reps"])]


def hf_client():
    """transformers loading headprune's HF exports on the GPU machine (tests/gpu/hf_client.py)."""
    t = load(HF_CLIENT)
    lines = ["| case | layout | loaded by | max. abs. logit difference | result |", "|---|---|---|---:|---|"]
    for r in t["records"]:
        who = ("%s (transformers %s)" % (r["hf_class"], r["transformers"])) if r.get("loaded") else "–"
        diff = "%.1e" % r["max_abs_diff"] if "max_abs_diff" in r else "–"
        if r.get("ok"):
            result = "same logits"
        elif not r.get("loaded", True):
            result = "refused: " + r.get("error", "").split(" For details")[0].replace("|", "/")
        else:
            result = "DIFFERENT: " + r.get("error", "")
        lines.append("| %s | %s | %s | %s | %s |" % (r["case"], r["layout"], who, diff, result))
    return lines


LLM7B = "bench/results/llm7b.json"
LLM7B_CUDA = "bench/results/llm7b_cuda.json"


def llm7b_table(path):
    """The 7B-class path (bench/llm7b.py): time, peak RSS and (on a GPU) peak device memory per step."""
    t = load(path)
    ck = t["checkpoint_bytes"]
    gib = lambda b: "%.2f" % (b / 2**30)
    gpu = any(r.get("device_peak_bytes") for r in t["steps"])
    head = "| step | what | seconds | peak RSS GiB | × checkpoint |"
    rule = "|---|---|---:|---:|---:|"
    if gpu:
        head += " GPU peak GiB | GPU × checkpoint |"
        rule += "---:|---:|"
    lines = [head + " exit |", rule + "---:|"]
    what = {"info": "config and headers", "importance": "gradient of every query head and KV group, %d × %d tokens"
            % (t["calibration"]["samples"], t["calibration"]["length"]),
            "prune": "25 % of the KV groups removed, saved, reloaded and checked", "info_pruned": "the pruned checkpoint",
            "export": "HF directory, dense, sharded"}
    for r in t["steps"]:
        row = "| %s | %s | %s | %s | %s |" % (r["step"], what.get(r["step"], ""), fmt(r["seconds"], 1),
                                              gib(r["peak_rss_bytes"]), fmt(r["rss_over_checkpoint"], 3))
        if gpu:
            d = r.get("device_peak_bytes")
            row += " %s | %s |" % ((gib(d), fmt(d / ck, 3)) if d else ("-", "-"))
        lines.append(row + " %d |" % r["exit_code"])
    m, c = t["machine"], t["pruned"].get("checks") or {}
    lines.append("")
    lines.append("%s, %d cores, %s GiB of memory (%s GiB available at the start), %s threads, device %s; checkpoint "
                 "%s GiB (%.2f B parameters, bf16, %d layers), %s. Pruned: %s heads removed; logits masked vs removed "
                 "max |diff| %s, reloaded %s." % (
                     m["cpu"], m["cores"], gib(m["memory_bytes"]), gib(m["available_at_start_bytes"]), m["threads"],
                     m["device"], gib(ck), t["model"]["parameters"] / 1e9, t["model"]["num_hidden_layers"], t["date"],
                     t["pruned"].get("heads_removed", "?"),
                     "%.2g" % c["masked_vs_removed_max_abs_diff"] if c.get("masked_vs_removed_max_abs_diff") is not None else "-",
                     "%.2g" % c["reloaded_max_abs_diff"] if c.get("reloaded_max_abs_diff") is not None else "-"))
    return lines


def llm7b():
    return llm7b_table(LLM7B)


def llm7b_cuda():
    return llm7b_table(LLM7B_CUDA)


BUDGET = "bench/results/budget.json"
METHODS = "bench/results/methods.json"
METHODS_FULL = "bench/results/methods_full.json"  # the full-size study, run seed by seed over sessions


ENGINES = "bench/results/engines.json"


def engines_bert():
    """headprune against ONNX Runtime on BERT-base's shape, and its pruned models against the FLOP-ideal (bench/engines.py)."""
    e = load(ENGINES)["bert"]
    lines = ["| batch x length | headprune ms | ONNX Runtime ms | headprune / ORT | 6 of 12 heads removed: speed-up (FLOP-ideal, share) | every second layer emptied: speed-up (FLOP-ideal, share) |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in e["rows"]:
        cell = lambda v: "x%s (x%s, %s)" % (fmt(v["paired_speedup"], 2), fmt(v["flop_ideal"], 2), fmt(v["of_ideal"], 2))
        lines.append("| %d x %d | %s | %s | **%s** | %s | %s |" % (
            r["batch"], r["length"], thousands(r["headprune_ms"]), thousands(r["onnxruntime_ms"]), fmt(r["ratio"], 2),
            cell(r["uniform50"]), cell(r["layers50"])))
    return lines


def engines_llama():
    """headprune against llama.cpp on a LLaMA-style 127 M model: prompt processing and decoding (bench/engines.py)."""
    e = load(ENGINES)["llama"]
    names = {"prompt128": "prompt 128 tokens", "prompt512": "prompt 512 tokens", "decode": "decode 128 after 128"}
    lines = ["| precision | workload | headprune tokens/s | llama.cpp tokens/s | headprune / llama.cpp |", "|---|---|---:|---:|---:|"]
    for r in e["rows"]:
        lines.append("| %s | %s | %s | %s | **%s** |" % (
            r["precision"], names[r["workload"]], thousands(r["headprune_tokens_per_s"]),
            thousands(r["llamacpp_tokens_per_s"]), fmt(r["ratio"], 2)))
    return lines


def engines_checks():
    """The engines' outputs compared before any timing, and against a float64 evaluation (bench/engines.py)."""
    e = load(ENGINES)
    sci = lambda v: "%.1e" % v
    lines = ["| model | weights | compared | what | largest difference |", "|---|---|---|---|---:|",
             "| BERT-base, 1 x 32 | N(0, 0.02²) | ONNX Runtime and headprune | logits | %s |"
             % sci(e["bert"]["logits_check"]["max_abs_diff"])]
    for part in ("llama", "llama_check"):
        if part not in e:
            continue
        l = e[part]["logprobs_check"]
        x = l["exact"]
        r = l.get("initializer_range")
        weights = "N(0, %s²)" % r if r else "N(0, 0.2²), embeddings N(0, 0.5²)"
        model = "LLaMA-style 127 M, 1 x 128, F32 (largest logit %s)" % fmt(x["max_abs_logit"], 1)
        pairs = [("llama.cpp and headprune", l), ("headprune and float64", x["headprune"])]
        if "pytorch_float32" in x:
            pairs.append(("PyTorch %s float32 and float64" % x["pytorch_float32"]["version"], x["pytorch_float32"]))
        pairs.append(("llama.cpp and float64", x["llama.cpp"]))
        for who, d in pairs:
            lines.append("| %s | %s | %s | log-probabilities (probabilities) | %s (%s) |" % (
                model, weights, who, sci(d["max_abs_logprob_diff"]), sci(d["max_abs_prob_diff"])))
    return lines


def engines_kv():
    """Decoding at a 2k context, unpruned and with half the key/value groups removed, in both engines (bench/engines.py)."""
    e = load(ENGINES)["kv"]
    lines = ["| precision | model | KV cache MiB (counted) | headprune tokens/s | speed-up (FLOP-ideal) | llama.cpp tokens/s | speed-up |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in e["rows"]:
        lines.append("| %s | %s | %s (%s) | %s | x%s (x%s) | %s | x%s |" % (
            r["precision"], r["model"], fmt(r["headprune_kv_cache_bytes"] / 2**20, 1),
            fmt(r["counted_kv_cache_bytes"] / 2**20, 1), thousands(r["headprune_tokens_per_s"]),
            fmt(r["headprune_speedup"], 2), fmt(r["flop_ideal"], 2), thousands(r["llamacpp_tokens_per_s"]),
            fmt(r["llamacpp_speedup"], 2)))
    return lines


def budget_table():
    """The budget planner's predictions against the chosen models' measured costs (bench/budget.sh)."""
    t = load(BUDGET)
    lines = ["| run | budget | heads removed | limit | predicted | measured | error | share predicted / measured | share error "
             "| unpruned: check / table | met |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in t["runs"]:
        unit = {"ms": "ms", "bytes": "MiB", "parameters": "M"}[r["unit"]]
        scale = {"ms": 1.0, "bytes": 2.0**-20, "parameters": 1e-6}[r["unit"]]
        v = lambda x: "%.2f %s" % (x * scale, unit)
        share = ("%.3f / %.3f" % (r["predicted_share"], r["measured_share"]), "%+.1f %%" % (100 * r["share_error"])) \
            if "measured_share" in r else ("-", "-")
        drift = "%+.1f %%" % (100 * r["drift"]) if "drift" in r else "-"
        lines.append("| %s | `%s` | %d | %s | %s | %s | %+.1f %% | %s | %s | %s | %s |" % (
            r["run"], r["budget"], r["heads_removed"], v(r["limit"]), v(r["predicted"]), v(r["measured"]),
            100 * r["error"], share[0], share[1], drift, "yes" if r["met"] else "**no**"))
    e = t["environment"] or {}
    lines += ["", "`%s`; %s, %s threads; a latency row's unpruned model was timed beside the chosen one (the "
              "share columns: median ratio over rounds)." % (t["command"], e.get("cpu", "?"), e.get("threads", "?"))]
    return lines


BUDGET_RUNS = [("one rotation, 15 rounds per model (d0b07f0)", "bench/results/budget_repeat.json"),
               ("each variant beside the unpruned model, a pair at a time, ≥ 2 s per model (bfe3089)",
                "bench/results/budget_pairs.json"),
               ("one rotation, ≥ 2 s per model (6ddc094)", "bench/results/budget_earlier.json"),
               ("one rotation, ≥ 2 s per model, first of three in a row", "bench/results/budget_run1.json"),
               ("the same, second", "bench/results/budget_run2.json"),
               ("the same, third (the table above)", BUDGET),
               ("one rotation, ≥ 2 s per model, AMD EPYC, 2026-12-02", "bench/results/budget_amd.json")]


def budget_runs_table():
    """Every kept run of bench/budget.sh on this machine: the latency rows' errors and drifts side by side."""
    lines = ["| run | share error | ms error | unpruned: check / table | ms within 10 % | met |",
             "|---|---:|---:|---:|---:|---|"]
    for label, path in BUDGET_RUNS:
        runs = [r for r in load(path)["runs"] if "measured_share" in r]
        span = lambda k: "%+.1f … %+.1f %%" % (min(100 * r[k] for r in runs), max(100 * r[k] for r in runs))
        within = sum(abs(r["error"]) <= 0.10 for r in runs)
        lines.append("| %s (`%s`) | %s | %s | %s | %d of %d | %s |" % (
            label, path, span("share_error"), span("error"), span("drift"), within, len(runs),
            "all" if all(r["met"] for r in runs) else "**not all**"))
    return lines


METHOD_ROWS = [("score_gradient", "gradient importance (Michel)"), ("score_taylor", "Taylor, LLM-Pruner"),
               ("score_activation", "activation, Minitron"), ("score_magnitude", "weight magnitude"),
               ("score_layer_drop", "attention-layer drop"), ("gates_passconc", "PASSCONC gates"),
               ("gates_dsp", "DSP gates"), ("gates_cofi", "CoFi gates"),
               ("budget", "budget planner at PASSCONC's latency")]


def random_row(runs):
    """The methods table's baseline: the study's seeded random plans of the same count (studies/methods.sh,
    N_RANDOM per seed and variant), mean ± s.d. over every plan of every seed; a results file from before
    the study had them says it has none (the rows above then have no baseline: rerun the study)."""
    plain = [x for r in runs for k, x in sorted(r["plain"].items()) if k.startswith("random_")]
    kd = [x for r in runs for k, x in sorted(r.get("kd", {}).items()) if k.startswith("random_")]
    if not plain:
        return ("| random plans of the same count (the baseline) | | | not in this results file: rerun "
                "studies/methods.sh (N_RANDOM) | | | |")
    heads = stage(plain[0], "removed")["heads"]
    cell = lambda xs: mean_sd(xs) if len(xs) > 1 else fmt(xs[0])  # noqa: E731
    return "| random plans of the same count (%d per seed) | %d | - | %s | %s | %s | - |" % (
        len(plain) // len(runs), heads, cell([stage(x, "removed")["metric"] for x in plain]),
        cell([x["stages"][-1]["metric"] for x in plain]),
        cell([x["stages"][-1]["metric"] for x in kd]) if kd else "-")


def methods_table(path=METHODS):
    """Every method at half the heads, with and without distillation, over seeds (studies/methods.sh)."""
    t = load(path)
    lines = []
    for model in t["models"].split():
        runs = [t[model][k] for k in sorted(t.get(model, {}), key=int)]
        if not runs:
            continue
        def cell(xs, digits=4):  # one seed: its value (the header says "1 seed")
            return fmt(xs[0], digits) if len(runs) == 1 else mean_sd(xs, digits)
        metric = runs[0]["plain"]["score_gradient"].get("metric", "metric")
        lines += ["**%s** (%s; %s)" % (model, metric, "1 seed" if len(runs) == 1 else "%d seeds; mean ± s.d." % len(runs)), "",
                  "| method | heads kept | layers emptied | after pruning | fine-tuned | fine-tuned with distillation | latency share (batch %d × %d) |"
                  % tuple(t["bench"]), "|---|---:|---:|---:|---:|---:|---:|"]
        base = [stage(r["plain"]["score_gradient"], "before")["metric"] for r in runs]
        lines.append("| unpruned | %d | 0 | %s | | | 1 |" % (stage(runs[0]["plain"]["score_gradient"], "before")["heads"], cell(base)))
        for key, label in METHOD_ROWS:
            plain = [r["plain"][key] for r in runs if key in r["plain"]]
            kd = [r["kd"][key] for r in runs if key in r.get("kd", {})]
            if not plain:
                continue
            removed = [stage(x, "removed")["metric"] for x in plain]
            ft = [x["stages"][-1]["metric"] for x in plain]
            ftk = [x["stages"][-1]["metric"] for x in kd]
            def kept(x):  # the heads kept, and what the gates kept by themselves where a ranking completed them
                n = stage(x, "removed")["heads"]
                by_gates = x.get("result", {}).get("closed_by_gates")
                own = stage(x, "before")["heads"] - by_gates if by_gates is not None else n
                return "%d" % n if own == n else "%d (%d)" % (n, own)
            heads = "/".join(kept(x) for x in plain)
            def n_emptied(x):
                if "emptied_layers" in x:
                    return str(len(x["emptied_layers"]))
                kept = x["plan"]["info"].get("kept_groups")  # the budget planner's groups per layer
                return str(sum(1 for v in kept.values() if v == 0)) if kept else "-"
            emptied = "/".join(n_emptied(x) for x in plain)
            shares = []
            for r, x in zip(runs, plain):
                recs = r["bench"]["records"]
                rec = next((q for q in recs if q["model"] == x.get("model")), None)
                if rec:
                    shares.append(1 / rec["paired_speedup"])
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (label, heads, emptied, cell(removed), cell(ft),
                                                                    cell(ftk) if ftk else "-", cell(shares, 3) if shares else "-"))
        lines.append(random_row(runs))
        lines.append("")
    lines.append("Heads kept per seed; in parentheses, what the gates kept by themselves where the ranking "
                 "(P(open); DSP and CoFi always, `--complete-by-rank` for PASSCONC) changed the count.")
    lines.append("")
    for model in t["models"].split():
        run = t.get("runs", {}).get(model)
        if run is None:  # one run did every model
            run = {k: t[k] for k in ("command", "finetune_steps", "gate_steps", "steps_sst2", "steps_llama", "max_examples")}
        records = run.get("earlier", []) + [run]  # a study run seed by seed: one record per run
        for r in records:
            what = []
            if "settings" in r or "steps_sst2" in r:
                cfg = r.get("settings") or dict(r, steps=r["steps_sst2" if model == "sst2" else "steps_llama"])
                what.append("training steps: %d; fine-tuning %d steps; gates %d steps" % (
                    cfg["steps"], cfg["finetune_steps"], cfg["gate_steps"]))
                if cfg.get("max_examples"):
                    what.append("every split cut to its first %s examples" % cfg["max_examples"])
            if "cpu" in r:
                what.append("%s, %s threads, %s" % (r["cpu"], r["threads"], r["date"]))
            who = "%s seed%s %s" % (model, "s" if " " in r["seeds"] else "", r["seeds"]) if len(records) > 1 else model
            lines.append("%s: `%s`%s." % (who, r["command"], " (%s)" % "; ".join(what) if what else ""))
            lines.append("")
    return lines[:-1]


STORIES = "bench/results/stories260k.json"


def stories260k_scorers():
    """Every scorer's default plan on stories260K beside random plans of the same size: held-out perplexity
    with the heads masked, before any fine-tuning (studies/stories260k.py)."""
    s = load(STORIES)
    rows = s["targets"]
    head = "| scorer | default normalization |"
    rule = "| --- | --- |"
    for r in rows:
        head += (" %d of %d heads removed: perplexity | vs random (mean) | removed per layer | unnormalized scores |"
                 % (r["count"], s["heads"]))
        rule += " --- | --- | --- | --- |"
    lines = [head, rule]
    rnd = "| random (%d seeded plans) | — |" % s["n_random"]
    for r in rows:
        rnd += " %.1f ± %.1f | 1 | — | — |" % (r["random"]["mean"], r["random"]["sd"])
    lines.append(rnd)
    same = "| random, the same count from every layer (%d plans) | — |" % s["n_random"]
    for r in rows:
        pl = r["random_per_layer"]
        same += " %.1f ± %.1f | ×%.2f | %s | — |" % (pl["mean"], pl["sd"], pl["mean"] / r["random"]["mean"],
                                                   " / ".join([str(r["count"] // s["layers"])] * s["layers"]))
    lines.append(same)
    for m in rows[0]["methods"]:
        line = "| `%s` | %s |" % (m, rows[0]["methods"][m]["normalization"])
        for r in rows:
            v = r["methods"][m]
            ratio = v["perplexity"] / r["random"]["mean"]
            mark = "" if v["beats_random"] else " **(worse than random)**"
            line += " %.1f | ×%.2f%s | %s | %s |" % (v["perplexity"], ratio, mark, " / ".join(map(str, v["per_layer"])),
                                                    "same" if v["normalization"] == "none" else
                                                    "%.1f" % v["unnormalized"]["perplexity"])
        lines.append(line)
    d = s["data"]
    lines.append("")
    lines.append("Unpruned: perplexity %.2f on %d held-out sequences of %d tokens; heads scored on %d other "
                 "sequences (both %s). `%s` (%s, %s threads, %s, %.0f s)."
                 % (s["unpruned_perplexity"], d["heldout"][0], d["heldout"][1], d["calibration"][0], d["how"],
                    s["command"], s["cpu"], s["threads"], s["date"], s["seconds"]))
    return lines


def stories260k_uniform():
    """Uniform plans (--shape uniform) on stories260K: each scorer's beside seeded random uniform plans,
    held-out perplexity with the heads masked (studies/stories260k.py, its "uniform" rows)."""
    s = load(STORIES)
    rows = [r for r in s["targets"] if "uniform" in r]
    if not rows:
        return ["not in this results file: rerun studies/stories260k.py"]
    head, rule = "| scorer |", "| --- |"
    for r in rows:
        head += " %d of %d heads: perplexity | vs random (mean) | groups × heads kept per layer |" % (r["count"], s["heads"])
        rule += " --- | --- | --- |"
    lines = [head, rule]
    rnd = "| random uniform plans (%d seeded) |" % s["n_random"]
    for r in rows:
        u = r["uniform"]["random"]
        shapes = sorted({"%d × %d" % tuple(x) for x in u["shapes"]})
        rnd += " %.1f ± %.1f | 1 | %s |" % (u["mean"], u["sd"], " or ".join(shapes))
    lines.append(rnd)
    for m in rows[0]["uniform"]["methods"]:
        line = "| `%s` |" % m
        for r in rows:
            v, mean = r["uniform"]["methods"][m], r["uniform"]["random"]["mean"]
            mark = "" if v["beats_random"] else " **(worse than random)**"
            line += " %.1f | ×%.2f%s | %d × %d |" % (v["perplexity"], v["perplexity"] / mean, mark, *v["shape"])
        lines.append(line)
    lines.append("")
    lines.append("Same run, model and data as the table above (per-layer plans of the same counts there).")
    return lines


DECODE_RUNTIMES = "bench/results/decode_runtimes.json"


def decode_runtimes():
    """Decoding tokens/s of the uniformly pruned model against the unpruned one in llama.cpp (f32, q8_0),
    ONNX Runtime with the key/value cache and headprune (bench/decode_runtimes.py)."""
    t = load(DECODE_RUNTIMES)
    lines = ["| runtime | model | query / key-value heads per layer | decode tok/s | speedup | FLOP ideal | byte ideal |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in t["rows"]:
        lines.append("| %s | %s | %d / %d | %.1f | ×%.2f | ×%.2f | ×%.2f |" % (
            r["runtime"], r["model"], r["heads"], r["kv_heads"], r["decode_tokens_per_s"], r["speedup"],
            r["flop_ideal"], r["byte_ideal"]))
    lines.append("")
    lines.append("`%s` (%s, %d threads, %s): batch 1, %d greedy tokens after a %d-token prompt, median of %d runs, "
                 "best of %d rounds." % (t["command"], t["cpu"], t["threads"], t["date"], t["new_tokens"], t["prompt"],
                                         t["reps"], t["rounds"]))
    return lines


TABLES = {"decode_runtimes": (DECODE_RUNTIMES, decode_runtimes), "stories260k_scorers": (STORIES, stories260k_scorers), "stories260k_uniform": (STORIES, stories260k_uniform), "engines_bert": (ENGINES, engines_bert), "engines_llama": (ENGINES, engines_llama),
          "engines_kv": (ENGINES, engines_kv), "engines_checks": (ENGINES, engines_checks), "budget": (BUDGET, budget_table), "budget_runs": (BUDGET, budget_runs_table), "methods": (METHODS, methods_table), "methods_full": (METHODS_FULL, functools.partial(methods_table, METHODS_FULL)), "gpu_table4": (GPU_TABLE4, gpu_table4), "llm7b": (LLM7B, llm7b), "llm7b_cuda": (LLM7B_CUDA, llm7b_cuda), "scorecard_speed_gpu": (GPU_TABLE4, scorecard_speed_gpu),
          "hf_client": (HF_CLIENT, hf_client),
          "sst2_study_models": (SST2, sst2_study_models), "sst2_study_curve": (SST2, sst2_study_curve),
          "sst2_training": (SST2, sst2_training), "sst2_importance_top": (SST2, sst2_importance_top),
          "sst2_all_but_one": (SST2, sst2_all_but_one), "sst2_agreement": (SST2, sst2_agreement),
          "sst2_curve_finetuned": (SST2, sst2_curve_finetuned), "sst2_prune50": (SST2, sst2_prune50),
          "sst2_compensation": (SST2, sst2_compensation), "sst2_precision": (PRECISION, sst2_precision),
          "importance_cost": (IMPORTANCE_COST, importance_cost), "sst2_gates": (SST2, sst2_gates), "sst2_roles": (SST2, sst2_roles),
          "cpu_kernel_sets": (KERNELS, cpu_kernel_sets), "eager_inference": (EAGER, eager_inference),
          "eager_training": (TRAIN, eager_training), "pruned_int8": (PRUNED_INT8, pruned_int8),
          "linear_engines": (LINEAR, linear_engines), "attention_core": (ATTENTION_CORE, attention_core),
          "attention_micro": (ATTENTION_MICRO, attention_micro), "gemm_engines": (GEMM_ENGINES, gemm_engines),
          "demo": (DEMO, demo), "synthetic_mt": (SYNTHETIC_MT, synthetic_mt),
          "scorecard_sst2": (SEEDS, scorecard_sst2), "sst2_seeds_curve": (SEEDS, functools.partial(seeds_curve, SEEDS, 3)),
          "scorecard_speed": (PRUNED_INT8, scorecard_speed),
          "bert_base_table4": (BERT_BASE, bert_base_table4), "distributed": (DISTRIBUTED, distributed), "bert_base_textbook": (BERT_TEXTBOOK, bert_base_textbook),
          "scorecard_llama": (LLAMA, scorecard_llama), "llama_curve": (LLAMA, llama_curve),
          "llama_curve_finetuned": (LLAMA, llama_curve_finetuned), "llama_speed": (LLAMA, llama_speed), "scorecard_multi30k": (M30K, scorecard_multi30k),
          "multi30k_curve": (M30K, multi30k_curve), "multi30k_all_but_one": (M30K, multi30k_all_but_one),
          "multi30k_gates": (M30K, multi30k_gates), "multi30k_over_training": (M30K, multi30k_over_training),
          "multi30k_importance_top": (M30K, multi30k_importance_top), "multi30k_roles": (M30K, multi30k_roles),
          "multi30k_training": (M30K, multi30k_training), "multi30k_speed": (M30K, multi30k_speed),
          **{"scorecard_lm_" + m: (LM_SEEDS[m], functools.partial(scorecard_lm, m)) for m in LM_SEEDS},
          **{"lm_seeds_curve_" + m: (LM_SEEDS[m], functools.partial(seeds_curve, LM_SEEDS[m], 1)) for m in LM_SEEDS},
          **{"lm_domains_" + m: (LM_SEEDS[m], functools.partial(lm_domains, m)) for m in LM_SEEDS}}
OPEN = re.compile(r"^<!-- table (\S+) \(scripts/doc_tables\.py; from (\S+)\) -->$")
CLOSE = "<!-- end table -->"


def process(doc, check):
    with open(doc) as f:
        lines = f.read().split("\n")
    out, i, differ, found = [], 0, [], []
    while i < len(lines):
        m = OPEN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not m:
            continue
        name, source = m.group(1), m.group(2)
        if name not in TABLES:
            raise SystemExit("%s: unknown table '%s' (known: %s)" % (doc, name, ", ".join(sorted(TABLES))))
        if source != TABLES[name][0]:
            raise SystemExit("%s: table %s says it is from %s, it is from %s" % (doc, name, source, TABLES[name][0]))
        end = i
        while end < len(lines) and lines[end] != CLOSE:
            end += 1
        if end == len(lines):
            raise SystemExit("%s: table %s has no '%s' line" % (doc, name, CLOSE))
        want = TABLES[name][1]()
        if lines[i:end] != want:
            differ.append(name)
        out.extend(want)
        found.append(name)
        i = end
    if differ and not check:
        with open(doc + ".tmp", "w") as f:
            f.write("\n".join(out))
        os.replace(doc + ".tmp", doc)
    return found, differ


def main():
    global RESULTS_OVERRIDE
    args = sys.argv[1:]
    check = "--check" in args
    if "--results" in args:
        RESULTS_OVERRIDE = os.path.abspath(args[args.index("--results") + 1])
    if "--print" in args:
        shown, stale = 0, []
        for name, (source, make) in sorted(TABLES.items()):
            if not os.path.exists(resolve(source)):
                continue
            try:
                lines = make()
            except KeyError as e:  # a results file from an older version of its study
                stale.append("%s: %s has no %s (written by an older version of its study? rerun it)"
                             % (name, resolve(source), e))
                continue
            print("%s (from %s):\n%s\n" % (name, resolve(source), "\n".join(lines)))
            shown += 1
        for line in stale:
            print("not made: " + line)
        print("tables OK: %d of %d tables made from %s" % (shown, len(TABLES), RESULTS_OVERRIDE or "bench/results"))
        return
    docs = ["README.md"] + sorted("docs/" + n for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md"))
    total, bad = 0, []
    for name in docs:
        found, differ = process(os.path.join(ROOT, name), check)
        total += len(found)
        bad += ["%s: table %s" % (name, t) for t in differ]
    if check and bad:
        for b in bad:
            print("%s differs from its results JSON (run python3 scripts/doc_tables.py and commit)" % b, file=sys.stderr)
        sys.exit(1)
    print("tables OK: %d generated tables in README.md and docs/ %s their results" % (total, "match" if check else "written from"))


if __name__ == "__main__":
    main()
