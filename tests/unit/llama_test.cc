// The LLaMA family: parity with the reference implementation (tests/fixtures/hf/make_llama_fixtures.py)
// for Llama (GQA, untied, llama3 RoPE scaling), Qwen2 (q/k/v biases, tied), Mistral (sliding window)
// and a sharded BF16 Llama (linear RoPE scaling, every bias); query heads and whole key/value groups
// masked and removed; the dense masked HF export; KV-cache decoding; bad input.
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "headprune/data/hf_tokenizers.h"
#include "headprune/data/model_dir.h"
#include "headprune/decode/search.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/hf.h"
#include "headprune/io/safetensors.h"
#include "headprune/jobs/generate_job.h"
#include "headprune/model/geometry.h"
#include "headprune/model/remove_heads.h"
#include "headprune/model/rotary.h"
#include "test_util.h"

namespace hp {
namespace {

namespace fs = std::filesystem;

const char* const kLlamaFixtures[] = {"llama_gqa",  "qwen2_tied",    "mistral_window",     "llama_sharded_bf16",
                                      "phi3_fused", "qwen3_qk_norm", "phi3_partial_rotary"};

struct LlamaGolden {
  TensorMap t;
  Batch batch;
  explicit LlamaGolden(const std::string& name) : t(read_safetensors(test::hf_fixture(name) + "/golden.safetensors").tensors) {
    batch.input_ids = t.at("input_ids");
    batch.attention_mask = t.at("attention_mask");
  }
  // Largest difference over the real (not padded) positions.
  double diff(const torch::Tensor& logits, const std::string& key) const {
    const auto keep = batch.attention_mask.to(torch::kBool).unsqueeze(-1).expand_as(logits);
    return test::max_abs_diff(logits.masked_select(keep), t.at(key).masked_select(keep));
  }
};

using test::logits;

// The heads a golden mask [layers, heads] sets to 0.
std::vector<HeadId> zeros_of(const torch::Tensor& mask) {
  std::vector<HeadId> out;
  for (int64_t l = 0; l < mask.size(0); ++l)
    for (int64_t h = 0; h < mask.size(1); ++h)
      if (mask[l][h].item<double>() == 0.0) out.push_back({AttnType::DecoderSelf, l, h});
  return out;
}

TEST(LlamaHf, MatchesTheReferenceWithHeadsAndGroupsMasked) {
  LoadOptions fp32;  // the references are computed in fp32 (the BF16 fixture's too)
  fp32.dtype = torch::kFloat;
  for (const char* name : kLlamaFixtures) {
    SCOPED_TRACE(name);
    auto hf = import_hf(test::hf_fixture(name), fp32);
    const auto& cfg = hf.model->config();
    EXPECT_EQ(cfg.positional, Positional::Rotary);
    EXPECT_EQ(cfg.norm_kind, NormKind::RmsNorm);
    EXPECT_TRUE(cfg.gated_ffn);
    EXPECT_LT(cfg.effective_kv_heads(), cfg.n_heads) << "fixtures use grouped-query attention";
    const LlamaGolden g(name);
    EXPECT_LT(g.diff(logits(*hf.model, g.batch), "logits"), 1e-4);
    for (const char* which : {"q", "group"}) {
      SCOPED_TRACE(which);
      const auto heads = zeros_of(g.t.at(std::string("mask_") + which));
      ASSERT_FALSE(heads.empty());
      hf.model->unmask_all();
      hf.model->mask_heads(heads);
      EXPECT_LT(g.diff(logits(*hf.model, g.batch), std::string("logits_masked_") + which), 1e-4);
      // Removed physically: the same logits.
      hf.model->unmask_all();
      auto pruned = remove_heads(*hf.model, heads);
      EXPECT_LT(g.diff(logits(*pruned, g.batch), std::string("logits_masked_") + which), 1e-4);
    }
  }
  const auto qwen = import_hf(test::hf_fixture("qwen2_tied")).model->config();
  EXPECT_TRUE(qwen.tie_embeddings && qwen.qkv_bias && !qwen.o_bias);
  EXPECT_EQ(import_hf(test::hf_fixture("mistral_window")).model->config().sliding_window, 3);
  EXPECT_EQ(import_hf(test::hf_fixture("llama_gqa")).model->config().rope_scaling.type, RopeScalingType::Llama3);
}

// The address ranges of this process's mappings of files whose path ends with `suffix`.
std::vector<std::pair<uintptr_t, uintptr_t>> mappings_of(const std::string& suffix) {
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.size() < suffix.size() || line.compare(line.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    uintptr_t a = 0, b = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &a, &b) == 2) out.push_back({a, b});
  }
  return out;
}

TEST(LlamaHf, Bf16WeightsStayBf16InTheMappedFiles) {
  // Loaded as stored: every weight is BF16 and lies inside a mapping of a shard file (no fp32 copy,
  // no copy at all); computed in bf16, the logits are the fp32 reference's to bf16's precision.
  auto hf = import_hf(test::hf_fixture("llama_sharded_bf16"));
  std::vector<std::pair<uintptr_t, uintptr_t>> maps;
  for (const char* shard : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}) {
    const auto m = mappings_of(shard);
    maps.insert(maps.end(), m.begin(), m.end());
  }
  ASSERT_FALSE(maps.empty());
  for (const auto& p : hf.model->named_parameters()) {
    SCOPED_TRACE(p.key());
    EXPECT_EQ(p.value().scalar_type(), torch::kBFloat16);
    const auto at = reinterpret_cast<uintptr_t>(p.value().data_ptr());
    EXPECT_TRUE(std::any_of(maps.begin(), maps.end(), [&](const auto& r) { return at >= r.first && at < r.second; }));
  }
  const LlamaGolden g("llama_sharded_bf16");
  const auto out = logits(*hf.model, g.batch);
  EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
  const double scale = g.t.at("logits").abs().max().item<double>();
  EXPECT_LT(g.diff(out.to(torch::kFloat), "logits"), 0.05 * scale);
  // The same heads removed in bf16: the pruned model keeps the untouched layers' mapped weights.
  const std::vector<HeadId> drop = zeros_of(g.t.at("mask_group"));
  auto pruned = remove_heads(*hf.model, drop, /*share_untouched=*/true);
  EXPECT_EQ(pruned->decoder->embed_tokens->weight.data_ptr(), hf.model->decoder->embed_tokens->weight.data_ptr());
  hf.model->mask_heads(drop);
  // Masked heads leave o_proj's product as removed ones do, and the attention core rounds once, so
  // masked and removed round alike in bf16 (issue 51 asks <= 1e-2; it was 0.03 here).
  const double masked_vs_removed =
      test::max_abs_diff(logits(*pruned, g.batch).to(torch::kFloat), logits(*hf.model, g.batch).to(torch::kFloat));
  RecordProperty("bf16_masked_vs_removed", std::to_string(masked_vs_removed));
  EXPECT_LE(masked_vs_removed, 1e-2);
}

TEST(LlamaHf, PrunedCheckpointAndDenseExportRoundTrip) {
  test::TempDir tmp;
  auto hf = import_hf(test::hf_fixture("llama_gqa"));
  const LlamaGolden g("llama_gqa");
  // Query heads within groups (layer 0 head 1; layer 1 head 3) and the whole group 0 of layer 1.
  const std::vector<HeadId> drop = {{AttnType::DecoderSelf, 0, 1}, {AttnType::DecoderSelf, 1, 0},
                                    {AttnType::DecoderSelf, 1, 1}, {AttnType::DecoderSelf, 1, 3}};
  hf.model->mask_heads(drop);
  const auto masked = logits(*hf.model, g.batch);
  hf.model->unmask_all();
  auto pruned = remove_heads(*hf.model, drop);
  const int64_t D = pruned->config().head_dim;
  EXPECT_EQ(pruned->attention(AttnType::DecoderSelf, 0).k_proj->weight.size(0), 2 * D) << "group of head 1 stays";
  EXPECT_EQ(pruned->attention(AttnType::DecoderSelf, 1).q_proj->weight.size(0), 1 * D);
  EXPECT_EQ(pruned->attention(AttnType::DecoderSelf, 1).k_proj->weight.size(0), 1 * D) << "group 0 of layer 1 left";
  save_checkpoint(tmp / "pruned", *pruned);
  auto reloaded = load_checkpoint(tmp / "pruned");
  EXPECT_EQ(reloaded->config().decoder_self_heads, (std::vector<std::vector<int64_t>>{{0, 2, 3}, {2}}));
  EXPECT_LT(test::max_abs_diff(logits(*reloaded, g.batch), masked), 1e-5);

  // Dense masked export: full head counts, removed heads zero; any HF loader computes the same.
  export_hf(tmp / "hf", *reloaded, hf.config);
  const auto exported = read_json_file(tmp / "hf/config.json");
  EXPECT_EQ(exported.at("num_attention_heads"), 4);
  EXPECT_EQ(exported.at("num_key_value_heads"), 2);
  EXPECT_EQ(exported.at("model_type"), "llama");
  EXPECT_FALSE(exported.contains("pruned_heads"));
  auto again = import_hf(tmp / "hf");
  EXPECT_EQ(again.model->config().decoder_self_heads, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {0, 1, 2, 3}}));
  EXPECT_LT(test::max_abs_diff(logits(*again.model, g.batch), masked), 1e-5);
  // A masked (not removed) model exports the same.
  hf.model->mask_heads(drop);
  export_hf(tmp / "hf_masked", *hf.model, hf.config);
  EXPECT_LT(test::max_abs_diff(logits(*import_hf(tmp / "hf_masked").model, g.batch), masked), 1e-5);
  // Qwen2 (biases on q, k, v; tied) exports as Qwen2.
  auto qwen = import_hf(test::hf_fixture("qwen2_tied"));
  qwen.model->set_head_mask({AttnType::DecoderSelf, 0, 4}, 0.0);
  export_hf(tmp / "qwen", *qwen.model, qwen.config);
  EXPECT_EQ(read_json_file(tmp / "qwen/config.json").at("model_type"), "qwen2");
  const LlamaGolden gq("qwen2_tied");
  EXPECT_LT(test::max_abs_diff(logits(*import_hf(tmp / "qwen").model, gq.batch), logits(*qwen.model, gq.batch)), 1e-5);
  // A pruned Mistral saved as a headprune checkpoint has no HF config left: its sliding window says
  // Mistral (the transformers client check found it exported as a Llama and refused).
  auto mistral = import_hf(test::hf_fixture("mistral_window"));
  auto mistral_pruned = remove_heads(*mistral.model, {{AttnType::DecoderSelf, 1, 2}});
  save_checkpoint(tmp / "mistral_pruned", *mistral_pruned);
  export_hf(tmp / "mistral_hf", *load_checkpoint(tmp / "mistral_pruned"));
  const auto mc = read_json_file(tmp / "mistral_hf/config.json");
  EXPECT_EQ(mc.at("model_type"), "mistral");
  EXPECT_EQ(mc.at("sliding_window"), 3);
  const LlamaGolden gm("mistral_window");
  EXPECT_LT(test::max_abs_diff(logits(*import_hf(tmp / "mistral_hf").model, gm.batch), logits(*mistral_pruned, gm.batch)),
            1e-5);
}

// An export of a fixture's unpruned model holds the fixture's tensors, tensor for tensor; returns them.
TensorMap expect_export_unchanged(const std::string& name, const std::string& exported) {
  const auto original = read_safetensors(test::hf_fixture(name) + "/model.safetensors").tensors;
  const auto written = read_safetensors(exported + "/model.safetensors").tensors;
  EXPECT_EQ(written.size(), original.size());
  for (const auto& [tensor, t] : original) {
    SCOPED_TRACE(tensor);
    const auto it = written.find(tensor);
    if (it == written.end()) ADD_FAILURE() << "missing from the export";
    else EXPECT_TRUE(torch::equal(it->second, t));
  }
  return original;
}

// Qwen3 is the LLaMA block with q_norm/k_norm over head_dim (io/hf/qwen3.cc): imported as qk_norm,
// exported unchanged, and a pruned model exports dense as Qwen3 with the norms whole (they belong to
// no head) and re-imports to the masked logits, from a native checkpoint too.
// A uniform result (the same query heads per key/value group and the same groups in every layer) is an
// ordinary smaller model: auto exports it natively, with the kept head counts and head_dim (issue 79),
// for every LLaMA-family member; transformers, vLLM and the rest load it as that smaller model.
TEST(LlamaHf, UniformPruningExportsTheSmallerModelNatively) {
  test::TempDir tmp;
  for (const char* name : {"llama_gqa", "mistral_window", "qwen2_tied", "qwen3_qk_norm", "phi3_fused", "phi3_partial_rotary"}) {
    auto hf = import_hf(test::hf_fixture(name));
    const LlamaGolden g(name);
    const ModelConfig c = hf.model->config();
    const int64_t H = c.n_heads, G = c.effective_kv_heads(), R = H / G, D = c.head_dim;
    // Case 1: one query head of every group (every other head without groups); case 2: key/value group 0.
    for (int which : {1, 2}) {
      if (which == 2 && G < 2) continue;
      SCOPED_TRACE(std::string(name) + " case " + std::to_string(which));
      std::vector<HeadId> drop;
      for (int64_t l = 0; l < c.n_decoder_layers; ++l)
        for (int64_t h = 0; h < H; ++h)
          if (which == 1 ? (R > 1 ? h % R == R - 1 : h % 2 == 1) : h / R == 0) drop.push_back({AttnType::DecoderSelf, l, h});
      const int64_t kept_q = H - static_cast<int64_t>(drop.size()) / c.n_decoder_layers;
      const int64_t kept_kv = which == 2 ? G - 1 : (R > 1 ? G : kept_q);
      hf.model->mask_heads(drop);
      const auto masked = logits(*hf.model, g.batch);
      const std::string dir = tmp / (std::string(name) + std::to_string(which));
      EXPECT_EQ(export_hf(dir, *hf.model, hf.config), HfLayout::Native);
      hf.model->unmask_all();
      const auto cfg = read_json_file(dir + "/config.json");
      EXPECT_EQ(cfg.at("num_attention_heads"), kept_q);
      EXPECT_EQ(cfg.at("num_key_value_heads"), kept_kv);
      EXPECT_EQ(cfg.at("head_dim"), D);
      EXPECT_EQ(cfg.at("hidden_size"), c.d_model);
      // The attention weights shrink by the removed fraction.
      const auto t = read_safetensors(dir + "/model.safetensors").tensors;
      const bool fused = t.count("model.layers.0.self_attn.qkv_proj.weight") > 0;
      if (fused) {
        EXPECT_EQ(t.at("model.layers.0.self_attn.qkv_proj.weight").size(0), (kept_q + 2 * kept_kv) * D);
      } else {
        EXPECT_EQ(t.at("model.layers.0.self_attn.q_proj.weight").size(0), kept_q * D);
        EXPECT_EQ(t.at("model.layers.1.self_attn.k_proj.weight").size(0), kept_kv * D);
      }
      EXPECT_EQ(t.at("model.layers.1.self_attn.o_proj.weight").size(1), kept_q * D);
      // Read back as any HF loader reads it: a smaller dense model computing the masked model's logits.
      auto again = import_hf(dir);
      EXPECT_EQ(again.model->config().n_heads, kept_q);
      EXPECT_TRUE(again.model->masked_heads().empty());
      EXPECT_LT(test::max_abs_diff(logits(*again.model, g.batch), masked), 1e-5);
    }
  }
  // Uneven layers: auto stays dense, native is refused naming the counts; BERT has no native form.
  auto llama = import_hf(test::hf_fixture("llama_gqa"));
  llama.model->mask_heads({{AttnType::DecoderSelf, 0, 1}});
  EXPECT_EQ(to_hf(*llama.model, llama.config).layout, HfLayout::Dense);
  EXPECT_NE(test::error_of([&] { to_hf(*llama.model, llama.config, HfLayout::Native); }).find("layers keep [3,4] query heads"),
            std::string::npos);
  llama.model->unmask_all();
  llama.model->mask_heads({{AttnType::DecoderSelf, 0, 0}, {AttnType::DecoderSelf, 1, 0}, {AttnType::DecoderSelf, 0, 3},
                           {AttnType::DecoderSelf, 1, 3}});  // each layer: both groups keep one head
  EXPECT_EQ(to_hf(*llama.model, llama.config).layout, HfLayout::Native);
  llama.model->unmask_all();
  llama.model->mask_heads({{AttnType::DecoderSelf, 0, 0}, {AttnType::DecoderSelf, 1, 0}});  // groups keep 1 and 2
  EXPECT_NE(test::error_of([&] { to_hf(*llama.model, llama.config, HfLayout::Native); }).find("serve different numbers"),
            std::string::npos);
  auto bert = import_hf(test::hf_fixture("bert"));
  EXPECT_NE(test::error_of([&] { to_hf(*bert.model, bert.config, HfLayout::Native); }).find("LLaMA family"), std::string::npos);
  EXPECT_EQ(parse_hf_layout("native"), HfLayout::Native);
}

TEST(LlamaHf, Qwen3QkNormRoundTrips) {
  test::TempDir tmp;
  auto q = import_hf(test::hf_fixture("qwen3_qk_norm"));
  EXPECT_EQ(q.model_type, "qwen3");
  const auto& cfg = q.model->config();
  EXPECT_TRUE(cfg.qk_norm);
  EXPECT_EQ(cfg.head_dim, 16);
  EXPECT_FALSE(cfg.qkv_bias);
  export_hf(tmp / "same", *q.model, q.config);
  const auto original = expect_export_unchanged("qwen3_qk_norm", tmp / "same");
  const LlamaGolden g("qwen3_qk_norm");
  const std::vector<HeadId> drop = {{AttnType::DecoderSelf, 0, 0}, {AttnType::DecoderSelf, 1, 2}, {AttnType::DecoderSelf, 1, 3}};
  q.model->mask_heads(drop);
  const auto masked = logits(*q.model, g.batch);
  auto pruned = remove_heads(*q.model, drop);
  EXPECT_LT(test::max_abs_diff(logits(*pruned, g.batch), masked), 1e-5);
  save_checkpoint(tmp / "native", *pruned);
  export_hf(tmp / "pruned", *load_checkpoint(tmp / "native"));
  const auto c = read_json_file(tmp / "pruned/config.json");
  EXPECT_EQ(c.at("model_type"), "qwen3");
  EXPECT_EQ(c.at("head_dim"), 16);
  const auto dense = read_safetensors(tmp / "pruned/model.safetensors").tensors;
  EXPECT_TRUE(torch::equal(dense.at("model.layers.1.self_attn.k_norm.weight"), original.at("model.layers.1.self_attn.k_norm.weight")));
  EXPECT_EQ(dense.at("model.layers.1.self_attn.q_proj.weight").sizes().vec(), (std::vector<int64_t>{64, 32}));
  EXPECT_LT(test::max_abs_diff(logits(*import_hf(tmp / "pruned").model, g.batch), masked), 1e-5);
  // Another LLaMA-family config cannot carry the norms: refused by name rather than dropped.
  auto as_llama = read_json_file(test::hf_fixture("qwen3_qk_norm") + "/config.json");
  as_llama["model_type"] = "llama";
  try {
    export_hf(tmp / "llama", *q.model, as_llama);
    ADD_FAILURE() << "a Llama export with q_norm/k_norm";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the model's qk_norm (true) has no form"), std::string::npos) << e.what();
  }
}

// Phi-3 is the LLaMA block with fused qkv_proj and gate_up_proj (io/hf/phi3.cc): the fused tensors
// split on import and fuse on export, unchanged; a pruned model exports dense as Phi-3.
TEST(LlamaHf, Phi3FusedTensorsSplitAndFuseBack) {
  test::TempDir tmp;
  auto phi = import_hf(test::hf_fixture("phi3_fused"));
  EXPECT_EQ(phi.model_type, "phi3");
  EXPECT_EQ(phi.model->config().sliding_window, 4);
  export_hf(tmp / "same", *phi.model, phi.config);
  expect_export_unchanged("phi3_fused", tmp / "same");
  const auto cfg = read_json_file(tmp / "same/config.json");
  EXPECT_EQ(cfg.at("model_type"), "phi3");
  EXPECT_EQ(cfg.at("architectures"), nlohmann::json::array({"Phi3ForCausalLM"}));
  EXPECT_EQ(cfg.at("sliding_window"), 4);

  const LlamaGolden g("phi3_fused");
  const std::vector<HeadId> drop = {{AttnType::DecoderSelf, 0, 1}, {AttnType::DecoderSelf, 1, 2}, {AttnType::DecoderSelf, 1, 3}};
  phi.model->mask_heads(drop);
  const auto masked = logits(*phi.model, g.batch);
  auto pruned = remove_heads(*phi.model, drop);
  export_hf(tmp / "pruned", *pruned, phi.config);
  const auto dense = read_safetensors(tmp / "pruned/model.safetensors").tensors;
  EXPECT_EQ(dense.at("model.layers.1.self_attn.qkv_proj.weight").sizes().vec(), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(dense.at("model.layers.0.mlp.gate_up_proj.weight").sizes().vec(), (std::vector<int64_t>{80, 32}));
  EXPECT_LT(test::max_abs_diff(logits(*import_hf(tmp / "pruned").model, g.batch), masked), 1e-5);

  // What Phi-3 models headprune cannot compute are refused by name.
  auto with = [&](const char* key, const nlohmann::json& value) {
    auto c = read_json_file(test::hf_fixture("phi3_fused") + "/config.json");
    c[key] = value;
    return c;
  };
  const auto tensors = read_safetensors(test::hf_fixture("phi3_fused") + "/model.safetensors").tensors;
  try {
    import_hf(with("partial_rotary_factor", 0.3), tensors, "x");  // 0.3 x 8 = 2.4 -> 2 channels: accepted
    import_hf(with("partial_rotary_factor", 0.1), tensors, "x");  // 0 channels
    ADD_FAILURE() << "partial rotary of 0 channels accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("partial_rotary_factor"), std::string::npos) << e.what();
  }
  try {
    import_hf(with("rope_scaling", {{"type", "longrope"}, {"short_factor", {1.0}}, {"long_factor", {1.0}}}), tensors, "x");
    ADD_FAILURE() << "longrope accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rope_scaling type 'longrope' is not supported"), std::string::npos) << e.what();
  }
}

// Partial rotary (Phi-4-mini's partial_rotary_factor): the first head_dim x factor channels of each head
// rotate, the others pass; read as rotary_dim, written back as the factor; other families refuse it.
TEST(LlamaHf, Phi3PartialRotaryRoundTrips) {
  test::TempDir tmp;
  auto phi = import_hf(test::hf_fixture("phi3_partial_rotary"));
  EXPECT_EQ(phi.model->config().rotary_dim, 4);
  EXPECT_EQ(phi.model->config().head_dim, 8);
  const LlamaGolden g("phi3_partial_rotary");
  auto full = phi.model->config();
  full.rotary_dim = 0;  // rotating every channel instead moves the logits
  Transformer other(full);
  load_state_strict(*other, state_dict(*phi.model), "same weights");
  EXPECT_GT(g.diff(logits(*other, g.batch), "logits"), 1e-3);
  export_hf(tmp / "same", *phi.model, phi.config);
  expect_export_unchanged("phi3_partial_rotary", tmp / "same");
  EXPECT_EQ(read_json_file(tmp / "same/config.json").at("partial_rotary_factor"), 0.5);
  // Cached decoding rotates the same channels as the full pass.
  DecodeOptions o;
  o.max_len = 5;
  const std::vector<int64_t> prompt = {3, 7, 11};
  const auto ids = generate(*phi.model, prompt, o);
  std::vector<int64_t> all = prompt;
  all.insert(all.end(), ids.begin(), ids.end());
  Batch b;
  b.input_ids = torch::tensor(all).unsqueeze(0);
  const auto best = logits(*phi.model, b).argmax(-1)[0];
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(best[static_cast<int64_t>(prompt.size() + i - 1)].item<int64_t>(), ids[i]);
  auto as_llama = read_json_file(test::hf_fixture("phi3_partial_rotary") + "/config.json");
  as_llama["model_type"] = "llama";
  EXPECT_THROW(export_hf(tmp / "llama", *phi.model, as_llama), std::invalid_argument);
}

// Exports are as strict as imports (issue 80): a checkpoint feature the LLaMA family's config cannot
// say is refused by name, not dropped.
TEST(LlamaHf, ExportRefusesFeaturesTheConfigCannotSay) {
  const ModelConfig base = import_hf(test::hf_fixture("llama_gqa")).model->config();
  EXPECT_NO_THROW(to_hf(*test::make_model(base, 1)));
  for (const std::string feature : {"scaled_attention", "output_scale", "logits_bias"}) {
    ModelConfig cfg = base;
    if (feature == "scaled_attention") cfg.scaled_attention = false;
    else if (feature == "output_scale") cfg.output_scale = 0.5;
    else cfg.logits_bias = true;
    auto m = test::make_model(cfg, 1);
    const std::string e = test::error_of([&] { to_hf(*m); });
    EXPECT_NE(e.find(feature), std::string::npos) << e;
  }
}

TEST(LlamaHf, BadInputGetsClearErrors) {
  test::TempDir tmp;
  auto copy_fixture = [&](const std::string& name) {
    const std::string dst = tmp / name;
    test::copy_tree(test::hf_fixture(name), dst);
    return dst;
  };
  auto error_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(no error)";
  };
  auto edit_config = [](const std::string& dir, const std::function<void(nlohmann::json&)>& f) {
    auto c = read_json_file(dir + "/config.json");
    f(c);
    write_json_file(dir + "/config.json", c);
  };
  {
    const auto d = copy_fixture("llama_gqa");
    edit_config(d, [](nlohmann::json& c) { c["num_key_value_heads"] = 3; });
    const auto e = error_of([&] { import_hf(d); });
    EXPECT_NE(e.find("config.json"), std::string::npos) << e;
    EXPECT_NE(e.find("num_attention_heads 4 is not a multiple of num_key_value_heads 3"), std::string::npos) << e;
  }
  {
    const auto d = tmp / "yarn";
    test::copy_tree(test::hf_fixture("llama_gqa"), d);
    edit_config(d, [](nlohmann::json& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; });
    const auto e = error_of([&] { import_hf(d); });
    EXPECT_NE(e.find("rope_scaling type 'yarn' is not supported (default, linear, llama3)"), std::string::npos) << e;
  }
  {
    const auto d = copy_fixture("llama_sharded_bf16");
    fs::remove(d + "/model-00002-of-00002.safetensors");
    const auto e = error_of([&] { import_hf(d); });
    EXPECT_NE(e.find("model.safetensors.index.json"), std::string::npos) << e;
    EXPECT_NE(e.find("shard 'model-00002-of-00002.safetensors' is missing"), std::string::npos) << e;
  }
  {
    const auto d = tmp / "absent";
    test::copy_tree(test::hf_fixture("llama_sharded_bf16"), d);
    auto index = read_json_file(d + "/model.safetensors.index.json");
    index["weight_map"]["model.layers.9.mlp.up_proj.weight"] = "model-00001-of-00002.safetensors";
    write_json_file(d + "/model.safetensors.index.json", index);
    const auto e = error_of([&] { import_hf(d); });
    EXPECT_NE(e.find("model-00001-of-00002.safetensors: tensor 'model.layers.9.mlp.up_proj.weight' is named in"),
              std::string::npos)
        << e;
  }
  {
    const auto d = tmp / "no_lm_head";
    fs::create_directories(d);
    fs::copy(test::hf_fixture("llama_gqa") + "/config.json", d + "/config.json");
    auto t = read_safetensors(test::hf_fixture("llama_gqa") + "/model.safetensors").tensors;
    t.erase("lm_head.weight");
    write_safetensors(d + "/model.safetensors", t);
    const auto e = error_of([&] { import_hf(d); });
    EXPECT_NE(e.find("missing tensor 'lm_head.weight'"), std::string::npos) << e;
  }
}

// A byte-level tokenizer.json as Llama 3 writes it: Split by its regex (isolated), ByteLevel without
// GPT-2's pattern, ignore_merges, added tokens.
nlohmann::json llama3_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  int64_t id = 0;
  for (const auto& sym : ByteLevelBpeTokenizer::byte_symbols()) vocab[sym] = id++;
  for (const char* t : {"He", "ll", "Hell", "Hello", "\u0120w", "or", "\u0120wor", "\u0120world", "12", "123"})
    vocab[t] = id++;
  const nlohmann::json merges = nlohmann::json::array({"H e", "l l", "He ll", "Hell o", "\u0120 w", "o r", "\u0120w or",
                                                       "\u0120wor ld", "1 2", "12 3"});
  const std::string pattern =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  return {{"version", "1.0"},
          {"added_tokens", {{{"id", 300}, {"content", "<|begin_of_text|>"}, {"special", true}},
                            {{"id", 301}, {"content", "<|end_of_text|>"}, {"special", true}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"ignore_merges", true}, {"vocab", vocab}, {"merges", merges}}}};
}

TEST(LlamaTokenizer, TokenizerJsonSplitsByItsRegexAndMatchesAddedTokensFirst) {
  test::TempDir tmp;
  write_json_file(tmp / "tokenizer.json", llama3_tokenizer_json());
  const auto t = ByteLevelBpeTokenizer::from_tokenizer_json(tmp / "tokenizer.json");
  // Llama 3's pattern: digits in threes, a lone space before digits on its own, "'s" split off.
  EXPECT_EQ(t.pre_tokenize("Hello world's 12345"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", "123", "45"}));
  EXPECT_EQ(t.tokenize("<|begin_of_text|>Hello world<|end_of_text|>"),
            (std::vector<std::string>{"<|begin_of_text|>", "Hello", "\u0120world", "<|end_of_text|>"}));
  const auto ids = t.encode("<|begin_of_text|>Hello world 123");
  EXPECT_EQ(ids.front(), 300);
  EXPECT_EQ(t.decode(ids), "<|begin_of_text|>Hello world 123");
  EXPECT_EQ(t.decode(t.encode("héllo wörld ¿12?")), "héllo wörld ¿12?") << "every byte round-trips";
  // As a directory's tokenizer (no tokenizer_config.json): the specials come from the added tokens.
  const auto tok = load_hf_tokenizer(tmp.path);
  ASSERT_TRUE(tok.has_value());
  EXPECT_EQ(tok->specials().bos, 300);
  EXPECT_EQ(tok->specials().eos, 301);
  EXPECT_EQ(tok->decode(tok->encode("Hello world")), "Hello world");
}

TEST(LlamaTokenizer, UnsupportedComponentsAreNamed) {
  test::TempDir tmp;
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto j = llama3_tokenizer_json();
    edit(j);
    write_json_file(tmp / "tokenizer.json", j);
    try {
      ByteLevelBpeTokenizer::from_tokenizer_json(tmp / "tokenizer.json");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(with([](nlohmann::json& j) { j["model"]["byte_fallback"] = true; }).find("model.byte_fallback"), std::string::npos);
  EXPECT_NE(with([](nlohmann::json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }).find("normalizer 'Lowercase' is not supported"),
            std::string::npos);
  EXPECT_NE(with([](nlohmann::json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; })
                .find("pre_tokenizer: pre-tokenizer 'Metaspace' is not supported"),
            std::string::npos);
  EXPECT_NE(with([](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; })
                .find("does not compile"),
            std::string::npos);
  EXPECT_NE(with([](nlohmann::json& j) { j["model"]["merges"] = {"abc"}; }).find("model.merges"), std::string::npos);
}

TEST(Llama, RotaryTablesAndSlidingWindowMask) {
  ModelConfig c = tiny_llama_config();
  const auto f = rope_inv_freq(c);  // head_dim 8: theta^(-i/8) for i = 0, 2, 4, 6
  ASSERT_EQ(f.size(0), 4);
  for (int64_t i = 0; i < 4; ++i) EXPECT_NEAR(f[i].item<double>(), std::pow(10000.0, -2.0 * i / 8), 1e-7);
  c.rope_scaling.type = RopeScalingType::Linear;
  c.rope_scaling.factor = 4;
  EXPECT_NEAR(rope_inv_freq(c)[1].item<double>(), std::pow(10000.0, -0.25) / 4, 1e-7);
  // Rotating by position p then reading position q: scores depend on q - p only.
  const auto x = torch::randn({1, 1, 1, 8}), y = torch::randn({1, 1, 1, 8});
  auto score = [&](int64_t p, int64_t q) {
    const auto rx = apply_rope(x, rope_tables(f, p, 1, torch::kFloat));
    const auto ry = apply_rope(y, rope_tables(f, q, 1, torch::kFloat));
    return (rx * ry).sum().item<double>();
  };
  EXPECT_NEAR(score(3, 5), score(10, 12), 1e-5);
  EXPECT_GT(std::abs(score(3, 5) - score(3, 6)), 1e-4);
  // Window 2: query i sees keys i-1 and i.
  const auto m = causal_mask(4, torch::kCPU, torch::kFloat, 2).view({4, 4});
  const auto seen = m.eq(0).to(torch::kInt);
  EXPECT_TRUE(torch::equal(seen, torch::tensor({1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1}, torch::kInt).view({4, 4})));
  // One query at position 5 over 6 keys (decoding).
  EXPECT_TRUE(torch::equal(causal_mask(1, torch::kCPU, torch::kFloat, 2, 6).view({6}).eq(0).to(torch::kInt),
                           torch::tensor({0, 0, 0, 0, 1, 1}, torch::kInt)));
}

TEST(Llama, CachedDecodingEqualsRecomputingThePrefix) {
  for (int64_t window : {0, 3}) {
    SCOPED_TRACE(window);
    ModelConfig cfg = tiny_llama_config();
    cfg.sliding_window = window;
    cfg.finalize();
    auto model = test::make_model(cfg, 13);
    model->set_head_mask({AttnType::DecoderSelf, 1, 2}, 0.0);
    DecodeOptions o;
    o.max_len = 8;
    o.eos_id = -1;  // never stops early
    const std::vector<int64_t> prompt = {5, 9, 17, 3};
    const auto cached = generate(*model, prompt, o);
    // Greedy by hand: the whole sequence through forward() at every step.
    std::vector<int64_t> seq = prompt, by_hand;
    torch::NoGradGuard ng;
    for (int64_t t = 0; t < o.max_len; ++t) {
      Batch b;
      b.input_ids = torch::tensor(seq, torch::kLong).unsqueeze(0);
      const int64_t next = model->forward(b).logits[0][-1].argmax().item<int64_t>();
      by_hand.push_back(next);
      seq.push_back(next);
    }
    EXPECT_EQ(cached, by_hand);
  }
}

// The session's logits (a prompt, then one token per step: the cache grows past its first buffers)
// equal the full forward pass's at every position: with even groups (grouped decoding steps), with a
// query head removed (uneven groups: the repeated keys), with a whole group removed, and after the
// caches were reordered (new buffers).
TEST(Llama, SessionLogitsEqualTheFullForwardAtEveryPosition) {
  ModelConfig cfg = tiny_llama_config();  // 4 query heads, 2 key/value heads, 2 layers
  cfg.max_positions = 128;
  cfg.finalize();
  auto full = test::make_model(cfg, 21);
  full->eval();
  const std::vector<std::pair<std::string, Transformer>> models = {
      {"even groups", full},
      {"a query head removed", remove_heads(*full, {{AttnType::DecoderSelf, 0, 1}})},
      {"a group removed", remove_heads(*full, {{AttnType::DecoderSelf, 1, 2}, {AttnType::DecoderSelf, 1, 3}})}};
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const auto ids = torch::randint(4, cfg.vocab_size, {1, 100}, gen, torch::kLong);
  for (auto [name, model] : models) {
    SCOPED_TRACE(name);
    torch::NoGradGuard ng;
    model->eval();
    Batch b;
    b.input_ids = ids;
    const auto want = model->forward(b).logits[0];  // [100, V]
    LmSession s(*model);
    double worst = (s.feed(ids.narrow(1, 0, 5))[0] - want[4]).abs().max().item<double>();
    for (int64_t p = 5; p < 100; ++p) {
      if (p == 60) s.reorder(torch::tensor({0}, torch::kLong));  // the caches leave their buffers
      worst = std::max(worst, (s.feed(ids.narrow(1, p, 1))[0] - want[p]).abs().max().item<double>());
    }
    EXPECT_LT(worst, 1e-4);
    EXPECT_EQ(s.position(), 100);
    // Cached keys and values of 100 positions: 2 x layers x kept groups x head_dim x 4 bytes each.
    int64_t groups = 0;
    for (int64_t l = 0; l < 2; ++l) groups += head_geometry(model->config(), AttnType::DecoderSelf, l).n_kv_heads_kept();
    EXPECT_EQ(s.kv_cache_bytes(), 2 * groups * cfg.head_dim * 100 * 4);
  }
  auto classifier = test::make_model(Arch::EncoderClassifier);
  EXPECT_THROW(LmSession{*classifier}, std::invalid_argument);
}

// A text prompt starts with the token the model was trained to continue from: headprune's own LM
// streams separate lines by eos and never contain bos (data/tasks.cc), so eos goes first there.
TEST(Llama, GenerateJobStartsAHeadpruneTokenizerPromptWithTheLineBoundary) {
  test::TempDir tmp;
  TokenizerTrainOptions topts;
  topts.vocab_size = 40;
  const auto tok = Tokenizer::train({"to be or not to be", "that is the question", "to see or not to see"}, topts);
  ModelConfig cfg = tiny_llama_config();
  cfg.vocab_size = tok.vocab_size();
  auto model = test::make_model(cfg);
  const std::string dir = tmp / "lm";
  save_checkpoint(dir, *model);
  tok.save(dir + "/tokenizer.json");
  GenerateRequest req;
  req.checkpoint = dir;
  req.prompt = "to be";
  req.decode.max_len = 5;
  const auto res = run_generate(req, Runtime{});
  const auto body = tok.encode("to be");
  ASSERT_EQ(res.prompt_ids.size(), body.size() + 1);
  EXPECT_EQ(res.prompt_ids.front(), tok.specials().eos);
  EXPECT_NE(tok.specials().eos, tok.specials().bos);
  EXPECT_TRUE(std::equal(body.begin(), body.end(), res.prompt_ids.begin() + 1));
  EXPECT_LE(res.ids.size(), 5u);
  req.add_bos = false;
  EXPECT_EQ(run_generate(req, Runtime{}).prompt_ids, body);
}

}  // namespace
}  // namespace hp
