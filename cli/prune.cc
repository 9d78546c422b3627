// `headprune prune` and `headprune curve`: options -> PruneRequest / CurveRequest -> jobs/prune_job.h.
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>

#include "common.h"
#include "headprune/jobs/prune_job.h"

namespace hp::cli {

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
  add_options(sub, r->plan, plan_option_table());
  add_options(sub, r->plan.budget_shape, budget_shape_table());
  add_options(sub, *r, prune_request_table());
  add_out_option(sub, r->out_dir, r->overwrite, "output directory: model/, plan.json, summary.json")->required();
  add_data_options(sub, r->data);
  add_score_split_option(sub, r->data);
  add_finetune_options(sub, r->finetune, r->data);
  sub->callback([&ctx, r, strategy] {
    settle_plan_strategy(r->plan, strategy->count() ? std::optional<PlanStrategy>(r->plan.strategy) : std::nullopt);
    run_prune(*r, start(ctx), stderr_events(ctx)).print(ctx.out);
  });

  auto c = std::make_shared<CurveRequest>();
  auto* cs = app.add_subcommand("curve", "Metric vs. fraction of heads pruned, for several strategies");
  cs->add_option("checkpoint", c->checkpoint, "checkpoint directory")->required();
  cs->add_option("--fractions", c->fractions, "fractions of heads pruned")->check(real_range(0, 1))->capture_default_str();
  add_options(cs, *c, curve_request_table());
  add_out_option(cs, c->out_dir, c->overwrite, "write curve.json and curve.csv here");
  add_data_options(cs, c->data);
  add_score_split_option(cs, c->data);
  add_finetune_options(cs, c->finetune, c->data);
  cs->callback([&ctx, c] { run_curve(*c, start(ctx), stderr_events(ctx)).print(ctx.out); });
}

}  // namespace hp::cli
