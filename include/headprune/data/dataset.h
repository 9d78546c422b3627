// Tokenized examples, batching by token count, and collation into model Batches.
// One Example format serves every family:
//   encoder_classifier  src = [bos] a [eos] (b [eos]), segments 0/1, label
//   decoder_lm          src = a block of tokens; collate predicts src[j+1] from src[..j]
//   encoder_decoder     src = x [eos], tgt = [bos] y [eos]; collate feeds tgt[:-1], predicts tgt[1:]
#pragma once

#include <cstdint>
#include <vector>

#include "headprune/config.h"
#include "headprune/model/transformer.h"

namespace hp {

struct Example {
  std::vector<int64_t> src;
  std::vector<int64_t> segments;  // empty, or one per src token
  std::vector<int64_t> tgt;
  int64_t label = -1;
};

// Padded batch of the given examples for the family `arch`.
Batch collate(const std::vector<const Example*>& examples, Arch arch, int64_t pad_id);
Batch collate(const std::vector<Example>& examples, Arch arch, int64_t pad_id);

// Tokens an example occupies in a padded batch row (max of source and target side).
int64_t example_length(const Example& e);

// Groups example indices into batches of similar length whose padded size
// (rows x longest example) stays within max_tokens (at least one example per batch), at most
// max_batch rows. With shuffle, ties in length are broken and the batch order is permuted
// by `seed`; without, batches come in length order. Deterministic.
std::vector<std::vector<size_t>> make_token_batches(const std::vector<Example>& examples, int64_t max_tokens,
                                                    int64_t max_batch, bool shuffle, uint64_t seed);

// Number of target tokens (labels that count in the loss) of a batch.
int64_t count_target_tokens(const Batch& b);

}  // namespace hp
