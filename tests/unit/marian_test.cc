// MarianMT (io/hf/marian.cc): parity with the reference implementation
// (tests/fixtures/hf/make_marian_fixtures.py) with heads of all three attention types masked and
// removed; the export unchanged, with one shared table or two, and pruned (dense); cached greedy
// decoding from the padding id agreeing with the full forward pass; bad configs refused by field.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "headprune/decode/search.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/hf.h"
#include "headprune/io/safetensors.h"
#include "headprune/model/remove_heads.h"
#include "test_util.h"

namespace hp {
namespace {

std::string fixture() { return std::string(HP_FIXTURES_DIR) + "/hf/marian_tiny"; }

struct Golden {
  TensorMap t = read_safetensors(fixture() + "/golden.safetensors").tensors;
  Batch batch;
  Golden() {
    batch.input_ids = t.at("input_ids");
    batch.attention_mask = t.at("attention_mask");
    batch.decoder_input_ids = t.at("decoder_input_ids");
    batch.decoder_attention_mask = t.at("decoder_attention_mask");
  }
  // Largest difference over the real (not padded) target positions.
  double diff(const torch::Tensor& logits, const torch::Tensor& want) const {
    const auto keep = batch.decoder_attention_mask.to(torch::kBool).unsqueeze(-1).expand_as(logits);
    return test::max_abs_diff(logits.masked_select(keep), want.masked_select(keep));
  }
  double diff(const torch::Tensor& logits, const std::string& key) const { return diff(logits, t.at(key)); }
  // The heads the golden masks set to 0, all three attention types.
  std::vector<HeadId> masked() const {
    std::vector<HeadId> out;
    for (const auto& [key, type] : {std::pair<const char*, AttnType>{"mask_enc", AttnType::EncoderSelf},
                                    {"mask_dec", AttnType::DecoderSelf},
                                    {"mask_cross", AttnType::Cross}}) {
      const auto& m = t.at(key);
      for (int64_t l = 0; l < m.size(0); ++l)
        for (int64_t h = 0; h < m.size(1); ++h)
          if (m[l][h].item<double>() == 0.0) out.push_back({type, l, h});
    }
    return out;
  }
};

using test::logits;

TEST(MarianHf, MatchesTheReferenceWithHeadsOfEveryTypeMaskedAndRemoved) {
  auto hf = import_hf(fixture());
  EXPECT_EQ(hf.model_type, "marian");
  const auto& cfg = hf.model->config();
  EXPECT_EQ(cfg.arch, Arch::EncoderDecoder);
  EXPECT_EQ(cfg.positional, Positional::Sinusoidal);
  EXPECT_TRUE(cfg.split_sinusoid && cfg.logits_bias && cfg.tie_embeddings);
  EXPECT_EQ(cfg.norm, NormPosition::Post);
  EXPECT_FALSE(cfg.embed_layer_norm);
  EXPECT_EQ(cfg.activation, Activation::Silu);
  EXPECT_EQ(cfg.pad_id, 66);
  const Golden g;
  EXPECT_LT(g.diff(logits(*hf.model, g.batch), "logits"), 1e-4);
  const auto heads = g.masked();
  ASSERT_EQ(heads.size(), 4u);
  hf.model->mask_heads(heads);
  EXPECT_LT(g.diff(logits(*hf.model, g.batch), "logits_masked"), 1e-4);
  hf.model->unmask_all();
  auto pruned = remove_heads(*hf.model, heads);
  EXPECT_EQ(pruned->config().n_heads_kept(AttnType::DecoderSelf), 6);
  EXPECT_LT(g.diff(logits(*pruned, g.batch), "logits_masked"), 1e-4);
  // Interleaved positions (headprune's own encoder-decoders) are not Marian's: the logits move.
  auto interleaved = cfg;
  interleaved.split_sinusoid = false;
  Transformer other(interleaved);
  load_state_strict(*other, state_dict(*hf.model), "same weights");
  EXPECT_GT(g.diff(logits(*other, g.batch), "logits"), 1e-2);
}

TEST(MarianHf, ExportsUnchangedAndPrunedDense) {
  test::TempDir tmp;
  auto hf = import_hf(fixture());
  export_hf(tmp / "same", *hf.model, hf.config);
  const auto original = read_safetensors(fixture() + "/model.safetensors").tensors;
  const auto written = read_safetensors(tmp / "same/model.safetensors").tensors;
  EXPECT_EQ(written.size(), original.size());
  for (const auto& [name, t] : original) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(written.count(name));
    EXPECT_TRUE(torch::equal(written.at(name), t));
  }
  auto c = read_json_file(tmp / "same/config.json");
  EXPECT_EQ(c.at("model_type"), "marian");
  EXPECT_EQ(c.at("share_encoder_decoder_embeddings"), true);
  EXPECT_EQ(c.at("decoder_start_token_id"), 66);
  EXPECT_EQ(c.at("scale_embedding"), true);
  EXPECT_EQ(c.at("bad_words_ids"), nlohmann::json::parse("[[66]]"));  // the base config's fields stay

  // Pruned: through a native checkpoint, exported dense (one head count per stack in HF), re-imported.
  const Golden g;
  const auto heads = g.masked();
  auto pruned = remove_heads(*hf.model, heads);
  save_checkpoint(tmp / "native", *pruned);
  export_hf(tmp / "pruned", *load_checkpoint(tmp / "native"), hf.config);
  const auto dense = read_safetensors(tmp / "pruned/model.safetensors").tensors;
  const auto q = dense.at("model.decoder.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(q.sizes().vec(), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(q.slice(0, 0, 8).abs().max().item<double>(), 0.0);  // removed head 0: zero rows
  EXPECT_EQ(dense.at("model.decoder.layers.1.encoder_attn.out_proj.weight").sizes().vec(), (std::vector<int64_t>{32, 32}));
  EXPECT_LT(g.diff(logits(*import_hf(tmp / "pruned").model, g.batch), "logits_masked"), 1e-4);
  EXPECT_THROW(export_hf(tmp / "heads", *pruned, hf.config, HfLayout::PrunedHeads), std::invalid_argument);
}

TEST(MarianHf, EmbeddingsMovedApartExportAsTwoTables) {
  test::TempDir tmp;
  auto hf = import_hf(fixture());
  const Golden g;
  {
    torch::NoGradGuard no_grad;
    auto& dec = hf.model->decoder->embed_tokens->weight;
    dec.set_data(dec.clone());  // no longer the encoder's table (as after fine-tuning)
    dec[5].add_(0.25);
  }
  const auto want = logits(*hf.model, g.batch);
  EXPECT_GT(g.diff(want, "logits"), 1e-3);
  export_hf(tmp / "two", *hf.model, hf.config);
  const auto c = read_json_file(tmp / "two/config.json");
  EXPECT_EQ(c.at("share_encoder_decoder_embeddings"), false);
  const auto t = read_safetensors(tmp / "two/model.safetensors").tensors;
  EXPECT_FALSE(t.count("model.shared.weight"));
  EXPECT_TRUE(t.count("model.encoder.embed_tokens.weight") && t.count("model.decoder.embed_tokens.weight"));
  EXPECT_LT(g.diff(logits(*import_hf(tmp / "two").model, g.batch), want), 1e-5);
}

TEST(MarianHf, CachedGreedyDecodingAgreesWithTheFullForwardPass) {
  auto hf = import_hf(fixture());
  const Golden g;
  Batch src;
  src.input_ids = g.batch.input_ids;
  src.attention_mask = g.batch.attention_mask;
  DecodeOptions o;
  o.bos_id = 66;  // decoder_start_token_id: the padding id
  o.eos_id = 0;
  o.max_len = 8;
  const auto hyps = translate(*hf.model, src, o);
  ASSERT_EQ(hyps.size(), 3u);
  for (size_t b = 0; b < hyps.size(); ++b) {
    SCOPED_TRACE(b);
    ASSERT_FALSE(hyps[b].empty());
    std::vector<int64_t> prefix = {66};
    prefix.insert(prefix.end(), hyps[b].begin(), hyps[b].end());
    Batch one;
    one.input_ids = src.input_ids.slice(0, b, b + 1);
    one.attention_mask = src.attention_mask.slice(0, b, b + 1);
    one.decoder_input_ids = torch::tensor(prefix).unsqueeze(0);
    one.decoder_attention_mask = torch::ones_like(one.decoder_input_ids);
    const auto best = logits(*hf.model, one).argmax(-1)[0];
    for (size_t i = 0; i < hyps[b].size(); ++i) EXPECT_EQ(best[static_cast<int64_t>(i)].item<int64_t>(), hyps[b][i]) << i;
  }
}

TEST(MarianHf, RefusesWhatHeadpruneCannotHoldByField) {
  test::TempDir tmp;
  const auto config = read_json_file(fixture() + "/config.json");
  const auto tensors = read_safetensors(fixture() + "/model.safetensors").tensors;
  auto refused = [&](nlohmann::json c, const TensorMap& t, const std::string& needle) {
    try {
      import_hf(c, t, "model.safetensors", "config.json");
      ADD_FAILURE() << "accepted; expected: " << needle;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto c = config;
  c["decoder_attention_heads"] = 2;
  refused(c, tensors, "decoder_attention_heads");
  c = config;
  c["scale_embedding"] = false;
  refused(c, tensors, "scale_embedding");
  c = config;
  c["activation_function"] = "mish";
  refused(c, tensors, "mish");
  auto missing = tensors;
  missing.erase("model.shared.weight");
  refused(config, missing, "model.shared.weight");
  c = config;
  c["share_encoder_decoder_embeddings"] = false;
  refused(c, tensors, "model.encoder.embed_tokens.weight");
  auto wrong = tensors;
  wrong["final_logits_bias"] = torch::zeros({1, 5});
  refused(config, wrong, "final_logits_bias");
}

}  // namespace
}  // namespace hp
