// `headprune importance` and `headprune agreement`: options -> requests -> jobs/importance_job.h.
#include <memory>
#include <ostream>

#include "common.h"
#include "headprune/jobs/importance_job.h"

namespace hp::cli {

void register_importance(CLI::App& app, Context& ctx) {
  auto r = std::make_shared<ImportanceRequest>();
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("importance", "Score every attention head (gradient, ablation, confidence, LRP, ...)");
  sub->add_option("checkpoint", r->checkpoint, "checkpoint directory")->required();
  add_options(sub, *r, importance_request_table());
  add_data_options(sub, r->data);
  add_out_option(sub, r->out_dir, r->overwrite, "write importance.json and importance.csv here");
  sub->add_flag("--json", *json, "print the maps as JSON instead of heat maps");
  sub->callback([&ctx, r, json] {
    const ImportanceResult res = run_importance(*r, start(ctx), stderr_events(ctx));
    if (*json) ctx.out << res.json.dump(2) << "\n";
    else res.print(ctx.out);
  });

  auto a = std::make_shared<AgreementRequest>();
  auto* ag = app.add_subcommand("agreement", "Spearman and Pearson correlation between two importance files");
  ag->add_option("a", a->a, "importance JSON (from importance --out or --json)")->required();
  ag->add_option("b", a->b, "importance JSON")->required();
  ag->add_option("--method", a->method, "compare this method's maps (default: every method both files have)");
  ag->add_flag("--by-type", a->by_type, "also per attention type");
  ag->callback([&ctx, a] {
    start(ctx);
    ctx.out << run_agreement(*a, stderr_events(ctx)).dump(2) << "\n";
  });
}

}  // namespace hp::cli
