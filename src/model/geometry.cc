// Head geometry (see header).
#include "headprune/model/geometry.h"

#include <cmath>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

namespace hp {

std::vector<int64_t> HeadGeometry::kv_heads() const {
  std::vector<int64_t> out;
  for (int64_t h : heads)
    if (out.empty() || out.back() != h / group_size) out.push_back(h / group_size);
  return out;  // heads are increasing, so their groups are too
}

std::vector<int64_t> HeadGeometry::kv_positions() const {
  std::vector<int64_t> out;
  int64_t pos = -1, last = -1;
  for (int64_t h : heads) {
    if (h / group_size != last) {
      last = h / group_size;
      ++pos;
    }
    out.push_back(pos);
  }
  return out;
}

int64_t HeadGeometry::position_of(int64_t head) const {
  auto it = std::find(heads.begin(), heads.end(), head);
  return it == heads.end() ? -1 : static_cast<int64_t>(it - heads.begin());
}

HeadGeometry::Cut HeadGeometry::cut(const std::vector<int64_t>& remove) const {
  const std::set<int64_t> drop(remove.begin(), remove.end());
  for (int64_t h : drop)
    if (position_of(h) < 0) throw std::invalid_argument("head geometry: head " + std::to_string(h) + " is not kept");
  Cut c;
  const auto kv = kv_heads();
  const auto kv_pos = kv_positions();
  std::vector<bool> kv_used(kv.size(), false);
  for (size_t p = 0; p < heads.size(); ++p) {
    if (drop.count(heads[p])) continue;
    c.heads.push_back(heads[p]);
    c.head_positions.push_back(static_cast<int64_t>(p));
    for (int64_t d = 0; d < head_dim; ++d) c.q_rows.push_back(static_cast<int64_t>(p) * head_dim + d);
    kv_used[static_cast<size_t>(kv_pos[p])] = true;
  }
  for (size_t g = 0; g < kv.size(); ++g)
    if (kv_used[g])
      for (int64_t d = 0; d < head_dim; ++d) c.kv_rows.push_back(static_cast<int64_t>(g) * head_dim + d);
  return c;
}

double HeadGeometry::flops(double b, double tq, double tk) const {
  const double c = static_cast<double>(d_model), h = static_cast<double>(n_heads_kept());
  const double d = static_cast<double>(head_dim);
  const double qw = static_cast<double>(q_width()), kvw = static_cast<double>(kv_width());
  return 2 * b * tq * c * qw          // queries
         + 2 * 2 * b * tk * c * kvw   // keys and values
         + 2 * 2 * b * h * tq * tk * d  // scores and weighted values
         + 2 * b * tq * qw * c;       // output projection
}

HeadGeometry head_geometry(const ModelConfig& cfg, AttnType type, int64_t layer) {
  if (!cfg.has(type))
    throw std::invalid_argument("model " + to_string(cfg.arch) + " has no " + to_string(type) + " attention");
  if (layer < 0 || layer >= cfg.n_layers(type))
    throw std::invalid_argument(to_string(type) + " layer " + std::to_string(layer) + " does not exist (model has " +
                                std::to_string(cfg.n_layers(type)) + " layers)");
  HeadGeometry g;
  g.d_model = cfg.d_model;
  g.head_dim = cfg.head_dim;
  g.group_size = cfg.n_heads / cfg.effective_kv_heads();
  g.heads = cfg.heads(type)[static_cast<size_t>(layer)];
  g.qkv_bias = cfg.qkv_bias;
  g.o_bias = cfg.o_bias;
  g.qk_norm = cfg.qk_norm;
  g.norm_eps = cfg.layer_norm_eps;
  g.scaled = cfg.scaled_attention;
  return g;
}

double HeadGeometry::score_scale() const { return scaled ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0; }

namespace {

double stack_flops(const ModelConfig& cfg, AttnType self, double b, double t, bool cross, double src_t) {
  const double c = static_cast<double>(cfg.d_model);
  double f = 0;
  for (int64_t l = 0; l < cfg.n_layers(self); ++l) {
    f += head_geometry(cfg, self, l).flops(b, t, t);
    if (cross) f += head_geometry(cfg, AttnType::Cross, l).flops(b, t, src_t);
    f += (cfg.gated_ffn ? 3 : 2) * 2 * b * t * c * static_cast<double>(cfg.d_ff);  // fc1, fc2 (and gate)
  }
  return f;
}

// Values one layer of a stack holds for b sequences of t positions (over src_t keys of cross
// attention): the projections, the attention scores (and probabilities when training), the
// context, the feed-forward's hidden activations and the residual stream.
double layer_values(const ModelConfig& cfg, const HeadGeometry& g, double b, double t, double tk, bool training) {
  const double c = static_cast<double>(cfg.d_model), qw = static_cast<double>(g.q_width());
  const double kvw = static_cast<double>(g.kv_width()), h = static_cast<double>(g.n_heads_kept());
  if (h == 0) return 0;
  return b * t * (2 * qw + c) + 2 * b * tk * kvw + (training ? 2 : 1) * b * h * t * tk;
}

// The values of a stack, kept layer by layer (training) or the largest layer at a time (inference).
double stack_values(const ModelConfig& cfg, AttnType self, double b, double t, bool cross, double src_t, bool training) {
  const double c = static_cast<double>(cfg.d_model), ff = static_cast<double>(cfg.d_ff);
  double sum = 0, peak = 0;
  for (int64_t l = 0; l < cfg.n_layers(self); ++l) {
    double v = layer_values(cfg, head_geometry(cfg, self, l), b, t, t, training);
    if (cross) v += layer_values(cfg, head_geometry(cfg, AttnType::Cross, l), b, t, src_t, training);
    v += b * t * ((cfg.gated_ffn ? 3 : 2) * ff + 2 * c);  // hidden (and gate), norms
    sum += v;
    peak = std::max(peak, v);
  }
  return (training ? sum : peak) + 2 * b * t * c;  // + the embeddings and the stack's output
}

}  // namespace

double forward_memory_bytes(const ModelConfig& cfg, int64_t batch, int64_t seq_len, bool training,
                            double element_bytes) {
  const double b = static_cast<double>(batch), t = static_cast<double>(seq_len);
  const double logits = training ? 3 : 1;  // training: the logits, their log-softmax and its gradient
  double v = 0;
  switch (cfg.arch) {
    case Arch::EncoderClassifier:
      v = stack_values(cfg, AttnType::EncoderSelf, b, t, false, 0, training);
      break;
    case Arch::DecoderLM:
      v = stack_values(cfg, AttnType::DecoderSelf, b, t, false, 0, training) +
          logits * b * t * static_cast<double>(cfg.vocab_size);
      break;
    case Arch::EncoderDecoder:
    {
      const double enc = stack_values(cfg, AttnType::EncoderSelf, b, t, false, 0, training);
      const double dec = stack_values(cfg, AttnType::DecoderSelf, b, t, true, t, training);
      v = (training ? enc + dec : std::max(enc, dec)) +
          logits * b * t * static_cast<double>(cfg.effective_tgt_vocab());
      break;
    }
  }
  return v * element_bytes;
}

double forward_flops(const ModelConfig& cfg, int64_t batch, int64_t seq_len) {
  const double b = static_cast<double>(batch), t = static_cast<double>(seq_len);
  const double c = static_cast<double>(cfg.d_model);
  switch (cfg.arch) {
    case Arch::EncoderClassifier:
      return stack_flops(cfg, AttnType::EncoderSelf, b, t, false, 0) + 2 * b * c * c +
             2 * b * c * static_cast<double>(cfg.n_classes);
    case Arch::DecoderLM:
      return stack_flops(cfg, AttnType::DecoderSelf, b, t, false, 0) + 2 * b * t * c * static_cast<double>(cfg.vocab_size);
    case Arch::EncoderDecoder:
      return stack_flops(cfg, AttnType::EncoderSelf, b, t, false, 0) + stack_flops(cfg, AttnType::DecoderSelf, b, t, true, t) +
             2 * b * t * c * static_cast<double>(cfg.effective_tgt_vocab());
  }
  return 0;
}

double generation_flops(const ModelConfig& cfg, int64_t batch, int64_t prompt, int64_t new_tokens) {
  const double b = static_cast<double>(batch), c = static_cast<double>(cfg.d_model);
  const double head = 2 * b * c * static_cast<double>(cfg.vocab_size);  // the output layer, one position
  if (new_tokens == 0) return stack_flops(cfg, AttnType::DecoderSelf, b, static_cast<double>(prompt), false, 0) + head;
  double f = 0;
  for (int64_t i = 0; i < new_tokens; ++i) {
    for (int64_t l = 0; l < cfg.n_layers(AttnType::DecoderSelf); ++l) {
      // The new position's projections (its own key and value: one key), then scores and weighted values
      // over the cached positions too.
      const auto g = head_geometry(cfg, AttnType::DecoderSelf, l);
      f += g.flops(b, 1, 1) + 2 * 2 * b * static_cast<double>(g.n_heads_kept() * g.head_dim) * static_cast<double>(prompt + i);
    }
    f += cfg.n_layers(AttnType::DecoderSelf) * (cfg.gated_ffn ? 3 : 2) * 2 * b * c * static_cast<double>(cfg.d_ff) + head;
  }
  return f;
}

}  // namespace hp
