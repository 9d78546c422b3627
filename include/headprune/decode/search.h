// Greedy and beam-search decoding for the encoder-decoder and decoder-LM families, with
// cached keys/values: each step feeds one token per hypothesis, so decoding costs O(T) layer
// calls instead of re-running the whole prefix.
#pragma once

#include <cstdint>
#include <vector>

#include "headprune/model/transformer.h"

namespace hp {

struct DecodeOptions {
  int64_t beam_size = 1;        // 1 = greedy
  double length_penalty = 1.0;  // final score = sum log p / length^length_penalty
  int64_t max_len = 0;          // generated tokens; 0 = 1.5 x longest source + 10 (translation)
  int64_t bos_id = 1, eos_id = 2;
};

// Best hypothesis per source row (token ids without bos/eos). Uses input_ids and
// attention_mask of `src`.
std::vector<std::vector<int64_t>> translate(TransformerImpl& model, const Batch& src, const DecodeOptions& opts);

// Continuation of `prompt` by a decoder LM (ids without the prompt, without eos).
std::vector<int64_t> generate(TransformerImpl& model, const std::vector<int64_t>& prompt, const DecodeOptions& opts);

}  // namespace hp
