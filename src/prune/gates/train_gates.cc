// train_gates: the gates trained with the model through train_model's hooks. The run's shared part is
// here (the gates' optimizer step, the period's record, the stop rule, the kept heads at the end); what
// differs between methods is their GateRule (method.h; one file per method).
#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

#include "headprune/model/remove_heads.h"
#include "headprune/score/importance.h"
#include "headprune/util/log.h"
#include "method.h"

namespace hp {

GateRun::GateRun(Transformer& model_, HeadGateSet& gates_, const TrainData& data_, const TrainOptions& train_,
                 const GateOptions& opts_, std::map<AttnType, int64_t> uniform_kept_)
    : model(model_), gates(gates_), data(data_), train(train_), opts(opts_), n(gates_.size()),
      k(opts_.target_kept ? *opts_.target_kept : 0),
      target_closed(opts_.target_kept ? static_cast<double>(n - *opts_.target_kept) : 0.0),
      n_layers(static_cast<double>(gates_.layer_sizes().size())),
      gate_opt(gates_.parameters(), torch::optim::AdamOptions(opts_.gate_lr)), coef(opts_.coef),
      uniform_kept(std::move(uniform_kept_)) {
  for (int64_t size : gates.layer_sizes()) spans.emplace_back(spans.empty() ? 0 : spans.back().first + spans.back().second, size);
  if (!uniform_kept.empty())
    for (const auto& [first, size] : spans) layer_kept.push_back(uniform_kept.at(gates.heads()[static_cast<size_t>(first)].type));
  res.heads = gates.heads();
  res.target_kept = opts.target_kept ? *opts.target_kept : -1;
}

torch::Tensor GateRun::by_layer(const torch::Tensor& x,
                                const std::function<torch::Tensor(const torch::Tensor&, size_t)>& f) const {
  std::vector<torch::Tensor> parts;
  for (size_t i = 0; i < spans.size(); ++i) parts.push_back(f(layer_slice(x, i), i));
  return torch::cat(parts);
}

bool GateRun::on_target() const {
  if (!opts.target_kept) return true;
  if (layer_kept.empty()) return gates.n_closed() == static_cast<int64_t>(target_closed);
  const auto closed = gates.closed();
  for (size_t i = 0; i < spans.size(); ++i) {
    const auto [first, size] = spans[i];
    if (std::count(closed.begin() + first, closed.begin() + first + size, true) != size - layer_kept[i]) return false;
  }
  return true;
}

bool GateRule::steer(GateRun& r, int64_t) {
  if (r.opts.target_kept && !r.on_target()) r.coef = std::min(r.opts.coef_max, r.coef * r.opts.coef_growth);
  return false;
}

std::unique_ptr<GateRule> make_gate_rule(GateMethod m) {
  switch (m) {
    case GateMethod::HardConcrete: return hard_concrete_rule();
    case GateMethod::Pass: return pass_rule(false);
    case GateMethod::PassConc: return pass_rule(true);
    case GateMethod::Dsp: return dsp_rule();
    case GateMethod::Cofi: return cofi_rule();
  }
  throw std::invalid_argument("gates: unknown method");
}

namespace {

// The gates' side of a gate training run: the hooks train_model calls, the period's record and the
// kept heads at the end; the method's own part is its rule.
class GateController {
 public:
  GateController(GateRun& run, GateRule& rule, const std::function<void(const GatePeriod&)>& on_period)
      : run_(run), rule_(rule), on_period_(on_period) {
    rule_.start(run_);
  }
  TrainHooks hooks();                     // what train_model calls
  GateTrainResult finish(int64_t steps);  // the closed and kept heads once training has ended

 private:
  int64_t record(int64_t step);
  void periodic(int64_t step);
  std::vector<bool> ranked_closed(std::vector<bool> closed, int64_t closed_by_gates);
  std::vector<HeadId> uniform_cut(const torch::Tensor& importance) const;

  GateRun& run_;
  GateRule& rule_;
  const std::function<void(const GatePeriod&)>& on_period_;
  bool last_on_target_ = false;
};

// Appends the gates' state to the log (and reports it); returns the number of closed gates.
int64_t GateController::record(int64_t step) {
  torch::NoGradGuard no_grad;
  auto la = run_.gates.log_alpha().detach();
  auto po = rule_.shown_p_open(run_, step);
  GatePeriod r;
  r.step = step;
  r.coef = rule_.shown_coef(run_, step);
  r.conc_coef = run_.conc_coef;
  r.expected_open = po.sum().item<double>();
  r.closed = rule_.shown_closed(run_);
  const int64_t n = run_.n;
  const auto host = torch::stack({po, la}).to(torch::kCPU).contiguous();  // one read per period
  const float* h = host.data_ptr<float>();
  r.p_open.assign(h, h + n);
  r.log_alpha.assign(h + n, h + 2 * n);
  run_.res.log.push_back(std::move(r));
  if (on_period_) on_period_(run_.res.log.back());
  return run_.res.log.back().closed;
}

// The period's end: the method's clipping, reopening and concentrator, the record, and the coefficient
// for the next period (recorded again when the gates were rolled back).
void GateController::periodic(int64_t step) {
  rule_.end_period(run_, step);
  if (rule_.steer(run_, record(step))) record(step);  // the state the next period starts from
  last_on_target_ = run_.on_target();
}

TrainHooks GateController::hooks() {
  TrainHooks hooks;
  hooks.save_checkpoints = false;
  hooks.before_forward = [this](int64_t step) { rule_.attach_train(run_, step); };
  hooks.extra_loss = [this](int64_t step) { return rule_.penalty(run_, step); };
  hooks.after_backward = [this](int64_t step) {
    run_.gate_opt.step();
    run_.gate_opt.zero_grad();
    rule_.after_gate_step(run_);
    if (step % run_.opts.period == 0) periodic(step);
  };
  hooks.before_eval = [this] { rule_.attach_eval(run_); };
  hooks.extra_parameters = [this] {
    auto p = run_.gates.parameters();
    for (auto& t : rule_.extra_parameters()) p.push_back(t);
    return p;
  };
  hooks.stop = [this](int64_t step) {
    if (rule_.ranks()) return step >= run_.train.max_steps;
    if (step < run_.train.max_steps || step % run_.opts.period != 0) return false;
    return !run_.opts.target_kept || last_on_target_;
  };
  return hooks;
}

std::vector<HeadId> GateController::uniform_cut(const torch::Tensor& importance) const {
  HeadScores s;
  s.method = "gates";
  const auto host = importance.to(torch::kCPU, torch::kDouble).contiguous();
  for (int64_t i = 0; i < run_.n; ++i) s.scores[run_.gates.heads()[static_cast<size_t>(i)]] = host[i].item<double>();
  return plan_uniform_by_score(s, run_.model->config(), ScorePlanOptions{}, &run_.uniform_kept).heads;
}

// The closed heads once the gates have trained: the gates' own, or the uniform shape's cut, or the
// target's count by rank (dsp and cofi always, the others with --complete-by-rank when they missed).
std::vector<bool> GateController::ranked_closed(std::vector<bool> closed, int64_t closed_by_gates) {
  const int64_t n = run_.n, k = run_.k;
  const bool missed = run_.opts.target_kept && !run_.on_target();
  if (!run_.uniform_kept.empty()) {
    // Uniform: each layer keeps its stack's count, as groups of query heads (grouped-query attention),
    // chosen by the gates' values summed over the heads that go together; under PASS, HC and CoFi what
    // the gates closed when they met every layer's count (dsp: its per-layer top-K).
    torch::NoGradGuard no_grad;
    const auto cut = uniform_cut(rule_.rank_values(run_));
    const std::set<HeadId> removed(cut.begin(), cut.end());
    int64_t moved = 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool c = removed.count(run_.gates.heads()[static_cast<size_t>(i)]) > 0;
      moved += rule_.gates_close() && c != closed[static_cast<size_t>(i)];
      closed[static_cast<size_t>(i)] = c;
    }
    run_.res.closed_by_gates = closed_by_gates;
    if (moved > 0)
      log_info("gates", "--shape uniform: " + std::to_string(moved) + " heads differ from the gates' own closed set "
                        "(" + std::to_string(closed_by_gates) + " closed); the uniform cut by P(open) decides");
  } else if (rule_.ranks() || (missed && run_.opts.complete_by_rank)) {
    // Exactly the target: the K largest logits (dsp) or P(open) (P_h(open)·P_L(open) with layer gates).
    torch::NoGradGuard no_grad;
    const auto keep = hard_top_k(rule_.rank_values(run_), k).to(torch::kCPU);
    run_.res.closed_by_gates = closed_by_gates;
    if (!rule_.ranks())
      log_info("gates", "the gates closed " + std::to_string(closed_by_gates) + " heads, the target is " +
                            std::to_string(n - k) + ": the " + std::to_string(k) +
                            " heads with the largest P(open) are kept (--complete-by-rank)");
    for (int64_t i = 0; i < n; ++i) closed[static_cast<size_t>(i)] = keep[i].item<double>() == 0.0;
  }
  return closed;
}

GateTrainResult GateController::finish(int64_t steps) {
  GateTrainResult& res = run_.res;
  res.steps = steps;
  res.final_coef = run_.coef;
  const int64_t closed_by_gates = rule_.gates_close() ? run_.gates.n_closed() : -1;
  const std::vector<bool> closed = ranked_closed(run_.gates.closed(), closed_by_gates);
  for (int64_t i = 0; i < run_.n; ++i) (closed[i] ? res.closed : res.kept).push_back(run_.gates.heads()[i]);
  if (res.log.empty() || res.log.back().step != steps) record(steps);
  res.reached_target = !run_.opts.target_kept || static_cast<int64_t>(res.kept.size()) == *run_.opts.target_kept;
  res.emptied = emptied_layers(run_.model->config(), res.closed);
  if (!res.reached_target)
    log_warn("gates", "kept " + std::to_string(res.kept.size()) + " heads, not the target " +
                          std::to_string(*run_.opts.target_kept) + "; train longer (--extra-steps) or raise --coef");
  return std::move(res);
}

// --shape uniform: the heads every layer of a stack keeps, which must add up to the target.
std::map<AttnType, int64_t> uniform_counts(Transformer& model, const HeadGateSet& gates, const GateOptions& opts) {
  if (opts.shape != PlanShape::Uniform) return {};
  auto uniform_kept = uniform_kept_per_layer(model->config(), gates.size() - *opts.target_kept, 1);
  const int64_t kept = uniform_heads_kept(model->config(), uniform_kept);
  if (kept != *opts.target_kept)
    throw std::invalid_argument("gates --shape uniform: no uniform shape keeps exactly " + std::to_string(*opts.target_kept) +
                                " heads; the nearest below the heads to remove keeps " + std::to_string(kept));
  return uniform_kept;
}

}  // namespace

GateTrainResult train_gates(Transformer& model, const TrainData& data, const TrainOptions& train,
                            const GateOptions& opts, const std::string& out_dir,
                            const std::function<void(const GatePeriod&)>& on_period,
                            const TrainProgressFn& progress) {
  if (!model->masked_heads().empty())
    throw std::invalid_argument("gates: the model has " + std::to_string(model->masked_heads().size()) +
                                " masked heads; remove them first (apply_plan_remove) so every gate is a live head");
  const std::unique_ptr<GateRule> rule = make_gate_rule(opts.method);
  HeadGateSet gates(*model, opts.dist, opts.init_log_alpha, rule->layer_gates());
  opts.validate(gates.size());
  std::map<AttnType, int64_t> uniform_kept = uniform_counts(model, gates, opts);
  TrainOptions with_teacher = train;
  if (opts.distill_weight > 0 || opts.distill_hidden_weight > 0) {
    with_teacher.distill_weight = opts.distill_weight;
    with_teacher.distill_hidden_weight = opts.distill_hidden_weight;
    with_teacher.distill_temperature = opts.distill_temperature;
    if (!with_teacher.teacher) with_teacher.teacher = remove_heads(*model, {}).ptr();  // a copy: the model before the gates
  }
  GateRun run(model, gates, data, with_teacher, opts, std::move(uniform_kept));
  GateController controller(run, *rule, on_period);
  const TrainHooks hooks = controller.hooks();
  TrainOptions topts = with_teacher;
  topts.max_steps = train.max_steps + opts.max_extra_steps;
  topts.resume = false;
  // The model's lr schedule spans max_steps + max_extra_steps (only the linear decay depends on it).
  auto tr = train_model(model, data, topts, out_dir, {}, progress, &hooks);
  gates.detach();
  return controller.finish(tr.steps);
}

}  // namespace hp
