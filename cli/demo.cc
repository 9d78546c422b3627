// `headprune demo`: options -> DemoOptions -> jobs/demo.h.
#include <memory>
#include <ostream>

#include "common.h"
#include "headprune/jobs/demo.h"

namespace hp::cli {

void register_demo(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<DemoOptions>();
  auto* sub = app.add_subcommand("demo", "Train, score, mask, prune and fine-tune each model family on the built-in synthetic task");
  add_out_option(sub, opts->out_dir, opts->overwrite, "directory for the checkpoints")->capture_default_str();
  add_parsed_list(sub, "--family", opts->families, parse_arch, "encoder_classifier, decoder_lm, encoder_decoder (default: all)");
  sub->add_option("--fraction", opts->prune_fraction, "fraction of heads to remove (one whole layer, then by gradient)")
      ->check(real_range(0, 1))
      ->capture_default_str();
  sub->add_option("--train-steps", opts->train_steps, "training steps per family (default: enough to learn each task)")
      ->check(at_least(1));
  sub->add_option("--finetune-steps", opts->finetune_steps, "fine-tuning steps after pruning")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--json", opts->json_path, "also write the results as JSON to this file (OUT/summary.json: inside the demo's output)");
  sub->callback([&ctx, opts] { run_demo(*opts, start(ctx), ctx.out, stderr_events(ctx)); });
}

}  // namespace hp::cli
