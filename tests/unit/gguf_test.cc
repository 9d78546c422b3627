// GGUF: the container's writer and reader, a LLaMA-family model's layout in the file (arch, per-layer
// head counts, repeated key/value heads, the layer-0 stand-in, the rope permutation) and the
// vocabulary of headprune's own tokenizer. llama.cpp itself runs the files in tests/e2e/gguf.sh.
#include <fstream>

#include <gtest/gtest.h>

#include "headprune/data/gguf_vocab.h"
#include "headprune/data/tokenizer.h"
#include "headprune/io/files.h"
#include "headprune/io/gguf.h"
#include "headprune/io/gguf_model.h"
#include "headprune/model/remove_heads.h"
#include "headprune/model/state.h"
#include "test_util.h"

namespace hp {
namespace {

using test::TempDir;

void write_file(const std::string& path, const GgufFile& f) {
  write_file_atomic(path, [&](std::ostream& o) { write_gguf(o, f); });
}

GgufVocab tiny_vocab(int64_t n) {
  GgufVocab v;
  v.model = "llama";
  for (int64_t i = 0; i < n; ++i) {
    v.tokens.push_back("t" + std::to_string(i));
    v.scores.push_back(-static_cast<double>(i));
    v.types.push_back(i < 3 ? 3 : 1);
  }
  v.bos = 1, v.eos = 2;
  return v;
}

TEST(Gguf, RoundTripsMetadataAndTensors) {
  TempDir dir;
  GgufFile f;
  f.metadata = {{"a.u32", GgufValue::u32(7)},
                {"a.i32", GgufValue::i32(-3)},
                {"a.f32", GgufValue::f32(0.5)},
                {"a.bool", GgufValue::boolean(true)},
                {"a.str", GgufValue::str("héllo")},
                {"a.ints", GgufValue::array(GgufType::I32, {1, 0, -2})},
                {"a.floats", GgufValue::f32s({1.5, -2.25})},
                {"a.strs", GgufValue::strs({"x", "", "▁y"})}};
  const auto w = torch::randn({3, 5});
  const auto b = torch::randn({7}).to(torch::kBFloat16);
  const auto h = torch::randn({2, 3}).to(torch::kFloat16);
  f.tensors = {{"w", LazyTensor::of(w)}, {"b", LazyTensor::of(b)}, {"h", LazyTensor::of(h)}};
  const auto path = dir / "x.gguf";
  write_file(path, f);
  const auto info = read_gguf_info(path);
  EXPECT_EQ(info.version, 3u);
  EXPECT_EQ(info.metadata.at("a.u32").i, 7);
  EXPECT_EQ(info.metadata.at("a.u32").type, GgufType::U32);
  EXPECT_EQ(info.metadata.at("a.i32").i, -3);
  EXPECT_DOUBLE_EQ(info.metadata.at("a.f32").f, 0.5);
  EXPECT_EQ(info.metadata.at("a.bool").i, 1);
  EXPECT_EQ(info.metadata.at("a.str").s, "héllo");
  EXPECT_EQ(info.metadata.at("a.ints").ints, (std::vector<int64_t>{1, 0, -2}));
  EXPECT_EQ(info.metadata.at("a.floats").floats, (std::vector<double>{1.5, -2.25}));
  EXPECT_EQ(info.metadata.at("a.strs").strings, (std::vector<std::string>{"x", "", "▁y"}));
  ASSERT_EQ(info.tensors.size(), 3u);
  EXPECT_EQ(info.tensors[0].ne, (std::vector<int64_t>{5, 3}));  // innermost first
  EXPECT_EQ(info.tensors[1].type, GgmlType::BF16);
  EXPECT_EQ(info.tensors[2].type, GgmlType::F16);
  for (const auto& t : info.tensors) EXPECT_EQ(t.offset % 32, 0u) << t.name;
  EXPECT_EQ(info.data_offset % 32, 0u);
  EXPECT_TRUE(torch::equal(gguf_tensor(path, info, "w"), w));
  EXPECT_TRUE(torch::equal(gguf_tensor(path, info, "b"), b));
  EXPECT_TRUE(torch::equal(gguf_tensor(path, info, "h"), h));
}

TEST(Gguf, RefusesMalformedFilesNamingThem) {
  TempDir dir;
  GgufFile f;
  f.metadata = {{"k", GgufValue::strs({"a", "b"})}};
  f.tensors = {{"w", LazyTensor::of(torch::ones({4, 4}))}};
  const auto good = dir / "good.gguf";
  write_file(good, f);
  const std::string bytes = read_file(good);
  const auto bad = dir / "bad.gguf";
  // Every cut short of the whole file is refused (the last tensor's data runs past the end).
  for (size_t n : {size_t{0}, size_t{3}, size_t{10}, size_t{30}, bytes.size() / 2, bytes.size() - 1}) {
    test::write(bad, bytes.substr(0, n));
    const auto e = test::error_of([&] { read_gguf_info(bad); });
    EXPECT_NE(e.find("bad.gguf"), std::string::npos) << n << ": " << e;
  }
  std::string wrong = bytes;
  wrong[0] = 'X';
  test::write(bad, wrong);
  EXPECT_NE(test::error_of([&] { read_gguf_info(bad); }).find("no GGUF magic"), std::string::npos);
  // An array length of 2^60 fails on the file's size, before anything is allocated.
  std::string huge = bytes;
  const size_t len_at = 4 + 4 + 8 + 8 + 8 + 1 + 4 + 4;  // magic, version, counts, key "k", type, element type
  const uint64_t n = 1ull << 60;
  huge.replace(len_at, 8, std::string(reinterpret_cast<const char*>(&n), 8));
  test::write(bad, huge);
  EXPECT_NE(test::error_of([&] { read_gguf_info(bad); }).find("runs past the end"), std::string::npos);
}

// The q (or k) rows llama.cpp reads, back in HF's rotate-half order: the inverse of the export's permutation.
torch::Tensor deinterleave(const torch::Tensor& w, int64_t D) {
  const auto shape = w.sizes().vec();
  return w.reshape({shape[0] / D, D / 2, 2, -1}).transpose(1, 2).reshape(shape);
}

TEST(GgufModel, UniformLlamaIsArchLlamaWithTheModelsWeights) {
  auto model = test::make_model(test::Fam::Llama);
  const auto& c = model->config();
  GgufLayout layout;
  const auto file = to_gguf(*model, tiny_vocab(90), torch::kFloat32, "tiny", &layout);
  EXPECT_EQ(layout.arch, "llama");
  EXPECT_EQ(layout.n_head, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(layout.n_head_kv, (std::vector<int64_t>{2, 2}));
  TempDir dir;
  write_file(dir / "m.gguf", file);
  const auto info = read_gguf_info(dir / "m.gguf");
  EXPECT_EQ(info.metadata.at("general.architecture").s, "llama");
  EXPECT_EQ(info.metadata.at("llama.attention.head_count").i, 4);
  EXPECT_EQ(info.metadata.at("llama.attention.head_count_kv").i, 2);
  EXPECT_EQ(info.metadata.at("llama.attention.key_length").i, c.head_dim);
  // The tokenizer's 90 tokens padded to the model's 100 rows, the padding unused (type 5).
  EXPECT_EQ(info.metadata.at("tokenizer.ggml.tokens").strings.size(), 100u);
  EXPECT_EQ(info.metadata.at("tokenizer.ggml.token_type").ints.back(), 5);
  // 3 model tensors + output + 9 per layer (no biases).
  EXPECT_EQ(info.tensors.size(), 3u + 9u * 2u);
  const auto s = state_dict(*model);
  const std::string path = dir / "m.gguf";
  EXPECT_TRUE(torch::equal(deinterleave(gguf_tensor(path, info, "blk.1.attn_q.weight"), c.head_dim),
                           s.at("decoder.layers.1.self_attn.q_proj.weight")));
  EXPECT_TRUE(torch::equal(deinterleave(gguf_tensor(path, info, "blk.0.attn_k.weight"), c.head_dim),
                           s.at("decoder.layers.0.self_attn.k_proj.weight")));
  EXPECT_TRUE(torch::equal(gguf_tensor(path, info, "blk.0.attn_v.weight"), s.at("decoder.layers.0.self_attn.v_proj.weight")));
  EXPECT_TRUE(torch::equal(gguf_tensor(path, info, "token_embd.weight"), s.at("decoder.embed_tokens.weight")));
  // bf16 weights, f32 norms.
  const auto half = to_gguf(*model, tiny_vocab(100), torch::kBFloat16, "tiny");
  for (const auto& t : half.tensors)
    EXPECT_EQ(t.data.dtype, t.data.shape.size() == 2 ? torch::kBFloat16 : torch::kFloat32) << t.name;
}

TEST(GgufModel, UnevenLayersAreDeciWithRepeatedGroupsAndAStandIn) {
  ModelConfig cfg = tiny_llama_config();
  cfg.n_decoder_layers = 3;
  cfg.decoder_self_heads.clear();
  cfg.finalize();
  auto model = test::make_model(cfg);
  const auto D = cfg.head_dim;
  // Layer 0 emptied; layer 1 loses query head 1 (group 0 keeps 1 head, group 1 keeps 2); layer 2 whole.
  std::vector<HeadId> drop;
  for (int64_t h = 0; h < 4; ++h) drop.push_back({AttnType::DecoderSelf, 0, h});
  drop.push_back({AttnType::DecoderSelf, 1, 1});
  auto pruned = remove_heads(*model, drop);
  GgufLayout layout;
  const auto file = to_gguf(*pruned, tiny_vocab(100), torch::kFloat32, "tiny", &layout);
  EXPECT_EQ(layout.arch, "deci");
  EXPECT_EQ(layout.n_head, (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(layout.n_head_kv, (std::vector<int64_t>{1, 3, 2}));  // group 1 repeated: 1 + 2 key/value heads
  EXPECT_EQ(layout.stand_in_layers, (std::vector<int64_t>{0}));
  TempDir dir;
  const std::string path = dir / "m.gguf";
  write_file(path, file);
  const auto info = read_gguf_info(path);
  EXPECT_EQ(info.metadata.at("deci.attention.head_count").ints, (std::vector<int64_t>{1, 3, 4}));
  const auto s = state_dict(*pruned);
  const auto k = deinterleave(gguf_tensor(path, info, "blk.1.attn_k.weight"), D);
  const auto k_ours = s.at("decoder.layers.1.self_attn.k_proj.weight");
  EXPECT_TRUE(torch::equal(k, torch::cat({k_ours.narrow(0, 0, D), k_ours.narrow(0, D, D), k_ours.narrow(0, D, D)})));
  // The stand-in adds nothing: its value and output weights are zero.
  EXPECT_EQ(gguf_tensor(path, info, "blk.0.attn_v.weight").abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(gguf_tensor(path, info, "blk.0.attn_output.weight").abs().sum().item<float>(), 0.0f);
  // An emptied layer other than 0 has no attention tensors at all.
  auto emptied = remove_heads(*model, {{AttnType::DecoderSelf, 2, 0}, {AttnType::DecoderSelf, 2, 1},
                                       {AttnType::DecoderSelf, 2, 2}, {AttnType::DecoderSelf, 2, 3}});
  const auto f2 = to_gguf(*emptied, tiny_vocab(100), torch::kFloat32, "tiny", &layout);
  EXPECT_EQ(layout.n_head, (std::vector<int64_t>{4, 4, 0}));
  for (const auto& t : f2.tensors) EXPECT_EQ(t.name.rfind("blk.2.attn", 0), std::string::npos) << t.name;
  // With an output bias, an emptied layer keeps a stand-in (deci would skip the bias with its attention).
  ModelConfig biased = cfg;
  biased.o_bias = biased.qkv_bias = true;
  auto with_bias = test::make_model(biased);
  auto emptied_bias = remove_heads(*with_bias, {{AttnType::DecoderSelf, 2, 0}, {AttnType::DecoderSelf, 2, 1},
                                                {AttnType::DecoderSelf, 2, 2}, {AttnType::DecoderSelf, 2, 3}});
  const auto f3 = to_gguf(*emptied_bias, tiny_vocab(100), torch::kFloat32, "tiny", &layout);
  EXPECT_EQ(layout.n_head, (std::vector<int64_t>{4, 4, 1}));
  EXPECT_EQ(layout.stand_in_layers, (std::vector<int64_t>{2}));
  bool bias_written = false;
  for (const auto& t : f3.tensors) bias_written = bias_written || t.name == "blk.2.attn_output.bias";
  EXPECT_TRUE(bias_written);
  // Masked heads are written removed: the same layout as the pruned model.
  model->mask_heads(drop);
  to_gguf(*model, tiny_vocab(100), torch::kFloat32, "tiny", &layout);
  EXPECT_EQ(layout.n_head, (std::vector<int64_t>{1, 3, 4}));
}

TEST(GgufModel, RefusesWhatGgufCannotSay) {
  auto gpt = test::make_model(test::Fam::DecoderLM);
  EXPECT_NE(test::error_of([&] { to_gguf(*gpt, tiny_vocab(100), torch::kFloat32, "x"); }).find("LLaMA family"),
            std::string::npos);
  auto bert = test::make_model(test::Fam::EncoderClassifier);
  EXPECT_NE(test::error_of([&] { check_gguf_family(bert->config()); }).find("encoder classifier"), std::string::npos);
  ModelConfig q = tiny_llama_config();
  q.qk_norm = true;
  q.decoder_self_heads.clear();
  q.finalize();
  auto qwen3 = test::make_model(q);
  EXPECT_NO_THROW(to_gguf(*qwen3, tiny_vocab(100), torch::kFloat32, "x"));
  auto uneven = remove_heads(*qwen3, {{AttnType::DecoderSelf, 0, 0}});
  EXPECT_NE(test::error_of([&] { to_gguf(*uneven, tiny_vocab(100), torch::kFloat32, "x"); }).find("--unit balanced"),
            std::string::npos);
  auto llama = test::make_model(test::Fam::Llama);
  EXPECT_NE(test::error_of([&] { to_gguf(*llama, tiny_vocab(101), torch::kFloat32, "x"); }).find("101 tokens"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { parse_gguf_dtype("q4_0"); }).find("f32, f16 or bf16"), std::string::npos);
}

TEST(GgufVocab, HeadpruneBpeScoresPiecesByMergeRank) {
  TokenizerTrainOptions o;
  o.vocab_size = 40;
  const auto tok = Tokenizer::train({"the cat sat on the mat", "the hat"}, o);
  const auto v = gguf_vocab({{"tokenizer.json", tok.serialized()}}, "dir");
  EXPECT_EQ(v.model, "llama");
  ASSERT_EQ(static_cast<int64_t>(v.tokens.size()), tok.vocab_size());
  EXPECT_EQ(v.types[0], 3);
  EXPECT_EQ(v.types[3], 2);  // <unk>
  EXPECT_EQ(v.bos, 1);
  EXPECT_FALSE(v.add_bos);
  // The last piece is the last merge's: the lowest score among merged pieces, above every character's.
  const auto last = v.tokens.size() - 1;
  EXPECT_LT(v.scores[last], v.scores[last - 1]);
  EXPECT_GT(v.scores[last], v.scores[4]);
  EXPECT_NE(test::error_of([&] { gguf_vocab({{"vocab.txt", "[PAD]\n"}}, "bert_dir"); }).find("bert_dir"),
            std::string::npos);
}

}  // namespace
}  // namespace hp
