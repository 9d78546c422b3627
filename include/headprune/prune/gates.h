// Learned head gates, trained jointly with the model to a head budget:
//   hard_concrete  Voita et al. 2019 §6 (Louizos et al. 2018): a Hard Concrete gate per head and
//                  the expected-L0 penalty λ · Σ_h P(g_h ≠ 0), averaged over the gated layers as
//                  Voita's code does. Voita has no target: λ sets how many heads close. With a
//                  target of K kept heads (HcTarget::Controller, the default) the penalty stays
//                  Voita's and λ is searched for during the run (LambdaSearch): ×growth each period
//                  while too few gates are closed; when too many are, the gates (log α and their
//                  optimizer state) go back to the last period that did not overshoot and λ is
//                  bisected between the largest λ that did not overshoot and the smallest that did.
//                  (Closed Hard Concrete gates hardly reopen, so overshooting cannot be undone by
//                  lowering λ alone.) log α is clipped to [−clip, clip]. HcTarget::Quadratic instead uses
//                  λ · (Σ_h P(g_h ≠ 0) − K)² / layers (CoFi's quadratic term), which pulls the
//                  expected count to K but leaves the gates non-binary.
//   pass           "Pruning Attention Heads with Almost-sure Sparsity Targets": the penalty
//                  c · [Σ_h P(g_h not binary) + |K0 − Σ_h P(g_h = 0)| + |(N − K0) − Σ_h P(g_h = 1)|]
//                  for K0 = N − target closed gates; c grows ×growth each period while the count
//                  of closed gates differs from K0; log α is clipped to [−clip, clip] and a closed
//                  gate reopens with probability (its normalized Voita confidence) · decay^(k − 2)
//                  at period k.
//   passconc       PASS plus c · λc · Σ_layers (1 − Π_{h in layer} P(g_h = 0)): kept heads are
//                  concentrated in fewer layers, so whole attention layers empty and are skipped.
//                  The term's gradient on a head is Π of the *other* heads' P(g = 0), which is ~0
//                  unless its layer is almost empty, so a fixed λc does little. By default λc is set
//                  every period as in the released PASS code: the smallest weight at which, for some
//                  open head, the concentrator's pull to close outweighs the P(g = 1) term's pull to
//                  stay open by `margin` (see concentrator_coefficient), capped at `max`; it is on
//                  from the first period until `until` of the steps, then 0 so PASS settles the count.
// Training samples g = min(1, max(0, σ((log u − log(1−u) + log α)/β)·(r − l) + l)), u ~ U(0, 1);
// evaluation uses the deterministic gate min(1, max(0, σ(log α)·(r − l) + l)). The gates multiply
// each head's output through MultiHeadAttention::head_probe; the model's own head_mask buffers
// (masks) are left as they are. At the end a gate is closed when P(g = 0) > P(g = 1); the run
// reports whether that count equals the target (no threshold is picked after the fact). The
// closed heads are then masked, or removed physically by the caller (see cli/gates.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "headprune/config.h"
#include "headprune/model/transformer.h"
#include "headprune/train/trainer.h"
#include "headprune/util/names.h"

namespace hp {

// The Hard Concrete distribution with stretch interval (l, r) and temperature beta.
struct HardConcrete {
  double beta = 0.33;  // Voita's code; Louizos and CoFi use 2/3
  double l = -0.1, r = 1.1;

  torch::Tensor sample(const torch::Tensor& log_alpha) const;         // differentiable, in [0, 1]
  torch::Tensor deterministic(const torch::Tensor& log_alpha) const;  // evaluation gate
  torch::Tensor p_open(const torch::Tensor& log_alpha) const;         // P(g ≠ 0), the expected L0
  torch::Tensor p_zero(const torch::Tensor& log_alpha) const;         // P(g = 0) = 1 − p_open
  torch::Tensor p_one(const torch::Tensor& log_alpha) const;          // P(g = 1)
  void validate() const;  // beta > 0, l < 0, r > 1
};

// The penalties, on flat per-head probability vectors.
torch::Tensor pass_penalty(const torch::Tensor& p0, const torch::Tensor& p1, double target_closed);
// Σ over layers of 1 − Π P(g = 0); layer_sizes partitions p0 in order.
torch::Tensor concentrator_penalty(const torch::Tensor& p0, const std::vector<int64_t>& layer_sizes);
// The adaptive concentrator weight: over the open heads i (open[i], i.e. P(g = 0) <= P(g = 1)),
//   min_i margin · max(1, P1_i(1 − P1_i) / (P0_i(1 − P0_i))) / Π_{j ≠ i, same layer} P0_j,
// the least λc for which λc · ∂(1 − Π P0)/∂(−log α_i) >= margin · ∂P1_i/∂log α_i for that head,
// capped at max_coef (also when no head is open or every product underflows).
double concentrator_coefficient(const torch::Tensor& p0, const torch::Tensor& p1, const std::vector<bool>& open,
                                const std::vector<int64_t>& layer_sizes, double margin, double max_coef);

enum class GateMethod { HardConcrete, Pass, PassConc };
enum class HcTarget { Controller, Quadratic };  // how hard_concrete reaches a target (see above)
std::string to_string(HcTarget t);
HcTarget parse_hc_target(const std::string& s);  // controller | quadratic
std::string to_string(GateMethod m);
GateMethod parse_gate_method(const std::string& s);  // hard_concrete (or l0) | pass | passconc
const NameTable<GateMethod>& gate_method_names();
const NameTable<HcTarget>& hc_target_names();

// The λ search of hard_concrete's controller. update() is called at each period end with the
// decided closed count; it sets the λ for the next period and returns true when the gates must be
// rolled back to the last snapshot (the count overshot the target), false when the current gates
// are the new snapshot. Bracket: lo = largest λ that did not overshoot, hi = smallest that did;
// the next λ is their geometric mean, or ×growth / ÷growth beyond the known side. The count at a
// fixed λ drifts as the gates train, so either bound can go stale: when the bracket has narrowed
// to growth^0.1 and still overshoots, lo is dropped and the search continues below hi; when it
// still undershoots, hi is dropped and the search continues above lo.
struct LambdaSearch {
  double lambda = 0.1, growth = 2.0;
  double lo = 0.0, hi = 0.0;  // 0: not known yet
  bool update(int64_t closed, int64_t target_closed);
};

struct GateOptions {
  GateMethod method = GateMethod::PassConc;
  std::optional<int64_t> target_kept;  // exact number of heads to keep (required by pass/passconc)
  HardConcrete dist;
  double coef = 0.1;          // λ of the L0 penalty, or PASS's starting coefficient
  HcTarget hc_target = HcTarget::Controller;
  double coef_growth = 2.0;   // coefficient update per period (see above)
  double coef_max = 1e4;
  // passconc: the concentrator's weight relative to PASS's coefficient. Adaptive (the default):
  // concentrator_coefficient(margin, max) recomputed every period until `until` of max_steps, 0
  // before the first period and after. Fixed: concentrator_weight throughout.
  bool concentrator_adaptive = true;
  double concentrator_weight = 1.0;    // fixed mode
  double concentrator_margin = 2.0;    // adaptive mode (the released code's factor 2)
  double concentrator_max = 500.0;     // adaptive mode (the released translation code's bound)
  double concentrator_until = 0.75;    // adaptive mode, fraction of max_steps
  int64_t period = 100;       // steps between checks (clip, reopen, coefficient, log line)
  double clip = 5.0;          // pass/passconc, hard_concrete's controller: log α range (0 = no clipping)
  bool reopen = true;         // pass/passconc: selective reopening of closed gates
  double reopen_decay = 0.9;
  double reopen_until = 0.75;  // fraction of max_steps after which no gate reopens
  int64_t confidence_examples = 128;  // validation examples for the reopening confidence
  double gate_lr = 0.05;      // Adam learning rate of log α
  double init_log_alpha = 3.0;  // all gates start open (deterministic gate 1)
  int64_t max_extra_steps = 0;  // train past max_steps, a period at a time, until the count is exact

  void validate(int64_t n_heads) const;  // throws std::invalid_argument naming the option
  nlohmann::json to_json() const;
};

// One gate per head of every attention layer that keeps heads, in model order.
class HeadGateSet {
 public:
  HeadGateSet(TransformerImpl& model, const HardConcrete& dist, double init_log_alpha);

  int64_t size() const { return log_alpha_.numel(); }
  const std::vector<HeadId>& heads() const { return heads_; }
  const std::vector<int64_t>& layer_sizes() const { return layer_sizes_; }
  torch::Tensor& log_alpha() { return log_alpha_; }  // [N] leaf with requires_grad
  const HardConcrete& dist() const { return dist_; }

  void attach_sample();         // a fresh training sample on every gated attention
  void attach_deterministic();  // evaluation gates
  void detach();                // no gates (the model's masks only)
  std::vector<bool> closed() const;  // P(g = 0) > P(g = 1)
  int64_t n_closed() const;

 private:
  void attach(const torch::Tensor& g);
  HardConcrete dist_;
  torch::Tensor log_alpha_;
  std::vector<HeadId> heads_;
  std::vector<MultiHeadAttentionImpl*> modules_;
  std::vector<int64_t> layer_sizes_;
};

// The gates at the end of a period: the coefficient, the concentrator weight (passconc), the expected
// number of open heads Σ P(g ≠ 0), the closed count, and P(g ≠ 0) and log α of every head.
struct GatePeriod {
  int64_t step = 0;
  double coef = 0, conc_coef = 0, expected_open = 0;
  int64_t closed = 0;
  bool rolled_back = false;  // hard_concrete controller: this period overshot and was undone
  std::vector<double> p_open, log_alpha;  // per head, in GateTrainResult::heads order
  int64_t n_heads() const { return static_cast<int64_t>(p_open.size()); }
};

struct GateTrainResult {
  std::vector<HeadId> heads;  // every gated head, in the order of the log's per-head arrays
  std::vector<HeadId> closed, kept;
  int64_t target_kept = -1;  // -1: no target
  bool reached_target = true;
  int64_t steps = 0;
  double final_coef = 0;
  int64_t rollbacks = 0;  // hard_concrete controller: periods undone because the count overshot
  std::vector<std::pair<AttnType, int64_t>> emptied;  // attention layers whose every gate is closed
  std::vector<GatePeriod> log;  // one record per period (two for a rolled-back period: before, after)
  nlohmann::json to_json() const;  // the summary (without the log)
  nlohmann::json log_json() const;  // [{step, coef, conc_coef, expected_open, closed, p_open, log_alpha}]
  std::string log_csv() const;      // step,head,p_open,log_alpha: one row per period and head
};

// Trains the model and the gates together (train.max_steps steps, plus up to max_extra_steps
// until the closed count is exact). The model must have no masked heads (remove them first).
// Model checkpoints are not written (out_dir receives
// history.json); the model keeps its trained weights, its masks unchanged and no gates attached.
GateTrainResult train_gates(Transformer& model, const TrainData& data, const TrainOptions& train,
                            const GateOptions& opts, const std::string& out_dir,
                            const std::function<void(const GatePeriod&)>& on_period = nullptr,
                            const TrainProgressFn& progress = nullptr);

// Attention layers (type, layer) that keep heads in the model but whose heads are all in `closed`.
std::vector<std::pair<AttnType, int64_t>> emptied_layers(const ModelConfig& cfg, const std::vector<HeadId>& closed);

}  // namespace hp
