// HuggingFace checkpoints: import BERT (BertModel, BertForSequenceClassification), GPT-2
// (GPT2Model, GPT2LMHeadModel) and the LLaMA family (LlamaForCausalLM, Qwen2ForCausalLM,
// MistralForCausalLM, Phi3ForCausalLM, Qwen3ForCausalLM: rotary positions, RMSNorm, SwiGLU,
// grouped-query attention), MarianMT (MarianMTModel: an encoder-decoder with sin | cos sinusoidal
// positions, a shared embedding table and final_logits_bias) and T5 (T5ForConditionalGeneration:
// relative position bias, unscaled attention, RMS-style norms);
// each family is one row of the registry (src/io/hf/family.h, private)
// from a directory with config.json and model.safetensors (or a sharded model.safetensors.index.json;
// F32, F16 and BF16 tensors are read as fp32), and export a (pruned) model back in HF's layout.
//
// Export has three layouts (HfLayout). pruned_heads, for BERT and GPT-2 when asked for: HF v4's pruned_heads
// with the kept heads' weights, sliced; transformers v4 loads it, v5 (which dropped head pruning)
// does not. dense: the config's head counts in every layer, every removed or masked query head's q
// rows and o columns zero and a removed key/value head's k/v rows zero (model/remove_heads.h,
// restore_head_shapes); any transformers version loads it and computes what the pruned model
// computes, without running faster (headprune's own checkpoint is the physically smaller one). native:
// a uniformly pruned LLaMA-family model as the smaller standard model (below). The LLaMA family has no
// pruned_heads in HF, and its runtimes expect one head count for every layer, so an uneven result is
// dense.
//
// Names are translated through each family's tensor-name table; fused tensors (GPT-2's transposed
// c_attn, Phi-3's qkv_proj and gate_up_proj) are split, and Conv1D weights transposed.
// Loading is strict: every tensor the model needs is present with the expected shape, and nothing
// is left over (except position-id and causal-mask buffers that older files carry). The config's
// `pruned_heads` ({"layer": [original head ids]}) is honoured: those heads are absent and the
// tensors hold only the kept heads, in original order. Export writes pruned_heads in HF's v4
// convention (num_attention_heads / n_head unchanged; the kept heads' weights, sliced).
// A directory with only pytorch_model.bin is an error that says how to convert it: LibTorch cannot
// unpickle it from C++, and unpickling runs code.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/io/load_options.h"
#include "headprune/io/safetensors.h"
#include "headprune/model/state.h"
#include "headprune/model/transformer.h"

namespace hp {

// True for a directory whose config.json has a "model_type" (and is not a headprune config).
bool is_hf_dir(const std::string& dir);
// The families for help texts: "llama, ... (native or dense); bert, gpt2 (dense or pruned_heads); marian (dense only)".
std::string hf_families_summary();

struct HfModel {
  Transformer model{nullptr};
  std::string model_type;                   // the family's config.json model_type ("bert", "llama" ...)
  nlohmann::json config;                    // the HF config as read
  std::vector<std::string> initialized;     // tensors the file lacked and that were initialized
                                            // (a BertModel has no classifier: it gets a fresh one)
};

// dir: config.json with model.safetensors, or with model.safetensors.index.json and its shards.
HfModel import_hf(const std::string& dir, const LoadOptions& options = {});
// Every tensor of a sharded checkpoint: each shard the index names must exist and hold exactly the
// tensors the index puts there (errors name the index or the shard).
TensorMap read_sharded_safetensors(const std::string& index_path);
// The same, from a config and tensors with HF names (what import_hf reads from the directory).
// Errors name `source` (the tensors' file) or `config_source` (the config's), whichever is at fault.
HfModel import_hf(const nlohmann::json& config, const TensorMap& tensors, const std::string& source,
                  const std::string& config_source = "config.json", const LoadOptions& options = {});

// native: the kept heads as an ordinary, smaller model — num_attention_heads, num_key_value_heads and
// head_dim of what is kept, the weights sliced — for a family whose config says head_dim (the LLaMA
// family) and a model that keeps the same number of query heads and of key/value heads in every layer,
// every key/value head serving as many query heads as the others (uniform; otherwise
// std::invalid_argument naming the layers). Every transformers version and every runtime reading HF
// checkpoints loads it as the smaller, faster model it is.
// Auto: native where the family has it and the model is uniform, else dense; pruned_heads only when
// asked for (transformers v5 ignores it), and std::invalid_argument for a family without it.
enum class HfLayout { Auto, PrunedHeads, Dense, Native };
HfLayout parse_hf_layout(const std::string& s);  // "auto", "pruned_heads", "dense", "native"

// The HF tensors and config of a model (masked heads are removed first). `base_config` (e.g.
// the imported one) supplies fields headprune does not model (id2label, token ids ...); the family is
// the base config's where it fits the model, else the one the model's shape says (hf_family_for:
// encoder_classifier -> BERT, decoder_lm -> GPT-2, rotary -> Llama, Mistral or Qwen2). A model that
// HF's classes cannot express (sinusoidal positions, pre-LayerNorm BERT ...) is std::invalid_argument.
struct HfExport {
  nlohmann::json config;
  // By HF name; each made when it is written (the LLaMA family restores one layer's attention at a
  // time from the model's own tensors: no second copy of a large model).
  std::map<std::string, LazyTensor> tensors;
  HfLayout layout = HfLayout::Dense;  // the one written (auto resolved)
};
HfExport to_hf(TransformerImpl& model, const nlohmann::json& base_config = nlohmann::json::object(),
               HfLayout layout = HfLayout::Auto);
// Writes dir/config.json and dir/model.safetensors atomically; returns the layout written.
HfLayout export_hf(const std::string& dir, TransformerImpl& model,
               const nlohmann::json& base_config = nlohmann::json::object(), HfLayout layout = HfLayout::Auto);

}  // namespace hp
