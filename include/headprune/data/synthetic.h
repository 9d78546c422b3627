// Built-in synthetic tasks, deterministic from a seed and generated in memory, so the demo
// and the core tests need no files. Token ids: 0 pad, 1 bos/[CLS], 2 eos/[SEP], 3.. content.
//   encoder_classifier: label = the class c whose tokens (id % n_classes == c) are most
//                       frequent (ties -> smallest c); half the examples are sentence pairs.
//   decoder_lm:         arithmetic progressions mod the content vocabulary (random start
//                       and step), so each next token is predictable from the two before.
//   encoder_decoder:    target = the source reversed, each token mapped by a fixed bijection.
#pragma once

#include <cstdint>

#include "headprune/config.h"
#include "headprune/data/dataset.h"
#include "headprune/model/transformer.h"

namespace hp {

constexpr int64_t kPadId = 0, kBosId = 1, kEosId = 2, kFirstContentId = 3;

// n examples with lengths in [min_len, max_len] (content tokens).
std::vector<Example> synthetic_examples(const ModelConfig& cfg, int64_t n, int64_t min_len, int64_t max_len,
                                        uint64_t seed);
// A padded batch for the family of `cfg` with lengths in [min_len, max_len].
Batch synthetic_batch(const ModelConfig& cfg, int64_t batch_size, int64_t min_len, int64_t max_len, uint64_t seed);

}  // namespace hp
