// Example collation and token-count batching (see header).
#include "headprune/data/dataset.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>

namespace hp {
namespace {

using Rows = std::vector<std::vector<int64_t>>;

// Pads rows to one length: ids [B, L] (pad_value) and mask [B, L] (1 = token).
std::pair<torch::Tensor, torch::Tensor> pad_rows(const Rows& rows, int64_t pad_value) {
  size_t L = 0;
  for (const auto& r : rows) L = std::max(L, r.size());
  const auto B = static_cast<int64_t>(rows.size());
  auto ids = torch::full({B, static_cast<int64_t>(L)}, pad_value, torch::kLong);
  auto mask = torch::zeros({B, static_cast<int64_t>(L)}, torch::kLong);
  auto a = ids.accessor<int64_t, 2>();
  auto m = mask.accessor<int64_t, 2>();
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < rows[i].size(); ++j) {
      a[i][j] = rows[i][j];
      m[i][j] = 1;
    }
  return {ids, mask};
}

}  // namespace

int64_t example_length(const Example& e) {
  return static_cast<int64_t>(std::max(e.src.size(), e.tgt.size()));
}

Batch collate(const std::vector<const Example*>& examples, Arch arch, int64_t pad_id) {
  if (examples.empty()) throw std::invalid_argument("collate: no examples");
  Batch b;
  Rows src;
  for (const auto* e : examples) {
    if (e->src.empty()) throw std::invalid_argument("collate: example with an empty source");
    src.push_back(e->src);
  }
  switch (arch) {
    case Arch::EncoderClassifier: {
      std::tie(b.input_ids, b.attention_mask) = pad_rows(src, pad_id);
      Rows segs;
      std::vector<int64_t> labels;
      for (const auto* e : examples) {
        segs.push_back(e->segments.empty() ? std::vector<int64_t>(e->src.size(), 0) : e->segments);
        labels.push_back(e->label);
      }
      b.segment_ids = pad_rows(segs, 0).first;
      b.labels = torch::tensor(labels, torch::kLong);
      break;
    }
    case Arch::DecoderLM: {
      std::tie(b.input_ids, b.attention_mask) = pad_rows(src, pad_id);
      Rows next;
      for (const auto* e : examples) {
        std::vector<int64_t> n(e->src.begin() + 1, e->src.end());
        n.push_back(kIgnoreIndex);
        next.push_back(std::move(n));
      }
      b.labels = pad_rows(next, kIgnoreIndex).first;
      break;
    }
    case Arch::EncoderDecoder: {
      std::tie(b.input_ids, b.attention_mask) = pad_rows(src, pad_id);
      Rows tin, tout;
      for (const auto* e : examples) {
        if (e->tgt.size() < 2) throw std::invalid_argument("collate: translation target needs [bos] ... [eos]");
        tin.emplace_back(e->tgt.begin(), e->tgt.end() - 1);
        tout.emplace_back(e->tgt.begin() + 1, e->tgt.end());
      }
      std::tie(b.decoder_input_ids, b.decoder_attention_mask) = pad_rows(tin, pad_id);
      b.labels = pad_rows(tout, kIgnoreIndex).first;
      break;
    }
  }
  return b;
}

Batch collate(const std::vector<Example>& examples, Arch arch, int64_t pad_id) {
  std::vector<const Example*> ptrs;
  for (const auto& e : examples) ptrs.push_back(&e);
  return collate(ptrs, arch, pad_id);
}

std::vector<std::vector<size_t>> make_token_batches(const std::vector<Example>& examples, int64_t max_tokens,
                                                    int64_t max_batch, bool shuffle, uint64_t seed) {
  if (max_tokens <= 0 || max_batch <= 0) throw std::invalid_argument("batching: max_tokens and max_batch must be > 0");
  std::vector<size_t> order(examples.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  if (shuffle) std::shuffle(order.begin(), order.end(), rng);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return example_length(examples[a]) < example_length(examples[b]); });
  std::vector<std::vector<size_t>> batches;
  std::vector<size_t> cur;
  int64_t longest = 0;
  for (size_t i : order) {
    const int64_t len = example_length(examples[i]);
    const int64_t new_longest = std::max(longest, len);
    if (!cur.empty() && (static_cast<int64_t>(cur.size() + 1) * new_longest > max_tokens ||
                         static_cast<int64_t>(cur.size()) >= max_batch)) {
      batches.push_back(std::move(cur));
      cur.clear();
      longest = 0;
    }
    cur.push_back(i);
    longest = std::max(longest, len);
  }
  if (!cur.empty()) batches.push_back(std::move(cur));
  if (shuffle) std::shuffle(batches.begin(), batches.end(), rng);
  return batches;
}

int64_t count_target_tokens(const Batch& b) {
  if (!b.labels.defined()) return 0;
  if (b.labels.dim() == 1) return b.labels.size(0);
  return b.labels.ne(kIgnoreIndex).sum().item<int64_t>();
}

}  // namespace hp
