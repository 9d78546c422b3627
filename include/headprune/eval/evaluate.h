// Loss-based evaluation over tokenized examples: mean loss, and per family accuracy/F1/MCC
// (classification) or perplexity (LM, translation). BLEU needs decoding: see decode.h.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "headprune/data/dataset.h"
#include "headprune/data/tokenizer.h"
#include "headprune/decode/search.h"
#include "headprune/eval/metrics.h"
#include "headprune/model/transformer.h"
#include "headprune/util/shape_graphs.h"

namespace hp {

struct EvalOptions {
  int64_t batch_tokens = 8192;
  int64_t max_batch = 256;
  // Forward passes replayed per batch shape (eval/graph_forward.h): CUDA graphs on a GPU, batches
  // padded up to power-of-two buckets of rows and lengths.
  GraphReplay graphs = GraphReplay::Off;
};

struct EvalResult {
  double loss = 0;         // mean over examples (classification) or target tokens
  int64_t n_examples = 0;
  int64_t n_tokens = 0;    // target tokens that count in the loss
  std::optional<ClassificationMetrics> classification;
  double perplexity = 0;   // exp(loss) for LM and translation
  std::vector<int64_t> predictions;  // classification: predicted label per example, in input order
  nlohmann::json to_json() const;
};

// Calls fn(indices into examples, batch, output) for each length-sorted token batch, with the
// model in eval mode and no gradients (its train/eval mode is restored afterwards). With
// `this_ranks_share`, only the batches this process owns in a run of several (dist::owns); the
// caller sums its results across ranks. With `graphs` other than Off, the outputs carry logits only,
// from GraphForward with buckets.
using BatchFn = std::function<void(const std::vector<size_t>&, const Batch&, const ModelOutput&)>;
void forward_batches(TransformerImpl& model, const std::vector<Example>& examples, int64_t batch_tokens,
                     int64_t max_batch, const BatchFn& fn, bool this_ranks_share = false,
                     GraphReplay graphs = GraphReplay::Off);

// Per example of a batch: the summed negative log-likelihood of its targets [B] and the number
// of targets that count [B] (1 for classification; label smoothing off).
std::pair<torch::Tensor, torch::Tensor> per_example_nll(const TransformerImpl& model, const ModelOutput& out,
                                                        const Batch& batch);

// Knowledge distillation's term (Hinton et al. 2015): T^2 * KL(p_teacher || p_student) with both
// distributions at temperature T, mean over the positions the task loss counts (the targets of a
// language model or translation, every example of a classifier); in fp32 (double stays double).
// Zero when the two logits are equal.
torch::Tensor distillation_kl(const TransformerImpl& model, const ModelOutput& student, const ModelOutput& teacher,
                              const Batch& batch, double temperature);

// CoFi's layer-wise term: the mean over layers of the mean squared difference between the
// student's and the teacher's hidden states (teacher detached); equal lists of equal shapes.
torch::Tensor hidden_state_mse(const std::vector<torch::Tensor>& student, const std::vector<torch::Tensor>& teacher);

// While alive, collects the hidden state [B, T, C] entering every attention sub-layer of the
// model's forward passes (through MultiHeadAttention::on_output), in call order, and removes its
// hooks when it goes (a layer that has a hook already is a std::logic_error). `on` false: collects
// nothing and installs nothing.
class HiddenStates {
 public:
  HiddenStates(TransformerImpl& model, bool on);
  ~HiddenStates();
  HiddenStates(const HiddenStates&) = delete;
  HiddenStates& operator=(const HiddenStates&) = delete;
  std::vector<torch::Tensor> states;

 private:
  std::vector<MultiHeadAttentionImpl*> modules_;
};

// Runs the model in eval mode without gradients; restores its train/eval mode afterwards. In a run
// of several processes each evaluates its share of the batches and the sums are combined, so every
// rank returns the whole set's result.
EvalResult evaluate(TransformerImpl& model, const std::vector<Example>& examples, const EvalOptions& opts = {});

struct TranslationEval {
  BleuResult bleu;
  std::vector<std::string> hypotheses;  // detokenized, in input order
  double seconds = 0;
};

// The decoding options of a translation with this tokenizer: its start id (bos: Marian and T5 start
// from their padding id), its end id, and its padding id never generated (unless it is the end id).
DecodeOptions translation_decode(DecodeOptions decode, const Tokenizer& tokenizer);

// Decodes every source sentence (batched by length), detokenizes and scores corpus BLEU
// against the raw references. progress(done, total) is called after each batch. Several processes
// decode their share of the batches and exchange the hypotheses. Decoding starts from the tokenizer's
// bos id, stops at its eos id and never emits its padding id (translation_decode).
TranslationEval evaluate_translation(TransformerImpl& model, const Tokenizer& tokenizer,
                                     const std::vector<std::pair<std::string, std::string>>& pairs,
                                     const DecodeOptions& decode, int64_t batch_tokens = 4096,
                                     const std::function<void(int64_t, int64_t)>& progress = nullptr);

// BLEU of greedy/beam translations of synthetic examples (token ids stand in for words).
TranslationEval evaluate_synthetic_translation(TransformerImpl& model, const std::vector<Example>& examples,
                                               const DecodeOptions& decode);

// Perplexity of a unigram model (add-one smoothed counts of `train` tokens) on `eval`
// tokens: the baseline a language model must beat. Counts every token the LM predicts
// (all but the first of each block).
double unigram_perplexity(const std::vector<Example>& train, const std::vector<Example>& eval, int64_t vocab_size);

}  // namespace hp
