// `headprune gates`: options -> GatesRequest -> jobs/gates_job.h; a missed target exits non-zero.
#include <limits>
#include <memory>
#include <ostream>
#include <stdexcept>

#include "common.h"
#include "headprune/jobs/gates_job.h"

namespace hp::cli {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void add_gate_options(CLI::App* sub, GatesRequest& r) {
  GateOptions& g = r.gate;
  add_parsed(sub, "--method", g.method, parse_gate_method, "hard_concrete, pass, passconc, dsp or cofi", "passconc");
  add_parsed(sub, "--target", r.prune, parse_target,
             "heads to prune: a fraction (0.5 or 50%) or a count; required by pass, passconc, dsp and cofi");
  sub->add_option("--coef,--lambda", g.coef, "L0 weight (hard_concrete) or PASS's starting coefficient")
      ->check(real_range(0, kInf))
      ->capture_default_str();
  add_parsed(sub, "--hc-target", g.hc_target, parse_hc_target,
             "hard_concrete with --target: 'controller' (Voita's penalty; lambda searched each period, gates "
             "rolled back when too many closed) or 'quadratic' (pull the expected open count to the target)",
             "controller");
  sub->add_option("--coef-growth", g.coef_growth, "coefficient factor per period while off target")
      ->check(real_range(1, kInf))
      ->capture_default_str();
  sub->add_option_function<std::string>(
         "--concentrator", [&g](const std::string& s) { set_concentrator(g, s); },
         "passconc: 'adaptive' (re-set every period so a nearly empty layer's last heads close) or a fixed weight "
         "relative to the PASS coefficient")
      ->default_str("adaptive");
  sub->add_option("--concentrator-margin", g.concentrator_margin,
                  "adaptive concentrator: how many times the pull to close must exceed the P(g=1) term's pull")
      ->check(positive_real())
      ->capture_default_str();
  sub->add_option("--concentrator-max", g.concentrator_max, "adaptive concentrator: upper bound of its weight")
      ->check(real_range(0, kInf))
      ->capture_default_str();
  sub->add_option("--concentrator-until", g.concentrator_until,
                  "adaptive concentrator: fraction of --steps after which it is off")
      ->check(real_range(0, 1))
      ->capture_default_str();
  sub->add_option("--temperature", g.dist.beta, "Hard Concrete temperature beta")->check(positive_real())->capture_default_str();
  sub->add_option("--period", g.period, "steps between checks, coefficient updates and log lines")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--clip", g.clip, "pass/passconc: clip log alpha to [-clip, clip] (0 = off)")
      ->check(real_range(0, kInf))
      ->capture_default_str();
  sub->add_option("--reopen", g.reopen, "pass/passconc: reopen closed gates by confidence")->capture_default_str();
  sub->add_option("--reopen-decay", g.reopen_decay, "reopening probability factor per period")
      ->check(real_range(0, 1, true))
      ->capture_default_str();
  sub->add_option("--gate-lr", g.gate_lr, "Adam learning rate of log alpha")->check(positive_real())->capture_default_str();
  sub->add_option("--init-log-alpha", g.init_log_alpha, "starting log alpha of every gate")
      ->check(finite_real())
      ->capture_default_str();
  sub->add_option("--dsp-tau-start", g.dsp_tau_start, "dsp: Gumbel soft top-K temperature at the first step")
      ->check(positive_real())
      ->capture_default_str();
  sub->add_option("--dsp-tau-end", g.dsp_tau_end, "dsp: temperature at the last step (annealed geometrically)")
      ->check(positive_real())
      ->capture_default_str();
  sub->add_flag("--straight-through", g.dsp_straight_through, "dsp: hard top-K forward, relaxed gradient backward");
  sub->add_option("--lagrangian-lr", g.lagrangian_lr, "cofi: Adam rate of the Lagrange multipliers (gradient ascent)")
      ->check(positive_real())
      ->capture_default_str();
  sub->add_option("--cofi-warmup", g.cofi_warmup, "cofi: fraction of --steps over which the target rises linearly")
      ->check(real_range(0, 1))
      ->capture_default_str();
  sub->add_option("--gate-distill-weight", g.distill_weight,
                  "distil the model before the gates into the gated one while they train: (1 - w) * task + w * KL")
      ->check(real_range(0, 1))
      ->capture_default_str();
  sub->add_option("--gate-distill-hidden", g.distill_hidden_weight,
                  "while the gates train, add this weight times the hidden-state MSE against the model before the "
                  "gates (CoFi's layer-wise distillation)")
      ->check(real_range(0, kInf))
      ->capture_default_str();
  sub->add_option("--extra-steps", g.max_extra_steps,
                  "train up to this many more steps, a period at a time, until the head count is exact")
      ->check(at_least(0))
      ->capture_default_str();
  sub->add_flag("--complete-by-rank", g.complete_by_rank,
                "if the gates still miss the target at the end, keep the target's count of heads with the largest "
                "P(open) (PASS's top-K evaluation); closed_by_gates in gates.json keeps the gates' own count");
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
