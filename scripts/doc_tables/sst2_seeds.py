"""bench/results/sst2_seeds.json (studies/sst2_seeds.sh): the SST-2 study over seeds.

docs/results.md: scorecard_sst2, sst2_seeds_curve.
"""
import functools

from .core import add, load, mean_sd, table
from .seeds import (LAYER_STRATEGIES, across, gate_cells, gates_claim, gates_finetuned, seed_grids, seed_runs,
                    seeds_curve, seeds_spread, unpruned_finetuned, versus)


SEEDS = "bench/results/sst2_seeds.json"


@table("scorecard_sst2", SEEDS)
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


add("sst2_seeds_curve", SEEDS, functools.partial(seeds_curve, SEEDS, 3))
