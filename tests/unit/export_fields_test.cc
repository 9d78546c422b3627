// Exports as strict as imports, field by field: every ModelConfig field (config_field_keys()) is set
// to a valid non-default value on small models of every HF family (the configs of the HF fixtures),
// and every exporter (HF, GGUF, ONNX) must either write a model that computes the same logits (HF:
// re-imported and run; GGUF, ONNX: written) or refuse it with an error that names the field. A field
// added to ModelConfig without a mutation here fails ExportFields.EveryConfigFieldHasAMutation; one
// that an exporter writes without its allow-list saying so is refused there by require_expressible.
#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "headprune/io/gguf_model.h"
#include "headprune/io/hf.h"
#include "headprune/io/onnx_model.h"
#include "headprune/model/state.h"
#include "test_util.h"

namespace hp {
namespace {

using Mutation = std::function<void(ModelConfig&)>;

void all_heads(ModelConfig& c) {
  for (AttnType t : kAllAttnTypes) c.heads(t).clear();
}

bool is_encoder_decoder(const ModelConfig& c) { return c.arch == Arch::EncoderDecoder; }

// Each field of config.json to a valid value other than the base's (a base it does not suit throws
// from finalize or leaves the config unchanged, and is skipped).
const std::map<std::string, Mutation>& mutations() {
  static const std::map<std::string, Mutation> m = {
      {"arch", [](ModelConfig& c) {  // a decoder LM's layers as a classifier's, or the other way round
         if (c.arch == Arch::DecoderLM)
           c.arch = Arch::EncoderClassifier, c.n_encoder_layers = c.n_decoder_layers, c.n_decoder_layers = 0, c.n_classes = 2;
         else if (c.arch == Arch::EncoderClassifier)
           c.arch = Arch::DecoderLM, c.n_decoder_layers = c.n_encoder_layers, c.n_encoder_layers = 0, c.n_classes = 0;
         all_heads(c);
       }},
      {"vocab_size", [](ModelConfig& c) { c.vocab_size += 8; }},
      {"tgt_vocab_size", [](ModelConfig& c) { c.tgt_vocab_size = c.vocab_size - 4, c.share_embeddings = false; }},
      {"d_model", [](ModelConfig& c) { c.d_model += 8; }},
      {"d_ff", [](ModelConfig& c) { c.d_ff += 8; }},
      {"n_heads", [](ModelConfig& c) { c.n_heads *= 2, all_heads(c); }},
      {"head_dim", [](ModelConfig& c) { c.head_dim += 2; }},
      {"n_kv_heads", [](ModelConfig& c) { c.n_kv_heads = c.effective_kv_heads() > 1 ? c.effective_kv_heads() / 2 : c.n_heads; }},
      {"qkv_bias", [](ModelConfig& c) { c.qkv_bias = !c.qkv_bias; }},
      {"o_bias", [](ModelConfig& c) { c.o_bias = !c.o_bias; }},
      {"mlp_bias", [](ModelConfig& c) { c.mlp_bias = !c.mlp_bias; }},
      {"qk_norm", [](ModelConfig& c) { c.qk_norm = !c.qk_norm; }},
      {"gated_ffn", [](ModelConfig& c) { c.gated_ffn = !c.gated_ffn; }},
      {"norm_kind", [](ModelConfig& c) {
         c.norm_kind = c.norm_kind == NormKind::LayerNorm ? NormKind::RmsNorm : NormKind::LayerNorm;
       }},
      {"rope_theta", [](ModelConfig& c) { c.rope_theta = 5000.0; }},
      {"rope_scaling", [](ModelConfig& c) { c.rope_scaling.type = RopeScalingType::Linear, c.rope_scaling.factor = 2.0; }},
      {"rotary_dim", [](ModelConfig& c) { c.rotary_dim = c.head_dim / 2; }},
      {"relative_buckets", [](ModelConfig& c) { c.relative_buckets = 16; }},
      {"relative_max_distance", [](ModelConfig& c) { c.relative_max_distance = 64; }},
      {"scaled_attention", [](ModelConfig& c) { c.scaled_attention = !c.scaled_attention; }},
      {"output_scale", [](ModelConfig& c) { c.output_scale *= 0.5; }},
      {"sliding_window", [](ModelConfig& c) { c.sliding_window = c.sliding_window > 0 ? 0 : 6; }},
      {"n_encoder_layers", [](ModelConfig& c) {
         if (c.n_encoder_layers > 0) c.n_encoder_layers += 1, all_heads(c);
       }},
      {"n_decoder_layers", [](ModelConfig& c) {
         if (c.n_decoder_layers > 0) c.n_decoder_layers += 1, all_heads(c);
       }},
      {"dropout", [](ModelConfig& c) { c.dropout = 0.3; }},
      {"attention_dropout", [](ModelConfig& c) { c.attention_dropout = 0.3; }},
      {"activation_dropout", [](ModelConfig& c) { c.activation_dropout = 0.3; }},
      {"max_positions", [](ModelConfig& c) { c.max_positions += 16; }},
      {"positional", [](ModelConfig& c) {
         c.positional = c.positional == Positional::Learned ? Positional::Sinusoidal : Positional::Learned;
       }},
      {"split_sinusoid", [](ModelConfig& c) { c.split_sinusoid = !c.split_sinusoid; }},
      {"activation", [](ModelConfig& c) { c.activation = c.activation == Activation::Relu ? Activation::Silu : Activation::Relu; }},
      {"norm", [](ModelConfig& c) { c.norm = c.norm == NormPosition::Pre ? NormPosition::Post : NormPosition::Pre; }},
      {"embed_layer_norm", [](ModelConfig& c) { c.embed_layer_norm = !c.embed_layer_norm; }},
      {"tie_embeddings", [](ModelConfig& c) { c.tie_embeddings = !c.tie_embeddings; }},
      {"logits_bias", [](ModelConfig& c) { c.logits_bias = !c.logits_bias; }},
      {"share_embeddings", [](ModelConfig& c) {
         if (is_encoder_decoder(c)) c.share_embeddings = !c.share_embeddings;
       }},
      {"n_segments", [](ModelConfig& c) { c.n_segments += 1; }},
      {"n_classes", [](ModelConfig& c) {
         if (c.arch == Arch::EncoderClassifier) c.n_classes += 2;
       }},
      {"layer_norm_eps", [](ModelConfig& c) { c.layer_norm_eps = 1e-3; }},
      {"pad_id", [](ModelConfig& c) { c.pad_id = 3; }},
      {"heads", [](ModelConfig& c) {  // the first head of every layer removed
         for (AttnType t : c.attn_types())
           for (auto& layer : c.heads(t))
             if (layer.size() > 1) layer.erase(layer.begin());
       }},
  };
  return m;
}

// The bases: an imported HF fixture's config (finalized) and its config.json, the base config export
// starts from.
struct Base {
  std::string name;
  ModelConfig cfg;
  nlohmann::json hf_config;
};

const std::vector<Base>& bases() {
  static const std::vector<Base> b = [] {
    std::vector<Base> out;
    for (const char* name : {"bert", "gpt2", "llama_gqa", "mistral_window", "phi3_partial_rotary", "qwen2_tied",
                             "qwen3_qk_norm", "t5_relu", "t5_gated", "marian_tiny"}) {
      auto hf = import_hf(test::hf_fixture(name));
      out.push_back({name, hf.model->config(), hf.config});
    }
    return out;
  }();
  return b;
}

enum class Outcome { Skipped, Written, Refused };

// The mutated config, finalized; nullopt when the mutation does not apply to this base.
std::optional<ModelConfig> mutated(const Base& base, const Mutation& m) {
  ModelConfig c = base.cfg;
  m(c);
  try {
    c.finalize();
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (c.to_json() == base.cfg.to_json()) return std::nullopt;
  return c;
}

// The fields whose config.json entries differ between two configs.
std::set<std::string> changed_fields(const ModelConfig& a, const ModelConfig& b) {
  const nlohmann::json ja = a.to_json(), jb = b.to_json();
  std::set<std::string> out;
  for (const auto& k : config_field_keys())
    if (ja.value(k, nlohmann::json()) != jb.value(k, nlohmann::json())) out.insert(k);
  return out;
}

// Runs `write`; a refusal must name one of the `changed` fields (a mutation such as arch changes
// several), or, for HF, come from another family than the base's (`family`): the change made the export
// choose it, and its allow-list names a field of the model ("HF export (gpt2): the model's n_kv_heads").
Outcome attempt(const std::set<std::string>& changed, const std::string& family, const std::string& where,
                const std::function<void()>& write) {
  try {
    write();
    return Outcome::Written;
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    const std::string prefix = "HF export (";
    bool named = !family.empty() && what.rfind(prefix, 0) == 0 && what.rfind(prefix + family + ")", 0) != 0 &&
                 what.find("the model's ") != std::string::npos;
    for (const auto& k : changed) named = named || what.find(k) != std::string::npos;
    EXPECT_TRUE(named) << where << ": the refusal names none of the changed fields: " << what;
    return Outcome::Refused;
  }
}

// HF: written, then read back, and the logits equal the model's.
void hf_round_trip(TransformerImpl& model, const Base& base, const std::string& where) {
  HfExport out = to_hf(model, base.hf_config);
  TensorMap tensors;
  for (const auto& [name, t] : out.tensors) tensors[name] = t.make();
  auto back = import_hf(out.config, tensors, where);
  back.model->eval();
  const Batch batch = test::make_batch(model.config(), 5, 2);
  EXPECT_LT(test::max_abs_diff(test::logits(model, batch), test::logits(*back.model, batch)), 1e-4)
      << where << ": the re-imported model computes other logits";
}


TEST(ExportFields, EveryConfigFieldHasAMutation) {
  std::set<std::string> keys;
  for (const auto& k : config_field_keys()) {
    keys.insert(k);
    EXPECT_TRUE(mutations().count(k)) << "config field '" << k << "' has no mutation in export_fields_test.cc";
  }
  for (const auto& [k, m] : mutations()) EXPECT_TRUE(keys.count(k)) << "mutation of '" << k << "': no such config field";
}

// The exporters, each with the archs it takes: writes `model` or throws std::invalid_argument.
struct Exporter {
  std::string name;
  std::function<bool(const ModelConfig&)> takes;
  std::function<void(TransformerImpl& model, const Base& base, const std::string& where)> write;
};

const std::vector<Exporter>& exporters() {
  static const std::vector<Exporter> e = {
      {"hf", [](const ModelConfig&) { return true; }, hf_round_trip},
      {"gguf", [](const ModelConfig& c) { return c.arch == Arch::DecoderLM; },
       [](TransformerImpl& m, const Base&, const std::string&) {
         to_gguf(m, test::tiny_gguf_vocab(m.config().vocab_size), GgmlType::F32, "t");
       }},
      {"onnx", [](const ModelConfig& c) { return c.arch != Arch::EncoderDecoder; },
       [](TransformerImpl& m, const Base&, const std::string&) { to_onnx(m); }},
  };
  return e;
}

// Whether the exporter writes the unchanged base (a base it refuses says nothing of a changed field).
bool writes_base(const Exporter& e, const Base& base) {
  if (!e.takes(base.cfg)) return false;
  Transformer model = test::make_model(base.cfg, 3);
  model->eval();
  try {
    e.write(*model, base, base.name);
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

// Every field, on every base it applies to, in every exporter that writes the base: written (and, for
// HF, the same logits after the round trip) or refused naming the field. Prints the outcome table.
TEST(ExportFields, EachExporterWritesAFieldFaithfullyOrRefusesItByName) {
  std::map<std::string, std::map<std::string, std::string>> table;  // field -> exporter -> outcomes
  std::map<std::string, int> applied;
  for (const auto& base : bases()) {
    for (const auto& e : exporters()) {
      if (!writes_base(e, base)) {
        EXPECT_NE(e.name, "hf") << "HF export refuses the imported fixture " << base.name;
        continue;
      }
      for (const auto& [key, m] : mutations()) {
        const auto cfg = mutated(base, m);
        if (!cfg || !e.takes(*cfg)) continue;
        ++applied[key];
        Transformer model = test::make_model(*cfg, 3);
        model->eval();
        const std::string where = base.name + " with " + key + " changed";
        const std::string family = e.name == "hf" ? base.hf_config.value("model_type", "") : "";
        const Outcome o = attempt(changed_fields(base.cfg, *cfg), family, e.name + ", " + where,
                                  [&] { e.write(*model, base, where); });
        table[key][e.name] += (o == Outcome::Written ? "+" : "-") + base.name + " ";
        if (training_only_config_fields().count(key)) {
          EXPECT_EQ(o, Outcome::Written) << e.name << ", " << where << ": a training-only field";
        }
      }
    }
  }
  for (const auto& k : config_field_keys()) EXPECT_GT(applied[k], 0) << "no base takes a changed '" << k << "'";
  for (const auto& [key, by] : table) {
    std::string line = key + ":";
    for (const auto& [exporter, outcomes] : by) line += " " + exporter + "[" + outcomes + "]";
    std::cout << line << "\n";
  }
}

}  // namespace
}  // namespace hp
