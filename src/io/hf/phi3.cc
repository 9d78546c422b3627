// Phi-3 (Phi3ForCausalLM): the LLaMA block with q, k and v fused in self_attn.qkv_proj ([q | k | v]
// rows) and gate and up fused in mlp.gate_up_proj ([gate | up] rows), no biases, an optional sliding
// window, and partial rotary (partial_rotary_factor: the first head_dim x factor channels of each head
// rotate; Phi-4-mini's 0.75). LongRoPE (the 128k models' rope_scaling) is refused by the rope key with
// the types it supports.
#include "llama_block.h"

namespace hp::hf::phi3 {

namespace {

// partial_rotary_factor: the first int(head_dim x factor) channels of each head rotate (Phi-4-mini: 0.75).
void read_partial_rotary(const JsonFields& c, ModelConfig& cfg) {
  const double factor = c.opt_num("partial_rotary_factor", 1.0);
  if (!(factor > 0 && factor <= 1)) c.fail("partial_rotary_factor", "must be in (0, 1], got " + std::to_string(factor));
  const int64_t head_dim = cfg.head_dim > 0 ? cfg.head_dim : cfg.n_heads > 0 ? cfg.d_model / cfg.n_heads : 0;
  const auto rotated = static_cast<int64_t>(static_cast<double>(head_dim) * factor);
  if (rotated == head_dim) return;
  if (rotated < 2 || rotated % 2 != 0)
    c.fail("partial_rotary_factor", std::to_string(factor) + " x head_dim " + std::to_string(head_dim) + " = " +
                                        std::to_string(rotated) + " rotated channels: must be even and at least 2");
  cfg.rotary_dim = rotated;
}

}  // namespace

const HfFamily& family() {
  using namespace hf_detail;
  using S = HfScope;
  static const HfFamily f = [] {
    const std::string L = "layers.{L}.", O = "decoder.layers.{L}.";
    HfFamily f = llama_block_member("phi3", "Phi3ForCausalLM");
    f.tensors = {{S::Model, "embed_tokens", {"decoder.embed_tokens"}},
                 {S::DecoderLayer, L + "self_attn.qkv_proj", {O + "self_attn.q_proj", O + "self_attn.k_proj", O + "self_attn.v_proj"}},
                 {S::DecoderLayer, L + "self_attn.o_proj", {O + "self_attn.o_proj"}},
                 {S::DecoderLayer, L + "mlp.gate_up_proj", {O + "ffn.gate", O + "ffn.fc1"}},
                 {S::DecoderLayer, L + "mlp.down_proj", {O + "ffn.fc2"}},
                 {S::DecoderLayer, L + "input_layernorm", {O + "self_attn_norm"}},
                 {S::DecoderLayer, L + "post_attention_layernorm", {O + "ffn_norm"}},
                 {S::Model, "norm", {"decoder.final_norm"}},
                 {S::Model, "lm_head", {"lm_head"}, HfStorage::Linear, HfPresence::Untied, /*prefixed=*/false}};
    f.guess = [](const ModelConfig&) { return false; };  // never chosen without a Phi-3 config to go by
    f.configure = [](const JsonFields& c, HfTensors& t, ModelConfig& cfg) {
      llama_block_configure(c, t, cfg);
      cfg.qkv_bias = cfg.o_bias = cfg.mlp_bias = false;
      read_partial_rotary(c, cfg);
    };
    f.check = [](const ModelConfig& cfg) {
      llama_block_check(cfg);
      if (cfg.qkv_bias || cfg.o_bias || cfg.mlp_bias) llama_block_bad("Phi-3 has no biases (qkv_bias, o_bias, mlp_bias)");
    };
    f.keys.push_back(sliding_window_key());
    f.keys.push_back({"partial_rotary_factor", {}, [](const ModelConfig& cfg) {
                        return nlohmann::json(cfg.rotary_dim > 0 ? static_cast<double>(cfg.rotary_dim) / static_cast<double>(cfg.head_dim) : 1.0);
                      }});
    f.config_fields.insert({"sliding_window", "rotary_dim"});
    return f;
  }();
  return f;
}

}  // namespace hp::hf::phi3
