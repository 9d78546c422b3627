// Import and export through an HF family's row (src/io/hf/family.h): the config key table read and
// written, the tensor-name table walked in both directions, fused tensors split and fused by one
// helper (split_rows / fused), and the config key helpers.
#include <optional>
#include <stdexcept>

#include "family.h"
#include "headprune/model/geometry.h"
#include "headprune/model/layers.h"
#include "headprune/model/remove_heads.h"
#include "tensors.h"

namespace hp {

using hf_detail::fail;
using hf_detail::HfTensors;

// ---- config keys ----

HfConfigKey hf_key(std::string key, int64_t ModelConfig::*field) {
  return {key, [key, field](const JsonFields& c, ModelConfig& cfg) { cfg.*field = c.req_int(key); },
          [field](const ModelConfig& cfg) { return nlohmann::json(cfg.*field); }};
}
HfConfigKey hf_key(std::string key, int64_t ModelConfig::*field, int64_t dflt) {
  return {key, [key, field, dflt](const JsonFields& c, ModelConfig& cfg) { cfg.*field = c.opt_int(key, dflt); },
          [field](const ModelConfig& cfg) { return nlohmann::json(cfg.*field); }};
}
HfConfigKey hf_key(std::string key, double ModelConfig::*field, double dflt) {
  return {key, [key, field, dflt](const JsonFields& c, ModelConfig& cfg) { cfg.*field = c.opt_num(key, dflt); },
          [field](const ModelConfig& cfg) { return nlohmann::json(cfg.*field); }};
}
HfConfigKey hf_key(std::string key, bool ModelConfig::*field, bool dflt) {
  return {key, [key, field, dflt](const JsonFields& c, ModelConfig& cfg) { cfg.*field = c.opt_bool(key, dflt); },
          [field](const ModelConfig& cfg) { return nlohmann::json(cfg.*field); }};
}
HfConfigKey hf_activation_key(std::string key, std::string dflt) {
  return {key,
          [key, dflt](const JsonFields& c, ModelConfig& cfg) {
            cfg.activation = hf_detail::parse_hf_activation(c.opt_str(key, dflt), c.source());
          },
          [](const ModelConfig& cfg) { return nlohmann::json(hf_detail::hf_activation(cfg.activation)); }};
}
HfConfigKey hf_fixed_key(std::string key, nlohmann::json value, bool written) {
  HfConfigKey k{key, [key, value](const JsonFields& c, ModelConfig&) {
                  if (c.has(key) && c.at(key) != value)
                    c.fail(key, "is " + c.at(key).dump() + ": only " + value.dump() + " is supported");
                }, {}};
  if (written) k.write = [value](const ModelConfig&) { return value; };
  return k;
}

bool hf_native_heads(const HfFamily& f) {
  return std::any_of(f.keys.begin(), f.keys.end(),
                     [](const HfConfigKey& k) { return (k.key == "head_dim" || k.key == "d_kv") && k.write; });
}

HfConfigKey hf_decoder_start_key() {
  return {"decoder_start_token_id",
          [](const JsonFields& c, ModelConfig& cfg) {
            if (!c.has("decoder_start_token_id") || c.at("decoder_start_token_id").is_null()) return;
            const int64_t start = c.opt_int("decoder_start_token_id", cfg.pad_id);
            if (start != cfg.pad_id)
              c.fail("decoder_start_token_id", "is " + std::to_string(start) + ", not the padding id " +
                                                   std::to_string(cfg.pad_id) +
                                                   ": headprune starts decoding from the padding id (T5's and Marian's "
                                                   "convention) and would decode this model wrongly");
          },
          {}};
}

namespace hf_detail {

Activation parse_hf_activation(const std::string& s, const std::string& source) {
  if (s == "gelu") return Activation::Gelu;
  if (s == "gelu_new" || s == "gelu_pytorch_tanh" || s == "gelu_fast") return Activation::GeluTanh;
  if (s == "relu") return Activation::Relu;
  if (s == "silu" || s == "swish") return Activation::Silu;
  fail(source, "activation '" + s + "' is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu, silu)");
}

std::set<std::string> config_fields_with(std::initializer_list<const char*> more) {
  std::set<std::string> f = {"arch",          "vocab_size", "d_model",    "d_ff",           "n_heads", "head_dim",
                             "heads",         "max_positions", "layer_norm_eps", "activation", "pad_id",
                             "tie_embeddings"};
  f.insert(more.begin(), more.end());
  return f;
}

void check_classic_block(const ModelConfig& cfg, const std::string& family) {
  if (cfg.head_dim * cfg.n_heads != cfg.d_model)
    throw std::invalid_argument("HF export: HF's " + family + " needs head_dim * n_heads = d_model (head_dim " +
                                std::to_string(cfg.head_dim) + ", n_heads " + std::to_string(cfg.n_heads) +
                                ", d_model " + std::to_string(cfg.d_model) + ")");
}

std::string hf_activation(Activation a) {
  switch (a) {
    case Activation::Gelu: return "gelu";
    case Activation::GeluTanh: return "gelu_new";
    case Activation::Relu: return "relu";
    case Activation::Silu: return "silu";
  }
  return "gelu";
}

}  // namespace hf_detail

namespace {

constexpr const char* kParams[] = {"weight", "bias"};

std::string at_layer(const std::string& pattern, int64_t layer) {
  const auto at = pattern.find("{L}");
  return at == std::string::npos ? pattern : pattern.substr(0, at) + std::to_string(layer) + pattern.substr(at + 3);
}

int64_t repeats(const ModelConfig& cfg, HfScope scope) {
  switch (scope) {
    case HfScope::Model: return 1;
    case HfScope::EncoderLayer: return cfg.n_encoder_layers;
    case HfScope::DecoderLayer: return cfg.n_decoder_layers;
  }
  return 0;
}

// Calls fn(row, layer) for every row in table order; a run of rows of one layer scope goes layer by
// layer (all of layer 0's rows, then layer 1's ...), as HF files are laid out.
void for_each_row(const std::vector<HfTensorName>& rows, const ModelConfig& cfg,
                  const std::function<void(const HfTensorName&, int64_t)>& fn) {
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rows[i].scope != HfScope::Model && rows[j].scope == rows[i].scope) ++j;
    for (int64_t l = 0; l < repeats(cfg, rows[i].scope); ++l)
      for (size_t k = i; k < j; ++k)
        if (rows[k].presence != HfPresence::Untied || !cfg.tie_embeddings) fn(rows[k], l);
    i = j;
  }
}

// The HF tensor's shape for headprune tensors of these shapes: their rows stacked (fused), a Conv1D
// matrix transposed.
std::vector<int64_t> hf_shape(const std::vector<std::vector<int64_t>>& parts, HfStorage storage) {
  std::vector<int64_t> shape = parts.front();
  shape[0] = 0;
  for (const auto& p : parts) shape[0] += p[0];
  if (storage == HfStorage::Conv1D && shape.size() == 2) std::swap(shape[0], shape[1]);
  return shape;
}

// One HF tensor into its headprune parts: transposed back (Conv1D), split by rows (fused).
std::vector<torch::Tensor> split_rows(torch::Tensor t, const std::vector<std::vector<int64_t>>& parts, HfStorage storage) {
  const bool transposed = storage == HfStorage::Conv1D && t.dim() == 2;
  if (transposed) t = t.t();
  if (parts.size() == 1) return {transposed ? t.contiguous() : t};
  std::vector<torch::Tensor> out;
  int64_t off = 0;
  for (const auto& p : parts) {
    out.push_back(t.slice(0, off, off + p[0]).contiguous());
    off += p[0];
  }
  return out;
}

// Headprune parts into one HF tensor, made when it is written.
LazyTensor fused(std::vector<LazyTensor> parts, HfStorage storage) {
  const bool conv = storage == HfStorage::Conv1D && parts.front().shape.size() == 2;
  if (parts.size() == 1 && !conv) return parts.front();
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& p : parts) shapes.push_back(p.shape);
  return LazyTensor{parts.front().dtype, hf_shape(shapes, storage), [parts, conv] {
                      std::vector<torch::Tensor> made;
                      for (const auto& p : parts) made.push_back(p.make());
                      auto t = made.size() == 1 ? made.front() : torch::cat(made, 0);
                      return (conv ? t.t() : t).contiguous();
                    }};
}

void take_rows(const HfFamily& f, const ModelConfig& cfg, HfTensors& t, TensorMap& s, std::vector<std::string>& initialized,
               const std::string& source) {
  for_each_row(f.tensors, cfg, [&](const HfTensorName& r, int64_t l) {
    const std::string hf = at_layer(r.hf, l);
    std::vector<std::string> ours;
    for (const auto& o : r.ours) ours.push_back(at_layer(o, l));
    if (r.presence == HfPresence::Optional && !t.has(hf + ".weight")) {
      for (const auto& o : ours)
        for (const char* p : kParams)
          if (s.count(o + "." + p)) initialized.push_back(o + "." + p);
      return;
    }
    if (r.presence == HfPresence::Untied && !t.has(hf + ".weight"))
      fail(source, "missing tensor '" + hf + ".weight' (the output embedding is not tied to the input one)");
    for (const char* p : kParams) {
      if (!s.count(ours.front() + "." + p)) continue;  // no bias here
      std::vector<std::vector<int64_t>> parts;
      for (const auto& o : ours) parts.push_back(s.at(o + "." + p).sizes().vec());
      const auto split = split_rows(t.take(hf + "." + p, hf_shape(parts, r.storage)), parts, r.storage);
      for (size_t k = 0; k < ours.size(); ++k) s[ours[k] + "." + p] = split[k];
    }
  });
}

// HF v4's pruned_heads of a config: {"layer": [original ids of removed heads]}.
nlohmann::json pruned_heads_json(const ModelConfig& cfg) {
  nlohmann::json out = nlohmann::json::object();
  for (AttnType type : cfg.attn_types()) {
    const auto& kept = cfg.heads(type);
    for (size_t l = 0; l < kept.size(); ++l) {
      nlohmann::json ids = nlohmann::json::array();
      for (int64_t h = 0; h < cfg.n_heads; ++h)
        if (std::find(kept[l].begin(), kept[l].end(), h) == kept[l].end()) ids.push_back(h);
      if (!ids.empty()) out[std::to_string(l)] = ids;
    }
  }
  return out;
}

// The headprune tensors an export writes, by headprune name. Dense: each attention layer restored to
// the config's head counts when its tensors are written (one layer at a time, no second copy of a
// large model); other tensors are the model's own.
struct ExportSource {
  ModelConfig cfg;                          // the config the file describes
  std::shared_ptr<const TensorMap> state;   // the model's (or the pruned copy's) tensors
  std::map<std::string, LazyTensor> restored;
  bool has(const std::string& n) const { return state->count(n) > 0; }
  LazyTensor get(const std::string& n) const {
    const auto it = restored.find(n);
    return it != restored.end() ? it->second : LazyTensor::of(state->at(n).contiguous());
  }
};

ExportSource dense_source(TransformerImpl& model) {
  const ModelConfig& cfg = model.config();
  ExportSource src{restored_config(cfg), std::make_shared<const TensorMap>(state_dict(model)), {}};
  const auto dtype = model.parameters().front().scalar_type();
  const auto s = src.state;
  for (AttnType type : cfg.attn_types()) {
    for (int64_t l = 0; l < cfg.n_layers(type); ++l) {
      const HeadGeometry g = head_geometry(src.cfg, type, l);
      const std::string at = attention_prefix(type, l) + ".";
      auto restore = [&](const std::string& n, std::vector<int64_t> shape) {
        if (!s->count(n)) return;
        src.restored[n] = LazyTensor{dtype, std::move(shape), [s, cfg, type, l, n] {
                                       return restore_layer_shapes(cfg, *s, type, l).at(n).to(torch::kCPU).contiguous();
                                     }};
      };
      const int64_t C = cfg.d_model, q = g.q_width(), kv = g.kv_width();
      for (const auto& [proj, rows] : {std::pair<std::string, int64_t>{"q_proj", q}, {"k_proj", kv}, {"v_proj", kv}}) {
        restore(at + proj + ".weight", {rows, C});
        restore(at + proj + ".bias", {rows});
      }
      restore(at + "o_proj.weight", {C, q});
    }
  }
  return src;
}

ExportSource plain_source(TransformerImpl& model) {
  if (const auto masked = model.masked_heads(); !masked.empty()) {  // HF files have no masks: removed
    auto pruned = remove_heads(model, masked, /*share_untouched=*/true);  // read only: no second copy
    return {pruned->config(), std::make_shared<const TensorMap>(state_dict(*pruned)), {}};
  }
  return {model.config(), std::make_shared<const TensorMap>(state_dict(model)), {}};
}

// Why one stack of a model (masked heads removed) is not uniform, or "" when it is: the same query and
// key/value head counts in every layer, each kept key/value head serving the same number of consecutive
// query heads (HF's grouped-query order), and with relative positions (T5: one bias table per stack,
// read by head id) the same head ids in every self-attention layer.
std::string not_uniform_stack(const ModelConfig& cfg, AttnType type, int64_t* n_query) {
  std::vector<int64_t> nq, nkv;
  std::string why;
  const std::string name = cfg.arch == Arch::DecoderLM ? "layer " : to_string(type) + " layer ";
  for (int64_t l = 0; l < cfg.n_layers(type); ++l) {
    const HeadGeometry g = head_geometry(cfg, type, l);
    nq.push_back(g.n_heads_kept());
    nkv.push_back(g.n_kv_heads_kept());
    const auto pos = g.kv_positions();
    const int64_t per = g.n_kv_heads_kept() > 0 ? g.n_heads_kept() / g.n_kv_heads_kept() : 0;
    for (size_t i = 0; i < pos.size() && why.empty(); ++i)
      if (per == 0 || g.n_heads_kept() % g.n_kv_heads_kept() != 0 || pos[i] != static_cast<int64_t>(i) / per)
        why = name + std::to_string(l) + "'s key/value heads serve different numbers of query heads";
    if (why.empty() && cfg.positional == Positional::Relative && type != AttnType::Cross &&
        cfg.heads(type)[static_cast<size_t>(l)] != cfg.heads(type)[0])
      why = name + std::to_string(l) + " keeps other head ids than layer 0 (relative positions: one bias table per "
            "stack, read by head id)";
  }
  const nlohmann::json q(nq), kv(nkv);
  if (std::count(nq.begin(), nq.end(), nq.front()) != static_cast<int64_t>(nq.size()) ||
      std::count(nkv.begin(), nkv.end(), nkv.front()) != static_cast<int64_t>(nkv.size()))
    return (cfg.arch == Arch::DecoderLM ? "layers keep " : to_string(type) + " layers keep ") + q.dump() +
           " query heads and " + kv.dump() + " key/value heads";
  if (nq.front() == 0) return "every " + (cfg.arch == Arch::DecoderLM ? std::string() : to_string(type) + " ") + "layer is emptied";
  *n_query = nq.front();
  return why;
}

// Why a model is not uniform (every stack's, and for an encoder-decoder one head count for all stacks).
std::string not_uniform(const ModelConfig& cfg) {
  std::vector<int64_t> counts;
  for (AttnType type : cfg.attn_types()) {
    int64_t n = 0;
    if (auto why = not_uniform_stack(cfg, type, &n); !why.empty()) return why;
    counts.push_back(n);
  }
  if (std::count(counts.begin(), counts.end(), counts.front()) != static_cast<int64_t>(counts.size()))
    return "the stacks keep " + nlohmann::json(counts).dump() + " heads per layer (the config has one head count)";
  return "";
}

// The kept heads (src: plain_source's, uniform) as a smaller dense model: the config's head counts
// those kept, its tensors the pruned model's (already of those shapes); relative positions' bias
// tables keep the kept heads' columns.
ExportSource native_source(ExportSource src) {
  const AttnType first = src.cfg.attn_types().front();
  const HeadGeometry g = head_geometry(src.cfg, first, 0);
  ModelConfig c = src.cfg;
  c.n_heads = g.n_heads_kept();
  c.n_kv_heads = g.n_kv_heads_kept() == g.n_heads_kept() ? 0 : g.n_kv_heads_kept();
  c.encoder_self_heads.clear();
  c.decoder_self_heads.clear();
  c.cross_heads.clear();
  c.finalize();
  if (src.cfg.positional == Positional::Relative) {
    auto state = std::make_shared<TensorMap>(*src.state);  // the same tensors, two tables replaced
    for (const auto& [stack, type] : {std::pair<std::string, AttnType>{"encoder", AttnType::EncoderSelf}, {"decoder", AttnType::DecoderSelf}}) {
      const std::string n = stack + ".relative_attention_bias.weight";
      if (!state->count(n) || !src.cfg.has(type)) continue;
      const auto ids = torch::tensor(src.cfg.heads(type)[0], torch::kLong);
      (*state)[n] = state->at(n).index_select(1, ids.to(state->at(n).device())).contiguous();
    }
    src.state = state;
  }
  src.cfg = c;
  return src;
}

}  // namespace

HfModel import_family(const HfFamily& f, const nlohmann::json& c, const TensorMap& tensors, const std::string& source,
                      const std::string& csrc, const LoadOptions& lo) {
  const JsonFields fields(c, csrc);
  ModelConfig cfg;
  for (const auto& k : f.keys)
    if (k.read) k.read(fields, cfg);
  const bool prefixed = !f.prefix.empty() && std::any_of(tensors.begin(), tensors.end(), [&](const auto& kv) {
    return kv.first.rfind(f.prefix, 0) == 0;
  });
  HfTensors t(tensors, prefixed ? f.prefix : "", source);
  if (f.configure) f.configure(fields, t, cfg);
  try {
    cfg.finalize();
  } catch (const std::invalid_argument& e) {
    fail(csrc, e.what());
  }
  check_tensors_fit(cfg, tensors, source);  // before anything is allocated
  HfModel out;
  out.model_type = f.model_type;
  out.config = c;
  if (f.deferred_init) {
    DeferredInit deferred;  // every parameter comes from the file: build without allocating
    out.model = Transformer(cfg);
  } else {
    out.model = Transformer(cfg);
  }
  TensorMap s = state_dict(*out.model);
  take_rows(f, cfg, t, s, out.initialized, source);
  if (f.finish) f.finish(cfg, t, s);
  t.drop_if([&](const std::string& n) {
    return std::any_of(f.ignorable.begin(), f.ignorable.end(),
                       [&](const std::string& suffix) { return hf_detail::ends_with(n, suffix); });
  });
  t.expect_empty();
  load_state_strict(*out.model, s, source, lo.state());
  out.model->eval();
  return out;
}

HfExport export_family(const HfFamily& f, TransformerImpl& model, const nlohmann::json& base, HfLayout layout) {
  if (layout == HfLayout::PrunedHeads && !f.pruned_heads)
    throw std::invalid_argument("HF export: " + f.model_type + " has no pruned_heads in HF (one head count for every "
                                "layer); use the native (uniform models) or dense layout");
  std::optional<ExportSource> native;  // the masked heads removed once: checked, then written
  if (layout == HfLayout::Native || layout == HfLayout::Auto) {
    const bool native_family = hf_native_heads(f) && (model.config().arch == Arch::DecoderLM ||
                                                      model.config().arch == Arch::EncoderDecoder);
    std::string why;
    if (native_family) {
      ExportSource kept = plain_source(model);
      why = not_uniform(kept.cfg);
      if (why.empty()) native = native_source(std::move(kept));
    }
    if (layout == HfLayout::Native && !native_family)
      throw std::invalid_argument("HF export: --hf-layout native: " + f.model_type + "'s config cannot give the kept "
                                  "heads their own head_dim (native is for the LLaMA family and T5); use dense");
    if (layout == HfLayout::Native && !why.empty())
      throw std::invalid_argument("HF export: --hf-layout native needs the same heads kept in every layer, and every "
                                  "key/value head serving as many query heads (prune the same heads from every layer and group); here " +
                                  why + ". Use dense (or GGUF / ONNX, which hold per-layer counts)");
    layout = native_family && why.empty() ? HfLayout::Native : HfLayout::Dense;
  }
  const ExportSource src = layout == HfLayout::Native  ? std::move(*native)
                           : layout == HfLayout::Dense ? dense_source(model)
                                                       : plain_source(model);
  require_expressible(src.cfg, f.config_fields, "HF export (" + f.model_type + ")");
  if (f.check) f.check(src.cfg);
  const auto base_type = base.is_object() ? base.value("model_type", f.model_type) : std::string();
  nlohmann::json c = base.is_object() && base_type == f.model_type ? base : nlohmann::json::object();
  c["model_type"] = f.model_type;
  c["architectures"] = {f.architecture};
  for (const auto& k : f.keys)
    if (k.write) c[k.key] = k.write(src.cfg);
  if (layout == HfLayout::PrunedHeads)
    c["pruned_heads"] = pruned_heads_json(src.cfg);
  else
    c.erase("pruned_heads");
  if (f.extras) f.extras(src.cfg, model, c);
  HfExport out;
  std::set<std::string> written;  // the model's tensors the file holds (every one must be)
  auto get = [&](const std::string& n) {
    written.insert(n);
    return src.get(n);
  };
  for_each_row(f.tensors, src.cfg, [&](const HfTensorName& r, int64_t l) {
    const std::string hf = (r.prefixed ? f.prefix : "") + at_layer(r.hf, l);
    for (const char* p : kParams) {
      std::vector<LazyTensor> parts;
      for (const auto& o : r.ours)
        if (src.has(at_layer(o, l) + "." + p)) parts.push_back(get(at_layer(o, l) + "." + p));
      if (!parts.empty()) out.tensors.emplace(hf + "." + p, fused(std::move(parts), r.storage));
    }
  });
  if (f.export_tensors) f.export_tensors(src.cfg, get, c, out.tensors);
  check_every_tensor_written(*src.state, written, "HF export: " + f.model_type + " (" + f.architecture + ")");
  out.config = c;
  out.layout = layout;
  return out;
}

}  // namespace hp
