// ModelConfig: names, validation and the config.json form.
#include "headprune/config.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "headprune/util/names.h"

namespace hp {

const NameTable<Arch>& arch_names() {
  static const NameTable<Arch> t{"architecture",
                                 {{Arch::EncoderClassifier, {"encoder_classifier", "bert"}},
                                  {Arch::DecoderLM, {"decoder_lm", "gpt"}},
                                  {Arch::EncoderDecoder, {"encoder_decoder", "seq2seq"}}}};
  return t;
}
const NameTable<AttnType>& attn_type_names() {
  static const NameTable<AttnType> t{"attention type",
                                     {{AttnType::EncoderSelf, {"encoder_self", "enc", "encoder"}},
                                      {AttnType::DecoderSelf, {"decoder_self", "dec", "decoder"}},
                                      {AttnType::Cross, {"cross", "enc_dec", "encoder_decoder"}}}};
  return t;
}

namespace {
const NameTable<Activation> kActNames{"activation",
                                      {{Activation::Gelu, {"gelu"}},
                                       {Activation::GeluTanh, {"gelu_tanh", "gelu_new"}},
                                       {Activation::Relu, {"relu"}},
                                       {Activation::Silu, {"silu", "swish"}}}};
const NameTable<NormPosition> kNormNames{"norm position", {{NormPosition::Pre, {"pre"}}, {NormPosition::Post, {"post"}}}};
const NameTable<Positional> kPosNames{"positional encoding",
                                      {{Positional::Learned, {"learned"}},
                                       {Positional::Sinusoidal, {"sinusoidal"}},
                                       {Positional::Rotary, {"rotary", "rope"}}}};
const NameTable<NormKind> kNormKindNames{"norm kind", {{NormKind::LayerNorm, {"layer_norm"}}, {NormKind::RmsNorm, {"rms_norm"}}}};
const NameTable<RopeScalingType> kRopeScalingNames{"rope_scaling type",
                                                   {{RopeScalingType::Default, {"default"}},
                                                    {RopeScalingType::Linear, {"linear"}},
                                                    {RopeScalingType::Llama3, {"llama3"}}}};

[[noreturn]] void bad(const std::string& field, const std::string& msg) {
  throw std::invalid_argument("config: field '" + field + "' " + msg);
}

void require_positive(const std::string& field, int64_t v) {
  if (v <= 0) bad(field, "must be > 0, got " + std::to_string(v));
}

void require_at_most(const std::string& field, int64_t v, int64_t limit) {
  if (v > limit) bad(field, "is " + std::to_string(v) + ", above the limit " + std::to_string(limit) + " (not a real model?)");
}

}  // namespace

std::string to_string(Arch a) { return arch_names().name(a); }
std::string to_string(AttnType t) { return attn_type_names().name(t); }
std::string to_string(Activation a) { return kActNames.name(a); }
std::string to_string(NormPosition n) { return kNormNames.name(n); }
std::string to_string(Positional p) { return kPosNames.name(p); }
std::string to_string(NormKind k) { return kNormKindNames.name(k); }
std::string to_string(RopeScalingType t) { return kRopeScalingNames.name(t); }
Arch parse_arch(const std::string& s) { return arch_names().parse(s); }
AttnType parse_attn_type(const std::string& s) { return attn_type_names().parse(s); }
Activation parse_activation(const std::string& s) { return kActNames.parse(s); }
NormPosition parse_norm_position(const std::string& s) { return kNormNames.parse(s); }
Positional parse_positional(const std::string& s) { return kPosNames.parse(s); }
NormKind parse_norm_kind(const std::string& s) { return kNormKindNames.parse(s); }
RopeScalingType parse_rope_scaling_type(const std::string& s) { return kRopeScalingNames.parse(s); }

bool HeadId::operator<(const HeadId& o) const {
  if (type != o.type) return static_cast<int>(type) < static_cast<int>(o.type);
  if (layer != o.layer) return layer < o.layer;
  return head < o.head;
}

std::string to_string(const HeadId& h) {
  return to_string(h.type) + ":" + std::to_string(h.layer) + ":" + std::to_string(h.head);
}

HeadId parse_head_id(const std::string& s) {
  std::vector<std::string> parts;
  std::stringstream ss(s);
  std::string p;
  while (std::getline(ss, p, ':')) parts.push_back(p);
  if (parts.size() != 3)
    throw std::invalid_argument("head '" + s + "': expected TYPE:LAYER:HEAD, e.g. encoder_self:0:3");
  HeadId h;
  h.type = parse_attn_type(parts[0]);
  try {
    size_t used = 0;
    h.layer = std::stoll(parts[1], &used);
    if (used != parts[1].size()) throw std::invalid_argument("");
    h.head = std::stoll(parts[2], &used);
    if (used != parts[2].size()) throw std::invalid_argument("");
  } catch (const std::exception&) {
    throw std::invalid_argument("head '" + s + "': LAYER and HEAD must be integers");
  }
  return h;
}

bool ModelConfig::has(AttnType t) const {
  switch (t) {
    case AttnType::EncoderSelf: return arch != Arch::DecoderLM;
    case AttnType::DecoderSelf: return arch != Arch::EncoderClassifier;
    case AttnType::Cross: return arch == Arch::EncoderDecoder;
  }
  return false;
}

int64_t ModelConfig::n_layers(AttnType t) const {
  if (!has(t)) return 0;
  return t == AttnType::EncoderSelf ? n_encoder_layers : n_decoder_layers;
}

const std::vector<std::vector<int64_t>>& ModelConfig::heads(AttnType t) const {
  switch (t) {
    case AttnType::EncoderSelf: return encoder_self_heads;
    case AttnType::DecoderSelf: return decoder_self_heads;
    default: return cross_heads;
  }
}

std::vector<std::vector<int64_t>>& ModelConfig::heads(AttnType t) {
  return const_cast<std::vector<std::vector<int64_t>>&>(
      static_cast<const ModelConfig*>(this)->heads(t));
}

std::vector<AttnType> ModelConfig::attn_types() const {
  std::vector<AttnType> out;
  for (AttnType t : kAllAttnTypes)
    if (has(t)) out.push_back(t);
  return out;
}

int64_t ModelConfig::n_heads_kept(AttnType t) const {
  int64_t n = 0;
  for (const auto& l : heads(t)) n += static_cast<int64_t>(l.size());
  return n;
}

double ModelConfig::approx_parameters() const {
  const double d = static_cast<double>(d_model), hd = static_cast<double>(head_dim > 0 ? head_dim : 0);
  const double attn = d * hd * (2.0 * static_cast<double>(n_heads) + 2.0 * static_cast<double>(effective_kv_heads()));
  const double ffn = (gated_ffn ? 3.0 : 2.0) * d * static_cast<double>(d_ff);
  const double layers = static_cast<double>(n_encoder_layers) + static_cast<double>(n_decoder_layers);
  const double cross = arch == Arch::EncoderDecoder ? static_cast<double>(n_decoder_layers) * attn : 0.0;
  const double positions = positional == Positional::Learned ? static_cast<double>(max_positions) : 0.0;
  double emb = d * (static_cast<double>(vocab_size) + positions + static_cast<double>(n_segments));
  if (arch == Arch::EncoderDecoder) emb += d * static_cast<double>(effective_tgt_vocab());
  if (!tie_embeddings) emb += d * static_cast<double>(effective_tgt_vocab());
  return emb + layers * (attn + ffn) + cross + d * static_cast<double>(n_classes);
}

void ModelConfig::finalize() {
  require_at_most("vocab_size", vocab_size, ConfigLimits::vocab);
  require_at_most("tgt_vocab_size", tgt_vocab_size, ConfigLimits::vocab);
  require_at_most("d_model", d_model, ConfigLimits::dim);
  require_at_most("d_ff", d_ff, ConfigLimits::dim);
  require_at_most("head_dim", head_dim, ConfigLimits::dim);
  require_at_most("n_heads", n_heads, ConfigLimits::heads);
  require_at_most("n_kv_heads", n_kv_heads, ConfigLimits::heads);
  require_at_most("n_encoder_layers", n_encoder_layers, ConfigLimits::layers);
  require_at_most("n_decoder_layers", n_decoder_layers, ConfigLimits::layers);
  require_at_most("max_positions", max_positions, ConfigLimits::positions);
  require_at_most("n_classes", n_classes, ConfigLimits::classes);
  require_at_most("n_segments", n_segments, ConfigLimits::classes);
  require_positive("vocab_size", vocab_size);
  require_positive("d_model", d_model);
  require_positive("d_ff", d_ff);
  require_positive("n_heads", n_heads);
  require_positive("max_positions", max_positions);
  if (head_dim == 0) {
    if (d_model % n_heads != 0)
      bad("head_dim", "is 0 (derive from d_model / n_heads) but d_model " + std::to_string(d_model) +
                          " is not divisible by n_heads " + std::to_string(n_heads));
    head_dim = d_model / n_heads;
  }
  require_positive("head_dim", head_dim);
  if (n_kv_heads < 0) bad("n_kv_heads", "must be >= 0 (0 = n_heads), got " + std::to_string(n_kv_heads));
  if (n_kv_heads > 0 && n_heads % n_kv_heads != 0)
    bad("n_kv_heads", std::to_string(n_kv_heads) + " does not divide n_heads " + std::to_string(n_heads) +
                          " (every key/value head serves the same number of query heads)");
  if (tgt_vocab_size < 0) bad("tgt_vocab_size", "must be >= 0");
  if (dropout < 0 || dropout >= 1) bad("dropout", "must be in [0, 1)");
  if (attention_dropout < 0 || attention_dropout >= 1) bad("attention_dropout", "must be in [0, 1)");
  if (activation_dropout >= 1) bad("activation_dropout", "must be in [0, 1) (absent: the same as dropout)");
  if (layer_norm_eps <= 0) bad("layer_norm_eps", "must be > 0");
  if (positional == Positional::Rotary) {
    if (head_dim % 2 != 0) bad("head_dim", "must be even for rotary positions, got " + std::to_string(head_dim));
    if (!(rope_theta > 1.0)) bad("rope_theta", "must be > 1, got " + std::to_string(rope_theta));
    const auto& r = rope_scaling;
    if (r.type != RopeScalingType::Default && !(r.factor > 0)) bad("rope_scaling.factor", "must be > 0");
    if (r.type == RopeScalingType::Llama3) {
      if (!(r.high_freq_factor > r.low_freq_factor) || !(r.low_freq_factor > 0))
        bad("rope_scaling", "llama3 needs 0 < low_freq_factor < high_freq_factor");
      require_positive("rope_scaling.original_max_positions", r.original_max_positions);
    }
  } else if (!(rope_scaling == RopeScaling{}) || rope_theta != 10000.0) {
    bad("rope_scaling", "and rope_theta are only for positional \"rotary\"");
  }
  if (sliding_window < 0) bad("sliding_window", "must be >= 0 (0 = none)");
  if (sliding_window > 0 && arch == Arch::EncoderClassifier) bad("sliding_window", "is only for causal self-attention");
  if (gated_ffn && activation != Activation::Silu && activation != Activation::Gelu && activation != Activation::GeluTanh)
    bad("activation", "of a gated feed-forward must be silu, gelu or gelu_tanh");
  if (pad_id < 0 || pad_id >= vocab_size)
    bad("pad_id", "must be a token id in [0, vocab_size), got " + std::to_string(pad_id));
  if (n_segments < 0) bad("n_segments", "must be >= 0");
  switch (arch) {
    case Arch::EncoderClassifier:
      require_positive("n_encoder_layers", n_encoder_layers);
      require_positive("n_classes", n_classes);
      if (n_decoder_layers != 0) bad("n_decoder_layers", "must be 0 for encoder_classifier");
      break;
    case Arch::DecoderLM:
      require_positive("n_decoder_layers", n_decoder_layers);
      if (n_encoder_layers != 0) bad("n_encoder_layers", "must be 0 for decoder_lm");
      if (n_classes != 0) bad("n_classes", "is only for encoder_classifier");
      break;
    case Arch::EncoderDecoder:
      require_positive("n_encoder_layers", n_encoder_layers);
      require_positive("n_decoder_layers", n_decoder_layers);
      if (n_classes != 0) bad("n_classes", "is only for encoder_classifier");
      break;
  }
  if (arch != Arch::EncoderDecoder && tgt_vocab_size != 0)
    bad("tgt_vocab_size", "is only for encoder_decoder");
  for (AttnType t : kAllAttnTypes) {
    auto& hs = heads(t);
    const std::string field = "heads." + to_string(t);
    if (!has(t)) {
      if (!hs.empty()) bad(field, "must be empty: " + to_string(arch) + " has no such attention");
      continue;
    }
    const int64_t L = n_layers(t);
    if (hs.empty()) {
      hs.assign(L, {});
      for (auto& l : hs)
        for (int64_t h = 0; h < n_heads; ++h) l.push_back(h);
    }
    if (static_cast<int64_t>(hs.size()) != L)
      bad(field, "has " + std::to_string(hs.size()) + " layers, expected " + std::to_string(L));
    for (size_t l = 0; l < hs.size(); ++l) {
      std::set<int64_t> seen;
      for (int64_t h : hs[l]) {
        if (h < 0 || h >= n_heads)
          bad(field, "layer " + std::to_string(l) + ": head id " + std::to_string(h) +
                         " out of range [0, " + std::to_string(n_heads) + ")");
        if (!seen.insert(h).second)
          bad(field, "layer " + std::to_string(l) + ": head id " + std::to_string(h) + " repeated");
      }
      if (!std::is_sorted(hs[l].begin(), hs[l].end()))
        bad(field, "layer " + std::to_string(l) + ": head ids must be in increasing order");
    }
  }
}

nlohmann::json ModelConfig::to_json() const {
  nlohmann::json j;
  j["arch"] = to_string(arch);
  j["vocab_size"] = vocab_size;
  if (arch == Arch::EncoderDecoder) j["tgt_vocab_size"] = tgt_vocab_size;
  j["d_model"] = d_model;
  j["d_ff"] = d_ff;
  j["n_heads"] = n_heads;
  j["head_dim"] = head_dim;
  if (effective_kv_heads() != n_heads) j["n_kv_heads"] = n_kv_heads;
  if (!qkv_bias) j["qkv_bias"] = false;
  if (!o_bias) j["o_bias"] = false;
  if (!mlp_bias) j["mlp_bias"] = false;
  if (gated_ffn) j["gated_ffn"] = true;
  if (norm_kind != NormKind::LayerNorm) j["norm_kind"] = to_string(norm_kind);
  if (positional == Positional::Rotary) {
    j["rope_theta"] = rope_theta;
    if (rope_scaling.type != RopeScalingType::Default) {
      nlohmann::json r = {{"type", to_string(rope_scaling.type)}, {"factor", rope_scaling.factor}};
      if (rope_scaling.type == RopeScalingType::Llama3) {
        r["low_freq_factor"] = rope_scaling.low_freq_factor;
        r["high_freq_factor"] = rope_scaling.high_freq_factor;
        r["original_max_positions"] = rope_scaling.original_max_positions;
      }
      j["rope_scaling"] = r;
    }
  }
  if (sliding_window > 0) j["sliding_window"] = sliding_window;
  j["n_encoder_layers"] = n_encoder_layers;
  j["n_decoder_layers"] = n_decoder_layers;
  j["dropout"] = dropout;
  j["attention_dropout"] = attention_dropout;
  if (activation_dropout >= 0) j["activation_dropout"] = activation_dropout;
  j["max_positions"] = max_positions;
  j["positional"] = to_string(positional);
  j["activation"] = to_string(activation);
  j["norm"] = to_string(norm);
  j["embed_layer_norm"] = embed_layer_norm;
  j["tie_embeddings"] = tie_embeddings;
  j["n_segments"] = n_segments;
  j["n_classes"] = n_classes;
  j["layer_norm_eps"] = layer_norm_eps;
  j["pad_id"] = pad_id;
  nlohmann::json heads_j = nlohmann::json::object();
  for (AttnType t : attn_types()) heads_j[to_string(t)] = heads(t);
  j["heads"] = heads_j;
  return j;
}

namespace {

template <typename T>
T get_as(const nlohmann::json& v, const std::string& key) {
  try {
    return v.get<T>();
  } catch (const nlohmann::json::exception&) {
    bad(key, "has the wrong type (got " + std::string(v.type_name()) + ": " + v.dump() + ")");
  }
}

int64_t get_int(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number_integer()) bad(key, "must be an integer, got " + v.dump());
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    bad(key, "is " + v.dump() + ", too large for a 64-bit integer");
  return v.get<int64_t>();
}

}  // namespace

ModelConfig ModelConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("config: expected a JSON object, got " + std::string(j.type_name()));
  ModelConfig c;
  static const std::set<std::string> known = {
      "arch", "vocab_size", "tgt_vocab_size", "d_model", "d_ff", "n_heads", "head_dim", "n_kv_heads", "qkv_bias", "o_bias",
      "n_encoder_layers", "n_decoder_layers", "dropout", "attention_dropout", "activation_dropout", "max_positions",
      "positional", "activation", "norm", "embed_layer_norm", "tie_embeddings", "n_segments",
      "n_classes", "layer_norm_eps", "pad_id", "heads", "format", "version", "mlp_bias", "gated_ffn", "norm_kind",
      "rope_theta", "rope_scaling", "sliding_window"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key())) bad(it.key(), "is not a known config key");
  if (!j.contains("arch")) bad("arch", "is required");
  c.arch = parse_arch(get_as<std::string>(j.at("arch"), "arch"));
  auto opt_int = [&](const char* k, int64_t& dst) {
    if (j.contains(k)) dst = get_int(j.at(k), k);
  };
  auto opt_double = [&](const char* k, double& dst) {
    if (j.contains(k)) {
      if (!j.at(k).is_number()) bad(k, "must be a number, got " + j.at(k).dump());
      dst = j.at(k).get<double>();
    }
  };
  auto opt_bool = [&](const char* k, bool& dst) {
    if (j.contains(k)) {
      if (!j.at(k).is_boolean()) bad(k, "must be true or false, got " + j.at(k).dump());
      dst = j.at(k).get<bool>();
    }
  };
  for (const char* k : {"vocab_size", "d_model", "d_ff", "n_heads"})
    if (!j.contains(k)) bad(k, "is required");
  opt_int("vocab_size", c.vocab_size);
  opt_int("tgt_vocab_size", c.tgt_vocab_size);
  opt_int("d_model", c.d_model);
  opt_int("d_ff", c.d_ff);
  opt_int("n_heads", c.n_heads);
  opt_int("head_dim", c.head_dim);
  opt_int("n_kv_heads", c.n_kv_heads);
  opt_bool("qkv_bias", c.qkv_bias);
  opt_bool("o_bias", c.o_bias);
  opt_bool("mlp_bias", c.mlp_bias);
  opt_bool("gated_ffn", c.gated_ffn);
  if (j.contains("norm_kind")) c.norm_kind = parse_norm_kind(get_as<std::string>(j.at("norm_kind"), "norm_kind"));
  opt_double("rope_theta", c.rope_theta);
  if (j.contains("rope_scaling")) {
    const auto& r = j.at("rope_scaling");
    if (!r.is_object()) bad("rope_scaling", "must be an object {\"type\": default|linear|llama3, \"factor\": ...}");
    static const std::set<std::string> rk = {"type", "factor", "low_freq_factor", "high_freq_factor", "original_max_positions"};
    for (auto it = r.begin(); it != r.end(); ++it)
      if (!rk.count(it.key())) bad("rope_scaling." + it.key(), "is not a known rope_scaling key");
    if (r.contains("type")) c.rope_scaling.type = parse_rope_scaling_type(get_as<std::string>(r.at("type"), "rope_scaling.type"));
    auto num = [&](const char* k, double& dst) {
      if (!r.contains(k)) return;
      if (!r.at(k).is_number()) bad(std::string("rope_scaling.") + k, "must be a number, got " + r.at(k).dump());
      dst = r.at(k).get<double>();
    };
    num("factor", c.rope_scaling.factor);
    num("low_freq_factor", c.rope_scaling.low_freq_factor);
    num("high_freq_factor", c.rope_scaling.high_freq_factor);
    if (r.contains("original_max_positions"))
      c.rope_scaling.original_max_positions = get_int(r.at("original_max_positions"), "rope_scaling.original_max_positions");
  }
  opt_int("sliding_window", c.sliding_window);
  opt_int("n_encoder_layers", c.n_encoder_layers);
  opt_int("n_decoder_layers", c.n_decoder_layers);
  opt_double("dropout", c.dropout);
  opt_double("attention_dropout", c.attention_dropout);
  if (j.contains("activation_dropout")) {
    opt_double("activation_dropout", c.activation_dropout);
    if (c.activation_dropout < 0) bad("activation_dropout", "must be in [0, 1) (absent: the same as dropout)");
  }
  opt_int("max_positions", c.max_positions);
  if (j.contains("positional")) c.positional = parse_positional(get_as<std::string>(j.at("positional"), "positional"));
  if (j.contains("activation")) c.activation = parse_activation(get_as<std::string>(j.at("activation"), "activation"));
  if (j.contains("norm")) c.norm = parse_norm_position(get_as<std::string>(j.at("norm"), "norm"));
  c.embed_layer_norm = c.norm == NormPosition::Post;
  opt_bool("embed_layer_norm", c.embed_layer_norm);
  opt_bool("tie_embeddings", c.tie_embeddings);
  opt_int("n_segments", c.n_segments);
  opt_int("n_classes", c.n_classes);
  opt_double("layer_norm_eps", c.layer_norm_eps);
  opt_int("pad_id", c.pad_id);
  if (j.contains("heads")) {
    const auto& hj = j.at("heads");
    if (!hj.is_object()) bad("heads", "must be an object {attention type: [[head ids of layer 0], ...]}");
    for (auto it = hj.begin(); it != hj.end(); ++it) {
      AttnType t = parse_attn_type(it.key());
      const std::string field = "heads." + it.key();
      if (!it.value().is_array()) bad(field, "must be a list of per-layer head id lists");
      auto& dst = c.heads(t);
      dst.clear();
      for (const auto& layer : it.value()) {
        if (!layer.is_array()) bad(field, "must be a list of per-layer head id lists, got element " + layer.dump());
        std::vector<int64_t> ids;
        for (const auto& h : layer) ids.push_back(get_int(h, field));
        dst.push_back(std::move(ids));
      }
      // An explicitly empty list of layers is "every layer pruned to nothing" only if the
      // arch has zero layers, which finalize() rejects; keep the marker distinguishable.
      if (dst.empty() && c.n_layers(t) > 0) bad(field, "lists no layers");
    }
  }
  c.finalize();
  return c;
}

ModelConfig tiny_llama_config() {
  // The tiny decoder LM with the LLaMA block: 2 key/value heads for 4 query heads, no dropout.
  ModelConfig c = tiny_config(Arch::DecoderLM);
  c.d_ff = 48;
  c.n_kv_heads = 2;
  c.dropout = c.attention_dropout = 0.0;
  c.norm_kind = NormKind::RmsNorm;
  c.positional = Positional::Rotary;
  c.activation = Activation::Silu;
  c.gated_ffn = true;
  c.qkv_bias = c.o_bias = c.mlp_bias = false;
  c.tie_embeddings = false;
  c.layer_norm_eps = 1e-6;
  c.finalize();
  return c;
}

ModelConfig tiny_config(Arch arch) {
  ModelConfig c;
  c.arch = arch;
  c.vocab_size = 100;
  c.d_model = 32;
  c.d_ff = 64;
  c.n_heads = 4;
  c.max_positions = 64;
  c.dropout = 0.1;
  c.attention_dropout = 0.1;
  switch (arch) {
    case Arch::EncoderClassifier:
      c.n_encoder_layers = 2;
      c.n_segments = 2;
      c.n_classes = 3;
      c.norm = NormPosition::Post;
      c.embed_layer_norm = true;
      c.activation = Activation::Gelu;
      break;
    case Arch::DecoderLM:
      c.n_decoder_layers = 2;
      c.norm = NormPosition::Pre;
      c.embed_layer_norm = false;
      c.activation = Activation::GeluTanh;
      break;
    case Arch::EncoderDecoder:
      c.n_encoder_layers = 2;
      c.n_decoder_layers = 2;
      c.tgt_vocab_size = 90;
      c.norm = NormPosition::Post;
      c.embed_layer_norm = false;
      c.positional = Positional::Sinusoidal;
      c.activation = Activation::Relu;
      break;
  }
  c.finalize();
  return c;
}

void validate_heads(const ModelConfig& cfg, const std::vector<HeadId>& heads) {
  std::set<HeadId> seen;
  for (const auto& h : heads) {
    if (!cfg.has(h.type))
      throw std::invalid_argument("head " + to_string(h) + ": model " + to_string(cfg.arch) + " has no " +
                                  to_string(h.type) + " attention");
    const int64_t L = cfg.n_layers(h.type);
    if (h.layer < 0 || h.layer >= L)
      throw std::invalid_argument("head " + to_string(h) + ": layer " + std::to_string(h.layer) +
                                  " out of range (" + to_string(h.type) + " has layers 0.." +
                                  std::to_string(L - 1) + ")");
    if (h.head < 0 || h.head >= cfg.n_heads)
      throw std::invalid_argument("head " + to_string(h) + ": head id out of range (ids are 0.." +
                                  std::to_string(cfg.n_heads - 1) + ")");
    const auto& kept = cfg.heads(h.type)[h.layer];
    if (std::find(kept.begin(), kept.end(), h.head) == kept.end())
      throw std::invalid_argument("head " + to_string(h) + " was already removed");
    if (!seen.insert(h).second) throw std::invalid_argument("head " + to_string(h) + " is listed twice");
  }
}

}  // namespace hp
