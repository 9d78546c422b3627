// Qwen3 (Qwen3ForCausalLM): the LLaMA block with an RMSNorm over head_dim on each query and key head
// before the rotary embedding (self_attn.q_norm, self_attn.k_norm: one weight of head_dim each, shared
// by the heads, so removing heads leaves them whole), head_dim independent of hidden_size, one
// attention_bias for q, k, v and o, no feed-forward biases, and no sliding window on some layers only.
#include "llama_block.h"

namespace hp::hf::qwen3 {

const HfFamily& family() {
  using namespace hf_detail;
  static const HfFamily f = [] {
    HfFamily f = llama_block_member("qwen3", "Qwen3ForCausalLM");
    for (const char* norm : {"q_norm", "k_norm"})
      f.tensors.push_back({HfScope::DecoderLayer, std::string("layers.{L}.self_attn.") + norm,
                           {std::string("decoder.layers.{L}.self_attn.") + norm}});
    f.keys.push_back(attention_bias_key());
    f.keys.push_back(use_sliding_window_key());
    f.config_fields.insert("qk_norm");
    f.guess = [](const ModelConfig& cfg) { return cfg.qk_norm; };
    f.configure = [](const JsonFields& c, HfTensors& t, ModelConfig& cfg) {
      llama_block_configure(c, t, cfg);
      cfg.qk_norm = true;
      cfg.mlp_bias = false;
    };
    f.check = [](const ModelConfig& cfg) {
      llama_block_check(cfg);
      if (!cfg.qk_norm) llama_block_bad("Qwen3 has q_norm/k_norm (qk_norm)");
      if (cfg.qkv_bias != cfg.o_bias)
        llama_block_bad("Qwen3 has attention biases on all of q, k, v and o or on none (attention_bias: qkv_bias = o_bias)");
      if (cfg.mlp_bias) llama_block_bad("Qwen3 has no feed-forward biases (mlp_bias)");
    };
    return f;
  }();
  return f;
}

}  // namespace hp::hf::qwen3
