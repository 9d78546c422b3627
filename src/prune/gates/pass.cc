// pass and passconc ("Pruning Attention Heads with Almost-sure Sparsity Targets"): PASS's penalty
// toward exactly the target's closed count, its coefficient grown while off target, log α clipped,
// closed gates reopened at random by Voita's confidence; passconc adds the concentrator, its weight
// fixed or re-set every period (see prune/gates.h).
#include <algorithm>
#include <cmath>
#include <random>

#include "headprune/score/importance.h"
#include "method.h"

namespace hp {
namespace {

class PassRule : public GateRule {
 public:
  explicit PassRule(bool concentrator) : conc_(concentrator) {}

  void start(GateRun& r) override {
    r.conc_coef = conc_ && !r.opts.concentrator_adaptive ? r.opts.concentrator_weight : 0.0;
    for (size_t i = 0; i < r.data.valid.size() && static_cast<int64_t>(i) < r.opts.confidence_examples; ++i)
      conf_set_.examples.push_back(r.data.valid[i]);
    confidence_.assign(static_cast<size_t>(r.n), 0.0);
    rng_.seed(r.train.seed * 7919ull + 17);
  }

  torch::Tensor penalty(GateRun& r, int64_t) override {
    auto la = r.gates.log_alpha();
    auto p0 = r.gates.dist().p_zero(la), p1 = r.gates.dist().p_one(la);
    if (!r.layer_kept.empty()) {  // uniform: PASS's terms layer by layer, each to its own count (no concentrator)
      torch::Tensor t = torch::zeros({}, p0.options());
      for (size_t i = 0; i < r.spans.size(); ++i)
        t = t + pass_penalty(r.layer_slice(p0, i), r.layer_slice(p1, i),
                             static_cast<double>(r.spans[i].second - r.layer_kept[i]));
      return r.coef * t;
    }
    auto t = pass_penalty(p0, p1, r.target_closed);
    if (conc_ && r.conc_coef > 0) t = t + r.conc_coef * concentrator_penalty(p0, r.gates.layer_sizes());
    return r.coef * t;
  }

  void end_period(GateRun& r, int64_t step) override {
    if (r.opts.clip > 0) {
      torch::NoGradGuard no_grad;
      r.gates.log_alpha().clamp_(-r.opts.clip, r.opts.clip);
    }
    reopen(r, step);
    if (conc_ && r.opts.concentrator_adaptive) adapt_concentrator(r, step);
  }

 private:
  // Closed gates reopen at random, more likely for confident heads and less so period by period.
  void reopen(GateRun& r, int64_t step) {
    torch::NoGradGuard no_grad;
    if (!r.opts.reopen || static_cast<double>(step) > r.opts.reopen_until * static_cast<double>(r.train.max_steps)) return;
    const int64_t k = step / r.opts.period;  // period number, 1-based
    r.gates.attach_deterministic();
    ScoreOptions so;
    so.seed = r.train.seed;
    auto conf = score_heads(*r.model, conf_set_, ScoreMethod::Confidence, so);  // restores train mode
    double mx = 0;
    for (int64_t i = 0; i < r.n; ++i) {
      confidence_[i] += conf.at(r.gates.heads()[i]);
      mx = std::max(mx, confidence_[i]);
    }
    const auto closed = r.gates.closed();
    const double decay = std::pow(r.opts.reopen_decay, static_cast<double>(k - 2));
    std::uniform_real_distribution<double> unif(0.0, 1.0);
    std::vector<int64_t> reopened;
    for (int64_t i = 0; i < r.n; ++i) {
      const double u = unif(rng_);  // drawn for every head, so the stream does not depend on the state
      if (closed[i] && mx > 0 && u < std::min(1.0, confidence_[i] / mx * decay)) reopened.push_back(i);
    }
    if (!reopened.empty())
      r.gates.log_alpha().index_fill_(0, torch::tensor(reopened, torch::kLong).to(r.gates.log_alpha().device()),
                                      static_cast<float>(r.opts.init_log_alpha));
  }

  // passconc, adaptive: the concentrator's weight for the next period (0 after its window).
  void adapt_concentrator(GateRun& r, int64_t step) {
    r.conc_coef = 0.0;
    if (static_cast<double>(step) >= r.opts.concentrator_until * static_cast<double>(r.train.max_steps)) return;
    torch::NoGradGuard no_grad;
    const auto la = r.gates.log_alpha().detach();
    const auto closed_now = r.gates.closed();
    std::vector<bool> open(closed_now.size());
    for (size_t i = 0; i < open.size(); ++i) open[i] = !closed_now[i];
    r.conc_coef = concentrator_coefficient(r.gates.dist().p_zero(la), r.gates.dist().p_one(la), open,
                                           r.gates.layer_sizes(), r.opts.concentrator_margin, r.opts.concentrator_max);
  }

  const bool conc_;  // passconc
  // Reopening confidence (Voita): accumulated over the periods on a slice of the validation set.
  EvalSet conf_set_{"valid", {}, {}, {}};
  std::vector<double> confidence_;
  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<GateRule> pass_rule(bool concentrator) { return std::make_unique<PassRule>(concentrator); }

}  // namespace hp
