// dsp (Differentiable Subset Pruning, Li, Cotterell, Sachan 2021): a logit per head and the Gumbel soft
// top-K of them, its temperature annealed over max_steps; no penalty (K is built in) and the K largest
// logits kept at the end (see prune/gates.h).
#include <algorithm>
#include <cmath>

#include "method.h"

namespace hp {
namespace {

class DspRule : public GateRule {
 public:
  // K of all heads, or under --shape uniform each layer's own K.
  void attach_train(GateRun& r, int64_t step) override {
    const double t = tau(r, step);
    const bool st = r.opts.dsp_straight_through;
    if (r.layer_kept.empty()) return r.gates.attach(gumbel_soft_top_k(r.gates.log_alpha(), r.k, t, st));
    r.gates.attach(r.by_layer(r.gates.log_alpha(), [&](const torch::Tensor& x, size_t i) {
      return gumbel_soft_top_k(x, r.layer_kept[i], t, st);
    }));
  }

  void attach_eval(GateRun& r) override {
    if (r.layer_kept.empty()) return r.gates.attach(hard_top_k(r.gates.log_alpha(), r.k));
    r.gates.attach(r.by_layer(r.gates.log_alpha(), [&](const torch::Tensor& x, size_t i) { return hard_top_k(x, r.layer_kept[i]); }));
  }

  torch::Tensor penalty(GateRun&, int64_t) override { return {}; }  // K is built into the relaxation

  // The record shows the noise-free soft top-K, the temperature as the coefficient and K kept.
  torch::Tensor shown_p_open(GateRun& r, int64_t step) override {
    const auto la = r.gates.log_alpha().detach();
    if (r.layer_kept.empty()) return soft_top_k(la, r.k, tau(r, step));
    return r.by_layer(la, [&](const torch::Tensor& x, size_t i) { return soft_top_k(x, r.layer_kept[i], tau(r, step)); });
  }
  double shown_coef(GateRun& r, int64_t step) override { return tau(r, step); }
  int64_t shown_closed(GateRun& r) override { return r.n - r.k; }

  bool steer(GateRun&, int64_t) override { return false; }  // no coefficient
  bool ranks() const override { return true; }
  torch::Tensor rank_values(GateRun& r) override { return r.gates.log_alpha().detach(); }
  bool gates_close() const override { return false; }

 private:
  // Annealed geometrically from dsp_tau_start to dsp_tau_end over max_steps.
  static double tau(const GateRun& r, int64_t step) {
    const double f =
        std::min(1.0, static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, r.train.max_steps)));
    return r.opts.dsp_tau_start * std::pow(r.opts.dsp_tau_end / r.opts.dsp_tau_start, f);
  }
};

}  // namespace

std::unique_ptr<GateRule> dsp_rule() { return std::make_unique<DspRule>(); }

}  // namespace hp
