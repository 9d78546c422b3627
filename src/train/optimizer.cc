// AdamW and learning-rate schedules (see header).
#include "headprune/train/optimizer.h"

#include <cmath>
#include <stdexcept>

#include "headprune/util/names.h"

namespace hp {

namespace {
const NameTable<LrSchedule> kScheduleNames{"lr schedule",
                                          {{LrSchedule::Constant, {"constant"}},
                                           {LrSchedule::Linear, {"linear"}},
                                           {LrSchedule::InverseSqrt, {"inverse_sqrt"}}}};
}  // namespace

LrSchedule parse_lr_schedule(const std::string& s) { return kScheduleNames.parse(s); }
std::string to_string(LrSchedule s) { return kScheduleNames.name(s); }

double lr_at(int64_t step, double peak, int64_t warmup, int64_t max_steps, LrSchedule schedule) {
  if (step < 1) step = 1;
  if (warmup > 0 && step <= warmup) return peak * static_cast<double>(step) / static_cast<double>(warmup);
  switch (schedule) {
    case LrSchedule::Constant: return peak;
    case LrSchedule::Linear: {
      const double span = static_cast<double>(std::max<int64_t>(1, max_steps - warmup));
      return peak * std::max(0.0, static_cast<double>(max_steps - step) / span);
    }
    case LrSchedule::InverseSqrt:
      return peak * std::sqrt(static_cast<double>(std::max<int64_t>(warmup, 1)) / static_cast<double>(step));
  }
  return peak;
}

AdamW::AdamW(std::vector<std::pair<std::string, torch::Tensor>> params, AdamWOptions opts) : opts_(opts) {
  for (auto& p : params) {
    const bool no_decay = p.first.size() >= 5 && (p.first.compare(p.first.size() - 5, 5, ".bias") == 0 ||
                                                  p.first.find("norm.") != std::string::npos);
    slots_.push_back({p.first, p.second, torch::zeros_like(p.second), torch::zeros_like(p.second), !no_decay});
  }
}

namespace {
std::vector<std::pair<std::string, torch::Tensor>> named(const torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> params;
  for (const auto& p : module.named_parameters()) params.emplace_back(p.key(), p.value());
  return params;
}
}  // namespace

AdamW::AdamW(const torch::nn::Module& module, AdamWOptions opts) : AdamW(named(module), opts) {}

void AdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  ++steps_;
  const double bc1 = 1.0 - std::pow(opts_.beta1, static_cast<double>(steps_));
  const double bc2 = 1.0 - std::pow(opts_.beta2, static_cast<double>(steps_));
  for (auto& s : slots_) {
    const auto& g = s.param.grad();
    if (!g.defined()) continue;
    s.exp_avg.mul_(opts_.beta1).add_(g, 1.0 - opts_.beta1);
    s.exp_avg_sq.mul_(opts_.beta2).addcmul_(g, g, 1.0 - opts_.beta2);
    if (s.decay && opts_.weight_decay > 0) s.param.mul_(1.0 - lr * opts_.weight_decay);
    auto denom = (s.exp_avg_sq / bc2).sqrt_().add_(opts_.eps);
    s.param.addcdiv_(s.exp_avg, denom, -lr / bc1);
  }
}

void AdamW::zero_grad() {
  for (auto& s : slots_)
    if (s.param.grad().defined()) s.param.mutable_grad() = torch::Tensor();
}

std::vector<torch::Tensor> AdamW::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& s : slots_) out.push_back(s.param);
  return out;
}

TensorMap AdamW::state() const {
  TensorMap m;
  for (const auto& s : slots_) {
    m[s.name + ".exp_avg"] = s.exp_avg;
    m[s.name + ".exp_avg_sq"] = s.exp_avg_sq;
  }
  m["step"] = torch::tensor(steps_, torch::kLong);
  return m;
}

void AdamW::load_state(const TensorMap& state, const std::string& source) {
  auto get = [&](const std::string& name, const torch::Tensor& like) {
    auto it = state.find(name);
    if (it == state.end()) throw std::runtime_error(source + ": missing optimizer tensor '" + name + "'");
    if (it->second.sizes() != like.sizes())
      throw std::runtime_error(source + ": optimizer tensor '" + name + "' has shape " + shape_str(it->second.sizes()) +
                               ", expected " + shape_str(like.sizes()));
    return it->second.to(like.options()).clone();
  };
  for (auto& s : slots_) {
    s.exp_avg = get(s.name + ".exp_avg", s.param);
    s.exp_avg_sq = get(s.name + ".exp_avg_sq", s.param);
  }
  auto it = state.find("step");
  if (it == state.end()) throw std::runtime_error(source + ": missing optimizer tensor 'step'");
  steps_ = it->second.item<int64_t>();
  if (state.size() != 2 * slots_.size() + 1)
    throw std::runtime_error(source + ": optimizer state has " + std::to_string(state.size()) + " tensors, expected " +
                             std::to_string(2 * slots_.size() + 1));
}

}  // namespace hp
