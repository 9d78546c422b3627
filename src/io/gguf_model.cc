// A LLaMA-family model as GGUF (see header).
#include "headprune/io/gguf_model.h"

#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>

#include "headprune/model/geometry.h"
#include "headprune/model/remove_heads.h"
#include "headprune/model/rotary.h"
#include "headprune/model/state.h"
#include "headprune/version.h"

namespace hp {

namespace {

void gguf_require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("GGUF export: " + what);
}

}  // namespace

void check_gguf_family(const ModelConfig& c) {
  gguf_require(c.arch == Arch::DecoderLM,
          "only decoder LMs of the LLaMA family (Llama, Mistral, Qwen2, Qwen3) are written to GGUF; this model is an " +
              std::string(c.arch == Arch::EncoderDecoder ? "encoder-decoder" : "encoder classifier"));
  // The allow-list: what llama.cpp's llama / qwen2 / qwen3 / deci hyperparameters and tensors can say.
  static const std::set<std::string> expressible = {
      "arch",       "vocab_size",   "d_model",     "d_ff",      "n_heads",        "head_dim",   "n_kv_heads",
      "heads",      "n_decoder_layers", "max_positions", "layer_norm_eps", "activation", "pad_id", "tie_embeddings",
      "positional", "rope_theta",   "rope_scaling", "norm",          "norm_kind",  "gated_ffn",
      "embed_layer_norm", "qkv_bias", "o_bias",    "mlp_bias",  "qk_norm",        "sliding_window"};
  require_expressible(c, expressible, "GGUF export");
  const std::string family = "; GGUF export writes the LLaMA family (Llama, Mistral, Qwen2, Qwen3)";
  gguf_require(c.positional == Positional::Rotary, "needs rotary positions (positional rotary)" + family);
  gguf_require(c.norm_kind == NormKind::RmsNorm && c.norm == NormPosition::Pre,
               "needs pre-RMSNorm layers (norm pre, norm_kind rms_norm)" + family);
  gguf_require(c.gated_ffn && c.activation == Activation::Silu,
               "needs a SwiGLU feed-forward (gated_ffn, activation silu)" + family);
  gguf_require(!c.embed_layer_norm, "has no norm after the embeddings (embed_layer_norm)" + family);
}

namespace {

// One layer's heads as written: query heads, key/value heads (each kept one repeated `repeat` times).
struct LayerHeads {
  int64_t n_head = 0, n_kv = 0;
  std::vector<int64_t> repeat;  // per kept key/value head
  bool stand_in = false;        // a zero head for an emptied layer that llama.cpp must not skip
};

// An emptied layer gets a stand-in head when it is layer 0 (llama.cpp reads the head size there) or when
// its output projection has a bias (deci skips an empty layer's attention, bias and all).
LayerHeads layer_heads(const HeadGeometry& g, int64_t layer) {
  LayerHeads h;
  if (g.heads.empty()) {
    if (layer == 0 || g.o_bias) h.n_head = h.n_kv = 1, h.stand_in = true;
    return h;
  }
  std::vector<int64_t> count(static_cast<size_t>(g.n_kv_heads_kept()), 0);
  for (int64_t p : g.kv_positions()) ++count[static_cast<size_t>(p)];
  int64_t common = 0;
  for (int64_t c : count) common = std::gcd(common, c);
  for (int64_t c : count) {
    h.repeat.push_back(c / common);
    h.n_kv += c / common;
  }
  h.n_head = g.n_heads_kept();
  return h;
}

// Rows of each head from HF's rotate-half order (first half, second half) to interleaved pairs.
torch::Tensor interleave_rope(const torch::Tensor& w, int64_t head_dim) {
  const auto shape = w.sizes().vec();
  const int64_t n = shape[0] / head_dim;
  return w.reshape({n, 2, head_dim / 2, -1}).transpose(1, 2).reshape(shape);
}

// Each key/value head's rows (head_dim of them) repeated as the layer's plan says.
torch::Tensor repeat_heads(const torch::Tensor& w, int64_t head_dim, const std::vector<int64_t>& repeat) {
  std::vector<torch::Tensor> parts;
  for (size_t j = 0; j < repeat.size(); ++j) {
    const auto rows = w.narrow(0, static_cast<int64_t>(j) * head_dim, head_dim);
    for (int64_t r = 0; r < repeat[j]; ++r) parts.push_back(rows);
  }
  return torch::cat(parts, 0);
}

class GgufBuilder {
 public:
  GgufBuilder(GgufFile& file, std::shared_ptr<const TensorMap> state, GgufTypes types, std::vector<std::string>* kept_f16)
      : file_(file), state_(std::move(state)), types_(types), kept_f16_(kept_f16) {}

  // A tensor of the model, transformed when written; 2-D ones in the file's type, the rest F32.
  void add(const std::string& name, const std::string& ours, std::vector<int64_t> shape,
           std::function<torch::Tensor(const torch::Tensor&)> f = {}) {
    const auto s = state_;
    read_.insert(ours);
    add_made(name, std::move(shape), [s, ours, f] {
      const torch::Tensor& t = s->at(ours);
      return f ? f(t) : t;
    });
  }
  // 2-D tensors in a block type when their rows split into blocks, else F16 (as llama.cpp's converter
  // writes them), named in kept_f16. The output projection (the token embedding when tied) in its own
  // type (GgufTypes::output).
  void add_made(const std::string& name, std::vector<int64_t> shape, std::function<torch::Tensor()> make) {
    GgmlType type = shape.size() != 2 ? GgmlType::F32 : name == output_name_ ? types_.output : types_.weights;
    if (is_block_type(type) && shape[1] % kGgmlBlockValues != 0) {
      type = GgmlType::F16;
      if (kept_f16_) kept_f16_->push_back(name);
    }
    if (is_block_type(type)) {
      file_.tensors.push_back(quantized_gguf_tensor(name, type, std::move(shape), std::move(make)));
      return;
    }
    const auto dt = type == GgmlType::F32 ? torch::kFloat32 : type == GgmlType::F16 ? torch::kFloat16 : torch::kBFloat16;
    file_.tensors.push_back({name, LazyTensor{dt, std::move(shape), [make, dt] { return make().to(torch::kCPU, dt).contiguous(); }}, {}, {}});
  }
  bool has(const std::string& ours) const { return state_->count(ours) > 0; }
  const std::set<std::string>& read() const { return read_; }  // the model's tensors written (or unused)
  void unused(const std::string& ours) { read_.insert(ours); }  // a model tensor that computes nothing here
  void set_output(std::string name) { output_name_ = std::move(name); }
  void meta(const std::string& key, GgufValue v) { file_.metadata.emplace_back(key, std::move(v)); }

 private:
  GgufFile& file_;
  std::shared_ptr<const TensorMap> state_;
  GgufTypes types_;
  std::vector<std::string>* kept_f16_;
  std::string output_name_;
  std::set<std::string> read_;
};

// llama.cpp's llama_ftype for a file whose 2-D weights are of `t`.
int64_t file_type_of(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q8_0: return 7;
    case GgmlType::BF16: return 32;
  }
  return 0;
}

std::string choose_arch(const ModelConfig& c, const std::vector<LayerHeads>& layers) {
  bool uniform = true;
  for (const auto& l : layers)
    uniform = uniform && l.n_head > 0 && !l.stand_in && l.n_head == layers[0].n_head && l.n_kv == layers[0].n_kv;
  const int64_t D = c.head_dim;
  if (c.qk_norm) {
    gguf_require(uniform, "Qwen3's q_norm / k_norm have no GGUF form with a different head count per layer (llama.cpp's "
                     "deci architecture lacks them); prune the same number of heads and groups in every layer "
                     "(prune --shape uniform) to write it as qwen3");
    return "qwen3";
  }
  const bool qwen2_shaped = c.qkv_bias && !c.o_bias && !c.mlp_bias;
  if (uniform && qwen2_shaped && layers[0].n_head * D == c.d_model && c.rope_scaling.type != RopeScalingType::Llama3)
    return "qwen2";
  return uniform ? "llama" : "deci";
}

void write_hparams(GgufBuilder& b, const std::string& arch, const ModelConfig& c, const std::vector<LayerHeads>& layers) {
  const std::string a = arch + ".";
  int64_t context = c.max_positions;
  if (c.sliding_window > 0 && c.sliding_window < context) context = c.sliding_window;  // exact up to the window
  b.meta(a + "context_length", GgufValue::u32(context));
  b.meta(a + "embedding_length", GgufValue::u32(c.d_model));
  b.meta(a + "block_count", GgufValue::u32(static_cast<int64_t>(layers.size())));
  b.meta(a + "feed_forward_length", GgufValue::u32(c.d_ff));
  if (arch == "deci") {
    std::vector<int64_t> heads, kv;
    for (const auto& l : layers) heads.push_back(l.n_head), kv.push_back(l.n_kv);
    b.meta(a + "attention.head_count", GgufValue::array(GgufType::I32, heads));
    b.meta(a + "attention.head_count_kv", GgufValue::array(GgufType::I32, kv));
  } else {
    b.meta(a + "attention.head_count", GgufValue::u32(layers[0].n_head));
    b.meta(a + "attention.head_count_kv", GgufValue::u32(layers[0].n_kv));
  }
  b.meta(a + "attention.key_length", GgufValue::u32(c.head_dim));
  b.meta(a + "attention.value_length", GgufValue::u32(c.head_dim));
  b.meta(a + "attention.layer_norm_rms_epsilon", GgufValue::f32(c.layer_norm_eps));
  b.meta(a + "rope.freq_base", GgufValue::f32(c.rope_theta));
  b.meta(a + "rope.dimension_count", GgufValue::u32(c.head_dim));
  b.meta(a + "vocab_size", GgufValue::u32(c.vocab_size));
  if (c.rope_scaling.type == RopeScalingType::Linear) {
    b.meta(a + "rope.scaling.type", GgufValue::str("linear"));
    b.meta(a + "rope.scaling.factor", GgufValue::f32(c.rope_scaling.factor));
  }
}

void write_vocab(GgufBuilder& b, const GgufVocab& v, int64_t vocab_size) {
  gguf_require(v.model == "llama" || v.model == "gpt2", "tokenizer model '" + v.model + "' (llama or gpt2)");
  const auto n = static_cast<int64_t>(v.tokens.size());
  gguf_require(n > 0, "the tokenizer has no tokens");
  gguf_require(n <= vocab_size, "the tokenizer has " + std::to_string(n) + " tokens, more than the model's vocabulary of " +
                               std::to_string(vocab_size));
  gguf_require(v.types.size() == v.tokens.size() && (v.model != "llama" || v.scores.size() == v.tokens.size()),
          "the tokenizer's token types or scores do not cover its tokens");
  auto tokens = v.tokens;
  auto scores = v.scores;
  auto types = v.types;
  for (int64_t i = n; i < vocab_size; ++i) {  // the model's rows past the tokenizer's (HF pads vocabularies)
    tokens.push_back("[PAD" + std::to_string(i) + "]");
    types.push_back(5);  // unused
    if (v.model == "llama") scores.push_back(-1000.0);
  }
  b.meta("tokenizer.ggml.model", GgufValue::str(v.model));
  if (!v.pre.empty()) b.meta("tokenizer.ggml.pre", GgufValue::str(v.pre));
  b.meta("tokenizer.ggml.tokens", GgufValue::strs(std::move(tokens)));
  if (v.model == "llama") b.meta("tokenizer.ggml.scores", GgufValue::f32s(std::move(scores)));
  b.meta("tokenizer.ggml.token_type", GgufValue::array(GgufType::I32, std::move(types)));
  if (v.model == "gpt2") b.meta("tokenizer.ggml.merges", GgufValue::strs(v.merges));
  for (const auto& [key, id] : {std::pair<const char*, int64_t>{"bos", v.bos}, {"eos", v.eos}, {"unknown", v.unk}, {"padding", v.pad}})
    if (id >= 0) b.meta(std::string("tokenizer.ggml.") + key + "_token_id", GgufValue::u32(id));
  b.meta("tokenizer.ggml.add_bos_token", GgufValue::boolean(v.add_bos));
  b.meta("tokenizer.ggml.add_eos_token", GgufValue::boolean(v.add_eos));
  if (v.model == "llama") b.meta("tokenizer.ggml.add_space_prefix", GgufValue::boolean(v.add_space_prefix));
}

void write_attention(GgufBuilder& b, const ModelConfig& c, int64_t l, const LayerHeads& h, bool permute) {
  const std::string at = attention_prefix(AttnType::DecoderSelf, l) + ".", blk = "blk." + std::to_string(l) + ".";
  const int64_t D = c.head_dim, C = c.d_model, q = h.n_head * D, kv = h.n_kv * D;
  if (h.stand_in) {  // one head: values and output zero, so it adds nothing
    for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"attn_q.weight", {D, C}}, {"attn_k.weight", {D, C}}, {"attn_v.weight", {D, C}}, {"attn_output.weight", {C, D}}})
      b.add_made(blk + name, shape, [shape = shape] { return torch::zeros(shape); });
    if (c.qkv_bias)
      for (const char* name : {"attn_q.bias", "attn_k.bias", "attn_v.bias"})
        b.add_made(blk + name, {D}, [D] { return torch::zeros({D}); });
  } else {
    const auto rep = h.repeat;
    auto rope = [permute, D](const torch::Tensor& t) { return permute ? interleave_rope(t, D) : t; };
    for (const char* p : {"weight", "bias"}) {
      const bool w = std::string(p) == "weight";
      auto shape = [&](int64_t rows) { return w ? std::vector<int64_t>{rows, C} : std::vector<int64_t>{rows}; };
      if (!b.has(at + "q_proj." + p)) continue;
      b.add(blk + "attn_q." + p, at + "q_proj." + p, shape(q), rope);
      b.add(blk + "attn_k." + p, at + "k_proj." + p, shape(kv), [=](const torch::Tensor& t) { return rope(repeat_heads(t, D, rep)); });
      b.add(blk + "attn_v." + p, at + "v_proj." + p, shape(kv), [=](const torch::Tensor& t) { return repeat_heads(t, D, rep); });
    }
    b.add(blk + "attn_output.weight", at + "o_proj.weight", {C, q});
    if (c.qk_norm) {
      b.add(blk + "attn_q_norm.weight", at + "q_norm.weight", {D});
      b.add(blk + "attn_k_norm.weight", at + "k_norm.weight", {D});
    }
  }
  if (b.has(at + "o_proj.bias")) b.add(blk + "attn_output.bias", at + "o_proj.bias", {C});
}

void write_layer(GgufBuilder& b, const ModelConfig& c, int64_t l, const LayerHeads& h, bool permute) {
  const std::string blk = "blk." + std::to_string(l) + ".", ours = "decoder.layers." + std::to_string(l) + ".";
  const int64_t C = c.d_model, F = c.d_ff;
  if (h.n_head > 0) {  // an empty layer has no attention tensors at all (deci skips its attention)
    b.add(blk + "attn_norm.weight", ours + "self_attn_norm.weight", {C});
    write_attention(b, c, l, h, permute);
  } else {
    b.unused(ours + "self_attn_norm.weight");  // it normalizes the input of an attention that adds nothing
  }
  b.add(blk + "ffn_norm.weight", ours + "ffn_norm.weight", {C});
  for (const auto& [name, mine, shape] : std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>>{
           {"ffn_gate", "ffn.gate", {F, C}}, {"ffn_up", "ffn.fc1", {F, C}}, {"ffn_down", "ffn.fc2", {C, F}}}) {
    b.add(blk + name + ".weight", ours + mine + ".weight", shape);
    if (b.has(ours + mine + ".bias")) b.add(blk + name + ".bias", ours + mine + ".bias", {shape[0]});
  }
}

}  // namespace

GgmlType parse_gguf_dtype(const std::string& s) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0})
    if (s == to_string(t)) return t;
  throw std::invalid_argument("GGUF dtype '" + s + "': expected f32, f16, bf16, q8_0 or q4_0");
}

GgmlType default_gguf_output_type(GgmlType weights) {
  switch (weights) {
    case GgmlType::Q8_0: return GgmlType::F16;
    case GgmlType::Q4_0: return GgmlType::Q8_0;
    default: return weights;
  }
}

GgufFile to_gguf(TransformerImpl& model, const GgufVocab& vocab, GgufTypes types, const std::string& name,
                 GgufLayout* layout) {
  check_gguf_family(model.config());
  // The file holds no masks: masked heads are removed (the untouched tensors shared, not copied).
  Transformer pruned{nullptr};
  if (const auto masked = model.masked_heads(); !masked.empty()) pruned = remove_heads(model, masked, /*share_untouched=*/true);
  TransformerImpl& m = pruned ? *pruned : model;
  const ModelConfig c = m.config();
  const auto state = std::make_shared<const TensorMap>(state_dict(m));

  std::vector<LayerHeads> layers;
  for (int64_t l = 0; l < c.n_layers(AttnType::DecoderSelf); ++l)
    layers.push_back(layer_heads(head_geometry(c, AttnType::DecoderSelf, l), l));
  const std::string arch = choose_arch(c, layers);
  const bool permute = arch == "llama" || arch == "deci";
  gguf_require(c.rope_scaling.type != RopeScalingType::Llama3 || permute, "rope_scaling llama3 is written for GGUF's llama and deci "
               "only, and this model is " + arch + " (qk_norm: qwen3; q/k/v biases only: qwen2)");

  GgufFile file;
  GgufLayout scratch;
  if (!layout) layout = &scratch;
  layout->kept_f16.clear();
  layout->output_type = types.output;
  GgufBuilder b(file, state, types, &layout->kept_f16);
  b.meta("general.architecture", GgufValue::str(arch));
  b.meta("headprune.exporter", GgufValue::str(std::string("headprune ") + HP_VERSION_STRING));
  b.meta("general.name", GgufValue::str(name));
  b.meta("general.file_type", GgufValue::u32(file_type_of(types.weights)));
  if (is_block_type(types.weights) || is_block_type(types.output)) b.meta("general.quantization_version", GgufValue::u32(2));  // ggml's GGML_QNT_VERSION
  write_hparams(b, arch, c, layers);
  write_vocab(b, vocab, c.vocab_size);

  const int64_t C = c.d_model, V = c.vocab_size;
  b.set_output(c.tie_embeddings ? "token_embd.weight" : "output.weight");
  b.add("token_embd.weight", "decoder.embed_tokens.weight", {V, C});
  b.add("output_norm.weight", "decoder.final_norm.weight", {C});
  if (!c.tie_embeddings) b.add("output.weight", "lm_head.weight", {V, C});
  if (c.rope_scaling.type == RopeScalingType::Llama3) {  // llama.cpp divides each frequency by its factor
    ModelConfig plain = c;
    plain.rope_scaling = RopeScaling{};
    const torch::Tensor factors = rope_inv_freq(plain) / rope_inv_freq(c);
    b.add_made("rope_freqs.weight", {factors.size(0)}, [factors] { return factors; });
  }
  for (size_t l = 0; l < layers.size(); ++l) write_layer(b, c, static_cast<int64_t>(l), layers[l], permute);
  check_every_tensor_written(*state, b.read(), "GGUF export (" + arch + ")");

  layout->arch = arch;
  layout->n_head.clear(), layout->n_head_kv.clear(), layout->stand_in_layers.clear();
  for (size_t l = 0; l < layers.size(); ++l) {
    layout->n_head.push_back(layers[l].n_head);
    layout->n_head_kv.push_back(layers[l].n_kv);
    if (layers[l].stand_in) layout->stand_in_layers.push_back(static_cast<int64_t>(l));
  }
  return file;
}

}  // namespace hp
