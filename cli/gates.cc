// `headprune gates`: options -> GatesRequest -> jobs/gates_job.h; a missed target exits non-zero.
#include <memory>
#include <ostream>
#include <stdexcept>

#include "common.h"
#include "headprune/jobs/gates_job.h"

namespace hp::cli {
void register_gates(CLI::App& app, Context& ctx) {
  auto r = std::make_shared<GatesRequest>();
  auto* sub = app.add_subcommand("gates", "Learn which heads to keep with Hard Concrete, PASS, PASSCONC, DSP or CoFi gates");
  sub->add_option("checkpoint", r->checkpoint, "checkpoint directory")->required();
  add_options(sub, *r, gates_request_table());
  add_options(sub, r->gate, gate_option_table());
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
