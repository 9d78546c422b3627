// Qwen3 (Qwen3ForCausalLM): the LLaMA block with an RMSNorm over head_dim on each query and key head
// before the rotary embedding (self_attn.q_norm, self_attn.k_norm: one weight of head_dim each, shared
// by the heads, so removing heads leaves them whole), head_dim independent of hidden_size, one
// attention_bias for q, k, v and o, no feed-forward biases, and no sliding window on some layers only.
#include "llama_block.h"

namespace hp {

const HfFamily& qwen3_family() {
  using namespace hf_detail;  // inside the function: a unity build's later files do not see it
  static const HfFamily f = [] {
    auto names = llama_block_tensor_names();
    for (const char* norm : {"q_norm", "k_norm"})
      names.push_back({HfScope::DecoderLayer, std::string("layers.{L}.self_attn.") + norm,
                       {std::string("decoder.layers.{L}.self_attn.") + norm}});
    HfFamily f{"qwen3",
               "Qwen3ForCausalLM",
               "model.",
               llama_block_keys(),
               std::move(names),
               {".rotary_emb.inv_freq"},
               /*pruned_heads=*/false,
               /*deferred_init=*/true,
               llama_block_fits,
               [](const ModelConfig& cfg) { return cfg.qk_norm; },
               [](const JsonFields& c, HfTensors& t, ModelConfig& cfg) {
                 llama_block_configure(c, t, cfg);
                 cfg.qk_norm = true;
                 cfg.mlp_bias = false;
               },
               llama_block_finish,
               [](const ModelConfig& cfg) {
                 llama_block_check(cfg, /*qk_norm=*/true);
                 if (cfg.qkv_bias != cfg.o_bias)
                   llama_block_bad("Qwen3 has attention biases on all of q, k, v and o or on none (attention_bias)");
                 if (cfg.mlp_bias) llama_block_bad("Qwen3 has no feed-forward biases");
                 if (cfg.sliding_window > 0) llama_block_bad("only Mistral has a sliding window");
               },
               llama_block_extras,
               {}};
    f.keys.push_back(attention_bias_key());
    f.keys.push_back(use_sliding_window_key());
    return f;
  }();
  return f;
}

}  // namespace hp
