// T5 (io/hf/t5.cc): parity with the reference implementation (tests/fixtures/hf/make_t5_fixtures.py)
// for the original T5 (ReLU, tied output rescaled by d_model^-0.5) and T5 v1.1 / Flan-T5 (gated-gelu, own
// lm_head, d_kv x heads != d_model, more decoder than encoder layers): T5's position buckets, heads of
// all three attention types masked and removed — a removed head's relative-bias column stays for the
// other layers, which still read it — the export unchanged and pruned (dense), cached greedy decoding
// against the full pass (the bias of later query positions), bad configs refused by key.
#include <cmath>

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

const char* const kT5Fixtures[] = {"t5_relu", "t5_gated"};

using test::logits;

TEST(T5Hf, PositionBucketsAreT5s) {
  for (const char* name : kT5Fixtures) {
    SCOPED_TRACE(name);
    const test::Seq2SeqGolden g(test::hf_fixture(name));
    const auto cfg = read_json_file(test::hf_fixture(name) + "/config.json");
    const int64_t buckets = cfg.at("relative_attention_num_buckets"), distance = cfg.at("relative_attention_max_distance");
    const auto rel = torch::arange(16).unsqueeze(0) - torch::arange(16).unsqueeze(1);
    EXPECT_TRUE(torch::equal(relative_position_buckets(rel, true, buckets, distance), g.t.at("buckets_bidirectional")));
    EXPECT_TRUE(torch::equal(relative_position_buckets(rel, false, buckets, distance), g.t.at("buckets_causal")));
  }
}

TEST(T5Hf, MatchesTheReferenceWithHeadsOfEveryTypeMaskedAndRemoved) {
  for (const char* name : kT5Fixtures) {
    SCOPED_TRACE(name);
    auto hf = import_hf(test::hf_fixture(name));
    EXPECT_EQ(hf.model_type, "t5");
    const auto& cfg = hf.model->config();
    EXPECT_EQ(cfg.positional, Positional::Relative);
    EXPECT_FALSE(cfg.scaled_attention);
    EXPECT_EQ(cfg.norm_kind, NormKind::RmsNorm);
    EXPECT_FALSE(cfg.qkv_bias || cfg.o_bias || cfg.mlp_bias);
    const test::Seq2SeqGolden g(test::hf_fixture(name));
    auto pruned = g.expect_matches_masked_and_removed(*hf.model);
    // The stack's table keeps every head's column: encoder layer 1 still reads head 1's, which layer 0 lost.
    EXPECT_EQ(pruned->encoder->relative_attention_bias->weight.size(1), cfg.n_heads);
    EXPECT_EQ(pruned->attention(AttnType::EncoderSelf, 0).kept_heads(), (std::vector<int64_t>{0, 2, 3}));
    g.expect_cached_greedy_matches_full(*pruned, /*start (pad)=*/0, /*eos=*/1, /*max_len=*/10);
  }
  const auto relu = import_hf(test::hf_fixture("t5_relu")).model->config();
  EXPECT_TRUE(relu.tie_embeddings && !relu.gated_ffn && relu.activation == Activation::Relu);
  EXPECT_DOUBLE_EQ(relu.output_scale, 1.0 / std::sqrt(32.0));
  const auto gated = import_hf(test::hf_fixture("t5_gated")).model->config();
  EXPECT_TRUE(!gated.tie_embeddings && gated.gated_ffn && gated.activation == Activation::GeluTanh);
  EXPECT_EQ(gated.head_dim, 12);
  EXPECT_EQ(gated.n_decoder_layers, 3);
  EXPECT_EQ(gated.output_scale, 1.0);
}

TEST(T5Hf, ExportsUnchangedAndPrunedDense) {
  for (const char* name : kT5Fixtures) {
    SCOPED_TRACE(name);
    test::TempDir tmp;
    auto hf = import_hf(test::hf_fixture(name));
    export_hf(tmp / "same", *hf.model, hf.config);
    test::expect_same_tensors(test::hf_fixture(name) + "/model.safetensors", tmp / "same/model.safetensors");
    const auto c = read_json_file(tmp / "same/config.json");
    EXPECT_EQ(c.at("feed_forward_proj"), read_json_file(test::hf_fixture(name) + "/config.json").at("feed_forward_proj"));

    const test::Seq2SeqGolden g(test::hf_fixture(name));
    auto pruned = remove_heads(*hf.model, g.masked());
    save_checkpoint(tmp / "native", *pruned);
    export_hf(tmp / "pruned", *load_checkpoint(tmp / "native"));  // no base config: every key from the model
    auto back = import_hf(tmp / "pruned");
    EXPECT_EQ(back.model_type, "t5");
    EXPECT_EQ(back.model->config().n_heads_kept(AttnType::EncoderSelf), hf.model->config().n_heads_kept(AttnType::EncoderSelf));
    EXPECT_LT(g.diff(logits(*back.model, g.batch), "logits_masked"), 1e-4);
  }
}

// The same head ids in every self-attention layer of a stack and one count for all stacks: the smaller
// standard T5 (num_heads, the bias tables' kept columns), read back with the masked model's logits;
// other ids in one layer, or another count in one stack, are refused by native and written dense by auto.
TEST(T5Hf, AUniformResultExportsAsTheSmallerT5) {
  test::TempDir tmp;
  auto hf = import_hf(test::hf_fixture("t5_relu"));  // 2 + 2 layers of 4 heads
  const test::Seq2SeqGolden g(test::hf_fixture("t5_relu"));
  const auto full = logits(*hf.model, g.batch);
  using T = AttnType;
  const std::vector<HeadId> uniform{{T::EncoderSelf, 0, 1}, {T::EncoderSelf, 1, 1}, {T::DecoderSelf, 0, 3},
                                    {T::DecoderSelf, 1, 3}, {T::Cross, 0, 0}, {T::Cross, 1, 2}};
  for (const auto& h : uniform) hf.model->set_head_mask(h, 0.0);
  const auto masked = logits(*hf.model, g.batch);
  EXPECT_GT((masked - full).abs().max().item<double>(), 1e-3);
  EXPECT_EQ(export_hf(tmp / "native", *hf.model, hf.config), HfLayout::Native);
  const auto c = read_json_file(tmp / "native/config.json");
  EXPECT_EQ(c.at("num_heads"), 3);
  EXPECT_EQ(c.at("d_kv"), 8);
  auto back = import_hf(tmp / "native");
  EXPECT_EQ(back.model->config().n_heads, 3);
  EXPECT_EQ(back.model->encoder->relative_attention_bias->weight.size(1), 3);
  EXPECT_LT((logits(*back.model, g.batch) - masked).abs().max().item<double>(), 1e-5);
  hf.model->set_head_mask({T::EncoderSelf, 1, 1}, 1.0);
  hf.model->set_head_mask({T::EncoderSelf, 1, 2}, 0.0);  // layer 1 now keeps other ids than layer 0
  EXPECT_NE(test::error_of([&] { export_hf(tmp / "refused", *hf.model, hf.config, HfLayout::Native); })
                .find("encoder_self layer 1 keeps other head ids than layer 0"),
            std::string::npos);
  EXPECT_EQ(export_hf(tmp / "dense", *hf.model, hf.config), HfLayout::Dense);
  hf.model->set_head_mask({T::EncoderSelf, 1, 2}, 1.0);
  hf.model->set_head_mask({T::EncoderSelf, 1, 1}, 0.0);
  hf.model->set_head_mask({T::Cross, 1, 3}, 0.0);  // cross keeps 3 in layer 0, 2 in layer 1
  EXPECT_NE(test::error_of([&] { export_hf(tmp / "refused2", *hf.model, hf.config, HfLayout::Native); }).find("cross layers keep"),
            std::string::npos);
}

TEST(T5Hf, RefusesWhatHeadpruneCannotHoldByKey) {
  const auto config = read_json_file(test::hf_fixture("t5_gated") + "/config.json");
  const auto tensors = read_safetensors(test::hf_fixture("t5_gated") + "/model.safetensors").tensors;
  const auto refused = test::expect_import_refused;
  auto c = config;
  c["feed_forward_proj"] = "gated-mish";
  refused(c, tensors, "feed_forward_proj");
  c["feed_forward_proj"] = "gated-gelu-new-x";
  refused(c, tensors, "feed_forward_proj");
  c = config;
  c["feed_forward_proj"] = "relu";  // the file holds wi_0 / wi_1, not wi
  refused(c, tensors, "wi.weight");
  c = config;
  c["decoder_start_token_id"] = 1;  // not the padding id (0) decoding starts from
  refused(c, tensors, "decoder_start_token_id");
  c = config;
  c["relative_attention_num_buckets"] = 7;
  refused(c, tensors, "relative_buckets");
  auto missing = tensors;
  missing.erase("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight");
  refused(config, missing, "relative_attention_bias");
  // A model whose encoder and decoder tables differ cannot be one shared table.
  auto hf = import_hf(test::hf_fixture("t5_relu"));
  EXPECT_TRUE(hf.model->config().share_embeddings);
  test::TempDir tmp;
  export_hf(tmp / "equal", *test::with_two_tables(*hf.model, 0.0), hf.config);  // equal tables are one
  EXPECT_TRUE(read_safetensors(tmp / "equal/model.safetensors").tensors.count("shared.weight"));
  EXPECT_THROW(export_hf(tmp / "x", *test::with_two_tables(*hf.model, 1.0), hf.config), std::invalid_argument);
}

}  // namespace
}  // namespace hp
