// ModelConfig: defaults, JSON round trip, strict validation with field names in errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "headprune/config.h"

namespace hp {
namespace {

std::string config_error_of(const nlohmann::json& j) {
  try {
    ModelConfig::from_json(j);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Config, FinalizeFillsAllHeadsAndHeadDim) {
  ModelConfig c = tiny_config(Arch::EncoderDecoder);
  EXPECT_EQ(c.head_dim, 8);
  ASSERT_EQ(c.encoder_self_heads.size(), 2u);
  EXPECT_EQ(c.encoder_self_heads[1], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(c.cross_heads.size(), 2u);
  EXPECT_EQ(c.n_heads_kept(AttnType::Cross), 8);
  EXPECT_EQ(c.attn_types().size(), 3u);
  EXPECT_FALSE(tiny_config(Arch::DecoderLM).has(AttnType::EncoderSelf));
  EXPECT_FALSE(tiny_config(Arch::EncoderClassifier).has(AttnType::Cross));
}

TEST(Config, JsonRoundTripKeepsHeterogeneousHeads) {
  ModelConfig c = tiny_config(Arch::EncoderDecoder);
  c.encoder_self_heads[0] = {1, 3};
  c.cross_heads[1] = {};
  c.finalize();
  ModelConfig d = ModelConfig::from_json(c.to_json());
  EXPECT_EQ(d.to_json(), c.to_json());
  EXPECT_EQ(d.encoder_self_heads[0], (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(d.cross_heads[1].empty());
  EXPECT_EQ(d.decoder_self_heads[0].size(), 4u);
}

TEST(Config, ErrorsNameTheField) {
  nlohmann::json j = tiny_config(Arch::EncoderClassifier).to_json();
  auto with = [&](const std::string& k, const nlohmann::json& v) {
    auto x = j;
    x[k] = v;
    return config_error_of(x);
  };
  EXPECT_NE(with("d_modle", 3).find("'d_modle' is not a known config key"), std::string::npos);
  EXPECT_NE(with("d_model", "big").find("'d_model'"), std::string::npos);
  EXPECT_NE(with("arch", "rnn").find("unknown architecture 'rnn'"), std::string::npos);
  EXPECT_NE(with("n_heads", 0).find("'n_heads' must be > 0"), std::string::npos);
  EXPECT_NE(with("heads", {{"encoder_self", {{0, 1, 9}, {0}}}}).find("head id 9 out of range"), std::string::npos);
  EXPECT_NE(with("heads", {{"encoder_self", {{1, 1}, {0}}}}).find("repeated"), std::string::npos);
  EXPECT_NE(with("heads", {{"encoder_self", {{0}}}}).find("has 1 layers, expected 2"), std::string::npos);
  EXPECT_NE(with("heads", {{"cross", {{0}, {0}}}}).find("must be empty"), std::string::npos);
  EXPECT_NE(with("pad_id", 1000).find("'pad_id'"), std::string::npos);
  auto missing = j;
  missing.erase("vocab_size");
  EXPECT_NE(config_error_of(missing).find("'vocab_size' is required"), std::string::npos);
  EXPECT_NE(config_error_of(nlohmann::json::array()).find("expected a JSON object"), std::string::npos);
}

TEST(Config, ActivationDropoutDefaultsToDropoutAndRoundTrips) {
  // Absent (configs written before the field existed): the FFN keeps using `dropout`, and the
  // config is written back without the field.
  nlohmann::json j = tiny_config(Arch::EncoderClassifier).to_json();
  j["dropout"] = 0.3;
  ASSERT_FALSE(j.contains("activation_dropout"));
  const auto absent = ModelConfig::from_json(j);
  EXPECT_DOUBLE_EQ(absent.ffn_dropout(), 0.3);
  EXPECT_FALSE(absent.to_json().contains("activation_dropout"));
  // Set: used and kept, 0 included.
  for (double p : {0.0, 0.05}) {
    j["activation_dropout"] = p;
    const auto set = ModelConfig::from_json(j);
    EXPECT_DOUBLE_EQ(set.ffn_dropout(), p);
    EXPECT_DOUBLE_EQ(ModelConfig::from_json(set.to_json()).ffn_dropout(), p);
  }
  for (double bad : {-0.1, 1.0}) {
    j["activation_dropout"] = bad;
    EXPECT_NE(config_error_of(j).find("'activation_dropout' must be in [0, 1)"), std::string::npos) << bad;
  }
}

TEST(Config, HeadDimMustDivide) {
  ModelConfig c = tiny_config(Arch::DecoderLM);
  c.n_heads = 5;
  c.head_dim = 0;
  for (AttnType t : kAllAttnTypes) c.heads(t).clear();
  EXPECT_THROW(c.finalize(), std::invalid_argument);
  c.head_dim = 6;  // explicit head_dim need not divide d_model
  EXPECT_NO_THROW(c.finalize());
}

TEST(Config, HeadIdParsing) {
  HeadId h = parse_head_id("cross:1:3");
  EXPECT_EQ(h.type, AttnType::Cross);
  EXPECT_EQ(h.layer, 1);
  EXPECT_EQ(h.head, 3);
  EXPECT_EQ(to_string(h), "cross:1:3");
  EXPECT_EQ(parse_head_id("enc:0:2").type, AttnType::EncoderSelf);
  EXPECT_THROW(parse_head_id("enc:0"), std::invalid_argument);
  EXPECT_THROW(parse_head_id("enc:x:1"), std::invalid_argument);
  EXPECT_THROW(parse_head_id("enc:1:2z"), std::invalid_argument);
  EXPECT_THROW(parse_head_id("foo:1:2"), std::invalid_argument);
}

}  // namespace
}  // namespace hp
