// Private to src/io: the HF architecture registry: one row (HfFamily) per HF model_type, each in its own file under
// src/io/hf/ and named once in src/io/hf/families.def. A row says everything headprune knows of a
// family: its config keys (each HfConfigKey reads a config.json key into ModelConfig and writes it
// back: both directions from one row), its tensor-name table (HfTensorName: HF module <-> headprune
// module, per layer, fused tensors split and fused by one helper, cross-attention included), which
// export layouts HF can load for it, and the few things a table cannot say (hooks). Import, export,
// `info` and the exporters read the row; nothing else decides the family.
// Each family file keeps its hooks in its own namespace, hp::hf::<name>, and defines
// `const HfFamily& hp::hf::<name>::family()`. Adding a family: docs/architecture.md, "Add an HF family".
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/config.h"
#include "headprune/io/hf.h"
#include "headprune/util/json_fields.h"

namespace hp {

namespace hf_detail {
class HfTensors;  // the file's tensors, taken out one by one (src/io/hf/tensors.h)
}

// One config.json key and the ModelConfig field(s) it stands for.
struct HfConfigKey {
  std::string key;
  // Import: reads the key (absent: the default) into the config. Empty: not read.
  std::function<void(const JsonFields& config, ModelConfig& cfg)> read;
  // Export: the value to write (null is written as null). Empty: not written.
  std::function<nlohmann::json(const ModelConfig& cfg)> write;
};
// A required integer; an optional one with its default; a number; a flag.
HfConfigKey hf_key(std::string key, int64_t ModelConfig::*field);
HfConfigKey hf_key(std::string key, int64_t ModelConfig::*field, int64_t dflt);
HfConfigKey hf_key(std::string key, double ModelConfig::*field, double dflt);
HfConfigKey hf_key(std::string key, bool ModelConfig::*field, bool dflt);
// The activation (HF's names: gelu, gelu_new, relu, silu ...).
HfConfigKey hf_activation_key(std::string key, std::string dflt);
// A key headprune supports one value of: absent or `value` reads fine, anything else is an error;
// written as `value` when `written`.
HfConfigKey hf_fixed_key(std::string key, nlohmann::json value, bool written = true);
// An encoder-decoder's decoder_start_token_id: absent or the padding id (read before it) reads fine,
// anything else is an error naming the field (decoding starts from the padding id). Not written.
HfConfigKey hf_decoder_start_key();

// Where a tensor-name row applies: once per model, or once per encoder or decoder layer.
enum class HfScope { Model, EncoderLayer, DecoderLayer };
// How HF stores a matrix: Linear [out, in] as headprune does, or Conv1D [in, out] (GPT-2).
enum class HfStorage { Linear, Conv1D };
enum class HfPresence {
  Always,    // the file must hold it
  Optional,  // absent: headprune initializes it (BERT's pooler and classifier, which BertModel lacks)
  Untied,    // only when the output embedding is not tied to the input one (lm_head)
};
// One HF module and the headprune module(s) it holds: its weight, and its bias where the headprune
// module has one. Several headprune modules: one fused HF tensor, their rows in this order
// (GPT-2's c_attn holds q, k, v; Phi-3's gate_up_proj holds gate, up). "{L}" stands for the layer.
struct HfTensorName {
  HfScope scope;
  std::string hf;                 // without the family's prefix
  std::vector<std::string> ours;  // headprune module names
  HfStorage storage = HfStorage::Linear;
  HfPresence presence = HfPresence::Always;
  bool prefixed = true;           // false: never under the family's prefix (lm_head, classifier)
};

// A family's row. Families build it member by member by name (src/io/hf/<family>.cc), never by position.
struct HfFamily {
  std::string model_type;    // config.json's model_type
  std::string architecture;  // the class export names in "architectures"
  std::string prefix;        // the optional prefix of the body's tensors ("bert.", "model.")
  std::vector<HfConfigKey> keys;
  // Export's allow-list: the ModelConfig fields (config.json keys of headprune's checkpoint) this
  // family's config and tensors can say. Any other field with a non-default value is refused, naming
  // it (require_expressible in config.h); `check` then tests the values of the listed ones.
  std::set<std::string> config_fields;
  std::vector<HfTensorName> tensors;
  std::vector<std::string> ignorable;  // name suffixes of buffers older files carry (not weights)
  bool pruned_heads = false;   // HF v4's pruned_heads can express a pruned model (else dense only)
  bool deferred_init = false;  // every parameter comes from the file: build without initializing
  // Export: whether this family can hold a model of this shape, and whether it is the one to choose
  // with no HF config to go by (exactly one family that fits should guess true).
  std::function<bool(const ModelConfig&)> fits;
  std::function<bool(const ModelConfig&)> guess;
  // What the tables cannot say. configure: import, after the keys are read and before finalize
  // (architecture, norms, pruned_heads ...). finish: import, after the tensors are moved (ties).
  // check: export, throws std::invalid_argument for what HF's class cannot express. extras: export,
  // config fields beyond the keys.
  std::function<void(const JsonFields& config, hf_detail::HfTensors& tensors, ModelConfig& cfg)> configure;
  std::function<void(const ModelConfig& cfg, hf_detail::HfTensors& tensors, TensorMap& state)> finish;
  std::function<void(const ModelConfig& cfg)> check;
  std::function<void(const ModelConfig& cfg, const TransformerImpl& model, nlohmann::json& config)> extras;
  // Export, after the table's tensors: tensors a table row cannot say (one HF tensor for several of
  // headprune's, such as Marian's shared embeddings; buffers), from headprune's tensors by name (`ours`;
  // undefined-valued LazyTensor never), with the config fields that describe them.
  std::function<void(const ModelConfig& cfg, const std::function<LazyTensor(const std::string&)>& ours,
                     nlohmann::json& config, std::map<std::string, LazyTensor>& tensors)>
      export_tensors;
};

// Whether the family's config can say the kept head counts of a uniformly pruned decoder (it writes
// head_dim, so num_attention_heads need not fill hidden_size): io/hf.h's native layout.
bool hf_native_heads(const HfFamily& f);

// Every family, sorted by model_type.
const std::vector<const HfFamily*>& hf_families();
// The family of a model_type; unknown: std::runtime_error naming `source` and the supported ones.
const HfFamily& hf_family(const std::string& model_type, const std::string& source);
// The family a model is exported as: the base config's model_type where that family fits the model,
// else the family whose guess says so; none: std::invalid_argument.
const HfFamily& hf_family_for(const ModelConfig& cfg, const nlohmann::json& base_config);

// Import and export through a row (src/io/hf/engine.cc).
HfModel import_family(const HfFamily& f, const nlohmann::json& config, const TensorMap& tensors,
                      const std::string& source, const std::string& config_source, const LoadOptions& options);
HfExport export_family(const HfFamily& f, TransformerImpl& model, const nlohmann::json& base_config, HfLayout layout);

}  // namespace hp
