// cofi (Xia et al. 2022), attention only: Hard Concrete gates per head and per layer, the expected
// sparsity held to the warming-up target by a Lagrangian whose multipliers ascend while the gates
// descend; the K heads with the largest P(open) kept at the end (see prune/gates.h).
#include <algorithm>

#include "method.h"

namespace hp {
namespace {

class CofiRule : public GateRule {
 public:
  bool layer_gates() const override { return true; }
  void start(GateRun& r) override {
    lambdas_ = torch::zeros({2}, r.gates.log_alpha().options()).requires_grad_(true);
    lagrange_opt_ = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{lambdas_},
                                                         torch::optim::AdamOptions(r.opts.lagrangian_lr));
  }

  torch::Tensor penalty(GateRun& r, int64_t step) override {
    const double warm = r.opts.cofi_warmup * static_cast<double>(r.train.max_steps);
    const double ramp = warm > 0 ? std::min(1.0, static_cast<double>(step) / warm) : 1.0;
    const double target_sparsity = r.target_closed / static_cast<double>(r.n) * ramp;
    if (r.layer_kept.empty()) {
      const auto gap = (1.0 - r.gates.p_open().sum() / static_cast<double>(r.n)) - target_sparsity;
      return lambdas_[0] * gap + lambdas_[1] * gap * gap;
    }
    // Uniform: every layer's own expected sparsity against its own target, averaged over the layers.
    const auto gap = r.by_layer(r.gates.p_open(), [&](const torch::Tensor& p, size_t i) {
      const auto n = static_cast<double>(p.numel());
      return ((1.0 - p.sum() / n) - (n - static_cast<double>(r.layer_kept[i])) / n * ramp).reshape({1});
    });
    return (lambdas_[0] * gap + lambdas_[1] * gap * gap).sum() / r.n_layers;
  }

  // The multipliers take a step up their gradient (the gates took theirs down).
  void after_gate_step(GateRun& r) override {
    if (!lambdas_.grad().defined()) return;
    lambdas_.mutable_grad().neg_();
    lagrange_opt_->step();
    lagrange_opt_->zero_grad();
    r.coef = lambdas_[0].item<double>();
    r.conc_coef = lambdas_[1].item<double>();
  }

  std::vector<torch::Tensor> extra_parameters() const override { return {lambdas_}; }
  bool steer(GateRun&, int64_t) override { return false; }  // the multipliers ascend every step
  bool ranks() const override { return true; }

 private:
  torch::Tensor lambdas_;  // λ1, λ2 (leaves)
  std::unique_ptr<torch::optim::Adam> lagrange_opt_;
};

}  // namespace

std::unique_ptr<GateRule> cofi_rule() { return std::make_unique<CofiRule>(); }

}  // namespace hp
