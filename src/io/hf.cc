// HuggingFace BERT / GPT-2 import and export (see header).
#include "headprune/io/hf.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>
#include <stdexcept>
#include <tuple>

#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/safetensors.h"
#include "headprune/model/geometry.h"
#include "headprune/model/remove_heads.h"
#include "hf_detail.h"

namespace hp {

namespace {

using namespace hf_detail;

// The name tables: HF module (without the bert. / transformer. prefix) -> headprune module. Every
// entry stands for its .weight and .bias; import and export both read them.
struct Rename {
  const char* hf;
  const char* ours;
};
constexpr Rename kBertEmbeddings[] = {{"embeddings.word_embeddings", "encoder.embed_tokens"},
                                      {"embeddings.position_embeddings", "encoder.embed_positions"},
                                      {"embeddings.token_type_embeddings", "encoder.embed_segments"}};
constexpr Rename kBertEmbeddingNorm = {"embeddings.LayerNorm", "encoder.embed_norm"};
constexpr Rename kBertLayer[] = {  // per layer: encoder.layer.L.<hf> -> encoder.layers.L.<ours>
    {"attention.self.query", "self_attn.q_proj"},        {"attention.self.key", "self_attn.k_proj"},
    {"attention.self.value", "self_attn.v_proj"},        {"attention.output.dense", "self_attn.o_proj"},
    {"attention.output.LayerNorm", "self_attn_norm"},    {"intermediate.dense", "ffn.fc1"},
    {"output.dense", "ffn.fc2"},                         {"output.LayerNorm", "ffn_norm"}};
constexpr Rename kBertHeads[] = {{"pooler.dense", "pooler"}, {"classifier", "classifier"}};  // classifier: no prefix
constexpr Rename kGpt2LayerNorms[] = {{"ln_1", "self_attn_norm"}, {"ln_2", "ffn_norm"}};  // per layer h.L.
constexpr Rename kGpt2LayerConv1D[] = {  // per layer; Conv1D weights are [in, out]: transposed
    {"attn.c_proj", "self_attn.o_proj"}, {"mlp.c_fc", "ffn.fc1"}, {"mlp.c_proj", "ffn.fc2"}};
constexpr const char* kGpt2Qkv[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"};  // attn.c_attn

std::string bert_layer(int64_t l, bool hf) {
  return (hf ? "encoder.layer." : "encoder.layers.") + std::to_string(l) + ".";
}
std::string gpt2_layer(int64_t l, bool hf) { return (hf ? "h." : "decoder.layers.") + std::to_string(l) + "."; }

HfModel import_bert(const nlohmann::json& c, const TensorMap& tensors, const std::string& source, const LoadOptions& lo,
                    const std::string& csrc) {
  ModelConfig cfg;
  cfg.arch = Arch::EncoderClassifier;
  cfg.vocab_size = req_int(c, "vocab_size", csrc);
  cfg.d_model = req_int(c, "hidden_size", csrc);
  cfg.n_heads = req_int(c, "num_attention_heads", csrc);
  cfg.n_encoder_layers = req_int(c, "num_hidden_layers", csrc);
  cfg.d_ff = req_int(c, "intermediate_size", csrc);
  cfg.max_positions = req_int(c, "max_position_embeddings", csrc);
  cfg.n_segments = opt_int(c, "type_vocab_size", 2, csrc);
  cfg.layer_norm_eps = opt_num(c, "layer_norm_eps", 1e-12, csrc);
  cfg.dropout = opt_num(c, "hidden_dropout_prob", 0.1, csrc);
  cfg.attention_dropout = opt_num(c, "attention_probs_dropout_prob", 0.1, csrc);
  cfg.activation_dropout = 0.0;  // BertIntermediate's activation goes to BertOutput's dense undropped
  cfg.pad_id = opt_int(c, "pad_token_id", 0, csrc);
  cfg.activation = parse_hf_activation(opt_str(c, "hidden_act", "gelu", csrc), csrc);
  if (const auto pe = opt_str(c, "position_embedding_type", "absolute", csrc); pe != "absolute")
    fail(csrc, "position_embedding_type '" + pe + "' is not supported (absolute only)");
  if (cfg.n_heads <= 0 || cfg.d_model % cfg.n_heads != 0)
    fail(csrc, "hidden_size must be a multiple of num_attention_heads");
  cfg.positional = Positional::Learned;
  cfg.norm = NormPosition::Post;
  cfg.embed_layer_norm = true;
  cfg.tie_embeddings = false;
  cfg.encoder_self_heads = kept_from_pruned(c, cfg.n_encoder_layers, cfg.n_heads, csrc);

  const bool prefixed = std::any_of(tensors.begin(), tensors.end(), [](const auto& kv) { return kv.first.rfind("bert.", 0) == 0; });
  HfTensors t(tensors, prefixed ? "bert." : "", source);
  const bool has_classifier = t.has("classifier.weight");
  if (has_classifier) {
    cfg.n_classes = t.rows("classifier.weight");
  } else if (c.contains("id2label") && c.at("id2label").is_object() && !c.at("id2label").empty() &&
             c.at("id2label").size() <= static_cast<size_t>(ConfigLimits::classes)) {
    cfg.n_classes = static_cast<int64_t>(c.at("id2label").size());
  } else {
    cfg.n_classes = opt_int(c, "num_labels", 2, csrc);
  }
  try {
    cfg.finalize();
  } catch (const std::invalid_argument& e) {
    fail(csrc, e.what());
  }
  check_tensors_fit(cfg, tensors, source);  // before anything is allocated
  HfModel out;
  out.model_type = "bert";
  out.config = c;
  out.model = Transformer(cfg);
  TensorMap s = state_dict(*out.model);
  auto put = [&](const std::string& ours, const std::string& hf) { s[ours] = t.take(hf, s.at(ours).sizes().vec()); };
  auto linear = [&](const std::string& ours, const std::string& hf) {
    put(ours + ".weight", hf + ".weight");
    put(ours + ".bias", hf + ".bias");
  };
  for (const auto& r : kBertEmbeddings) put(std::string(r.ours) + ".weight", std::string(r.hf) + ".weight");
  linear(kBertEmbeddingNorm.ours, kBertEmbeddingNorm.hf);
  for (int64_t l = 0; l < cfg.n_encoder_layers; ++l)
    for (const auto& r : kBertLayer) linear(bert_layer(l, false) + r.ours, bert_layer(l, true) + r.hf);
  // BertModel checkpoints have no classifier (and may have no pooler): those start fresh.
  for (const auto& r : kBertHeads) {
    if (t.has(std::string(r.hf) + ".weight")) {
      linear(r.ours, r.hf);
    } else {
      out.initialized.push_back(std::string(r.ours) + ".weight");
      out.initialized.push_back(std::string(r.ours) + ".bias");
    }
  }
  t.drop_if([](const std::string& n) { return n == "embeddings.position_ids"; });
  t.expect_empty();
  load_state_strict(*out.model, s, source, lo.state());
  out.model->eval();
  return out;
}

HfModel import_gpt2(const nlohmann::json& c, const TensorMap& tensors, const std::string& source, const LoadOptions& lo,
                    const std::string& csrc) {
  ModelConfig cfg;
  cfg.arch = Arch::DecoderLM;
  cfg.vocab_size = req_int(c, "vocab_size", csrc);
  cfg.d_model = req_int(c, "n_embd", csrc);
  cfg.n_heads = req_int(c, "n_head", csrc);
  cfg.n_decoder_layers = req_int(c, "n_layer", csrc);
  // 4 x n_embd by default (n_embd is bounded first, so the product cannot overflow).
  cfg.d_ff = opt_int(c, "n_inner", cfg.d_model > 0 && cfg.d_model <= ConfigLimits::dim ? 4 * cfg.d_model : cfg.d_model, csrc);
  cfg.max_positions = req_int(c, "n_positions", csrc);
  cfg.layer_norm_eps = opt_num(c, "layer_norm_epsilon", 1e-5, csrc);
  cfg.dropout = opt_num(c, "resid_pdrop", 0.1, csrc);
  cfg.attention_dropout = opt_num(c, "attn_pdrop", 0.1, csrc);
  cfg.activation_dropout = 0.0;  // GPT2MLP drops after c_proj (resid_pdrop), not after the activation
  cfg.activation = parse_hf_activation(opt_str(c, "activation_function", "gelu_new", csrc), csrc);
  if (!opt_bool(c, "scale_attn_weights", true, csrc)) fail(csrc, "scale_attn_weights false is not supported");
  if (opt_bool(c, "scale_attn_by_inverse_layer_idx", false, csrc))
    fail(csrc, "scale_attn_by_inverse_layer_idx true is not supported");
  if (cfg.n_heads <= 0 || cfg.d_model % cfg.n_heads != 0) fail(csrc, "n_embd must be a multiple of n_head");
  const int64_t eos = opt_int(c, "eos_token_id", 0, csrc);
  cfg.pad_id = eos >= 0 && eos < cfg.vocab_size ? eos : 0;
  cfg.positional = Positional::Learned;
  cfg.norm = NormPosition::Pre;
  cfg.embed_layer_norm = false;

  const bool prefixed =
      std::any_of(tensors.begin(), tensors.end(), [](const auto& kv) { return kv.first.rfind("transformer.", 0) == 0; });
  HfTensors t(tensors, prefixed ? "transformer." : "", source);
  torch::Tensor lm_head;
  if (t.has("lm_head.weight")) lm_head = t.take("lm_head.weight");
  cfg.tie_embeddings = true;
  cfg.decoder_self_heads = kept_from_pruned(c, cfg.n_decoder_layers, cfg.n_heads, csrc);
  try {
    cfg.finalize();
  } catch (const std::invalid_argument& e) {
    fail(csrc, e.what());
  }
  const int64_t C = cfg.d_model;
  auto wte = t.take("wte.weight", {cfg.vocab_size, C});
  if (lm_head.defined() && !(lm_head.sizes() == wte.sizes() && torch::equal(lm_head.to(wte.scalar_type()), wte))) {
    cfg.tie_embeddings = false;
    cfg.finalize();
  }
  check_tensors_fit(cfg, tensors, source);  // before anything is allocated
  HfModel out;
  out.model_type = "gpt2";
  out.config = c;
  out.model = Transformer(cfg);
  TensorMap s = state_dict(*out.model);
  s["decoder.embed_tokens.weight"] = wte;
  if (!cfg.tie_embeddings) s["lm_head.weight"] = lm_head;
  s["decoder.embed_positions.weight"] = t.take("wpe.weight", {cfg.max_positions, C});
  auto norm = [&](const std::string& ours, const std::string& hf) {
    s[ours + ".weight"] = t.take(hf + ".weight", {C});
    s[ours + ".bias"] = t.take(hf + ".bias", {C});
  };
  for (int64_t l = 0; l < cfg.n_decoder_layers; ++l) {
    const std::string hf = gpt2_layer(l, true), ours = gpt2_layer(l, false);
    // c_attn holds [q | k | v] of the kept heads, each as wide as the geometry says.
    const HeadGeometry g = head_geometry(cfg, AttnType::DecoderSelf, l);
    const int64_t widths[3] = {g.q_width(), g.kv_width(), g.kv_width()};
    const int64_t total = widths[0] + widths[1] + widths[2];
    for (const auto& r : kGpt2LayerNorms) norm(ours + r.ours, hf + r.hf);
    auto w = t.take(hf + "attn.c_attn.weight", {C, total});  // Conv1D: [in, out]
    auto b = t.take(hf + "attn.c_attn.bias", {total});
    for (int64_t k = 0, off = 0; k < 3; off += widths[k], ++k) {
      s[ours + kGpt2Qkv[k] + ".weight"] = w.slice(1, off, off + widths[k]).t().contiguous();
      s[ours + kGpt2Qkv[k] + ".bias"] = b.slice(0, off, off + widths[k]).contiguous();
    }
    for (const auto& r : kGpt2LayerConv1D) {
      const auto& ours_w = s.at(ours + r.ours + ".weight");  // [out, in] as built from the config
      s[ours + r.ours + ".weight"] =
          t.take(hf + r.hf + ".weight", {ours_w.size(1), ours_w.size(0)}).t().contiguous();
      s[ours + r.ours + ".bias"] = t.take(hf + r.hf + ".bias", {ours_w.size(0)});
    }
  }
  norm("decoder.final_norm", "ln_f");
  // Causal-mask buffers of older files.
  t.drop_if([](const std::string& n) { return ends_with(n, ".attn.bias") || ends_with(n, ".attn.masked_bias"); });
  t.expect_empty();
  load_state_strict(*out.model, s, source, lo.state());
  out.model->eval();
  return out;
}

}  // namespace

bool is_hf_dir(const std::string& dir) {
  const std::string path = join_path(dir, kConfigFile);
  if (!is_file(path)) return false;
  try {
    const auto j = read_json_file(path);
    return j.is_object() && j.contains("model_type") && !j.contains("format");
  } catch (const std::runtime_error&) {
    return false;
  }
}

HfModel import_hf(const nlohmann::json& config, const TensorMap& tensors, const std::string& source,
                  const std::string& config_source, const LoadOptions& lo) {
  if (!config.is_object() || !config.contains("model_type") || !config.at("model_type").is_string())
    fail(config_source, "no model_type (a string such as \"bert\" or \"gpt2\")");
  const auto type = config.at("model_type").get<std::string>();
  if (type == "bert") return import_bert(config, tensors, source, lo, config_source);
  if (type == "gpt2") return import_gpt2(config, tensors, source, lo, config_source);
  if (is_llama_family(type)) return import_llama_family(config, tensors, source, config_source, lo);
  fail(config_source, "model_type '" + type + "' is not supported (bert, gpt2, llama, qwen2, mistral)");
}

HfModel import_hf(const std::string& dir, const LoadOptions& lo) {
  const std::string cpath = join_path(dir, kConfigFile);
  if (!is_file(cpath)) throw std::runtime_error("HF checkpoint '" + dir + "': missing config.json");
  const nlohmann::json config = read_json_file(cpath);
  const std::string wpath = join_path(dir, kWeightsFile);
  const std::string index = join_path(dir, kWeightsIndexFile);
  if (!is_file(wpath) && is_file(index)) return import_hf(config, read_sharded_safetensors(index), index, cpath, lo);
  if (!is_file(wpath)) {
    if (is_file(join_path(dir, "pytorch_model.bin")))
      throw std::runtime_error(
          "HF checkpoint '" + dir + "' has only pytorch_model.bin: headprune reads safetensors only (LibTorch "
          "cannot unpickle HF's state dict from C++, and unpickling runs code). Convert it once in Python: "
          "from safetensors.torch import save_file; import torch; "
          "save_file(torch.load('pytorch_model.bin', weights_only=True), 'model.safetensors') "
          "(weights_only=True: never unpickle a downloaded file without it)");
    throw std::runtime_error("HF checkpoint '" + dir + "': missing model.safetensors");
  }
  // Errors name the file at fault: config.json for its fields, model.safetensors for its tensors.
  return import_hf(config, read_safetensors(wpath).tensors, wpath, cpath, lo);
}

TensorMap read_sharded_safetensors(const std::string& index_path) {
  const auto index = read_json_file(index_path);
  if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object())
    fail(index_path, "expected an object with \"weight_map\": {tensor: shard file}");
  const std::string dir = std::filesystem::path(index_path).parent_path().string();
  std::map<std::string, std::set<std::string>> by_shard;  // shard file -> tensors the index puts there
  for (auto it = index.at("weight_map").begin(); it != index.at("weight_map").end(); ++it) {
    if (!it.value().is_string()) fail(index_path, "weight_map['" + it.key() + "'] must be a file name");
    const std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard.rfind("..", 0) == 0)
      fail(index_path, "weight_map['" + it.key() + "']: '" + shard + "' is not a file name in this directory");
    by_shard[shard].insert(it.key());
  }
  if (by_shard.empty()) fail(index_path, "weight_map lists no tensors");
  TensorMap all;
  for (const auto& [shard, names] : by_shard) {
    const std::string path = join_path(dir, shard);
    if (!is_file(path)) fail(index_path, "shard '" + shard + "' is missing (" + std::to_string(names.size()) + " tensors)");
    auto file = read_safetensors(path);
    for (const auto& name : names)
      if (!file.tensors.count(name)) fail(path, "tensor '" + name + "' is named in " + index_path + " but absent here");
    for (auto& [name, t] : file.tensors) {
      if (!names.count(name)) fail(path, "tensor '" + name + "' is not listed for this shard in " + index_path);
      all.emplace(name, std::move(t));
    }
  }
  return all;
}

HfLayout parse_hf_layout(const std::string& s) {
  if (s == "auto") return HfLayout::Auto;
  if (s == "pruned_heads") return HfLayout::PrunedHeads;
  if (s == "dense") return HfLayout::Dense;
  throw std::invalid_argument("unknown HF layout '" + s + "' (expected auto, pruned_heads or dense)");
}

HfExport to_hf(TransformerImpl& model_in, const nlohmann::json& base_config, HfLayout layout) {
  if (model_in.config().positional == Positional::Rotary) {
    if (layout == HfLayout::PrunedHeads)
      throw std::invalid_argument("HF export: the LLaMA family has no pruned_heads in HF (one head count for every "
                                  "layer); use the dense layout");
    return to_hf_llama(model_in, base_config);
  }
  // HF files have no masks. pruned_heads: masked heads leave physically. dense: every layer back at
  // the config's head counts, removed heads zero, masked heads' outputs scaled by their masks.
  ModelConfig cfg;
  TensorMap s;
  if (layout == HfLayout::Dense) {
    std::tie(cfg, s) = restore_head_shapes(model_in.config(), state_dict(model_in));
  } else if (const auto masked = model_in.masked_heads(); !masked.empty()) {
    auto pruned = remove_heads(model_in, masked);
    cfg = pruned->config();
    s = state_dict(*pruned);
  } else {
    cfg = model_in.config();
    s = state_dict(model_in);
  }
  auto bad = [](const std::string& w) { throw std::invalid_argument("HF export: " + w); };
  if (cfg.positional != Positional::Learned) bad("HF's BERT and GPT-2 have learned positions, not sinusoidal");
  if (cfg.head_dim * cfg.n_heads != cfg.d_model) bad("head_dim * n_heads must equal d_model");
  if (cfg.norm_kind != NormKind::LayerNorm || cfg.gated_ffn || !cfg.mlp_bias || cfg.sliding_window > 0)
    bad("HF's BERT and GPT-2 have LayerNorm, a plain feed-forward with biases and no sliding window");
  if (cfg.effective_kv_heads() != cfg.n_heads || !cfg.qkv_bias || !cfg.o_bias)
    bad("HF's BERT and GPT-2 have one key/value head per query head and biases on every projection (n_kv_heads " +
        std::to_string(cfg.effective_kv_heads()) + ", n_heads " + std::to_string(cfg.n_heads) + ")");
  HfExport out;
  TensorMap plain;  // small models: made here, written as they are
  nlohmann::json c = base_config.is_object() ? base_config : nlohmann::json::object();
  nlohmann::json pruned_heads = nlohmann::json::object();
  auto record_pruned = [&](const std::vector<std::vector<int64_t>>& kept) {
    for (size_t l = 0; l < kept.size(); ++l) {
      nlohmann::json ids = nlohmann::json::array();
      for (int64_t h = 0; h < cfg.n_heads; ++h)
        if (std::find(kept[l].begin(), kept[l].end(), h) == kept[l].end()) ids.push_back(h);
      if (!ids.empty()) pruned_heads[std::to_string(l)] = ids;
    }
  };
  auto get = [&](const std::string& n) { return s.at(n).contiguous(); };
  if (cfg.arch == Arch::EncoderClassifier) {
    if (cfg.norm != NormPosition::Post || !cfg.embed_layer_norm || cfg.n_segments < 1)
      bad("a BERT needs post-LayerNorm, a LayerNorm after the embeddings and segment embeddings");
    if (c.value("model_type", std::string("bert")) != "bert") c = nlohmann::json::object();
    c["model_type"] = "bert";
    c["architectures"] = {"BertForSequenceClassification"};
    c["vocab_size"] = cfg.vocab_size;
    c["hidden_size"] = cfg.d_model;
    c["num_hidden_layers"] = cfg.n_encoder_layers;
    c["num_attention_heads"] = cfg.n_heads;
    c["intermediate_size"] = cfg.d_ff;
    c["hidden_act"] = hf_activation(cfg.activation);
    c["max_position_embeddings"] = cfg.max_positions;
    c["type_vocab_size"] = cfg.n_segments;
    c["layer_norm_eps"] = cfg.layer_norm_eps;
    c["hidden_dropout_prob"] = cfg.dropout;
    c["attention_probs_dropout_prob"] = cfg.attention_dropout;
    c["pad_token_id"] = cfg.pad_id;
    c["position_embedding_type"] = "absolute";
    if (!c.contains("id2label") || c.at("id2label").size() != static_cast<size_t>(cfg.n_classes)) {
      c["id2label"] = nlohmann::json::object();
      c["label2id"] = nlohmann::json::object();
      for (int64_t k = 0; k < cfg.n_classes; ++k) {
        c["id2label"][std::to_string(k)] = "LABEL_" + std::to_string(k);
        c["label2id"]["LABEL_" + std::to_string(k)] = k;
      }
    }
    record_pruned(cfg.encoder_self_heads);
    auto& t = plain;
    auto linear = [&](const std::string& hf, const std::string& ours) {
      t[hf + ".weight"] = get(ours + ".weight");
      t[hf + ".bias"] = get(ours + ".bias");
    };
    for (const auto& r : kBertEmbeddings) t["bert." + std::string(r.hf) + ".weight"] = get(std::string(r.ours) + ".weight");
    linear("bert." + std::string(kBertEmbeddingNorm.hf), kBertEmbeddingNorm.ours);
    for (int64_t l = 0; l < cfg.n_encoder_layers; ++l)
      for (const auto& r : kBertLayer) linear("bert." + bert_layer(l, true) + r.hf, bert_layer(l, false) + r.ours);
    for (const auto& r : kBertHeads)
      linear((std::string(r.ours) == "classifier" ? "" : "bert.") + std::string(r.hf), r.ours);
  } else if (cfg.arch == Arch::DecoderLM) {
    if (cfg.norm != NormPosition::Pre || cfg.embed_layer_norm)
      bad("a GPT-2 needs pre-LayerNorm and no LayerNorm after the embeddings");
    if (c.value("model_type", std::string("gpt2")) != "gpt2") c = nlohmann::json::object();
    c["model_type"] = "gpt2";
    c["architectures"] = {"GPT2LMHeadModel"};
    c["vocab_size"] = cfg.vocab_size;
    c["n_embd"] = cfg.d_model;
    c["n_layer"] = cfg.n_decoder_layers;
    c["n_head"] = cfg.n_heads;
    c["n_inner"] = cfg.d_ff;
    c["n_positions"] = cfg.max_positions;
    c["activation_function"] = hf_activation(cfg.activation);
    c["layer_norm_epsilon"] = cfg.layer_norm_eps;
    c["resid_pdrop"] = cfg.dropout;
    c["attn_pdrop"] = cfg.attention_dropout;
    c["scale_attn_weights"] = true;
    c["tie_word_embeddings"] = cfg.tie_embeddings;
    record_pruned(cfg.decoder_self_heads);
    auto& t = plain;
    t["transformer.wte.weight"] = get("decoder.embed_tokens.weight");
    t["transformer.wpe.weight"] = get("decoder.embed_positions.weight");
    if (!cfg.tie_embeddings) t["lm_head.weight"] = get("lm_head.weight");
    for (int64_t l = 0; l < cfg.n_decoder_layers; ++l) {
      const std::string hf = "transformer." + gpt2_layer(l, true), ours = gpt2_layer(l, false);
      for (const auto& r : kGpt2LayerNorms) {
        t[hf + r.hf + ".weight"] = get(ours + r.ours + ".weight");
        t[hf + r.hf + ".bias"] = get(ours + r.ours + ".bias");
      }
      std::vector<torch::Tensor> w, b;
      for (const char* m : kGpt2Qkv) {
        w.push_back(get(ours + m + ".weight").t());
        b.push_back(get(ours + m + ".bias"));
      }
      t[hf + "attn.c_attn.weight"] = torch::cat(w, 1).contiguous();
      t[hf + "attn.c_attn.bias"] = torch::cat(b);
      for (const auto& r : kGpt2LayerConv1D) {
        t[hf + r.hf + ".weight"] = get(ours + r.ours + ".weight").t().contiguous();
        t[hf + r.hf + ".bias"] = get(ours + r.ours + ".bias");
      }
    }
    t["transformer.ln_f.weight"] = get("decoder.final_norm.weight");
    t["transformer.ln_f.bias"] = get("decoder.final_norm.bias");
  } else {
    bad("encoder_decoder models have no HF export (BERT and GPT-2 only)");
  }
  c["pruned_heads"] = pruned_heads;
  out.config = c;
  for (const auto& [name, tensor] : plain) out.tensors.emplace(name, LazyTensor::of(tensor));
  return out;
}

void export_hf(const std::string& dir, TransformerImpl& model, const nlohmann::json& base_config, HfLayout layout) {
  const auto e = to_hf(model, base_config, layout);
  make_directories(dir);
  write_safetensors_sharded(dir, "model", e.tensors, {{"format", "pt"}});  // HF's shards past 5 GiB
  write_json_file(join_path(dir, kConfigFile), e.config);
}

}  // namespace hp
