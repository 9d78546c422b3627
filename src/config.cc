// ModelConfig: names, validation and the config.json form.
#include "headprune/config.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "headprune/util/json_fields.h"
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
                                       {Positional::Rotary, {"rotary", "rope"}},
                                       {Positional::Relative, {"relative"}}}};
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

void check_field_bounds(const ModelConfig& c);  // the field table's bounds (below)

// Rotary positions' fields, and none of them without rotary positions.
void check_rope(const ModelConfig& c) {
  if (c.positional == Positional::Rotary) {
    if (c.head_dim % 2 != 0) bad("head_dim", "must be even for rotary positions, got " + std::to_string(c.head_dim));
    if (!(c.rope_theta > 1.0)) bad("rope_theta", "must be > 1, got " + std::to_string(c.rope_theta));
    const auto& r = c.rope_scaling;
    if (r.type != RopeScalingType::Default && !(r.factor > 0)) bad("rope_scaling.factor", "must be > 0");
    if (r.type == RopeScalingType::Llama3) {
      if (!(r.high_freq_factor > r.low_freq_factor) || !(r.low_freq_factor > 0))
        bad("rope_scaling", "llama3 needs 0 < low_freq_factor < high_freq_factor");
      require_positive("rope_scaling.original_max_positions", r.original_max_positions);
    }
    if (c.rotary_dim < 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2 != 0)
      bad("rotary_dim", "must be even and in [0, head_dim " + std::to_string(c.head_dim) + "] (0 = all), got " +
                            std::to_string(c.rotary_dim));
  } else if (!(c.rope_scaling == RopeScaling{}) || c.rope_theta != 10000.0 || c.rotary_dim != 0) {
    bad("rope_scaling", "rope_theta and rotary_dim are only for positional \"rotary\"");
  }
  if (c.positional == Positional::Relative) {
    if (c.arch != Arch::EncoderDecoder) bad("positional", "\"relative\" (T5) is for encoder_decoder models");
    if (c.relative_buckets < 2 || c.relative_buckets % 2 != 0 || c.relative_buckets > (1 << 16))
      bad("relative_buckets", "must be even and in [2, 65536], got " + std::to_string(c.relative_buckets));
    if (c.relative_max_distance <= c.relative_buckets / 2 || c.relative_max_distance > ConfigLimits::positions)
      bad("relative_max_distance", "must exceed relative_buckets / 2 (the exact distances), got " +
                                       std::to_string(c.relative_max_distance));
  }
}

// The layers and classes each architecture has.
void check_layers(const ModelConfig& c) {
  switch (c.arch) {
    case Arch::EncoderClassifier:
      require_positive("n_encoder_layers", c.n_encoder_layers);
      require_positive("n_classes", c.n_classes);
      if (c.n_decoder_layers != 0) bad("n_decoder_layers", "must be 0 for encoder_classifier");
      break;
    case Arch::DecoderLM:
      require_positive("n_decoder_layers", c.n_decoder_layers);
      if (c.n_encoder_layers != 0) bad("n_encoder_layers", "must be 0 for decoder_lm");
      if (c.n_classes != 0) bad("n_classes", "is only for encoder_classifier");
      break;
    case Arch::EncoderDecoder:
      require_positive("n_encoder_layers", c.n_encoder_layers);
      require_positive("n_decoder_layers", c.n_decoder_layers);
      if (c.n_classes != 0) bad("n_classes", "is only for encoder_classifier");
      break;
  }
  if (c.arch != Arch::EncoderDecoder && c.tgt_vocab_size != 0)
    bad("tgt_vocab_size", "is only for encoder_decoder");
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
  if (arch == Arch::EncoderDecoder && !share_embeddings) emb += d * static_cast<double>(effective_tgt_vocab());
  if (!tie_embeddings) emb += d * static_cast<double>(effective_tgt_vocab());
  return emb + layers * (attn + ffn) + cross + d * static_cast<double>(n_classes);
}

void ModelConfig::finalize() {
  check_field_bounds(*this);
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
  check_rope(*this);
  if (sliding_window < 0) bad("sliding_window", "must be >= 0 (0 = none)");
  if (split_sinusoid && positional != Positional::Sinusoidal) bad("split_sinusoid", "is only for sinusoidal positions");
  if (logits_bias && arch == Arch::EncoderClassifier) bad("logits_bias", "is only for models with a language-model output");
  if (!(output_scale > 0) || !std::isfinite(output_scale)) bad("output_scale", "must be a finite number > 0");
  if (share_embeddings && (arch != Arch::EncoderDecoder || effective_tgt_vocab() != vocab_size))
    bad("share_embeddings", "is for encoder_decoder models with one vocabulary (tgt_vocab_size 0 or vocab_size)");
  if (sliding_window > 0 && arch == Arch::EncoderClassifier) bad("sliding_window", "is only for causal self-attention");
  if (gated_ffn && activation != Activation::Silu && activation != Activation::Gelu && activation != Activation::GeluTanh)
    bad("activation", "of a gated feed-forward must be silu, gelu or gelu_tanh");
  if (pad_id < 0 || pad_id >= vocab_size)
    bad("pad_id", "must be a token id in [0, vocab_size), got " + std::to_string(pad_id));
  if (n_segments < 0) bad("n_segments", "must be >= 0");
  check_layers(*this);
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

namespace {

// ---- the field table: every ModelConfig field in config.json, read, written and bounded from one row ----

struct ConfigField {
  std::string key;
  bool required = false;
  std::function<void(const JsonFields& j, ModelConfig& c)> read;  // called for every row, present or not
  std::function<void(const ModelConfig& c, nlohmann::json& j)> write;
  // Sets the field to its default (in this config's context: embed_layer_norm's follows norm, the
  // heads' are all heads), for non_default_config_fields.
  std::function<void(ModelConfig& c)> reset;
  int64_t ModelConfig::*bounded = nullptr;  // an integer field finalize bounds
  int64_t at_most = 0;                      // ConfigLimits (0 = no upper bound)
  bool positive = false;
};
using When = std::function<bool(const ModelConfig&)>;
const When kAlways = [](const ModelConfig&) { return true; };

template <typename T>
When unless_default(T ModelConfig::*m) {
  return [m](const ModelConfig& c) { return !(c.*m == ModelConfig{}.*m); };
}

template <typename T>
std::function<void(ModelConfig&)> reset_of(T ModelConfig::*m) {
  return [m](ModelConfig& c) { c.*m = ModelConfig{}.*m; };
}

ConfigField int_field(std::string key, int64_t ModelConfig::*m, int64_t at_most = 0, bool positive = false,
                      bool required = false, When when = kAlways) {
  ConfigField f{key, required,
                [key, m](const JsonFields& j, ModelConfig& c) {
                  if (j.has(key)) c.*m = j.req_int(key);
                },
                [key, m, when](const ModelConfig& c, nlohmann::json& j) {
                  if (when(c)) j[key] = c.*m;
                },
                reset_of(m)};
  f.bounded = m;
  f.at_most = at_most;
  f.positive = positive;
  return f;
}

ConfigField num_field(std::string key, double ModelConfig::*m, When when = kAlways) {
  return {key, false,
          [key, m](const JsonFields& j, ModelConfig& c) {
            if (j.has(key)) c.*m = j.req_num(key);
          },
          [key, m, when](const ModelConfig& c, nlohmann::json& j) {
            if (when(c)) j[key] = c.*m;
          },
          reset_of(m)};
}

ConfigField bool_field(std::string key, bool ModelConfig::*m, When when = kAlways) {
  return {key, false,
          [key, m](const JsonFields& j, ModelConfig& c) {
            if (j.has(key)) c.*m = j.opt_bool(key, c.*m);
          },
          [key, m, when](const ModelConfig& c, nlohmann::json& j) {
            if (when(c)) j[key] = c.*m;
          },
          reset_of(m)};
}

template <typename E>
ConfigField enum_field(std::string key, E ModelConfig::*m, const NameTable<E>& names, bool required = false,
                       When when = kAlways) {
  const NameTable<E>* t = &names;
  return {key, required,
          [key, m, t](const JsonFields& j, ModelConfig& c) {
            if (j.has(key)) c.*m = t->parse(j.req_str(key));
          },
          [key, m, t, when](const ModelConfig& c, nlohmann::json& j) {
            if (when(c)) j[key] = t->name(c.*m);
          },
          reset_of(m)};
}

void read_rope_scaling(const JsonFields& j, ModelConfig& c) {
  if (!j.has("rope_scaling")) return;
  if (!j.at("rope_scaling").is_object())
    j.fail("rope_scaling", "must be an object {\"type\": default|linear|llama3, \"factor\": ...}");
  const JsonFields r = j.object("rope_scaling");
  r.only({"type", "factor", "low_freq_factor", "high_freq_factor", "original_max_positions"}, "rope_scaling key");
  auto& s = c.rope_scaling;
  if (r.has("type")) s.type = parse_rope_scaling_type(r.req_str("type"));
  s.factor = r.opt_num("factor", s.factor);
  s.low_freq_factor = r.opt_num("low_freq_factor", s.low_freq_factor);
  s.high_freq_factor = r.opt_num("high_freq_factor", s.high_freq_factor);
  s.original_max_positions = r.opt_int("original_max_positions", s.original_max_positions);
}

void write_rope_scaling(const ModelConfig& c, nlohmann::json& j) {
  const auto& s = c.rope_scaling;
  if (c.positional != Positional::Rotary || s.type == RopeScalingType::Default) return;
  nlohmann::json r = {{"type", to_string(s.type)}, {"factor", s.factor}};
  if (s.type == RopeScalingType::Llama3) {
    r["low_freq_factor"] = s.low_freq_factor;
    r["high_freq_factor"] = s.high_freq_factor;
    r["original_max_positions"] = s.original_max_positions;
  }
  j["rope_scaling"] = r;
}

// "heads": {attention type: [[kept head ids of layer 0], ...]}.
void read_heads(const JsonFields& j, ModelConfig& c) {
  if (!j.has("heads")) return;
  const auto& hj = j.at("heads");
  if (!hj.is_object()) j.fail("heads", "must be an object {attention type: [[head ids of layer 0], ...]}");
  for (auto it = hj.begin(); it != hj.end(); ++it) {
    const AttnType t = parse_attn_type(it.key());
    const std::string field = "heads." + it.key();
    if (!it.value().is_array()) j.fail(field, "must be a list of per-layer head id lists");
    auto& dst = c.heads(t);
    dst.clear();
    for (const auto& layer : it.value()) {
      if (!layer.is_array()) j.fail(field, "must be a list of per-layer head id lists, got element " + layer.dump());
      std::vector<int64_t> ids;
      for (const auto& h : layer) ids.push_back(j.as_int(h, field));
      dst.push_back(std::move(ids));
    }
    // An explicitly empty list of layers is "every layer pruned to nothing" only if the
    // arch has zero layers, which finalize() rejects; keep the marker distinguishable.
    if (dst.empty() && c.n_layers(t) > 0) j.fail(field, "lists no layers");
  }
}

const std::vector<ConfigField>& config_fields() {
  using M = ModelConfig;
  using L = ConfigLimits;
  static const std::vector<ConfigField> fields = {
      enum_field("arch", &M::arch, arch_names(), /*required=*/true),
      int_field("vocab_size", &M::vocab_size, L::vocab, true, /*required=*/true),
      int_field("tgt_vocab_size", &M::tgt_vocab_size, L::vocab, false, false,
                [](const M& c) { return c.arch == Arch::EncoderDecoder; }),
      int_field("d_model", &M::d_model, L::dim, true, true),
      int_field("d_ff", &M::d_ff, L::dim, true, true),
      int_field("n_heads", &M::n_heads, L::heads, true, true),
      int_field("head_dim", &M::head_dim, L::dim),
      int_field("n_kv_heads", &M::n_kv_heads, L::heads, false, false,
                [](const M& c) { return c.effective_kv_heads() != c.n_heads; }),
      bool_field("qkv_bias", &M::qkv_bias, unless_default(&M::qkv_bias)),
      bool_field("o_bias", &M::o_bias, unless_default(&M::o_bias)),
      bool_field("mlp_bias", &M::mlp_bias, unless_default(&M::mlp_bias)),
      bool_field("qk_norm", &M::qk_norm, unless_default(&M::qk_norm)),
      bool_field("gated_ffn", &M::gated_ffn, unless_default(&M::gated_ffn)),
      enum_field("norm_kind", &M::norm_kind, kNormKindNames, false, unless_default(&M::norm_kind)),
      num_field("rope_theta", &M::rope_theta, [](const M& c) { return c.positional == Positional::Rotary; }),
      {"rope_scaling", false, read_rope_scaling, write_rope_scaling, reset_of(&M::rope_scaling)},
      int_field("rotary_dim", &M::rotary_dim, L::dim, false, false, unless_default(&M::rotary_dim)),
      int_field("relative_buckets", &M::relative_buckets, 0, false, false,
                [](const M& c) { return c.positional == Positional::Relative; }),
      int_field("relative_max_distance", &M::relative_max_distance, 0, false, false,
                [](const M& c) { return c.positional == Positional::Relative; }),
      bool_field("scaled_attention", &M::scaled_attention, unless_default(&M::scaled_attention)),
      num_field("output_scale", &M::output_scale, unless_default(&M::output_scale)),
      int_field("sliding_window", &M::sliding_window, 0, false, false, unless_default(&M::sliding_window)),
      int_field("n_encoder_layers", &M::n_encoder_layers, L::layers),
      int_field("n_decoder_layers", &M::n_decoder_layers, L::layers),
      num_field("dropout", &M::dropout),
      num_field("attention_dropout", &M::attention_dropout),
      {"activation_dropout", false,  // absent (-1): the same as dropout
       [](const JsonFields& j, M& c) {
         if (!j.has("activation_dropout")) return;
         c.activation_dropout = j.req_num("activation_dropout");
         if (c.activation_dropout < 0) j.fail("activation_dropout", "must be in [0, 1) (absent: the same as dropout)");
       },
       [](const M& c, nlohmann::json& j) {
         if (c.activation_dropout >= 0) j["activation_dropout"] = c.activation_dropout;
       },
       reset_of(&M::activation_dropout)},
      int_field("max_positions", &M::max_positions, L::positions, true),
      enum_field("positional", &M::positional, kPosNames),
      bool_field("split_sinusoid", &M::split_sinusoid, unless_default(&M::split_sinusoid)),
      enum_field("activation", &M::activation, kActNames),
      enum_field("norm", &M::norm, kNormNames),
      {"embed_layer_norm", false,  // absent: after a post-norm stack's embeddings (BERT), not a pre-norm one's
       [](const JsonFields& j, M& c) { c.embed_layer_norm = j.opt_bool("embed_layer_norm", c.norm == NormPosition::Post); },
       [](const M& c, nlohmann::json& j) { j["embed_layer_norm"] = c.embed_layer_norm; },
       [](M& c) { c.embed_layer_norm = c.norm == NormPosition::Post; }},
      bool_field("tie_embeddings", &M::tie_embeddings),
      bool_field("logits_bias", &M::logits_bias, unless_default(&M::logits_bias)),
      bool_field("share_embeddings", &M::share_embeddings, unless_default(&M::share_embeddings)),
      int_field("n_segments", &M::n_segments, L::classes),
      int_field("n_classes", &M::n_classes, L::classes),
      num_field("layer_norm_eps", &M::layer_norm_eps),
      int_field("pad_id", &M::pad_id),
      {"heads", false, read_heads,
       [](const M& c, nlohmann::json& j) {
         nlohmann::json heads = nlohmann::json::object();
         for (AttnType t : c.attn_types()) heads[to_string(t)] = c.heads(t);
         j["heads"] = heads;
       },
       [](M& c) {  // every head of every layer
         for (AttnType t : c.attn_types()) {
           std::vector<int64_t> all(static_cast<size_t>(c.n_heads));
           std::iota(all.begin(), all.end(), int64_t{0});
           c.heads(t).assign(static_cast<size_t>(c.n_layers(t)), all);
         }
       }},
  };
  return fields;
}

void check_field_bounds(const ModelConfig& c) {
  for (const auto& f : config_fields())
    if (f.bounded && f.at_most > 0) require_at_most(f.key, c.*f.bounded, f.at_most);
  for (const auto& f : config_fields())
    if (f.bounded && f.positive) require_positive(f.key, c.*f.bounded);
}

}  // namespace

nlohmann::json ModelConfig::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : config_fields()) f.write(*this, j);
  return j;
}

ModelConfig ModelConfig::from_json(const nlohmann::json& j) {
  const JsonFields fields(j, "config",
                          JsonStyle{"field", "is required", JsonStyle::Nulls::Invalid, JsonStyle::Error::InvalidArgument});
  std::set<std::string> known = {"format", "version"};  // a checkpoint's own tags
  for (const auto& f : config_fields()) known.insert(f.key);
  fields.only(known, "config key");
  for (const auto& f : config_fields())
    if (f.required && !fields.has(f.key)) fields.fail(f.key, "is required");
  ModelConfig c;
  for (const auto& f : config_fields()) f.read(fields, c);
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

std::vector<std::string> config_field_keys() {
  std::vector<std::string> keys;
  for (const auto& f : config_fields()) keys.push_back(f.key);
  return keys;
}

namespace {

// One field's to_json entry (null when the field is not written for this config).
nlohmann::json field_entry(const ConfigField& f, const ModelConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  f.write(c, j);
  return j.contains(f.key) ? j.at(f.key) : nlohmann::json(nullptr);
}

}  // namespace

std::vector<std::string> non_default_config_fields(const ModelConfig& c) {
  std::vector<std::string> out;
  for (const auto& f : config_fields()) {
    ModelConfig d = c;
    f.reset(d);
    if (field_entry(f, c) != field_entry(f, d)) out.push_back(f.key);
  }
  return out;
}

const std::set<std::string>& training_only_config_fields() {
  static const std::set<std::string> keys = {"dropout", "attention_dropout", "activation_dropout"};
  return keys;
}

void require_expressible(const ModelConfig& c, const std::set<std::string>& expressible, const std::string& who) {
  for (const auto& key : non_default_config_fields(c)) {
    if (expressible.count(key) || training_only_config_fields().count(key)) continue;
    const nlohmann::json j = c.to_json();
    throw std::invalid_argument(who + ": the model's " + key + " (" + (j.contains(key) ? j.at(key).dump() : "unset") +
                                ") has no form in this format; written without it, the file would compute other "
                                "outputs than the model does");
  }
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
