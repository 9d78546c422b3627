// Private to src/io/hf: the LLaMA block (rotary positions, pre-RMSNorm, gated feed-forward,
// grouped-query attention) that Llama, Mistral, Qwen2 and Phi-3 share (llama.cc). A family file of
// that block takes these pieces and adds its own keys, names and checks.
#pragma once

#include <string>
#include <vector>

#include "family.h"
#include "tensors.h"

namespace hp::hf_detail {

// vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads, head_dim, max_position_embeddings, rms_norm_eps, hidden_act,
// attention_dropout, tie_word_embeddings, rope_theta, rope_scaling / rope_parameters, pad_token_id.
std::vector<HfConfigKey> llama_block_keys();
HfConfigKey sliding_window_key();  // Mistral's and Phi-3's window over the last tokens (null: none)
// The block's fixed shape (no dropout, rotary, pre-RMSNorm, gated feed-forward).
void llama_block_configure(const JsonFields& config, HfTensors& tensors, ModelConfig& cfg);
// A tied lm_head the file carries anyway must equal the input embedding.
void llama_block_finish(const ModelConfig& cfg, HfTensors& tensors, TensorMap& state);
// The tensor names: embed_tokens, q/k/v/o_proj, gate/up/down_proj, the two layer norms, norm, lm_head.
std::vector<HfTensorName> llama_block_tensor_names();
// Llama, Mistral, Qwen3: one attention_bias for q, k, v and o.
HfConfigKey attention_bias_key();
// Qwen2, Qwen3: use_sliding_window (a window on some layers only is refused); written false.
HfConfigKey use_sliding_window_key();
// Export: a decoder LM of that block (std::invalid_argument otherwise); errors in its words.
void llama_block_check(const ModelConfig& cfg);
// Export's allow-list: what every member's config says (the block, its biases, the rope), with `more`
// (Mistral's sliding_window, Phi-3's rotary_dim, Qwen3's qk_norm).
std::set<std::string> llama_block_config_fields(std::initializer_list<const char*> more);
// The row every member shares (keys, allow-list, tensor names, hooks); a member adds its own.
HfFamily llama_block_member(std::string model_type, std::string architecture);
[[noreturn]] void llama_block_bad(const std::string& what);
// torch_dtype as the model holds its weights; pad_token_id where the base config has none.
void llama_block_extras(const ModelConfig& cfg, const TransformerImpl& model, nlohmann::json& config);
bool llama_block_fits(const ModelConfig& cfg);  // rotary positions

}  // namespace hp::hf_detail
