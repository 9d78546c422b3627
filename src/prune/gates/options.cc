// GateOptions: their option table (the flags, Python's keywords and gates.json's "options" in one),
// the method and target names, and the checks that tie fields together (see prune/gates.h).
#include "headprune/prune/gates.h"

#include <cmath>
#include <stdexcept>
#include <utility>

#include "headprune/util/json_fields.h"

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

}  // namespace hp
