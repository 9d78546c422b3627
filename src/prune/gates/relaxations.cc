// The gates' relaxations and penalties as pure functions of their parameters: the Hard Concrete
// distribution, the soft and hard top-K (dsp), PASS's and the concentrator's terms, the concentrator's
// adaptive weight and hard_concrete's λ search (see prune/gates.h).
#include "headprune/prune/gates.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace hp {

namespace {
torch::Tensor stretch_clamp(const torch::Tensor& s, const HardConcrete& d) {
  return (s * (d.r - d.l) + d.l).clamp(0.0, 1.0);
}
}  // namespace

void HardConcrete::validate() const {
  if (!(beta > 0)) throw std::invalid_argument("hard concrete: temperature beta must be > 0");
  if (!(l < 0) || !(r > 1)) throw std::invalid_argument("hard concrete: stretch needs l < 0 and r > 1");
}

torch::Tensor HardConcrete::sample(const torch::Tensor& log_alpha) const {
  constexpr double eps = 1e-6;
  auto u = torch::rand(log_alpha.sizes(), log_alpha.options().requires_grad(false)).clamp(eps, 1.0 - eps);
  auto s = torch::sigmoid((torch::log(u) - torch::log1p(-u) + log_alpha) / beta);
  return stretch_clamp(s, *this);
}

torch::Tensor HardConcrete::deterministic(const torch::Tensor& log_alpha) const {
  return stretch_clamp(torch::sigmoid(log_alpha), *this);
}

torch::Tensor HardConcrete::p_open(const torch::Tensor& log_alpha) const {
  return torch::sigmoid(log_alpha - beta * std::log(-l / r));
}

torch::Tensor HardConcrete::p_zero(const torch::Tensor& log_alpha) const {
  return torch::sigmoid(beta * std::log(-l / r) - log_alpha);
}

torch::Tensor HardConcrete::p_one(const torch::Tensor& log_alpha) const {
  return torch::sigmoid(log_alpha - beta * std::log((1.0 - l) / (r - 1.0)));
}

torch::Tensor soft_top_k(const torch::Tensor& keys, int64_t k, double tau) {
  if (keys.dim() != 1 || k < 1 || k > keys.numel())
    throw std::invalid_argument("soft top-k: need 1 <= k <= the number of keys, got k = " + std::to_string(k) + " of " +
                                std::to_string(keys.numel()));
  if (!(tau > 0)) throw std::invalid_argument("soft top-k: the temperature must be > 0");
  auto r = keys;
  torch::Tensor mask = torch::zeros_like(keys);
  for (int64_t j = 0; j < k; ++j) {
    const auto p = torch::softmax(r / tau, 0);
    mask = mask + p;
    if (j + 1 < k) r = r + torch::log1p(-p.clamp_max(1.0 - 1e-6));
  }
  return mask;
}

torch::Tensor hard_top_k(const torch::Tensor& scores, int64_t k) {
  if (scores.dim() != 1 || k < 0 || k > scores.numel())
    throw std::invalid_argument("top-k: k = " + std::to_string(k) + " of " + std::to_string(scores.numel()) + " scores");
  torch::NoGradGuard no_grad;
  // A stable sort by descending score: ties go to the lower index.
  const auto order = std::get<1>(scores.detach().to(torch::kCPU, torch::kDouble).sort(true, 0, true));
  auto mask = torch::zeros({scores.numel()}, scores.options().requires_grad(false));
  if (k > 0) mask.index_fill_(0, order.slice(0, 0, k).to(scores.device()), 1.0);
  return mask;
}

torch::Tensor gumbel_soft_top_k(const torch::Tensor& logits, int64_t k, double tau, bool straight_through) {
  constexpr double eps = 1e-6;
  const auto u = torch::rand(logits.sizes(), logits.options().requires_grad(false)).clamp(eps, 1.0 - eps);
  const auto soft = soft_top_k(logits - torch::log(-torch::log(u)), k, tau);
  if (!straight_through) return soft;
  return hard_top_k(soft, k) - soft.detach() + soft;
}

torch::Tensor pass_penalty(const torch::Tensor& p0, const torch::Tensor& p1, double target_closed) {
  const double n = static_cast<double>(p0.numel());
  auto not_binary = (1.0 - p0 - p1).sum();
  return not_binary + (target_closed - p0.sum()).abs() + ((n - target_closed) - p1.sum()).abs();
}

torch::Tensor concentrator_penalty(const torch::Tensor& p0, const std::vector<int64_t>& layer_sizes) {
  int64_t total = 0;
  for (auto n : layer_sizes) total += n;
  if (total != p0.numel())
    throw std::invalid_argument("concentrator_penalty: layer sizes add up to " + std::to_string(total) + ", not " +
                                std::to_string(p0.numel()));
  auto out = torch::zeros({}, p0.options());
  int64_t off = 0;
  for (auto n : layer_sizes) {
    out = out + (1.0 - p0.slice(0, off, off + n).prod());
    off += n;
  }
  return out;
}

double concentrator_coefficient(const torch::Tensor& p0, const torch::Tensor& p1, const std::vector<bool>& open,
                                const std::vector<int64_t>& layer_sizes, double margin, double max_coef) {
  torch::NoGradGuard no_grad;
  const auto q0 = p0.detach().to(torch::kCPU, torch::kDouble).contiguous();
  const auto q1 = p1.detach().to(torch::kCPU, torch::kDouble).contiguous();
  const int64_t n = q0.numel();
  if (q1.numel() != n || static_cast<int64_t>(open.size()) != n)
    throw std::invalid_argument("concentrator_coefficient: P(g = 0), P(g = 1) and the open flags differ in length");
  auto a0 = q0.accessor<double, 1>();
  auto a1 = q1.accessor<double, 1>();
  double best = max_coef;
  int64_t off = 0;
  for (auto size : layer_sizes) {
    if (off + size > n) throw std::invalid_argument("concentrator_coefficient: layer sizes exceed the head count");
    for (int64_t i = off; i < off + size; ++i) {
      if (!open[static_cast<size_t>(i)]) continue;
      double others = 1.0;  // Π of the other heads' P(g = 0) in this layer
      for (int64_t j = off; j < off + size; ++j)
        if (j != i) others *= a0[j];
      const double slope0 = a0[i] * (1.0 - a0[i]), slope1 = a1[i] * (1.0 - a1[i]);
      if (!(others > 0) || !(slope0 > 0)) continue;  // underflow: no finite weight helps this head
      best = std::min(best, margin * std::max(1.0, slope1 / slope0) / others);
    }
    off += size;
  }
  if (off != n) throw std::invalid_argument("concentrator_coefficient: layer sizes do not add up to the head count");
  return best;
}

bool LambdaSearch::update(int64_t closed, int64_t target_closed) {
  const double narrow = std::pow(growth, 0.1);
  if (closed <= target_closed) {
    lo = lambda;
    if (closed < target_closed) {
      // The gates at a λ that overshot were those of an earlier period; once they have trained on,
      // the same λ may close fewer. A bracket narrower than growth^0.1 that still undershoots
      // means hi is stale: it is dropped and the search goes above lo.
      if (hi > 0 && hi > lo * narrow) {
        lambda = std::sqrt(lo * hi);
      } else {
        hi = 0;
        lambda = lo * growth;
      }
    }
    return false;
  }
  hi = lambda;
  // Likewise a λ that did not overshoot may do so later, as the gates train on: once the bracket
  // is narrower than growth^0.1 and still overshoots, lo is stale and the search goes below hi.
  if (lo > 0 && hi > lo * narrow) {
    lambda = std::sqrt(lo * hi);
  } else {
    lo = 0;
    lambda = hi / growth;
  }
  return true;
}

}  // namespace hp
