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
//   dsp            Differentiable Subset Pruning (Li, Cotterell, Sachan 2021): a logit per head and a
//                  Gumbel soft top-K (Xie & Ermon 2019): K rounds of a softmax at temperature τ over
//                  the noisy logits, each round's probabilities taken off the next round's keys by
//                  log(1 − p); the relaxed mask is their sum and adds up to exactly K. τ is annealed
//                  geometrically from dsp_tau_start to dsp_tau_end over max_steps. With
//                  dsp_straight_through the forward pass uses the hard top-K of that mask and the
//                  backward pass its relaxation. No penalty: K is built in; evaluation and the
//                  result keep the K largest logits, so exactly K heads are kept.
//   cofi           CoFi (Xia et al. 2022) restricted to attention: a Hard Concrete gate per head and
//                  one per attention layer (its heads' outputs are multiplied by both, so a closed layer
//                  gate empties the layer); the expected kept fraction Σ_L P_L(open)·Σ_{h in L}
//                  P_h(open) / N is held to the target by the Lagrangian λ1·(s − t) + λ2·(s − t)²
//                  on the sparsity s = 1 − that fraction, λ1 and λ2 trained by gradient ascent (Adam,
//                  lagrangian_lr) while the gates descend; t warms up linearly to the target over
//                  cofi_warmup of max_steps. The result keeps exactly K heads: the K largest
//                  P_h(open)·P_L(open). Its layer-wise distillation is TrainOptions::distill_hidden_weight
//                  (the gates job's --gate-distill-hidden; see GateOptions::distill_*).
// Training samples g = min(1, max(0, σ((log u − log(1−u) + log α)/β)·(r − l) + l)), u ~ U(0, 1);
// evaluation uses the deterministic gate min(1, max(0, σ(log α)·(r − l) + l)). The gates multiply
// each head's output through MultiHeadAttention::head_probe; the model's own head_mask buffers
// (masks) are left as they are. At the end a gate is closed when P(g = 0) > P(g = 1); the run
// reports whether that count equals the target (no threshold is picked after the fact). The
// closed heads are then masked, or removed physically by the caller (jobs/gates_job.h).
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
#include "headprune/prune/plan.h"
#include "headprune/train/trainer.h"
#include "headprune/util/names.h"
#include "headprune/util/options.h"

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

// Xie & Ermon's relaxed top-K of `keys` [N] at temperature tau: K softmax rounds, each taken off the
// next round's keys by log(1 − p); the result is >= 0 and sums to k (warm, an entry may pass 1);
// as tau -> 0 it tends to the hard top-K. 1 <= k <= N.
torch::Tensor soft_top_k(const torch::Tensor& keys, int64_t k, double tau);
// 1 for the k largest entries of `scores` [N], 0 elsewhere (ties: the lower index).
torch::Tensor hard_top_k(const torch::Tensor& scores, int64_t k);
// DSP's training mask: soft_top_k of logits plus Gumbel(0, 1) noise; straight_through: the hard
// top-K of it forward, its gradient backward.
torch::Tensor gumbel_soft_top_k(const torch::Tensor& logits, int64_t k, double tau, bool straight_through);

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

enum class GateMethod { HardConcrete, Pass, PassConc, Dsp, Cofi };
enum class HcTarget { Controller, Quadratic };  // how hard_concrete reaches a target (see above)
std::string to_string(HcTarget t);
HcTarget parse_hc_target(const std::string& s);  // controller | quadratic
std::string to_string(GateMethod m);
GateMethod parse_gate_method(const std::string& s);  // hard_concrete (or l0) | pass | passconc | dsp | cofi
// dsp and cofi keep exactly the target by ranking at the end; the others decide by P(g = 0) > P(g = 1).
bool keeps_by_rank(GateMethod m);
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
  // A target the gates still miss at the end is completed by rank: the K heads with the largest
  // P(open) are kept (the released PASS code's top-K evaluation); closed_by_gates keeps the gates' own
  // count. Off (the default): a missed target is reported (reached_target false), never ranked.
  bool complete_by_rank = false;
  // dsp: the Gumbel soft top-K's temperature, annealed geometrically from start to end over max_steps.
  double dsp_tau_start = 1.0, dsp_tau_end = 0.05;
  bool dsp_straight_through = false;
  // cofi: Adam rate of the Lagrange multipliers (ascent) and the target's linear warm-up (fraction of
  // max_steps); the layer gates start at init_log_alpha too.
  double lagrangian_lr = 0.05;
  double cofi_warmup = 0.5;
  // Distillation while the gates train (CoFi's recipe; any method): the model as it was before the
  // gates teaches; the weights and temperature as in TrainOptions (0 = none).
  double distill_weight = 0, distill_hidden_weight = 0, distill_temperature = 1;
  // Uniform: every layer of a stack is trained to keep the same count (uniform_kept_per_layer of the
  // target: dsp's top-K, PASS's terms, hard_concrete's quadratic term and cofi's sparsity per layer), and
  // the result is that shape's uniform cut by the gates' values (plan_uniform_by_score): the same key/
  // value groups and query heads per group in every layer. Needs a target that a uniform shape keeps
  // exactly; not passconc (its concentrator empties layers) nor hard_concrete's controller (one λ for
  // the total).
  PlanShape shape = PlanShape::PerLayer;

  void validate(int64_t n_heads) const;  // throws std::invalid_argument naming the option
  // gates.json's "options": gate_option_table()'s record, the keys the flags' names. from_json also
  // reads the names of files written before (beta, max_extra_steps, dsp_straight_through, dsp_tau).
  nlohmann::json to_json() const;
  static GateOptions from_json(const nlohmann::json& j);  // strict: unknown keys are errors
};

// "adaptive" or a fixed weight (relative to PASS's coefficient) -> the options' concentrator fields.
void set_concentrator(GateOptions& opts, const std::string& text);

// GateOptions' options: `gates --...` and Python's gate={...} (util/options.h). The target is the
// request's (target_kept follows from it); the distillation temperature is the fine-tuning's
// (--distill-temperature: one temperature for both distillations, jobs/gates_job.cc).
const OptionTable<GateOptions>& gate_option_table();

// One gate per head of every attention layer that keeps heads, in model order.
class HeadGateSet {
 public:
  // layer_gates: also one gate per attention layer (cofi), multiplied into each of its heads' gates.
  HeadGateSet(TransformerImpl& model, const HardConcrete& dist, double init_log_alpha, bool layer_gates = false);

  int64_t size() const { return log_alpha_.numel(); }
  const std::vector<HeadId>& heads() const { return heads_; }
  const std::vector<int64_t>& layer_sizes() const { return layer_sizes_; }
  torch::Tensor& log_alpha() { return log_alpha_; }  // [N] leaf with requires_grad
  bool has_layer_gates() const { return layer_log_alpha_.defined(); }
  torch::Tensor& layer_log_alpha() { return layer_log_alpha_; }  // [layers] leaf (layer gates only)
  std::vector<torch::Tensor> parameters() const;  // log α, and the layers' log α with layer gates
  const HardConcrete& dist() const { return dist_; }
  torch::Tensor per_head(const torch::Tensor& per_layer) const;  // [layers] -> [N], repeated per head

  void attach(const torch::Tensor& g);  // g [N]: multiplies each head's output (through head_probe)
  void attach_sample();         // a fresh training sample on every gated attention (and layer)
  void attach_deterministic();  // evaluation gates
  void detach();                // no gates (the model's masks only)
  torch::Tensor p_open() const;  // P(head open), times P(layer open) with layer gates
  // P(g = 0) > P(g = 1) of the head's gate, or of its layer's with layer gates.
  std::vector<bool> closed() const;
  int64_t n_closed() const;

 private:
  HardConcrete dist_;
  torch::Tensor log_alpha_, layer_log_alpha_;
  std::vector<HeadId> heads_;
  std::vector<MultiHeadAttentionImpl*> modules_;
  std::vector<int64_t> layer_sizes_;
};

// The gates at the end of a period: the coefficient, the concentrator weight (passconc), the expected
// number of open heads Σ P(g ≠ 0), the closed count, and P(g ≠ 0) and log α of every head.
// cofi: coef is λ1, conc_coef λ2; dsp: coef is the temperature τ, p_open the noise-free soft top-K.
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
  // cofi, and any method completed by rank: heads whose gates were closed before the ranking (else -1)
  int64_t closed_by_gates = -1;
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
