// hard_concrete (Voita et al. 2019): the expected-L0 penalty, with a target either by the λ search
// (HcTarget::Controller, rolling the gates back when the count overshoots) or by CoFi's quadratic term
// (see prune/gates.h).
#include <algorithm>
#include <string>

#include "headprune/util/log.h"
#include "headprune/util/torch_compat.h"
#include "method.h"

namespace hp {
namespace {

class HardConcreteRule : public GateRule {
 public:
  void start(GateRun& r) override {
    controller_ = r.opts.target_kept && r.opts.hc_target == HcTarget::Controller;
    search_ = {r.opts.coef, r.opts.coef_growth};
    snapshot_ = r.gates.log_alpha().detach().clone();
  }

  // Voita's λ·Σ P(open) / layers, without a target or with the λ search; the quadratic mode pulls the
  // expected number of open heads to the target from both sides (CoFi's term), under --shape uniform
  // every layer's to its own.
  torch::Tensor penalty(GateRun& r, int64_t) override {
    const auto open = r.gates.dist().p_open(r.gates.log_alpha());
    if (!r.opts.target_kept || controller_) return r.coef * open.sum() / r.n_layers;
    if (!r.layer_kept.empty())
      return r.coef * r.by_layer(open, [&](const torch::Tensor& p, size_t i) {
        return (p.sum() - static_cast<double>(r.layer_kept[i])).pow(2).reshape({1});
      }).sum() / r.n_layers;
    return r.coef * (open.sum() - static_cast<double>(*r.opts.target_kept)).pow(2) / r.n_layers;
  }

  void end_period(GateRun& r, int64_t) override {
    if (!controller_ || r.opts.clip <= 0) return;
    torch::NoGradGuard no_grad;
    r.gates.log_alpha().clamp_(-r.opts.clip, r.opts.clip);
  }

  // The λ search: the next period's λ, and a rollback of the gates (log α and the second moment of
  // their Adam state) to the last period that did not overshoot when this one did.
  bool steer(GateRun& r, int64_t closed) override {
    if (!controller_) return GateRule::steer(r, closed);
    const bool rollback = search_.update(closed, static_cast<int64_t>(r.target_closed));
    search_.lambda = std::min(r.opts.coef_max, search_.lambda);
    r.coef = search_.lambda;
    if (!rollback) {
      snapshot_ = r.gates.log_alpha().detach().clone();
      snapshot_moments_ = compat::adam_moments(r.gate_opt, r.gates.log_alpha());
      return false;
    }
    {
      torch::NoGradGuard no_grad;
      r.gates.log_alpha().copy_(snapshot_);
    }
    auto restart = snapshot_moments_;
    if (restart.exp_avg.defined()) restart.exp_avg = torch::zeros_like(restart.exp_avg);
    compat::set_adam_moments(r.gate_opt, r.gates.log_alpha(), restart);
    ++r.res.rollbacks;
    r.res.log.back().rolled_back = true;
    log_info("gates", "closed " + std::to_string(closed) + " > target " +
                          std::to_string(static_cast<int64_t>(r.target_closed)) +
                          ": gates rolled back to the last period that did not overshoot, lambda " + std::to_string(r.coef));
    return true;
  }

 private:
  bool controller_ = false;  // steered to a target by its λ (Voita's penalty kept as it is)
  LambdaSearch search_;
  // The gates and their Adam state at the last period that did not overshoot. A rollback restores the
  // gates and the second moment but not the momentum: the momentum at the snapshot still points where
  // the overshoot went (every gate closing together), and a fresh Adam's first steps would move every
  // gate by the full learning rate at once; with the second moment kept, steps are scaled by the
  // gradients seen so far, so a lowered λ moves gently.
  torch::Tensor snapshot_;
  compat::AdamMoments snapshot_moments_;
};

}  // namespace

std::unique_ptr<GateRule> hard_concrete_rule() { return std::make_unique<HardConcreteRule>(); }

}  // namespace hp
