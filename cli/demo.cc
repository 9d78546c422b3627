// `headprune demo`: the built-in end-to-end demo (library: hp::run_demo).
#include <memory>
#include <ostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app.h"
#include "headprune/demo.h"
#include "headprune/io/files.h"

namespace hp::cli {

void register_demo(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<DemoOptions>();
  auto families = std::make_shared<std::vector<std::string>>();
  auto json_path = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("demo", "Train, score, mask, prune and fine-tune each model family on the built-in synthetic task");
  sub->add_option("--out", opts->out_dir, "directory for the pruned checkpoints")->capture_default_str();
  sub->add_option("--family", *families, "encoder_classifier, decoder_lm, encoder_decoder (default: all)");
  sub->add_option("--fraction", opts->prune_fraction, "fraction of heads to remove by gate gradient")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  sub->add_option("--train-steps", opts->train_steps, "training steps per family")->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--finetune-steps", opts->finetune_steps, "fine-tuning steps after pruning")
      ->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--json", *json_path, "also write the results as JSON to this file");
  sub->callback([&ctx, opts, families, json_path] {
    apply_globals(ctx);
    opts->seed = ctx.seed;
    if (!families->empty()) {
      opts->families.clear();
      for (const auto& f : *families) opts->families.push_back(parse_arch(f));
    }
    auto report = run_demo(*opts, ctx.out);
    if (!json_path->empty()) write_file_atomic(*json_path, report.dump(2) + "\n");
  });
}

}  // namespace hp::cli
