// Greedy and beam-search decoding for the encoder-decoder and decoder-LM families, with
// cached keys/values: each step feeds one token per hypothesis, so decoding costs O(T) layer
// calls instead of re-running the whole prefix.
#pragma once

#include <cstdint>
#include <vector>

#include <memory>

#include "headprune/model/transformer.h"
#include "headprune/util/shape_graphs.h"

namespace hp {

struct DecodeOptions {
  int64_t beam_size = 1;        // 1 = greedy
  double length_penalty = 1.0;  // final score = sum log p / length^length_penalty
  int64_t max_len = 0;          // generated tokens; 0 = 1.5 x longest source + 10 (translation)
  int64_t bos_id = 1, eos_id = 2;  // bos: the decoder's start token (Marian and T5 start from their padding id)
  // translate(): tokens never generated (HF's single-token bad_words_ids: a translation never contains
  // padding). generate() does not read it.
  std::vector<int64_t> suppress;
  // Decoder LMs (generate): sample instead of searching. Each step draws from softmax(logits /
  // temperature) restricted to the top_k most likely tokens (0 = all) and to the smallest set whose
  // probability reaches top_p (1 = all); seeded, so a run repeats exactly.
  bool sample = false;
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 1;
  // generate(): the decoding steps on key/value caches of fixed size (the prompt and max_len), replayed
  // from a CUDA graph (Cuda) or through the same buffers (Emulate): LmSession's graphs.
  GraphReplay graphs = GraphReplay::Off;
};

// Best hypothesis per source row (token ids without bos/eos). Uses input_ids and
// attention_mask of `src`.
std::vector<std::vector<int64_t>> translate(TransformerImpl& model, const Batch& src, const DecodeOptions& opts);

// A decoder LM's incremental state for rows sequences decoded side by side: the cached keys and values
// of every layer and the next position. feed() runs new tokens through the model (a prompt into an empty
// cache, then a token per row at each step) and returns the logits of the last position only, as a
// serving engine computes them. The caches grow in place (attention.h's KVCache), so a step copies its
// new keys and values only. generate() and the generation benchmark (eval/benchmark.h) both use it.
// The caller holds the model in eval mode without gradients.
//
// With graphs other than Off, the steps after the prompt (one token per row) run on caches of a fixed
// `capacity` of positions (attention.h's KVCache::write_at), the step's position held on the device, so
// that every step is the same work at the same addresses: replayed from a CUDA graph recorded at the
// first step (Cuda), or through the same buffers without one (Emulate, any device). The prompt runs as
// without graphs.
class LmSession {
 public:
  explicit LmSession(TransformerImpl& model, GraphReplay graphs = GraphReplay::Off, int64_t capacity = 0);
  ~LmSession();
  // ids [N, T] of the next T positions -> logits [N, V] at the last of them (the model's dtype). With
  // graphs, a step's logits are the recording's output: valid until the next step.
  torch::Tensor feed(const torch::Tensor& ids);
  int64_t position() const { return position_; }
  // Back to an earlier position: what was cached before it stays, later positions are written again
  // (a benchmark decodes the same steps again on the same recordings).
  void rewind(int64_t position);
  // Bytes of the cached keys and values of the positions fed so far (not the allocated headroom).
  int64_t kv_cache_bytes() const;
  void reorder(const torch::Tensor& idx);  // rows of the caches by origin row (beam search)

 private:
  torch::Tensor fixed_step(const torch::Tensor& ids);
  void to_fixed_capacity();
  TransformerImpl& model_;
  std::vector<KVCache> caches_;
  int64_t position_ = 0;
  int64_t capacity_;
  bool fixed_ = false;  // the caches are at their fixed capacity
  std::unique_ptr<ShapeGraphs> replay_;
};

// Continuation of `prompt` by a decoder LM (ids without the prompt, without eos): greedy, beam search,
// or sampling (opts.sample), with the keys and values of earlier positions cached.
std::vector<int64_t> generate(TransformerImpl& model, const std::vector<int64_t>& prompt, const DecodeOptions& opts);

}  // namespace hp
