// Internal helpers shared by the scorers (src/score/scorers/*.cc, one file per row of the scorer table
// score/scorers.def) and their dispatch (importance.cc); not installed.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "headprune/score/importance.h"

namespace hp::detail {

// One attention module and the original ids of its heads, in kept order.
struct AttnLayer {
  AttnType type;
  int64_t layer;
  MultiHeadAttentionImpl* module;
  std::vector<int64_t> heads;
};
std::vector<AttnLayer> attention_layers(TransformerImpl& model);
// [H] bool: heads that contribute nothing (mask 0, or output-projection columns all zero).
torch::Tensor no_op_heads(const AttnLayer& a);

// Per attention type of a batch: which query positions are real tokens [B, T], the token ids
// of the keys [B, S] and which keys are real [B, S].
torch::Tensor query_mask(const Batch& b, AttnType t, Arch arch);
torch::Tensor key_ids(const Batch& b, AttnType t, Arch arch);
torch::Tensor key_mask(const Batch& b, AttnType t, Arch arch);

// The scorers' batching of the data (length-sorted, deterministic), reporting progress. Several
// processes split the batches between them, unless every_rank (a pipeline: every rank runs every batch).
void for_each_batch(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts, const std::string& what,
                    const std::function<void(const Batch&)>& fn, bool every_rank = false);

// Gradients of the loss (the sum of the batch's per-example losses) of a single-stack model for one
// batch, one layer's graph at a time (memory: one hidden state per layer and one layer's graph): for
// each entry i of `layers`, the gradients of wrt_of[i] (a probe, which attach(i, true) installs and
// attach(i, false) removes, or the layer's own weights, which must require grad); empty where wrt_of[i]
// is, or (opts.pipeline) where the layer belongs to another rank. Same values as the whole graph's.
std::vector<std::vector<torch::Tensor>> layerwise_grads(TransformerImpl& model, const Batch& b,
                                                        const std::vector<AttnLayer>& layers,
                                                        const std::vector<std::vector<torch::Tensor>>& wrt_of,
                                                        const std::function<void(size_t, bool)>& attach,
                                                        const ScoreOptions& opts);

// The loop of the forward-only scorers that read one tensor per attention layer and batch:
// install(i, slot) sets layer i's hook, which stores what it sees in slot; after each forward pass
// use(i, slot, batch) runs for every layer that keeps heads and captured something, and the slot is
// cleared. (The caller holds a ScoringGuard, which removes the hooks, and a NoGradGuard.)
void capture_per_layer(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts, const std::string& what,
                       const std::vector<AttnLayer>& layers, const std::function<void(size_t, torch::Tensor&)>& install,
                       const std::function<void(size_t, const torch::Tensor&, const Batch&)>& use);

// Puts the model in eval mode for scoring and restores, on destruction, its mode, the
// parameters' requires_grad and the analysis hooks (head probes, context observers).
class ScoringGuard {
 public:
  explicit ScoringGuard(TransformerImpl& model);
  ~ScoringGuard();
  void freeze_parameters();  // no weight gradients: backward passes only reach the probes

 private:
  TransformerImpl& model_;
  bool was_training_;
  std::vector<bool> requires_grad_;
};

// Names, times, normalizes and annotates a finished map.
HeadScores finish(HeadScores s, TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts,
                  ScoreMethod method, std::chrono::steady_clock::time_point t0);

torch::Device device_of(TransformerImpl& model);
int64_t query_len(const Batch& b, AttnType t, Arch arch);

// Sums of a per-(head, query) quantity over valid queries, per layer, and the query counts, kept in
// double precision on the model's device and read back once.
struct Accumulator {
  std::vector<torch::Tensor> sums;    // per layer: [H] double
  std::vector<torch::Tensor> counts;  // per layer: [] double

  Accumulator(const std::vector<AttnLayer>& layers, const torch::Device& device);
  // v [B, H, T] summed over the valid queries of qmask [B, T].
  void add_masked(size_t layer, const torch::Tensor& v, const torch::Tensor& qmask);
  // The means over every process's batches (util/dist.h): the sums are added across ranks first, so
  // this is a collective, called once per accumulator on every rank.
  HeadScores mean(const std::vector<AttnLayer>& layers);
};

// Gradient importance of several units from one pass over the data (scorers/gradient.cc): raw maps,
// in the order of `units`.
std::vector<HeadScores> gradient_units(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts,
                                       const std::vector<ScoreUnit>& units);

}  // namespace hp::detail
