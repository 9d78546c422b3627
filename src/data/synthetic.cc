// Built-in synthetic tasks (see header).
#include "headprune/data/synthetic.h"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <vector>

namespace hp {
namespace {

using Rows = std::vector<std::vector<int64_t>>;

// Pads rows to one length; returns ids [B, L] and mask [B, L].
std::pair<torch::Tensor, torch::Tensor> pad_rows(const Rows& rows, int64_t pad_value) {
  size_t L = 0;
  for (const auto& r : rows) L = std::max(L, r.size());
  auto ids = torch::full({static_cast<int64_t>(rows.size()), static_cast<int64_t>(L)}, pad_value, torch::kLong);
  auto mask = torch::zeros({static_cast<int64_t>(rows.size()), static_cast<int64_t>(L)}, torch::kLong);
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

Batch synthetic_batch(const ModelConfig& cfg, int64_t batch_size, int64_t min_len, int64_t max_len, uint64_t seed) {
  if (batch_size <= 0 || min_len < 2 || max_len < min_len)
    throw std::invalid_argument("synthetic_batch: need batch_size > 0 and 2 <= min_len <= max_len");
  const int64_t n_content = cfg.vocab_size - kFirstContentId;
  if (n_content < 4) throw std::invalid_argument("synthetic_batch: vocab_size must be at least 7");
  if (max_len + 2 > cfg.max_positions)
    throw std::invalid_argument("synthetic_batch: max_len + 2 exceeds max_positions " + std::to_string(cfg.max_positions));
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto content = [&]() { return kFirstContentId + uniform(0, n_content - 1); };
  Batch b;
  switch (cfg.arch) {
    case Arch::EncoderClassifier: {
      Rows ids, segs;
      std::vector<int64_t> labels;
      for (int64_t i = 0; i < batch_size; ++i) {
        const int64_t len = uniform(min_len, max_len);
        const bool pair = uniform(0, 1) == 1 && cfg.n_segments >= 2 && len >= 4;
        const int64_t split = pair ? uniform(1, len - 2) : len;
        std::vector<int64_t> row{kBosId}, seg{0};
        std::vector<int64_t> counts(cfg.n_classes, 0);
        for (int64_t j = 0; j < len; ++j) {
          if (pair && j == split) {
            row.push_back(kEosId);
            seg.push_back(0);
          }
          const int64_t t = content();
          counts[t % cfg.n_classes]++;
          row.push_back(t);
          seg.push_back(pair && j >= split ? 1 : 0);
        }
        row.push_back(kEosId);
        seg.push_back(pair ? 1 : 0);
        labels.push_back(std::max_element(counts.begin(), counts.end()) - counts.begin());
        ids.push_back(row);
        segs.push_back(seg);
      }
      std::tie(b.input_ids, b.attention_mask) = pad_rows(ids, kPadId);
      b.segment_ids = pad_rows(segs, 0).first;
      b.labels = torch::tensor(labels, torch::kLong);
      break;
    }
    case Arch::DecoderLM: {
      Rows ids, labels;
      for (int64_t i = 0; i < batch_size; ++i) {
        const int64_t len = uniform(min_len, max_len);
        const int64_t start = uniform(0, n_content - 1), step = uniform(1, 3);
        std::vector<int64_t> row{kBosId};
        for (int64_t j = 0; j < len; ++j) row.push_back(kFirstContentId + (start + j * step) % n_content);
        row.push_back(kEosId);
        std::vector<int64_t> next(row.begin() + 1, row.end());
        next.push_back(kIgnoreIndex);
        ids.push_back(row);
        labels.push_back(next);
      }
      std::tie(b.input_ids, b.attention_mask) = pad_rows(ids, kPadId);
      b.labels = pad_rows(labels, kIgnoreIndex).first;
      break;
    }
    case Arch::EncoderDecoder: {
      const int64_t n_tgt = cfg.effective_tgt_vocab() - kFirstContentId;
      if (n_tgt < 4) throw std::invalid_argument("synthetic_batch: tgt_vocab_size must be at least 7");
      Rows src, tgt_in, tgt_out;
      for (int64_t i = 0; i < batch_size; ++i) {
        const int64_t len = uniform(min_len, max_len);
        std::vector<int64_t> s;
        for (int64_t j = 0; j < len; ++j) s.push_back(content());
        std::vector<int64_t> t{kBosId};
        for (auto it = s.rbegin(); it != s.rend(); ++it)
          t.push_back(kFirstContentId + ((*it - kFirstContentId) * 7 + 5) % n_tgt);
        s.push_back(kEosId);
        t.push_back(kEosId);
        src.push_back(s);
        tgt_in.emplace_back(t.begin(), t.end() - 1);
        tgt_out.emplace_back(t.begin() + 1, t.end());
      }
      std::tie(b.input_ids, b.attention_mask) = pad_rows(src, kPadId);
      std::tie(b.decoder_input_ids, b.decoder_attention_mask) = pad_rows(tgt_in, kPadId);
      b.labels = pad_rows(tgt_out, kIgnoreIndex).first;
      break;
    }
  }
  return b;
}

}  // namespace hp
