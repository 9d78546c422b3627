// Internal helpers shared by the scorers (importance.cc, ablation.cc); not installed.
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

// Puts the model in eval mode for scoring and restores, on destruction, its mode, the
// parameters' requires_grad and the analysis hooks (head probes, context observers).
class ModelState {
 public:
  explicit ModelState(TransformerImpl& model);
  ~ModelState();
  void freeze_parameters();  // no weight gradients: backward passes only reach the probes

 private:
  TransformerImpl& model_;
  bool was_training_;
  std::vector<bool> requires_grad_;
};

// Names, times, normalizes and annotates a finished map.
HeadScores finish(HeadScores s, TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts,
                  ScoreMethod method, std::chrono::steady_clock::time_point t0);

HeadScores ablation_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts);
HeadScores all_but_one_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts);

}  // namespace hp::detail
