// MarianMT (io/hf/marian.cc): parity with the reference implementation
// (tests/fixtures/hf/make_marian_fixtures.py) with heads of all three attention types masked and
// removed; the export unchanged, with one shared table or two, and pruned (dense); cached greedy
// decoding from the padding id agreeing with the full forward pass; bad configs refused by field.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/hf.h"
#include "headprune/io/safetensors.h"
#include "headprune/model/remove_heads.h"
#include "seq2seq_golden.h"
#include "test_util.h"

namespace hp {
namespace {

std::string marian_dir() { return test::hf_fixture("marian_tiny"); }

struct MarianGolden : test::Seq2SeqGolden {
  MarianGolden() : Seq2SeqGolden(marian_dir()) {}
};

using test::logits;

TEST(MarianHf, MatchesTheReferenceWithHeadsOfEveryTypeMaskedAndRemoved) {
  auto hf = import_hf(marian_dir());
  EXPECT_EQ(hf.model_type, "marian");
  const auto& cfg = hf.model->config();
  EXPECT_EQ(cfg.arch, Arch::EncoderDecoder);
  EXPECT_EQ(cfg.positional, Positional::Sinusoidal);
  EXPECT_TRUE(cfg.split_sinusoid && cfg.logits_bias && cfg.tie_embeddings);
  EXPECT_EQ(cfg.norm, NormPosition::Post);
  EXPECT_FALSE(cfg.embed_layer_norm);
  EXPECT_EQ(cfg.activation, Activation::Silu);
  EXPECT_EQ(cfg.pad_id, 66);
  const MarianGolden g;
  auto pruned = g.expect_matches_masked_and_removed(*hf.model);
  EXPECT_EQ(pruned->config().n_heads_kept(AttnType::DecoderSelf), 6);
  // Interleaved positions (headprune's own encoder-decoders) are not Marian's: the logits move.
  auto interleaved = cfg;
  interleaved.split_sinusoid = false;
  Transformer other(interleaved);
  load_state_strict(*other, state_dict(*hf.model), "same weights");
  EXPECT_GT(g.diff(logits(*other, g.batch), "logits"), 1e-2);
}

TEST(MarianHf, ExportsUnchangedAndPrunedDense) {
  test::TempDir tmp;
  auto hf = import_hf(marian_dir());
  export_hf(tmp / "same", *hf.model, hf.config);
  test::expect_same_tensors(marian_dir() + "/model.safetensors", tmp / "same/model.safetensors");
  auto c = read_json_file(tmp / "same/config.json");
  EXPECT_EQ(c.at("model_type"), "marian");
  EXPECT_EQ(c.at("share_encoder_decoder_embeddings"), true);
  EXPECT_EQ(c.at("decoder_start_token_id"), 66);
  EXPECT_EQ(c.at("scale_embedding"), true);
  EXPECT_EQ(c.at("bad_words_ids"), nlohmann::json::parse("[[66]]"));  // the base config's fields stay

  // Pruned: through a native checkpoint, exported dense (one head count per stack in HF), re-imported.
  const MarianGolden g;
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
  auto hf = import_hf(marian_dir());
  // Imported, model.shared is one parameter that both stacks read.
  EXPECT_TRUE(hf.model->config().share_embeddings);
  EXPECT_TRUE(hf.model->decoder->embed_tokens->weight.is_same(hf.model->encoder->embed_tokens->weight));
  EXPECT_FALSE(state_dict(*hf.model).count("decoder.embed_tokens.weight"));
  // A model with a table per stack that differ (as a headprune model without share_embeddings may end).
  auto two = test::with_two_tables(*hf.model, 0.25);
  const MarianGolden g;
  const auto want = logits(*two, g.batch);
  EXPECT_GT(g.diff(want, "logits"), 1e-3);
  export_hf(tmp / "two", *two, hf.config);
  const auto c = read_json_file(tmp / "two/config.json");
  EXPECT_EQ(c.at("share_encoder_decoder_embeddings"), false);
  const auto t = read_safetensors(tmp / "two/model.safetensors").tensors;
  EXPECT_FALSE(t.count("model.shared.weight"));
  EXPECT_TRUE(t.count("model.encoder.embed_tokens.weight") && t.count("model.decoder.embed_tokens.weight"));
  EXPECT_LT(g.diff(logits(*import_hf(tmp / "two").model, g.batch), want), 1e-5);
}

TEST(MarianHf, CachedGreedyDecodingAgreesWithTheFullForwardPass) {
  auto hf = import_hf(marian_dir());
  MarianGolden().expect_cached_greedy_matches_full(*hf.model, /*start (pad)=*/66, /*eos=*/0, /*max_len=*/8);
}

TEST(MarianHf, RefusesWhatHeadpruneCannotHoldByField) {
  test::TempDir tmp;
  const auto config = read_json_file(marian_dir() + "/config.json");
  const auto tensors = read_safetensors(marian_dir() + "/model.safetensors").tensors;
  const auto refused = test::expect_import_refused;
  auto c = config;
  c["decoder_attention_heads"] = 2;
  refused(c, tensors, "decoder_attention_heads");
  c = config;
  c["scale_embedding"] = false;
  refused(c, tensors, "scale_embedding");
  c = config;
  c["activation_function"] = "mish";
  refused(c, tensors, "mish");
  c = config;
  c["decoder_start_token_id"] = 5;  // decoding would start elsewhere than the padding id headprune starts from
  refused(c, tensors, "decoder_start_token_id");
  auto missing = tensors;
  missing.erase("model.shared.weight");
  refused(config, missing, "shared.weight");
  c = config;
  c["share_encoder_decoder_embeddings"] = false;
  refused(c, tensors, "model.encoder.embed_tokens.weight");
  auto wrong = tensors;
  wrong["final_logits_bias"] = torch::zeros({1, 5});
  refused(config, wrong, "final_logits_bias");
}

}  // namespace
}  // namespace hp
