// `headprune gates`: options -> GatesRequest -> jobs/gates_job.h; a missed target exits non-zero.
#include <memory>
#include <ostream>
#include <stdexcept>

#include "common.h"
#include "headprune/jobs/gates_job.h"

namespace hp::cli {
namespace {

void add_gate_options(CLI::App* sub, GatesRequest& r) {
  add_options(sub, r.gate, gate_option_table());
  add_parsed(sub, "--target", r.prune, parse_target,
             "heads to prune: a fraction (0.5 or 50%) or a count; required by pass, passconc, dsp and cofi");
}

}  // namespace

void register_gates(CLI::App& app, Context& ctx) {
  auto r = std::make_shared<GatesRequest>();
  auto* sub = app.add_subcommand("gates", "Learn which heads to keep with Hard Concrete, PASS, PASSCONC, DSP or CoFi gates");
  sub->add_option("checkpoint", r->checkpoint, "checkpoint directory")->required();
  sub->add_option("--steps", r->steps, "training steps with gates")->check(at_least(1))->capture_default_str();
  sub->add_option("--lr", r->lr, "model learning rate (default: the run config's)")->check(positive_real());
  sub->add_flag("--from-scratch", r->from_scratch, "train the checkpoint's architecture with gates from a fresh init");
  add_gate_options(sub, *r);
  add_parsed(sub, "--metric", r->metric, parse_metric, "accuracy, bleu, perplexity or loss (default: the task's)");
  sub->add_option("--beam", r->beam, "beam size for BLEU")->check(at_least(1))->capture_default_str();
  add_out_option(sub, r->out_dir, r->overwrite, "output directory")->required();
  add_data_options(sub, r->data);
  add_finetune_options(sub, r->finetune, r->data);
  sub->callback([&ctx, r] {
    const GatesResult res = run_gates(*r, start(ctx), stderr_events(ctx));
    res.print(ctx.out);
    if (!res.gates.reached_target)
      throw std::runtime_error("gates: kept " + std::to_string(res.gates.kept.size()) + " heads, not the target " +
                               std::to_string(*res.options.target_kept) +
                               " (results saved; train longer, allow --extra-steps or raise --coef)");
  });
}

}  // namespace hp::cli
