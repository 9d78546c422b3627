// `headprune prune` and `headprune curve`: options -> PruneRequest / CurveRequest -> jobs/prune_job.h.
#include <memory>
#include <ostream>
#include <stdexcept>

#include "common.h"
#include "headprune/jobs/prune_job.h"

namespace hp::cli {

namespace {

// Strategy budget: the budget and where it is measured.
void add_budget_options(CLI::App* sub, PlanSpec& plan) {
  sub->add_option("--budget", plan.budget,
                  "budget: latency=0.7x or =12ms (measured here), memory=2GiB or =0.8x (weights and key/value cache), "
                  "kv-cache=..., params=0.75x or =80M; the plan keeps the most --method importance within it (implies --strategy budget)");
  add_options(sub, plan.budget_shape, budget_shape_table());
}

}  // namespace

void register_prune(CLI::App& app, Context& ctx) {
  auto r = std::make_shared<PruneRequest>();
  auto* sub = app.add_subcommand("prune", "Prune heads: score, plan, mask or remove, fine-tune, evaluate, save");
  sub->add_option("checkpoint", r->checkpoint, "checkpoint directory")->required();
  auto* strategy = add_parsed(
      sub, "--strategy", r->plan.strategy,
      [](const std::string& s) {
        const PlanStrategy st = parse_plan_strategy(s);
        if (st == PlanStrategy::Given) throw std::invalid_argument("--strategy given is for library callers; use --strategy plan --plan FILE");
        return st;
      },
      "score, iterative, random, layers, manual, plan or budget", "score");
  add_parsed(sub, "--method", r->plan.method, parse_score_method, "scoring method for score and iterative", "gradient");
  add_parsed(sub, "--target", r->plan.target, parse_target, "how many heads: a fraction (0.3 or 30%) or a count (12)");
  sub->add_flag("--per-layer", r->plan.per_layer, "score: the target fraction of every layer instead of globally");
  add_parsed(sub, "--unit", r->plan.unit, parse_plan_unit,
             "score, grouped-query attention: head (query heads), group (whole key/value groups; the target counts "
             "groups) or balanced (as many query heads from every group of a layer)",
             "head");
  sub->add_option("--min-per-layer", r->plan.min_per_layer, "keep at least this many heads in every layer")
      ->check(at_least(0))
      ->capture_default_str();
  add_parsed(sub, "--layer-strategy", r->plan.layer_strategy, parse_layer_choice,
             "random: uniform, avoid_middle, avoid_consecutive, top, bottom", "uniform");
  sub->add_option("--step", r->plan.step, "iterative: fraction of the heads pruned per step")
      ->check(real_range(0, 1, true))
      ->capture_default_str();
  sub->add_option("--min-ratio", r->plan.min_ratio, "iterative: stop before the metric falls below this fraction of the start")
      ->check(finite_real());
  sub->add_option("--heads", r->plan.heads, "manual: TYPE:LAYER:HEAD,... or HF's {\"layer\": [heads]} JSON");
  add_parsed(sub, "--hf-type", r->plan.hf_type, parse_attn_type, "manual, HF form: the attention type its layers refer to");
  add_parsed(sub, "--layers", r->plan.layers, parse_layer_list, "layers: TYPE:LAYER,... whole attention layers");
  sub->add_option("--plan", r->plan.plan_file, "a plan JSON (an earlier prune's plan.json); implies --strategy plan");
  sub->add_option("--scores", r->plan.scores_file,
                  "score: take the --method map from this importance.json (headprune importance --out) instead of "
                  "scoring again");
  add_budget_options(sub, r->plan);
  sub->add_flag("--mask-only", r->mask_only, "save the model with the heads masked instead of removing them");
  add_parsed(sub, "--metric", r->metric, parse_metric, "accuracy, bleu, perplexity or loss (default: the task's)");
  sub->add_option("--beam", r->beam, "beam size for BLEU")->check(at_least(1))->capture_default_str();
  add_out_option(sub, r->out_dir, r->overwrite, "output directory: model/, plan.json, summary.json")->required();
  add_data_options(sub, r->data);
  add_score_split_option(sub, r->data);
  add_finetune_options(sub, r->finetune, r->data);
  sub->callback([&ctx, r, strategy] {
    if (!r->plan.plan_file.empty() && strategy->count() == 0) r->plan.strategy = PlanStrategy::File;
    if (!r->plan.budget.empty() && strategy->count() == 0) r->plan.strategy = PlanStrategy::Budget;
    run_prune(*r, start(ctx), stderr_events(ctx)).print(ctx.out);
  });

  auto c = std::make_shared<CurveRequest>();
  c->series = {parse_curve_series("gradient"), parse_curve_series("iterative:gradient"),
                   parse_curve_series("random:uniform")};
  auto* cs = app.add_subcommand("curve", "Metric vs. fraction of heads pruned, for several strategies");
  cs->add_option("checkpoint", c->checkpoint, "checkpoint directory")->required();
  add_parsed_list(cs, "--strategy", c->series, parse_curve_series,
                  "METHOD[:per_layer|:group|:balanced], iterative[:METHOD], "
                  "random[:uniform|avoid_middle|avoid_consecutive|top|bottom]; "
                  "append @TYPE[+TYPE] to prune only those attention types (repeat for several)",
                  "[gradient,iterative:gradient,random:uniform]");
  cs->add_option("--fractions", c->fractions, "fractions of heads pruned")->check(real_range(0, 1))->capture_default_str();
  cs->add_option("--min-per-layer", c->min_per_layer, "score and iterative: keep this many heads per layer")
      ->check(at_least(0))
      ->capture_default_str();
  add_parsed(cs, "--metric", c->metric, parse_metric, "accuracy, bleu, perplexity or loss (default: the task's)");
  cs->add_option("--beam", c->beam, "beam size for BLEU")->check(at_least(1))->capture_default_str();
  add_out_option(cs, c->out_dir, c->overwrite, "write curve.json and curve.csv here");
  add_data_options(cs, c->data);
  add_score_split_option(cs, c->data);
  add_finetune_options(cs, c->finetune, c->data);
  cs->callback([&ctx, c] { run_curve(*c, start(ctx), stderr_events(ctx)).print(ctx.out); });
}

}  // namespace hp::cli
