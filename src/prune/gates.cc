// Learned head gates: Hard Concrete L0, PASS and PASSCONC (see header).
#include "headprune/prune/gates.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>

#include "headprune/model/remove_heads.h"
#include "headprune/score/importance.h"
#include "headprune/util/log.h"
#include "headprune/util/torch_compat.h"

namespace hp {

void set_concentrator(GateOptions& opts, const std::string& text) {
  opts.concentrator_adaptive = text == "adaptive";
  if (opts.concentrator_adaptive) return;
  const auto w = parse_finite_number(text);
  if (!w) throw std::invalid_argument("expected 'adaptive' or a number, got '" + text + "'");
  opts.concentrator_weight = *w;
}

namespace {
// [a, b] of two finite numbers (a recorded pair of GateOptions).
std::pair<double, double> finite_pair(const nlohmann::json& v) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number())
    throw std::invalid_argument("expected [a, b] of two numbers, got " + v.dump());
  const double a = v[0].get<double>(), b = v[1].get<double>();
  if (!std::isfinite(a) || !std::isfinite(b)) throw std::invalid_argument("expected finite numbers, got " + v.dump());
  return {a, b};
}

// The rows of gates.json's "options" only: the request's target, what no flag sets, what the
// fine-tuning's flags set, and the old pair of dsp temperatures.
OptionTable<GateOptions> recorded_rows(OptionTable<GateOptions>&& table) {
  using G = GateOptions;
  using R = ValueRange;
  return std::move(table)
          .custom("target_kept", "heads to keep (the request's target; null: none)",
                  [](const G& g) { return g.target_kept ? nlohmann::json(*g.target_kept) : nlohmann::json(nullptr); },
                  [](G& g, const nlohmann::json& v) {
                    if (!v.is_number_integer()) throw std::invalid_argument("expected an integer, got " + v.dump());
                    g.target_kept = v.get<int64_t>();
                  })
          .custom("stretch", "the Hard Concrete stretch interval [l, r]",
                  [](const G& g) { return nlohmann::json{g.dist.l, g.dist.r}; },
                  [](G& g, const nlohmann::json& v) {
                    const auto lr = finite_pair(v);
                    g.dist.l = lr.first;
                    g.dist.r = lr.second;
                  })
          .real("coef_max", "", "upper bound of the coefficient", &G::coef_max, R::at_least(0))
          .recorded()
          .real("reopen_until", "", "fraction of --steps after which no gate reopens", &G::reopen_until, R::at_least(0))
          .recorded()
          .integer("confidence_examples", "", "validation examples for the reopening confidence",
                   &G::confidence_examples, R::at_least(0))
          .recorded()
          .real("distill_temperature", "", "the gate training's distillation temperature (--distill-temperature)",
                &G::distill_temperature, R::positive())
          .recorded()
          // Read only: gates.json before the keys were the flags' names held both temperatures in one pair.
          .custom("dsp_tau", "", nullptr, [](G& g, const nlohmann::json& v) {
            const auto tau = finite_pair(v);
            g.dsp_tau_start = tau.first;
            g.dsp_tau_end = tau.second;
          });
}
}  // namespace

const OptionTable<GateOptions>& gate_option_table() {
  using G = GateOptions;
  using R = ValueRange;
  static const OptionTable<G> t =
      recorded_rows(OptionTable<G>()
          .parsed("method", "--method", "hard_concrete, pass, passconc, dsp or cofi",
                  [](G& g, const std::string& s) { g.method = parse_gate_method(s); }, "passconc",
                  [](const G& g) -> nlohmann::json { return to_string(g.method); })
          .real("coef", "--coef,--lambda", "L0 weight (hard_concrete) or PASS's starting coefficient", &G::coef,
                R::at_least(0))
          .parsed("hc_target", "--hc-target",
                  "hard_concrete with --target: 'controller' (Voita's penalty; lambda searched each period, gates "
                  "rolled back when too many closed) or 'quadratic' (pull the expected open count to the target)",
                  [](G& g, const std::string& s) { g.hc_target = parse_hc_target(s); }, "controller",
                  [](const G& g) -> nlohmann::json { return to_string(g.hc_target); })
          .real("coef_growth", "--coef-growth", "coefficient factor per period while off target", &G::coef_growth,
                R::at_least(1))
          .parsed("concentrator", "--concentrator",
                  "passconc: 'adaptive' (re-set every period so a nearly empty layer's last heads close) or a fixed "
                  "weight relative to the PASS coefficient",
                  [](G& g, const std::string& s) { set_concentrator(g, s); }, "adaptive",
                  [](const G& g) {
                    return g.concentrator_adaptive ? nlohmann::json("adaptive") : nlohmann::json(g.concentrator_weight);
                  })
          .real("concentrator_margin", "--concentrator-margin",
                "adaptive concentrator: how many times the pull to close must exceed the P(g=1) term's pull",
                &G::concentrator_margin, R::positive())
          .real("concentrator_max", "--concentrator-max", "adaptive concentrator: upper bound of its weight",
                &G::concentrator_max, R::at_least(0))
          .real("concentrator_until", "--concentrator-until", "adaptive concentrator: fraction of --steps after which it is off",
                &G::concentrator_until, R::between(0, 1))
          .real("temperature", "--temperature", "Hard Concrete temperature beta",
                [](G& g) -> double& { return g.dist.beta; }, R::positive())
          .was("beta")
          .integer("period", "--period", "steps between checks, coefficient updates and log lines", &G::period,
                   R::at_least(1))
          .real("clip", "--clip", "pass/passconc: clip log alpha to [-clip, clip] (0 = off)", &G::clip, R::at_least(0))
          .yes_no("reopen", "--reopen", "pass/passconc: reopen closed gates by confidence", &G::reopen, FlagStyle::Value)
          .real("reopen_decay", "--reopen-decay", "reopening probability factor per period", &G::reopen_decay,
                R::between(0, 1, true))
          .real("gate_lr", "--gate-lr", "Adam learning rate of log alpha", &G::gate_lr, R::positive())
          .real("init_log_alpha", "--init-log-alpha", "starting log alpha of every gate", &G::init_log_alpha, R::any())
          .real("dsp_tau_start", "--dsp-tau-start", "dsp: Gumbel soft top-K temperature at the first step",
                &G::dsp_tau_start, R::positive())
          .real("dsp_tau_end", "--dsp-tau-end", "dsp: temperature at the last step (annealed geometrically)",
                &G::dsp_tau_end, R::positive())
          .yes_no("straight_through", "--straight-through", "dsp: hard top-K forward, relaxed gradient backward",
                  &G::dsp_straight_through, FlagStyle::Sets)
          .was("dsp_straight_through")
          .real("lagrangian_lr", "--lagrangian-lr", "cofi: Adam rate of the Lagrange multipliers (gradient ascent)",
                &G::lagrangian_lr, R::positive())
          .real("cofi_warmup", "--cofi-warmup", "cofi: fraction of --steps over which the target rises linearly",
                &G::cofi_warmup, R::between(0, 1))
          .real("distill_weight", "--gate-distill-weight",
                "distil the model before the gates into the gated one while they train: (1 - w) * task + w * KL",
                &G::distill_weight, R::between(0, 1))
          .real("distill_hidden_weight", "--gate-distill-hidden",
                "while the gates train, add this weight times the hidden-state MSE against the model before the "
                "gates (CoFi's layer-wise distillation)",
                &G::distill_hidden_weight, R::at_least(0))
          .integer("extra_steps", "--extra-steps",
                   "train up to this many more steps, a period at a time, until the head count is exact",
                   &G::max_extra_steps, R::at_least(0))
          .was("max_extra_steps")
          .parsed("shape", "--shape",
                  "per-layer (any count in any layer) or uniform (every layer trained to keep the same count, then "
                  "the same key/value groups and query heads per group in every layer, by the gates' values: an "
                  "ordinary smaller model that export --hf writes natively; dsp, pass, cofi, hard_concrete with "
                  "--hc-target quadratic)",
                  [](G& g, const std::string& s) { g.shape = parse_plan_shape(s); }, "per-layer",
                  [](const G& g) -> nlohmann::json { return to_string(g.shape); })
          .yes_no("complete_by_rank", "--complete-by-rank",
                  "if the gates still miss the target at the end, keep the target's count of heads with the largest "
                  "P(open) (PASS's top-K evaluation); closed_by_gates in gates.json keeps the gates' own count",
                  &G::complete_by_rank, FlagStyle::Sets));
  return t;
}

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

const NameTable<GateMethod>& gate_method_names() {
  static const NameTable<GateMethod> t{"gate method",
                                       {{GateMethod::HardConcrete, {"hard_concrete", "l0"}},
                                        {GateMethod::Pass, {"pass"}},
                                        {GateMethod::PassConc, {"passconc"}},
                                        {GateMethod::Dsp, {"dsp"}},
                                        {GateMethod::Cofi, {"cofi"}}}};
  return t;
}
bool keeps_by_rank(GateMethod m) { return m == GateMethod::Dsp || m == GateMethod::Cofi; }
std::string to_string(GateMethod m) { return gate_method_names().name(m); }
GateMethod parse_gate_method(const std::string& s) { return gate_method_names().parse(s); }

const NameTable<HcTarget>& hc_target_names() {
  static const NameTable<HcTarget> t{"hard concrete target mode",
                                     {{HcTarget::Controller, {"controller"}}, {HcTarget::Quadratic, {"quadratic"}}}};
  return t;
}
std::string to_string(HcTarget t) { return hc_target_names().name(t); }
HcTarget parse_hc_target(const std::string& s) { return hc_target_names().parse(s); }

void GateOptions::validate(int64_t n_heads) const {
  auto bad = [](const std::string& m) { throw std::invalid_argument("gates: " + m); };
  dist.validate();
  gate_option_table().check(*this, "gates");
  if (method != GateMethod::HardConcrete && !target_kept) bad(to_string(method) + " needs a target head count");
  if (target_kept && (*target_kept < 1 || *target_kept > n_heads))
    bad("target of " + std::to_string(*target_kept) + " kept heads is outside [1, " + std::to_string(n_heads) +
        "] (the model keeps " + std::to_string(n_heads) + " heads; keeping none would prune every head)");
  if (concentrator_weight < 0) bad("concentrator weight must be >= 0");
  if (shape == PlanShape::Uniform) {
    if (!target_kept) bad("--shape uniform needs a target (--target)");
    if (method == GateMethod::PassConc)
      bad("--shape uniform does not go with passconc (its concentrator empties layers; every layer keeps the same "
          "count under uniform): use --method pass");
    if (method == GateMethod::HardConcrete && hc_target == HcTarget::Controller)
      bad("--shape uniform with hard_concrete needs --hc-target quadratic (the controller searches one lambda for the "
          "total count, not one count per layer)");
  }
}

nlohmann::json GateOptions::to_json() const { return gate_option_table().write(*this); }

GateOptions GateOptions::from_json(const nlohmann::json& j) {
  const JsonFields f(j, "gate options", JsonStyle{"field", "is missing", JsonStyle::Nulls::Absent, JsonStyle::Error::InvalidArgument});
  f.only(gate_option_table().record_keys());
  GateOptions o;
  gate_option_table().read(f, o);
  return o;
}

HeadGateSet::HeadGateSet(TransformerImpl& model, const HardConcrete& dist, double init_log_alpha, bool layer_gates)
    : dist_(dist) {
  for (const auto& g : model.head_masks()) {
    if (g.heads.empty()) continue;
    modules_.push_back(&model.attention(g.type, g.layer));
    layer_sizes_.push_back(static_cast<int64_t>(g.heads.size()));
    for (auto h : g.heads) heads_.push_back({g.type, g.layer, h});
  }
  if (heads_.empty()) throw std::invalid_argument("gates: the model keeps no heads");
  const auto device = model.parameters().front().device();
  log_alpha_ = torch::full({static_cast<int64_t>(heads_.size())}, init_log_alpha,
                           torch::TensorOptions().dtype(torch::kFloat).device(device))
                   .requires_grad_(true);
  if (layer_gates)
    layer_log_alpha_ = torch::full({static_cast<int64_t>(layer_sizes_.size())}, init_log_alpha, log_alpha_.options())
                           .requires_grad_(true);
}

std::vector<torch::Tensor> HeadGateSet::parameters() const {
  if (!has_layer_gates()) return {log_alpha_};
  return {log_alpha_, layer_log_alpha_};
}

torch::Tensor HeadGateSet::per_head(const torch::Tensor& per_layer) const {
  return per_layer.repeat_interleave(torch::tensor(layer_sizes_, torch::kLong).to(per_layer.device()));
}

void HeadGateSet::attach(const torch::Tensor& g) {
  int64_t off = 0;
  for (size_t i = 0; i < modules_.size(); ++i) {
    const int64_t n = layer_sizes_[i];
    modules_[i]->head_probe = g.slice(0, off, off + n).view({1, n, 1, 1});
    off += n;
  }
}

void HeadGateSet::attach_sample() {
  auto g = dist_.sample(log_alpha_);
  attach(has_layer_gates() ? g * per_head(dist_.sample(layer_log_alpha_)) : g);
}

void HeadGateSet::attach_deterministic() {
  torch::NoGradGuard no_grad;
  auto g = dist_.deterministic(log_alpha_);
  attach(has_layer_gates() ? g * per_head(dist_.deterministic(layer_log_alpha_)) : g);
}

torch::Tensor HeadGateSet::p_open() const {
  auto p = dist_.p_open(log_alpha_);
  return has_layer_gates() ? p * per_head(dist_.p_open(layer_log_alpha_)) : p;
}

void HeadGateSet::detach() {
  for (auto* m : modules_) m->head_probe = torch::Tensor();
}

std::vector<bool> HeadGateSet::closed() const {
  torch::NoGradGuard no_grad;
  auto c = dist_.p_zero(log_alpha_) > dist_.p_one(log_alpha_);
  if (has_layer_gates()) c = c | per_head(dist_.p_zero(layer_log_alpha_) > dist_.p_one(layer_log_alpha_));
  c = c.to(torch::kCPU).contiguous();
  std::vector<bool> out(heads_.size());
  auto a = c.accessor<bool, 1>();
  for (size_t i = 0; i < out.size(); ++i) out[i] = a[static_cast<int64_t>(i)];
  return out;
}

int64_t HeadGateSet::n_closed() const {
  auto c = closed();
  return std::count(c.begin(), c.end(), true);
}

nlohmann::json GateTrainResult::to_json() const {
  nlohmann::json c = nlohmann::json::array(), k = nlohmann::json::array();
  for (const auto& h : closed) c.push_back(hp::to_string(h));
  for (const auto& h : kept) k.push_back(hp::to_string(h));
  return {{"closed", c},
          {"kept", k},
          {"n_kept", kept.size()},
          {"n_closed", closed.size()},
          {"target_kept", target_kept < 0 ? nlohmann::json(nullptr) : nlohmann::json(target_kept)},
          {"reached_target", reached_target},
          {"steps", steps},
          {"final_coef", final_coef},
          {"rollbacks", rollbacks},
          {"empty_layers", emptied.size()},
          {"closed_by_gates", closed_by_gates < 0 ? nlohmann::json(nullptr) : nlohmann::json(closed_by_gates)}};
}

nlohmann::json GateTrainResult::log_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : log) {
    nlohmann::json j = {{"step", r.step},   {"coef", r.coef},     {"conc_coef", r.conc_coef}, {"expected_open", r.expected_open},
                        {"closed", r.closed}, {"p_open", r.p_open}, {"log_alpha", r.log_alpha}};
    if (r.rolled_back) j["rolled_back"] = true;
    out.push_back(j);
  }
  return out;
}

std::string GateTrainResult::log_csv() const {
  std::ostringstream csv;
  csv << "step,head,p_open,log_alpha\n";
  for (const auto& r : log)
    for (size_t i = 0; i < heads.size(); ++i)
      csv << r.step << "," << hp::to_string(heads[i]) << "," << r.p_open[i] << "," << r.log_alpha[i] << "\n";
  return csv.str();
}

std::vector<std::pair<AttnType, int64_t>> emptied_layers(const ModelConfig& cfg, const std::vector<HeadId>& closed) {
  std::vector<std::pair<AttnType, int64_t>> out;
  for (auto t : cfg.attn_types()) {
    const auto& layers = cfg.heads(t);
    for (int64_t l = 0; l < static_cast<int64_t>(layers.size()); ++l) {
      if (layers[l].empty()) continue;
      bool all = true;
      for (auto h : layers[l])
        if (std::find(closed.begin(), closed.end(), HeadId{t, l, h}) == closed.end()) all = false;
      if (all) out.emplace_back(t, l);
    }
  }
  return out;
}

namespace {

// The gates' side of a gate training run: their penalty, their optimizer and, every period, the
// controllers (reopening, the concentrator's weight, the coefficient or λ search) and a log record.
class GateController {
 public:
  GateController(Transformer& model, HeadGateSet& gates, const TrainData& data, const TrainOptions& train,
                 const GateOptions& opts, const std::function<void(const GatePeriod&)>& on_period,
                 std::map<AttnType, int64_t> uniform_kept);
  TrainHooks hooks();                     // what train_model calls
  GateTrainResult finish(int64_t steps);  // the closed and kept heads once training has ended

 private:
  torch::Tensor penalty(int64_t step);
  void attach_train(int64_t step);
  void attach_eval();
  double dsp_tau(int64_t step) const;
  void ascend_lagrangian();
  int64_t record(int64_t step);
  void reopen(int64_t step);
  void adapt_concentrator(int64_t step);
  int64_t steer(int64_t step, int64_t closed);
  int64_t periodic(int64_t step);
  bool on_target() const;
  // Gated layer i's heads in a per-head [N] tensor, and f(each layer's slice, i) concatenated (the uniform
  // shape's per-layer targets).
  torch::Tensor layer_slice(const torch::Tensor& x, size_t i) const {
    return x.slice(0, spans_[i].first, spans_[i].first + spans_[i].second);
  }
  torch::Tensor by_layer(const torch::Tensor& x, const std::function<torch::Tensor(const torch::Tensor&, size_t)>& f) const;
  std::vector<HeadId> uniform_cut(const torch::Tensor& importance) const;

  Transformer& model_;
  HeadGateSet& gates_;
  const TrainOptions& train_;
  const GateOptions& opts_;
  const std::function<void(const GatePeriod&)>& on_period_;
  const int64_t n_;
  const bool pass_;
  const bool dsp_, cofi_;
  const int64_t k_;  // the target kept count (dsp, cofi), else 0
  const bool hc_controller_;  // hard_concrete steered to a target by its λ (Voita's penalty kept as it is)
  const double target_closed_;
  const double n_layers_;
  torch::optim::Adam gate_opt_;
  // cofi: the Lagrange multipliers λ1, λ2 (leaves) and their optimizer, which ascends.
  torch::Tensor lambdas_;
  std::unique_ptr<torch::optim::Adam> lagrange_opt_;
  double coef_;
  LambdaSearch search_;
  // hard_concrete controller: the gates and their Adam state at the last period that did not
  // overshoot. A rollback restores the gates and the second moment but not the momentum: the
  // momentum at the snapshot still points where the overshoot went (every gate closing together),
  // and a fresh Adam's first steps would move every gate by the full learning rate at once; with the
  // second moment kept, steps are scaled by the gradients seen so far, so a lowered λ moves gently.
  torch::Tensor snapshot_;
  compat::AdamMoments snapshot_moments_;
  const bool conc_;
  double conc_coef_;  // the concentrator's weight relative to coef: fixed, or adaptive (0 until the first period)
  // Reopening confidence (Voita): accumulated over the periods on a slice of the validation set.
  EvalSet conf_set_{"valid", {}, {}, {}};
  std::vector<double> confidence_;
  std::mt19937_64 rng_;
  GateTrainResult res_;
  int64_t last_closed_ = -1;
  bool last_on_target_ = false;
  // --shape uniform: the heads every layer of a stack keeps, and per gated layer (empty: per-layer shape).
  std::map<AttnType, int64_t> uniform_kept_;
  std::vector<int64_t> layer_kept_;
  std::vector<std::pair<int64_t, int64_t>> spans_;  // per gated layer: its first head's index and its head count
};

GateController::GateController(Transformer& model, HeadGateSet& gates, const TrainData& data, const TrainOptions& train,
                               const GateOptions& opts, const std::function<void(const GatePeriod&)>& on_period,
                               std::map<AttnType, int64_t> uniform_kept)
    : model_(model), gates_(gates), train_(train), opts_(opts), on_period_(on_period), n_(gates.size()),
      pass_(opts.method == GateMethod::Pass || opts.method == GateMethod::PassConc),
      dsp_(opts.method == GateMethod::Dsp), cofi_(opts.method == GateMethod::Cofi),
      k_(opts.target_kept ? *opts.target_kept : 0),
      hc_controller_(opts.method == GateMethod::HardConcrete && opts.target_kept && opts.hc_target == HcTarget::Controller),
      target_closed_(opts.target_kept ? static_cast<double>(n_ - *opts.target_kept) : 0.0),
      n_layers_(static_cast<double>(gates.layer_sizes().size())),
      gate_opt_(gates.parameters(), torch::optim::AdamOptions(opts.gate_lr)),
      coef_(opts.coef), search_{opts.coef, opts.coef_growth}, snapshot_(gates.log_alpha().detach().clone()),
      conc_(opts.method == GateMethod::PassConc),
      conc_coef_(conc_ && !opts.concentrator_adaptive ? opts.concentrator_weight : 0.0),
      confidence_(static_cast<size_t>(n_), 0.0), rng_(train.seed * 7919ull + 17), uniform_kept_(std::move(uniform_kept)) {
  for (int64_t size : gates.layer_sizes()) spans_.emplace_back(spans_.empty() ? 0 : spans_.back().first + spans_.back().second, size);
  if (!uniform_kept_.empty())
    for (const auto& [first, size] : spans_) layer_kept_.push_back(uniform_kept_.at(gates.heads()[static_cast<size_t>(first)].type));
  for (size_t i = 0; i < data.valid.size() && static_cast<int64_t>(i) < opts.confidence_examples; ++i)
    conf_set_.examples.push_back(data.valid[i]);
  res_.heads = gates.heads();
  res_.target_kept = opts.target_kept ? *opts.target_kept : -1;
  if (cofi_) {
    lambdas_ = torch::zeros({2}, gates.log_alpha().options()).requires_grad_(true);
    lagrange_opt_ = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{lambdas_},
                                                         torch::optim::AdamOptions(opts.lagrangian_lr));
  }
}

double GateController::dsp_tau(int64_t step) const {
  const double f = std::min(1.0, static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, train_.max_steps)));
  return opts_.dsp_tau_start * std::pow(opts_.dsp_tau_end / opts_.dsp_tau_start, f);
}

torch::Tensor GateController::by_layer(const torch::Tensor& x,
                                       const std::function<torch::Tensor(const torch::Tensor&, size_t)>& f) const {
  std::vector<torch::Tensor> parts;
  for (size_t i = 0; i < spans_.size(); ++i) parts.push_back(f(layer_slice(x, i), i));
  return torch::cat(parts);
}

// dsp: K of all heads, or under --shape uniform each layer's own K.
void GateController::attach_train(int64_t step) {
  if (!dsp_) return gates_.attach_sample();
  const double tau = dsp_tau(step);
  if (layer_kept_.empty()) return gates_.attach(gumbel_soft_top_k(gates_.log_alpha(), k_, tau, opts_.dsp_straight_through));
  gates_.attach(by_layer(gates_.log_alpha(), [&](const torch::Tensor& x, size_t i) {
    return gumbel_soft_top_k(x, layer_kept_[i], tau, opts_.dsp_straight_through);
  }));
}

void GateController::attach_eval() {
  if (!dsp_) return gates_.attach_deterministic();
  if (layer_kept_.empty()) return gates_.attach(hard_top_k(gates_.log_alpha(), k_));
  gates_.attach(by_layer(gates_.log_alpha(), [&](const torch::Tensor& x, size_t i) { return hard_top_k(x, layer_kept_[i]); }));
}

// cofi: the multipliers take a step up their gradient (the gates took theirs down).
void GateController::ascend_lagrangian() {
  if (!lambdas_.grad().defined()) return;
  lambdas_.mutable_grad().neg_();
  lagrange_opt_->step();
  lagrange_opt_->zero_grad();
  coef_ = lambdas_[0].item<double>();
  conc_coef_ = lambdas_[1].item<double>();
}

torch::Tensor GateController::penalty(int64_t step) {
  if (dsp_) return {};  // K is built into the relaxation
  if (cofi_) {
    const double warm = opts_.cofi_warmup * static_cast<double>(train_.max_steps);
    const double ramp = warm > 0 ? std::min(1.0, static_cast<double>(step) / warm) : 1.0;
    const double target_sparsity = target_closed_ / static_cast<double>(n_) * ramp;
    if (layer_kept_.empty()) {
      const auto gap = (1.0 - gates_.p_open().sum() / static_cast<double>(n_)) - target_sparsity;
      return lambdas_[0] * gap + lambdas_[1] * gap * gap;
    }
    // Uniform: every layer's own expected sparsity against its own target, averaged over the layers.
    const auto gap = by_layer(gates_.p_open(), [&](const torch::Tensor& p, size_t i) {
      const auto n = static_cast<double>(p.numel());
      return ((1.0 - p.sum() / n) - (n - static_cast<double>(layer_kept_[i])) / n * ramp).reshape({1});
    });
    return (lambdas_[0] * gap + lambdas_[1] * gap * gap).sum() / n_layers_;
  }
  auto la = gates_.log_alpha();
  if (!pass_) {
    const auto open = gates_.dist().p_open(la);
    // Voita's λ·Σ P(open) / layers, without a target or with the λ search; the quadratic mode
    // pulls the expected number of open heads to the target from both sides (CoFi's term), under
    // --shape uniform every layer's to its own.
    if (!opts_.target_kept || hc_controller_) return coef_ * open.sum() / n_layers_;
    if (!layer_kept_.empty())
      return coef_ * by_layer(open, [&](const torch::Tensor& p, size_t i) {
        return (p.sum() - static_cast<double>(layer_kept_[i])).pow(2).reshape({1});
      }).sum() / n_layers_;
    return coef_ * (open.sum() - static_cast<double>(*opts_.target_kept)).pow(2) / n_layers_;
  }
  auto p0 = gates_.dist().p_zero(la), p1 = gates_.dist().p_one(la);
  if (!layer_kept_.empty()) {  // uniform: PASS's terms layer by layer, each to its own count (no concentrator)
    torch::Tensor t = torch::zeros({}, p0.options());
    for (size_t i = 0; i < spans_.size(); ++i)
      t = t + pass_penalty(layer_slice(p0, i), layer_slice(p1, i), static_cast<double>(spans_[i].second - layer_kept_[i]));
    return coef_ * t;
  }
  auto t = pass_penalty(p0, p1, target_closed_);
  if (conc_ && conc_coef_ > 0) t = t + conc_coef_ * concentrator_penalty(p0, gates_.layer_sizes());
  return coef_ * t;
}

// Appends the gates' state to the log (and reports it); returns the number of closed gates.
int64_t GateController::record(int64_t step) {
  torch::NoGradGuard no_grad;
  auto la = gates_.log_alpha().detach();
  auto po = !dsp_ ? gates_.p_open()
            : layer_kept_.empty()
                ? soft_top_k(la, k_, dsp_tau(step))
                : by_layer(la, [&](const torch::Tensor& x, size_t i) { return soft_top_k(x, layer_kept_[i], dsp_tau(step)); });
  GatePeriod r;
  r.step = step;
  r.coef = dsp_ ? dsp_tau(step) : coef_;
  r.conc_coef = conc_coef_;
  r.expected_open = po.sum().item<double>();
  r.closed = dsp_ ? n_ - k_ : gates_.n_closed();
  const auto host = torch::stack({po, la}).to(torch::kCPU).contiguous();  // one read per period
  const float* h = host.data_ptr<float>();
  r.p_open.assign(h, h + n_);
  r.log_alpha.assign(h + n_, h + 2 * n_);
  res_.log.push_back(std::move(r));
  if (on_period_) on_period_(res_.log.back());
  return res_.log.back().closed;
}

// PASS: closed gates reopen at random, more likely for confident heads and less so period by period.
void GateController::reopen(int64_t step) {
  torch::NoGradGuard no_grad;
  if (!opts_.reopen || static_cast<double>(step) > opts_.reopen_until * static_cast<double>(train_.max_steps)) return;
  const int64_t k = step / opts_.period;  // period number, 1-based
  gates_.attach_deterministic();
  ScoreOptions so;
  so.seed = train_.seed;
  auto conf = score_heads(*model_, conf_set_, ScoreMethod::Confidence, so);  // restores train mode
  double mx = 0;
  for (int64_t i = 0; i < n_; ++i) {
    confidence_[i] += conf.at(gates_.heads()[i]);
    mx = std::max(mx, confidence_[i]);
  }
  const auto closed = gates_.closed();
  const double decay = std::pow(opts_.reopen_decay, static_cast<double>(k - 2));
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::vector<int64_t> reopened;
  for (int64_t i = 0; i < n_; ++i) {
    const double u = unif(rng_);  // drawn for every head, so the stream does not depend on the state
    if (closed[i] && mx > 0 && u < std::min(1.0, confidence_[i] / mx * decay)) reopened.push_back(i);
  }
  if (!reopened.empty())
    gates_.log_alpha().index_fill_(0, torch::tensor(reopened, torch::kLong).to(gates_.log_alpha().device()),
                                   static_cast<float>(opts_.init_log_alpha));
}

// PASSCONC, adaptive: the concentrator's weight for the next period (0 after its window).
void GateController::adapt_concentrator(int64_t step) {
  conc_coef_ = 0.0;
  if (static_cast<double>(step) >= opts_.concentrator_until * static_cast<double>(train_.max_steps)) return;
  torch::NoGradGuard no_grad;
  const auto la = gates_.log_alpha().detach();
  const auto closed_now = gates_.closed();
  std::vector<bool> open(closed_now.size());
  for (size_t i = 0; i < open.size(); ++i) open[i] = !closed_now[i];
  conc_coef_ = concentrator_coefficient(gates_.dist().p_zero(la), gates_.dist().p_one(la), open, gates_.layer_sizes(),
                                        opts_.concentrator_margin, opts_.concentrator_max);
}

// The coefficient for the next period: hard_concrete's λ search (rolling the gates back when it
// overshot), or growth while a target is missed. Returns the closed gates the next period starts from.
int64_t GateController::steer(int64_t step, int64_t closed) {
  if (keeps_by_rank(opts_.method)) return closed;  // dsp: no coefficient; cofi: the multipliers ascend every step
  if (!hc_controller_) {
    if (opts_.target_kept && !on_target()) coef_ = std::min(opts_.coef_max, coef_ * opts_.coef_growth);
    return closed;
  }
  const bool rollback = search_.update(closed, static_cast<int64_t>(target_closed_));
  search_.lambda = std::min(opts_.coef_max, search_.lambda);
  coef_ = search_.lambda;
  if (!rollback) {
    snapshot_ = gates_.log_alpha().detach().clone();
    snapshot_moments_ = compat::adam_moments(gate_opt_, gates_.log_alpha());
    return closed;
  }
  {
    torch::NoGradGuard no_grad;
    gates_.log_alpha().copy_(snapshot_);
  }
  auto restart = snapshot_moments_;
  if (restart.exp_avg.defined()) restart.exp_avg = torch::zeros_like(restart.exp_avg);
  compat::set_adam_moments(gate_opt_, gates_.log_alpha(), restart);
  ++res_.rollbacks;
  res_.log.back().rolled_back = true;
  log_info("gates", "closed " + std::to_string(closed) + " > target " +
                        std::to_string(static_cast<int64_t>(target_closed_)) +
                        ": gates rolled back to the last period that did not overshoot, lambda " + std::to_string(coef_));
  return record(step);  // the state the next period starts from
}

// The gates close the target's count: in all, or under --shape uniform in every layer.
bool GateController::on_target() const {
  if (!opts_.target_kept) return true;
  if (layer_kept_.empty()) return gates_.n_closed() == static_cast<int64_t>(target_closed_);
  const auto closed = gates_.closed();
  for (size_t i = 0; i < spans_.size(); ++i) {
    const auto [first, size] = spans_[i];
    if (std::count(closed.begin() + first, closed.begin() + first + size, true) != size - layer_kept_[i]) return false;
  }
  return true;
}

int64_t GateController::periodic(int64_t step) {
  if ((pass_ || hc_controller_) && opts_.clip > 0) {
    torch::NoGradGuard no_grad;
    gates_.log_alpha().clamp_(-opts_.clip, opts_.clip);
  }
  if (pass_) reopen(step);
  if (conc_ && opts_.concentrator_adaptive) adapt_concentrator(step);
  const int64_t closed = steer(step, record(step));
  last_on_target_ = on_target();
  return closed;
}

TrainHooks GateController::hooks() {
  TrainHooks hooks;
  hooks.save_checkpoints = false;
  hooks.before_forward = [this](int64_t step) { attach_train(step); };
  hooks.extra_loss = [this](int64_t step) { return penalty(step); };
  hooks.after_backward = [this](int64_t step) {
    gate_opt_.step();
    gate_opt_.zero_grad();
    if (cofi_) ascend_lagrangian();
    if (step % opts_.period == 0) last_closed_ = periodic(step);
  };
  hooks.before_eval = [this] { attach_eval(); };
  hooks.extra_parameters = [this] {
    auto p = gates_.parameters();
    if (cofi_) p.push_back(lambdas_);
    return p;
  };
  hooks.stop = [this](int64_t step) {
    if (keeps_by_rank(opts_.method)) return step >= train_.max_steps;
    if (step < train_.max_steps || step % opts_.period != 0) return false;
    return !opts_.target_kept || last_on_target_;
  };
  return hooks;
}

std::vector<HeadId> GateController::uniform_cut(const torch::Tensor& importance) const {
  HeadScores s;
  s.method = "gates";
  const auto host = importance.to(torch::kCPU, torch::kDouble).contiguous();
  for (int64_t i = 0; i < n_; ++i) s.scores[gates_.heads()[static_cast<size_t>(i)]] = host[i].item<double>();
  return plan_uniform_by_score(s, model_->config(), ScorePlanOptions{}, &uniform_kept_).heads;
}

GateTrainResult GateController::finish(int64_t steps) {
  res_.steps = steps;
  res_.final_coef = coef_;
  std::vector<bool> closed = gates_.closed();
  const int64_t closed_by_gates = dsp_ ? -1 : gates_.n_closed();
  const bool missed = opts_.target_kept && !on_target();
  if (!uniform_kept_.empty()) {
    // Uniform: each layer keeps its stack's count, as groups of query heads (grouped-query attention),
    // chosen by the gates' values summed over the heads that go together; under PASS, HC and CoFi what
    // the gates closed when they met every layer's count (dsp: its per-layer top-K).
    torch::NoGradGuard no_grad;
    const auto cut = uniform_cut(dsp_ ? gates_.log_alpha().detach() : gates_.p_open());
    const std::set<HeadId> removed(cut.begin(), cut.end());
    int64_t moved = 0;
    for (int64_t i = 0; i < n_; ++i) {
      const bool c = removed.count(gates_.heads()[static_cast<size_t>(i)]) > 0;
      moved += !dsp_ && c != closed[static_cast<size_t>(i)];
      closed[static_cast<size_t>(i)] = c;
    }
    res_.closed_by_gates = closed_by_gates;
    if (moved > 0)
      log_info("gates", "--shape uniform: " + std::to_string(moved) + " heads differ from the gates' own closed set "
                        "(" + std::to_string(closed_by_gates) + " closed); the uniform cut by P(open) decides");
  } else if (keeps_by_rank(opts_.method) || (missed && opts_.complete_by_rank)) {
    // Exactly the target: the K largest logits (dsp) or P(open) (P_h(open)·P_L(open) with layer gates).
    torch::NoGradGuard no_grad;
    const auto keep = hard_top_k(dsp_ ? gates_.log_alpha().detach() : gates_.p_open(), k_).to(torch::kCPU);
    res_.closed_by_gates = closed_by_gates;
    if (!keeps_by_rank(opts_.method))
      log_info("gates", "the gates closed " + std::to_string(closed_by_gates) + " heads, the target is " +
                            std::to_string(n_ - k_) + ": the " + std::to_string(k_) +
                            " heads with the largest P(open) are kept (--complete-by-rank)");
    for (int64_t i = 0; i < n_; ++i) closed[static_cast<size_t>(i)] = keep[i].item<double>() == 0.0;
  }
  for (int64_t i = 0; i < n_; ++i) (closed[i] ? res_.closed : res_.kept).push_back(gates_.heads()[i]);
  if (res_.log.empty() || res_.log.back().step != steps) record(steps);
  res_.reached_target = !opts_.target_kept || static_cast<int64_t>(res_.kept.size()) == *opts_.target_kept;
  res_.emptied = emptied_layers(model_->config(), res_.closed);
  if (!res_.reached_target)
    log_warn("gates", "kept " + std::to_string(res_.kept.size()) + " heads, not the target " +
                          std::to_string(*opts_.target_kept) + "; train longer (--extra-steps) or raise --coef");
  return std::move(res_);
}

}  // namespace

GateTrainResult train_gates(Transformer& model, const TrainData& data, const TrainOptions& train,
                            const GateOptions& opts, const std::string& out_dir,
                            const std::function<void(const GatePeriod&)>& on_period,
                            const TrainProgressFn& progress) {
  if (!model->masked_heads().empty())
    throw std::invalid_argument("gates: the model has " + std::to_string(model->masked_heads().size()) +
                                " masked heads; remove them first (apply_plan_remove) so every gate is a live head");
  HeadGateSet gates(*model, opts.dist, opts.init_log_alpha, opts.method == GateMethod::Cofi);
  opts.validate(gates.size());
  std::map<AttnType, int64_t> uniform_kept;
  if (opts.shape == PlanShape::Uniform) {
    uniform_kept = uniform_kept_per_layer(model->config(), gates.size() - *opts.target_kept, 1);
    const int64_t kept = uniform_heads_kept(model->config(), uniform_kept);
    if (kept != *opts.target_kept)
      throw std::invalid_argument("gates --shape uniform: no uniform shape keeps exactly " + std::to_string(*opts.target_kept) +
                                  " heads; the nearest below the heads to remove keeps " + std::to_string(kept));
  }
  TrainOptions with_teacher = train;
  if (opts.distill_weight > 0 || opts.distill_hidden_weight > 0) {
    with_teacher.distill_weight = opts.distill_weight;
    with_teacher.distill_hidden_weight = opts.distill_hidden_weight;
    with_teacher.distill_temperature = opts.distill_temperature;
    if (!with_teacher.teacher) with_teacher.teacher = remove_heads(*model, {}).ptr();  // a copy: the model before the gates
  }
  GateController controller(model, gates, data, with_teacher, opts, on_period, uniform_kept);
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
