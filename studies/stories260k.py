#!/usr/bin/python3
"""Every scorer's plan on a model someone else trained, beside random plans of the same size (issue 77).

The model is ../shared/models/stories260K (llama2.c's GQA LLaMA trained on TinyStories: 5 layers x 8
query heads over 4 key/value heads). It has no tokenizer here, so its data is text the model itself
writes: sequences sampled from it at temperature 1 from BOS, by the independent reference
(tests/clients/llama2c_reference.py), seeded - one set to score heads on (calibration), another to
measure (held-out). For each scorer: `headprune.importance` on the calibration set (the scorer's default
normalization), the plan `headprune.plan(strategy="score", method=M, scores=...)` would give at each
target, those heads masked, and the held-out perplexity before any fine-tuning (and the same for the
scores unnormalized, `--normalize none`, to show what each default changes); beside it the mean and
sample standard deviation of N_RANDOM seeded random plans of the same count on the same data, and of
N_RANDOM random plans that take the same count from every layer (the baseline of a scorer whose default
normalization ranks within layers, as `rank` does).

  studies/stories260k.py [--out bench/results/stories260k.json] [--model DIR] [--calibration N]
                         [--heldout N] [--length L] [--targets 0.25,0.5] [--random 8] [--seed S]
                         [--methods all|m1,m2] [--threads T]

tests/python/test_stories260k.py runs `study()` at the CI's size; scripts/doc_tables.py turns the
results file into docs/importance.md's table.
"""
import argparse
import datetime
import json
import math
import os
import platform
import random
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.environ.get("HEADPRUNE_PYTHONPATH") or os.path.join(REPO, "build", "python"))
sys.path.insert(0, os.path.join(REPO, "tests", "clients"))

import torch  # noqa: E402

import headprune  # noqa: E402
import llama2c_reference as ref  # noqa: E402

MODEL = os.path.join(REPO, "..", "shared", "models", "stories260K")
# The data-driven scorers and magnitude (weights only); random is the baseline itself.
METHODS = ["gradient", "ablation", "all_but_one", "confidence", "entropy", "magnitude", "output_norm", "lrp",
           "activation", "taylor", "layer_drop"]


def sampled(model_dir, n, length, seed):
    """n sequences of `length` token ids the model writes (temperature 1, from BOS), as a [n, length] tensor."""
    w, cfg = ref.load(model_dir)
    return torch.tensor(ref.sample(w, cfg, n, length, seed), dtype=torch.long)


def perplexity(model, ids):
    """exp of the mean next-token negative log-likelihood over every position after the first (no mask:
    every token is real, end-of-text inside the text included)."""
    logits = model(ids).float()
    nll = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
    return math.exp(float(nll))


def masked_perplexity(model, heads, ids):
    model.mask_heads(heads)
    try:
        return perplexity(model, ids)
    finally:
        model.unmask_heads()


def per_layer(heads, n_layers):
    counts = [0] * n_layers
    for _, layer, _ in heads:
        counts[layer] += 1
    return counts


def cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def uniform_row(model, imp, count, heldout, methods, n_random, seed, threads):
    """Uniform plans (--shape uniform: every layer keeps the same key/value groups and query heads per
    group, an ordinary smaller model) of up to `count` heads: each scorer's, beside n_random seeded random
    uniform plans (the shape and the heads drawn at random), all on the same held-out text."""
    def shape(p):
        k = p.info["kept_per_layer"]["decoder_self"]
        return [k["key_value_groups"], k["query_heads_per_group"]]
    rnd, shapes = [], []
    for s in range(n_random):
        p = headprune.plan(model, strategy="random", shape="uniform", target=count, seed=seed * 1000 + 500 + s,
                           threads=threads, progress=False)
        rnd.append(masked_perplexity(model, p.heads, heldout))
        shapes.append(shape(p))
    mean = statistics.fmean(rnd)
    out = {"random": {"perplexities": rnd, "mean": mean, "sd": statistics.stdev(rnd) if n_random > 1 else 0.0,
                      "shapes": shapes}, "methods": {}}
    for m in methods:
        p = headprune.plan(model, strategy="score", method=m, shape="uniform", target=count, scores=imp,
                           threads=threads, progress=False)
        ppl = masked_perplexity(model, p.heads, heldout)
        out["methods"][m] = {"perplexity": ppl, "removed": len(p.heads), "shape": shape(p), "beats_random": ppl < mean}
    return out


def study(model_dir=MODEL, n_calibration=32, n_heldout=32, length=128, targets=(0.25, 0.5), n_random=8, seed=1,
          methods=METHODS, threads=None, progress=False):
    """The study's results as a dict (see the module's doc)."""
    start = time.time()
    calibration = sampled(model_dir, n_calibration, length, seed)
    heldout = sampled(model_dir, n_heldout, length, seed + 1000)
    model = headprune.load(model_dir)
    layers = model.config["heads"]["decoder_self"]
    total, n_layers = sum(len(h) for h in layers), len(layers)
    base = perplexity(model, heldout)
    imp = headprune.importance(model, calibration, methods=list(methods), seed=seed, threads=threads,
                               progress=progress)
    # The same scores unnormalized, ranked globally: what each default normalization changes.
    raw = headprune.importance(model, calibration, methods=list(methods), normalize="none", seed=seed,
                               threads=threads, progress=progress)
    rows = []
    for fraction in targets:
        count = int(round(fraction * total))
        random_ppl, random_layers = [], []
        for s in range(n_random):
            p = headprune.plan(model, strategy="random", target=count, seed=seed * 1000 + s, threads=threads,
                               progress=False)
            random_ppl.append(masked_perplexity(model, p.heads, heldout))
            random_layers.append(per_layer(p.heads, n_layers))
        mean = statistics.fmean(random_ppl)
        sd = statistics.stdev(random_ppl) if len(random_ppl) > 1 else 0.0
        # The baseline of a plan that takes the same share of every layer (rank-normalized scorers):
        # random heads, round(fraction x heads) of each layer.
        rng = random.Random(seed * 1000 + 999)
        per_layer_ppl = []
        for _ in range(n_random):
            heads = [("decoder_self", layer, h) for layer, kept in enumerate(layers)
                     for h in sorted(rng.sample(kept, int(round(fraction * len(kept)))))]
            per_layer_ppl.append(masked_perplexity(model, heads, heldout))
        row = {"fraction": fraction, "count": count,
               "random": {"perplexities": random_ppl, "mean": mean, "sd": sd, "per_layer": random_layers},
               "random_per_layer": {"perplexities": per_layer_ppl, "mean": statistics.fmean(per_layer_ppl),
                                    "sd": statistics.stdev(per_layer_ppl) if n_random > 1 else 0.0},
               "methods": {}}
        for m in methods:
            p = headprune.plan(model, strategy="score", method=m, target=count, scores=imp, threads=threads,
                               progress=False)
            ppl = masked_perplexity(model, p.heads, heldout)
            row["methods"][m] = {"perplexity": ppl, "normalization": imp[m].normalization,
                                 "per_layer": per_layer(p.heads, n_layers), "beats_random": ppl < mean,
                                 "heads": ["%s:%d:%d" % h for h in p.heads]}
            p = headprune.plan(model, strategy="score", method=m, target=count, scores=raw, threads=threads,
                               progress=False)
            row["methods"][m]["unnormalized"] = {"perplexity": masked_perplexity(model, p.heads, heldout),
                                                 "per_layer": per_layer(p.heads, n_layers)}
        row["uniform"] = uniform_row(model, imp, count, heldout, methods, n_random, seed, threads)
        rows.append(row)
    return {
        "model": "stories260K (../shared/models/stories260K)", "layers": n_layers, "heads": total,
        "data": {"calibration": [n_calibration, length, seed], "heldout": [n_heldout, length, seed + 1000],
                 "how": "sampled from the model by tests/clients/llama2c_reference.py, temperature 1, from BOS"},
        "unpruned_perplexity": base, "n_random": n_random, "targets": rows,
        "cpu": cpu_name(), "threads": threads or torch.get_num_threads(),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
        "seconds": round(time.time() - start, 1), "date": datetime.date.today().isoformat(),
    }


def write_json(path, obj):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results", "stories260k.json"))
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--calibration", type=int, default=64, help="calibration sequences (default 64)")
    ap.add_argument("--heldout", type=int, default=64, help="held-out sequences (default 64)")
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--targets", default="0.25,0.5", help="fractions of the heads removed")
    ap.add_argument("--random", type=int, default=8, help="random plans per target (default 8)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--methods", default="all")
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args(argv)
    if not os.path.isdir(a.model):
        sys.exit("stories260k.py: %s: no such model directory (see ../shared/models/stories260K/SOURCE.md)" % a.model)
    methods = METHODS if a.methods == "all" else a.methods.split(",")
    res = study(a.model, a.calibration, a.heldout, a.length, [float(t) for t in a.targets.split(",")], a.random,
                a.seed, methods, a.threads, progress=True)
    res["command"] = "studies/stories260k.py " + " ".join(argv if argv is not None else sys.argv[1:])
    write_json(a.out, res)
    for row in res["targets"]:
        r = row["random"]
        pl = row["random_per_layer"]
        print("%d of %d heads: random %.1f +- %.1f, the same share of each layer %.1f +- %.1f"
              % (row["count"], res["heads"], r["mean"], r["sd"], pl["mean"], pl["sd"]))
        for m, v in row["methods"].items():
            print("  %-12s %8.1f  %s  per layer %s" % (m, v["perplexity"], "beats" if v["beats_random"] else "LOSES",
                                                       v["per_layer"]))
    print("wrote %s (%.0f s)" % (a.out, res["seconds"]))


if __name__ == "__main__":
    main()
