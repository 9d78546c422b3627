// Beam search with KV caches (see header). Dimension legend: B sentences, K beams,
// N = B*K hypotheses, V vocabulary, S source length.
#include "headprune/decode/search.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include "headprune/model/geometry.h"
#include "headprune/util/runtime.h"

namespace hp {
namespace {

struct Finished {
  std::vector<int64_t> tokens;
  double score;
};

// Generic beam search. first_logp: [N, V] log-probabilities for the first generated token
// (N = B*K rows, beams of one sentence adjacent). step(last [N,1], t) -> logp [N, V] for
// generated position t (t >= 1); reorder(idx [N]) reorders cached state by origin row.
std::vector<std::vector<int64_t>> beam_search(
    int64_t B, const DecodeOptions& o, int64_t max_len, torch::Tensor logp,
    const std::function<torch::Tensor(const torch::Tensor&, int64_t)>& step,
    const std::function<void(const torch::Tensor&)>& reorder) {
  const int64_t K = o.beam_size;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  std::vector<std::vector<std::vector<int64_t>>> beams(B, std::vector<std::vector<int64_t>>(K));
  std::vector<double> scores(B * K, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 1; k < K; ++k) scores[b * K + k] = neg_inf;  // all beams start identical
  std::vector<std::vector<Finished>> done(B);
  std::vector<bool> closed(B, false);
  auto norm = [&](double s, size_t len) { return s / std::pow(static_cast<double>(std::max<size_t>(len, 1)), o.length_penalty); };

  for (int64_t t = 0;; ++t) {
    const int64_t V = logp.size(1);
    // Candidates are ranked where the log-probabilities are; only the 2K best per sentence come back.
    auto cand = logp.to(torch::kDouble) + torch::tensor(scores, torch::kDouble).to(logp.device()).unsqueeze(1);  // [N, V]
    auto top = std::get<1>(cand.view({B, K * V}).topk(2 * K, 1));  // [B, 2K] flat (beam * V + token)
    auto top_scores = cand.view({B, K * V}).gather(1, top).to(torch::kCPU).contiguous();
    top = top.to(torch::kCPU).contiguous();
    auto top_a = top.accessor<int64_t, 2>();
    auto score_a = top_scores.accessor<double, 2>();
    std::vector<int64_t> origin(B * K, 0), next_tok(B * K, o.eos_id);
    std::vector<double> next_score(B * K, neg_inf);
    std::vector<std::vector<std::vector<int64_t>>> next_beams(B, std::vector<std::vector<int64_t>>(K));
    const bool last_step = t + 1 >= max_len;
    for (int64_t b = 0; b < B; ++b) {
      int64_t filled = 0;
      if (!closed[b]) {
        for (int64_t c = 0; c < 2 * K && filled < K; ++c) {
          const int64_t flat = top_a[b][c], k = flat / V, tok = flat % V;
          const double s = score_a[b][c];
          if (s == neg_inf) break;
          auto seq = beams[b][k];
          if (tok == o.eos_id || last_step) {
            if (tok != o.eos_id) seq.push_back(tok);
            if (static_cast<int64_t>(done[b].size()) < K) done[b].push_back({seq, norm(s, seq.size() + 1)});
            continue;
          }
          seq.push_back(tok);
          origin[b * K + filled] = b * K + k;
          next_tok[b * K + filled] = tok;
          next_score[b * K + filled] = s;
          next_beams[b][filled] = std::move(seq);
          ++filled;
        }
        if (static_cast<int64_t>(done[b].size()) >= K || last_step) closed[b] = true;
      }
      for (int64_t k = filled; k < K; ++k) origin[b * K + k] = b * K;  // padding rows, never selected
      if (closed[b]) std::fill(next_score.begin() + b * K, next_score.begin() + (b + 1) * K, neg_inf);
    }
    if (std::all_of(closed.begin(), closed.end(), [](bool c) { return c; })) break;
    beams = std::move(next_beams);
    scores = next_score;
    reorder(torch::tensor(origin, torch::kLong));
    logp = step(torch::tensor(next_tok, torch::kLong).unsqueeze(1), t + 1);
  }
  std::vector<std::vector<int64_t>> out(B);
  for (int64_t b = 0; b < B; ++b) {
    if (done[b].empty()) continue;
    auto best = std::max_element(done[b].begin(), done[b].end(),
                                 [](const Finished& x, const Finished& y) { return x.score < y.score; });
    out[b] = best->tokens;
  }
  return out;
}

void reorder_caches(std::vector<KVCache>& caches, const torch::Tensor& idx) {
  for (auto& c : caches) {
    if (!c.k.defined()) continue;
    c.k = c.k.index_select(0, idx.to(c.k.device()));
    c.v = c.v.index_select(0, idx.to(c.v.device()));
  }
}

// Refuses a beam size outside [1, the output vocabulary]: more beams than tokens cannot differ.
void check_beam(const ModelConfig& cfg, int64_t beam, const char* who) {
  const int64_t v = cfg.arch == Arch::EncoderDecoder ? cfg.effective_tgt_vocab() : cfg.vocab_size;
  if (beam < 1 || beam > v)
    throw std::invalid_argument(std::string(who) + ": beam size " + std::to_string(beam) + " is outside [1, " +
                                std::to_string(v) + "] (1 = greedy; at most the model's vocabulary)");
}

// The memory a search holds, checked before it starts: the cached keys and values of `rows`
// hypotheses over `positions` (and, translating, the cross-attention's over `src_len` source
// positions), one forward pass over the prompt or source, and the candidates ranked per step
// (log-probabilities of every token, in double precision).
void check_decode_memory(TransformerImpl& model, int64_t rows, int64_t positions, int64_t src_len,
                         const std::string& what, const std::string& hint) {
  const auto& cfg = model.config();
  const auto p = model.parameters().front();
  const double elem = static_cast<double>(p.is_floating_point() ? p.element_size() : 4);
  auto kv = [&](AttnType t) {
    double w = 0;
    for (int64_t l = 0; l < cfg.n_layers(t); ++l) w += 2.0 * static_cast<double>(head_geometry(cfg, t, l).kv_width());
    return w;
  };
  const double n = static_cast<double>(rows);
  const double v = static_cast<double>(cfg.arch == Arch::EncoderDecoder ? cfg.effective_tgt_vocab() : cfg.vocab_size);
  double bytes = n * static_cast<double>(positions) * kv(AttnType::DecoderSelf) * elem + 3.0 * n * v * 8.0;
  if (cfg.arch == Arch::EncoderDecoder) {
    bytes += n * static_cast<double>(src_len) * (kv(AttnType::Cross) + static_cast<double>(cfg.d_model)) * elem;
  } else {
    bytes += forward_memory_bytes(cfg, rows, src_len, false, elem);
  }
  check_memory(bytes, p.device(), what, hint);
}

}  // namespace

std::vector<std::vector<int64_t>> translate(TransformerImpl& model, const Batch& src, const DecodeOptions& o) {
  const auto& cfg = model.config();
  if (cfg.arch != Arch::EncoderDecoder) throw std::invalid_argument("translate: needs an encoder_decoder model");
  check_beam(cfg, o.beam_size, "translate");
  const int64_t B = src.size(), K = o.beam_size;
  int64_t max_len = o.max_len > 0 ? o.max_len : src.input_ids.size(1) * 3 / 2 + 10;
  max_len = std::min(max_len, cfg.max_positions - 1);
  check_decode_memory(model, B * K, max_len, src.input_ids.size(1),
                      "translate: " + std::to_string(B) + " sentences x beam size " + std::to_string(K),
                      "use a smaller beam size (--beam)");
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  auto memory = model.encode(src).repeat_interleave(K, 0);  // [N, S, C]
  auto cross_mask = padding_mask(src.attention_mask, memory.scalar_type());  // none given: every token is real
  if (cross_mask.defined()) cross_mask = cross_mask.repeat_interleave(K, 0);     // [N, 1, 1, S]
  std::vector<KVCache> self_c, cross_c;
  const auto suppress = torch::tensor(o.suppress, torch::kLong).to(memory.device());  // made once, used every step
  auto step = [&](const torch::Tensor& last, int64_t t) {
    auto h = model.decoder->forward(last.to(memory.device()), {}, {}, memory, cross_mask, nullptr, nullptr, t,
                                    &self_c, &cross_c);
    auto logp = torch::log_softmax(model.output_projection(h.select(1, -1)).to(torch::kFloat), -1);
    if (suppress.numel() > 0) logp.index_fill_(1, suppress, -std::numeric_limits<float>::infinity());
    return logp;
  };
  auto first = step(torch::full({B * K, 1}, o.bos_id, torch::kLong), 0);
  auto out = beam_search(B, o, max_len, first, step, [&](const torch::Tensor& idx) { reorder_caches(self_c, idx); });
  model.train(was_training);
  return out;
}

LmSession::LmSession(TransformerImpl& model, GraphReplay graphs, int64_t capacity)
    : model_(model), capacity_(capacity) {
  const auto& cfg = model.config();
  if (cfg.arch != Arch::DecoderLM) throw std::invalid_argument("LmSession: needs a decoder_lm model");
  if (graphs == GraphReplay::Off) return;
  if (capacity < 2 || capacity > cfg.max_positions)
    throw std::invalid_argument("LmSession: a replayed session's capacity (" + std::to_string(capacity) +
                                " positions) must be between 2 and max_positions (" +
                                std::to_string(cfg.max_positions) + ")");
  if (cfg.positional == Positional::Relative)
    throw std::invalid_argument("LmSession: replayed decoding steps need absolute or rotary positions, not relative");
  replay_ = std::make_unique<ShapeGraphs>(
      [this](const std::vector<torch::Tensor>& in) {  // in: ids [N, 1], the position [1]
        for (auto& c : caches_)
          if (c.k_buf.defined()) c.write_at = in[1];
        const auto& w = model_.decoder->embed_tokens->weight;
        const auto mask = causal_mask_at(in[1], capacity_, w.scalar_type(), model_.config().sliding_window);
        auto h = model_.decoder->forward(in[0], {}, mask, {}, {}, nullptr, nullptr, 0, &caches_, nullptr, in[1]);
        return std::vector<torch::Tensor>{model_.output_projection(h.select(1, -1))};
      },
      graphs);
}

LmSession::~LmSession() = default;

// Moves every layer's cache into buffers of the fixed capacity: zeros after the cached positions, never
// garbage (a blocked position's weight is exactly 0, and 0 times NaN would not be).
void LmSession::to_fixed_capacity() {
  for (auto& c : caches_) {
    if (!c.k.defined()) continue;  // a layer without heads caches nothing
    auto grow = [&](const torch::Tensor& t) {
      auto b = torch::zeros({t.size(0), t.size(1), capacity_, t.size(3)}, t.options());
      b.narrow(2, 0, t.size(2)).copy_(t);
      return b;
    };
    c.k_buf = grow(c.k);
    c.v_buf = grow(c.v);
    c.k = c.k_buf;
    c.v = c.v_buf;
  }
  fixed_ = true;
}

torch::Tensor LmSession::fixed_step(const torch::Tensor& ids) {
  if (position_ >= capacity_)
    throw std::invalid_argument("LmSession: position " + std::to_string(position_) + " is past the replayed session's " +
                                std::to_string(capacity_) + " positions");
  if (!fixed_) to_fixed_capacity();
  const auto pos = torch::full({1}, position_, ids.options().dtype(torch::kLong));  // filled on the device
  const auto& out = (*replay_)({ids, pos});
  position_ += 1;
  return out.front();
}

void LmSession::rewind(int64_t position) {
  if (position < 0 || position > position_)
    throw std::invalid_argument("LmSession::rewind: position " + std::to_string(position) + " is outside [0, " +
                                std::to_string(position_) + "]");
  if (!fixed_)
    for (auto& c : caches_)
      if (c.k.defined()) {
        c.k = c.k.narrow(2, 0, position);
        c.v = c.v.narrow(2, 0, position);
      }
  position_ = position;
}

torch::Tensor LmSession::feed(const torch::Tensor& ids) {
  const auto& cfg = model_.config();
  const int64_t T = ids.size(1);
  if (replay_ && T == 1 && position_ > 0) return fixed_step(ids);
  if (fixed_)
    throw std::invalid_argument("LmSession: a replayed session takes one token per row after its prompt, not " +
                                std::to_string(T));
  const auto& w = model_.decoder->embed_tokens->weight;
  // A single new token sees every cached position: only a sliding window needs a mask then.
  const auto mask = (T > 1 || cfg.sliding_window > 0)
                        ? causal_mask(T, w.device(), w.scalar_type(), cfg.sliding_window, position_ + T)
                        : torch::Tensor();
  auto h = model_.decoder->forward(ids, {}, mask, {}, {}, nullptr, nullptr, position_, &caches_, nullptr);
  position_ += T;
  return model_.output_projection(h.select(1, -1));
}

int64_t LmSession::kv_cache_bytes() const {
  int64_t bytes = 0;
  for (const auto& c : caches_) {
    if (!c.k.defined()) continue;
    // At a fixed capacity the positions fed so far, not the whole buffers.
    const int64_t n = fixed_ ? c.k.numel() / c.k.size(2) * position_ : c.k.numel();
    bytes += 2 * n * static_cast<int64_t>(c.k.element_size());
  }
  return bytes;
}

void LmSession::reorder(const torch::Tensor& idx) {
  if (!fixed_) return reorder_caches(caches_, idx);
  for (auto& c : caches_)  // in place: the recordings read these buffers
    if (c.k.defined()) {
      c.k_buf.copy_(c.k_buf.index_select(0, idx.to(c.k_buf.device())));
      c.v_buf.copy_(c.v_buf.index_select(0, idx.to(c.v_buf.device())));
    }
}

std::vector<int64_t> generate(TransformerImpl& model, const std::vector<int64_t>& prompt, const DecodeOptions& o) {
  const auto& cfg = model.config();
  if (cfg.arch != Arch::DecoderLM) throw std::invalid_argument("generate: needs a decoder_lm model");
  if (prompt.empty()) throw std::invalid_argument("generate: empty prompt");
  if (o.max_len <= 0) throw std::invalid_argument("generate: max_len must be > 0");
  check_beam(cfg, o.beam_size, "generate");
  const int64_t K = o.beam_size, P = static_cast<int64_t>(prompt.size());
  if (P >= cfg.max_positions)
    throw std::invalid_argument("generate: the prompt's " + std::to_string(P) + " tokens leave no room in the model's " +
                                std::to_string(cfg.max_positions) + " positions (max_positions)");
  const int64_t max_len = std::min(o.max_len, cfg.max_positions - P);
  check_decode_memory(model, K, P + max_len, P,
                      "generate: beam size " + std::to_string(K) + " over " + std::to_string(P + max_len) + " positions",
                      "use a smaller beam size (--beam) or fewer new tokens (--max-new)");
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  LmSession session(model, o.graphs, P + max_len);
  const auto device = model.decoder->embed_tokens->weight.device();
  auto logp_of = [&](const torch::Tensor& ids) { return torch::log_softmax(session.feed(ids.to(device)).to(torch::kFloat), -1); };
  auto first = logp_of(torch::tensor(prompt, torch::kLong).unsqueeze(0).repeat({K, 1}));
  auto step = [&](const torch::Tensor& last, int64_t) { return logp_of(last); };
  if (o.sample) {
    if (!(o.temperature > 0) || o.top_k < 0 || !(o.top_p > 0 && o.top_p <= 1))
      throw std::invalid_argument("generate: temperature must be > 0, top_k >= 0 and top_p in (0, 1]");
    if (K != 1) throw std::invalid_argument("generate: sampling draws one sequence (beam_size 1)");
    auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
    std::vector<int64_t> out;
    torch::Tensor logp = first;  // [1, V] log-probabilities of the next token
    for (int64_t t = 0; t < max_len; ++t) {
      auto logits = (logp[0] / o.temperature).to(torch::kCPU, torch::kDouble);
      auto probs = torch::softmax(logits, -1);
      auto [sorted, order] = probs.sort(-1, /*descending=*/true);
      auto keep = torch::ones_like(sorted, torch::kBool);
      if (o.top_k > 0 && o.top_k < sorted.size(0)) keep.narrow(0, o.top_k, sorted.size(0) - o.top_k).fill_(false);
      if (o.top_p < 1) keep &= (sorted.cumsum(0) - sorted) < o.top_p;  // the first token is always kept
      auto p = torch::where(keep, sorted, torch::zeros_like(sorted));
      const int64_t pick = order[torch::multinomial(p / p.sum(), 1, false, gen).item<int64_t>()].item<int64_t>();
      if (pick == o.eos_id) break;
      out.push_back(pick);
      if (t + 1 == max_len) break;
      logp = step(torch::tensor({pick}, torch::kLong).unsqueeze(0), t + 1);
    }
    model.train(was_training);
    return out;
  }
  auto out = beam_search(1, o, max_len, first, step, [&](const torch::Tensor& idx) { session.reorder(idx); });
  model.train(was_training);
  return out[0];
}

}  // namespace hp
