"""bench/results/lm_seeds_gpt.json, lm_seeds_llama.json and lm_seeds_wikitext.json
(studies/lm_seeds.sh): the language models over seeds, three tables per file (M: gpt, llama, wikitext).

docs/results.md: scorecard_lm_M, lm_seeds_curve_M, lm_domains_M.
"""
import functools
import math

from .core import add, load, mean_sd
from .common import curve_grid
from .seeds import (LAYER_STRATEGIES, across, gate_cells, gates_claim, grids_table, seed_runs, seeds_curve,
                    seeds_spread, unpruned_finetuned, versus)


LM_SEEDS = {m: "bench/results/lm_seeds_%s.json" % m for m in ("gpt", "llama", "wikitext")}
LM_NAMES = {"gpt": "GPT-2-style decoder", "llama": "LLaMA-style decoder (grouped-query attention)",
            "wikitext": "GPT-2-style decoder on WikiText-2"}
# the corpus each study's out-of-domain config (studies/lm_seeds.sh) reports on
OTHER_CORPUS = {"configs/shakespeare_on_wikitext.json": "WikiText-2's test file",
                "configs/wikitext_on_shakespeare.json": "Tiny Shakespeare"}


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


for _model, _path in LM_SEEDS.items():
    add("scorecard_lm_" + _model, _path, functools.partial(scorecard_lm, _model))
    add("lm_seeds_curve_" + _model, _path, functools.partial(seeds_curve, _path, 1))
    add("lm_domains_" + _model, _path, functools.partial(lm_domains, _model))
