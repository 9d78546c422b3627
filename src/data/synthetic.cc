// Built-in synthetic tasks (see header).
#include "headprune/data/synthetic.h"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <vector>

#include "headprune/util/runtime.h"

namespace hp {

std::vector<Example> synthetic_examples(const ModelConfig& cfg, int64_t n, int64_t min_len, int64_t max_len,
                                        uint64_t seed) {
  if (n <= 0 || min_len < 2 || max_len < min_len)
    throw std::invalid_argument("synthetic task: need n > 0 and 2 <= min_len <= max_len");
  const int64_t n_content = cfg.vocab_size - kFirstContentId;
  if (n_content < 4) throw std::invalid_argument("synthetic task: vocab_size must be at least 7");
  if (max_len + 2 > cfg.max_positions)
    throw std::invalid_argument("synthetic task: max_len + 2 exceeds max_positions " + std::to_string(cfg.max_positions));
  // The examples' vectors, before the first is made: each holds its tokens (and segments or target).
  const double tokens = static_cast<double>(min_len + max_len) / 2 + 2;
  const double vectors = cfg.arch == Arch::DecoderLM ? 1 : 2;  // src, and segments or tgt
  const double per_example = static_cast<double>(sizeof(Example)) + tokens * sizeof(int64_t) * vectors;
  check_memory(static_cast<double>(n) * per_example, torch::kCPU, "synthetic task: " + std::to_string(n) + " examples",
               "use fewer examples (--synthetic, --synthetic-train)");
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto content = [&]() { return kFirstContentId + uniform(0, n_content - 1); };
  std::vector<Example> out;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = uniform(min_len, max_len);
    Example e;
    switch (cfg.arch) {
      case Arch::EncoderClassifier: {
        const bool pair = uniform(0, 1) == 1 && cfg.n_segments >= 2 && len >= 4;
        const int64_t split = pair ? uniform(1, len - 2) : len;
        e.src = {kBosId};
        e.segments = {0};
        std::vector<int64_t> counts(cfg.n_classes, 0);
        for (int64_t j = 0; j < len; ++j) {
          if (pair && j == split) {
            e.src.push_back(kEosId);
            e.segments.push_back(0);
          }
          const int64_t t = content();
          counts[t % cfg.n_classes]++;
          e.src.push_back(t);
          e.segments.push_back(pair && j >= split ? 1 : 0);
        }
        e.src.push_back(kEosId);
        e.segments.push_back(pair ? 1 : 0);
        e.label = std::max_element(counts.begin(), counts.end()) - counts.begin();
        break;
      }
      case Arch::DecoderLM: {
        const int64_t start = uniform(0, n_content - 1), step = uniform(1, 3);
        e.src = {kBosId};
        for (int64_t j = 0; j < len; ++j) e.src.push_back(kFirstContentId + (start + j * step) % n_content);
        e.src.push_back(kEosId);
        break;
      }
      case Arch::EncoderDecoder: {
        const int64_t n_tgt = cfg.effective_tgt_vocab() - kFirstContentId;
        if (n_tgt < 4) throw std::invalid_argument("synthetic task: tgt_vocab_size must be at least 7");
        for (int64_t j = 0; j < len; ++j) e.src.push_back(content());
        e.tgt = {kBosId};
        for (auto it = e.src.rbegin(); it != e.src.rend(); ++it)
          e.tgt.push_back(kFirstContentId + ((*it - kFirstContentId) * 7 + 5) % n_tgt);
        e.src.push_back(kEosId);
        e.tgt.push_back(kEosId);
        break;
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

Batch synthetic_batch(const ModelConfig& cfg, int64_t batch_size, int64_t min_len, int64_t max_len, uint64_t seed) {
  return collate(synthetic_examples(cfg, batch_size, min_len, max_len, seed), cfg.arch, kPadId);
}

}  // namespace hp
