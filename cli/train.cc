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
  sub->add_option("--config", r->config, "run config JSON with model, data and train sections (see configs/)");
  add_parsed(sub, "--family", r->family, parse_arch,
             "built-in synthetic task when no --config: encoder_classifier, decoder_lm, encoder_decoder",
             "encoder_classifier");
  add_out_option(sub, r->out_dir, r->overwrite, "output directory (best/, last/, history.json)")->required();
  sub->add_option("--data-root", r->data_root, "directory that relative data paths start from")->capture_default_str();
  sub->add_flag("--resume", r->resume, "continue OUT's run from OUT/last (an error if there is none)");
  sub->add_option("--max-steps", r->max_steps, "override the config's max_steps")->check(at_least(1));
  sub->add_option("--keep-every", r->keep_every, "keep a model snapshot OUT/step-NNNNNN every N steps (0 = none)")
      ->check(at_least(0));
  sub->add_option("--eval-every", r->eval_every, "override the config's eval_every")->check(at_least(1));
  sub->callback([&ctx, r] { ctx.out << run_train(*r, start(ctx), stderr_events(ctx)).to_json().dump(2) << "\n"; });
}

}  // namespace hp::cli
