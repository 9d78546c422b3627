// `headprune train` and `headprune init`: options -> TrainRequest / InitRequest -> jobs/train_job.h.
#include <memory>
#include <ostream>

#include "common.h"
#include "headprune/jobs/train_job.h"

namespace hp::cli {

void register_train(CLI::App& app, Context& ctx) {
  auto i = std::make_shared<InitRequest>();
  auto* init = app.add_subcommand("init", "Write a randomly initialized checkpoint of a model config (speed studies)");
  init->add_option("--config", i->config, "model config JSON (a bare model object or a run config)")->required();
  add_out_option(init, i->out_dir, i->overwrite, "checkpoint directory to write")->required();
  init->callback([&ctx, i] { ctx.out << run_init(*i, start(ctx)) << "\n"; });

  auto r = std::make_shared<TrainRequest>();
  auto* sub = app.add_subcommand("train", "Train a model (from a JSON config, or on the built-in synthetic task)");
  add_options(sub, *r, train_request_table());
  add_out_option(sub, r->out_dir, r->overwrite, "output directory (best/, last/, history.json)")->required();
  sub->callback([&ctx, r] { ctx.out << run_train(*r, start(ctx), stderr_events(ctx)).to_json().dump(2) << "\n"; });
}

}  // namespace hp::cli
