// Private to src/prune/gates/: what a gate method plugs into a gate training run (train_gates.cc).
// GateRun is the state every method shares (the gates, their optimizer, the coefficient, the result
// being built, the uniform shape's per-layer counts); a GateRule is one method's part: how the gates
// are attached, its penalty, what it does at each period, how it steers its coefficient and how the
// kept heads are decided at the end. One file per method (hard_concrete.cc, pass.cc for pass and
// passconc, dsp.cc, cofi.cc); make_gate_rule picks one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "headprune/prune/gates.h"

namespace hp {

struct GateRun {
  GateRun(Transformer& model, HeadGateSet& gates, const TrainData& data, const TrainOptions& train,
          const GateOptions& opts, std::map<AttnType, int64_t> uniform_kept);

  Transformer& model;
  HeadGateSet& gates;
  const TrainData& data;
  const TrainOptions& train;  // max_steps without the extra steps
  const GateOptions& opts;
  const int64_t n;               // gated heads
  const int64_t k;               // the target kept count, else 0
  const double target_closed;    // n − k with a target, else 0
  const double n_layers;         // gated layers
  torch::optim::Adam gate_opt;   // of the gates' log α
  double coef;                   // the penalty's coefficient (cofi: λ1)
  double conc_coef = 0;          // the concentrator's weight relative to coef (cofi: λ2)
  GateTrainResult res;
  // --shape uniform: the heads every layer of a stack keeps, and per gated layer (empty: per-layer shape).
  std::map<AttnType, int64_t> uniform_kept;
  std::vector<int64_t> layer_kept;
  std::vector<std::pair<int64_t, int64_t>> spans;  // per gated layer: its first head's index and its head count

  // Gated layer i's heads in a per-head [N] tensor, and f(each layer's slice, i) concatenated (the uniform
  // shape's per-layer targets).
  torch::Tensor layer_slice(const torch::Tensor& x, size_t i) const {
    return x.slice(0, spans[i].first, spans[i].first + spans[i].second);
  }
  torch::Tensor by_layer(const torch::Tensor& x, const std::function<torch::Tensor(const torch::Tensor&, size_t)>& f) const;
  // The gates close the target's count: in all, or under --shape uniform in every layer.
  bool on_target() const;
};

class GateRule {
 public:
  virtual ~GateRule() = default;
  // A gate per attention layer too (cofi), multiplied into its heads' gates (HeadGateSet).
  virtual bool layer_gates() const { return false; }
  // Called once the run exists, before the first step.
  virtual void start(GateRun&) {}
  // The gates of a training step and of an evaluation.
  virtual void attach_train(GateRun& r, int64_t /*step*/) { r.gates.attach_sample(); }
  virtual void attach_eval(GateRun& r) { r.gates.attach_deterministic(); }
  // Added to the task loss; undefined: none.
  virtual torch::Tensor penalty(GateRun& r, int64_t step) = 0;
  // After the gates' optimizer step (cofi: the multipliers ascend).
  virtual void after_gate_step(GateRun&) {}
  // Trained with the gates, besides the gate set's own parameters.
  virtual std::vector<torch::Tensor> extra_parameters() const { return {}; }
  // At a period's end, before it is recorded: clipping, reopening, the concentrator's weight.
  virtual void end_period(GateRun&, int64_t /*step*/) {}
  // What the period's record shows: P(open) of every head, the coefficient and the closed count.
  virtual torch::Tensor shown_p_open(GateRun& r, int64_t /*step*/) { return r.gates.p_open(); }
  virtual double shown_coef(GateRun& r, int64_t /*step*/) { return r.coef; }
  virtual int64_t shown_closed(GateRun& r) { return r.gates.n_closed(); }
  // The coefficient for the next period from the recorded closed count; true when the gates were
  // changed (rolled back), so that the period is recorded again. Default: ×growth while a target is missed.
  virtual bool steer(GateRun& r, int64_t closed);
  // dsp and cofi keep exactly the target by ranking at the end (keeps_by_rank) and run max_steps.
  virtual bool ranks() const { return false; }
  // What the final ranking (or the uniform cut) orders the heads by.
  virtual torch::Tensor rank_values(GateRun& r) { return r.gates.p_open(); }
  // Whether the gates' own closed set means anything (dsp's does not: its mask is its top-K).
  virtual bool gates_close() const { return true; }
};

std::unique_ptr<GateRule> hard_concrete_rule();
std::unique_ptr<GateRule> pass_rule(bool concentrator);  // pass, or passconc with its concentrator
std::unique_ptr<GateRule> dsp_rule();
std::unique_ptr<GateRule> cofi_rule();
std::unique_ptr<GateRule> make_gate_rule(GateMethod m);

}  // namespace hp
