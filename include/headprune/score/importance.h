// Head importance: every scorer from the literature behind one call.
//
//   gradient     Michel et al.: I_h = E |d L / d xi_h|, one backward pass per batch through a
//                per-example (or per-token) head probe, weights frozen. L is an example's summed
//                token loss. Granularity "example" is the paper's formula; "token" takes |.| per
//                query token and averages over tokens, as Michel's code does.
//   ablation     mask each head alone; the change in loss and in the task metric, with a paired
//                bootstrap p-value per head (Michel §3.2); score = how much the metric worsens
//                (signed: a head whose removal improves the metric scores below 0, below a no-op
//                head, and is the first a performance-based pruner removes).
//   all_but_one  keep one head of a layer, mask the rest of that layer (Michel §3.3);
//                score = the metric with only that head kept.
//   confidence   Voita et al.: mean over query tokens of the head's largest attention weight,
//                keys that are special tokens (end of sentence / separator) excluded.
//   entropy      mean over query tokens of the entropy of the head's attention divided by its
//                maximum ln(n) for the query's n valid keys (comparable across causal and
//                bidirectional layers; column entropy_nats has the raw mean); lower = more
//                focused, so lower ranks as more important.
//                Both look at attention patterns only, which say nothing about a head that
//                contributes nothing: a head with mask 0 or all-zero output-projection columns
//                scores confidence 0 and normalized entropy 1, uniform attention (the least important
//                values possible).
//   magnitude    L2 norm of the head's weight slices (Q/K/V rows and output-projection columns);
//                the four norms are columns. Needs no data.
//   output_norm  mean over query tokens of the L2 norm of the head's contribution to the block
//                output (its context through its slice of the output projection).
//   lrp          Voita et al.: relevance of each head's output to the top-1 logit of every
//                prediction (alpha-beta LRP, see model/lrp.h), averaged over predictions.
//   random       seeded uniform scores, the control.
//   activation   Minitron: per channel of o_proj's input the mean over an example's tokens; the
//                head's score is the norm of its channels, root-mean-square over examples.
//   taylor       LLM-Pruner: sum of |w * dL/dw| over the weights removed with the head (or group).
//   layer_drop   1 - cos(x, x + Attn(x)) of the head's attention layer (whole layers rank together).
// Scores are keyed by original head id; heads already removed are absent, heads masked in the
// model keep their mask (they usually score 0). Deterministic for a given seed and thread count.
//
// Key/value groups (ScoreOptions::unit = kv_group; grouped-query attention): a group is a key/value
// head and the query heads reading it, keyed by the key/value head's original id. gradient is the
// group gate's |d L / d xi_g| = |sum over its query heads of d L / d xi_h| (one gate on all of them),
// ablation masks all its query heads at once; magnitude, output_norm and lrp are summed over the
// group's query heads, confidence, entropy, random and layer_drop averaged; activation and taylor
// score a group's own channels and weights (see above); all_but_one has no group form.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "headprune/eval/task_eval.h"
#include "headprune/model/lrp.h"
#include "headprune/score/head_scores.h"
#include "headprune/score/scorers.h"

namespace hp {

// ScoreMethod, its names and each scorer's properties: the scorer table (score/scorers.h).

enum class Granularity { Example, Token };
const NameTable<Granularity>& granularity_names();  // example | token

struct ScoreOptions {
  std::optional<Normalization> normalize;  // unset: default_normalization(method)
  int64_t batch_tokens = 4096;
  int64_t max_batch = 128;
  Granularity granularity = Granularity::Example;  // gradient
  std::optional<Metric> metric;                    // ablation, all_but_one: unset = default_metric(arch)
  DecodeOptions decode;                            // BLEU: greedy unless beam_size is set
  int64_t bootstrap_samples = 1000;                // ablation significance test
  double significance = 0.01;
  std::vector<int64_t> special_ids = {2};          // confidence: keys excluded (eos / [SEP])
  lrp::Rules lrp;
  uint64_t seed = 1;                               // random scores, bootstrap resamples
  ScoreUnit unit = ScoreUnit::Head;                // query heads, or key/value groups
  // Gradient and taylor: recompute one layer at a time (single-stack models): a hidden state per layer is kept
  // and each layer's graph is built again on the way back, so memory is the weights, one layer's
  // activations and one hidden state per layer, whatever the depth. The same scores as the whole graph.
  bool layerwise = false;
  // Gradient, several processes (util/dist.h): each process holds a contiguous slice of the layers
  // and every process sees every batch (hidden states forward, their gradients back, the loss on the
  // last process), instead of splitting the batches. Implies layerwise.
  bool pipeline = false;
  // Called as work progresses: (what, done, total).
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

// Scores every head the model keeps. info records: examples, seconds, forward_passes and
// backward_passes over the data; ablation adds the base loss/metric and the number of heads
// whose removal changes the metric significantly; all_but_one adds a per-layer summary.
HeadScores score_heads(TransformerImpl& model, const EvalSet& data, ScoreMethod method, const ScoreOptions& opts = {});
// Gradient importance of several units (query heads and key/value groups) from one pass over the data:
// the same maps as score_heads with each unit, at the cost of one.
std::vector<HeadScores> score_gradient_units(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts,
                                             const std::vector<ScoreUnit>& units);

// Reference costs for the benchmarks: seconds of one forward pass and of one forward + backward
// pass (every parameter's gradient) over the same data, batched as the scorers batch, after one
// untimed warm-up pass.
struct PassCost {
  double forward_s = 0, forward_backward_s = 0;
};
PassCost measure_pass_cost(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts = {});

}  // namespace hp
