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

GgufVocab tiny_vocab(int64_t n) { return test::tiny_gguf_vocab(n); }

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
  f.tensors = {{"w", LazyTensor::of(w), {}, {}}, {"b", LazyTensor::of(b), {}, {}}, {"h", LazyTensor::of(h), {}, {}}};
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
  f.tensors = {{"w", LazyTensor::of(torch::ones({4, 4})), {}, {}}};
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
  const auto file = to_gguf(*model, tiny_vocab(90), GgmlType::F32, "tiny", &layout);
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
  const auto half = to_gguf(*model, tiny_vocab(100), GgmlType::BF16, "tiny");
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
  const auto file = to_gguf(*pruned, tiny_vocab(100), GgmlType::F32, "tiny", &layout);
  EXPECT_EQ(layout.arch, "deci");
  EXPECT_EQ(layout.n_head, (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(layout.n_head_kv, (std::vector<int64_t>{1, 3, 2}));  // group 1 repeated: 1 + 2 key/value heads
  EXPECT_EQ(layout.stand_in_layers, (std::vector<int64_t>{0}));
  TempDir dir;
  const std::string path = dir / "m.gguf";
  write_file(path, file);
  const auto info = read_gguf_info(path);
  EXPECT_EQ(info.metadata.at("deci.attention.head_count").ints, (std::vector<int64_t>{1, 3, 4}));
  // Every per-layer array has block_count entries (llama.cpp reads one per block).
  const auto blocks = static_cast<size_t>(info.metadata.at("deci.block_count").i);
  EXPECT_EQ(info.metadata.at("deci.attention.head_count").size(), blocks);
  EXPECT_EQ(info.metadata.at("deci.attention.head_count_kv").size(), blocks);
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
  const auto f2 = to_gguf(*emptied, tiny_vocab(100), GgmlType::F32, "tiny", &layout);
  EXPECT_EQ(layout.n_head, (std::vector<int64_t>{4, 4, 0}));
  for (const auto& t : f2.tensors) EXPECT_EQ(t.name.rfind("blk.2.attn", 0), std::string::npos) << t.name;
  // With an output bias, an emptied layer keeps a stand-in (deci would skip the bias with its attention).
  ModelConfig biased = cfg;
  biased.o_bias = biased.qkv_bias = true;
  auto with_bias = test::make_model(biased);
  auto emptied_bias = remove_heads(*with_bias, {{AttnType::DecoderSelf, 2, 0}, {AttnType::DecoderSelf, 2, 1},
                                                {AttnType::DecoderSelf, 2, 2}, {AttnType::DecoderSelf, 2, 3}});
  const auto f3 = to_gguf(*emptied_bias, tiny_vocab(100), GgmlType::F32, "tiny", &layout);
  EXPECT_EQ(layout.n_head, (std::vector<int64_t>{4, 4, 1}));
  EXPECT_EQ(layout.stand_in_layers, (std::vector<int64_t>{2}));
  bool bias_written = false;
  for (const auto& t : f3.tensors) bias_written = bias_written || t.name == "blk.2.attn_output.bias";
  EXPECT_TRUE(bias_written);
  // Masked heads are written removed: the same layout as the pruned model.
  model->mask_heads(drop);
  to_gguf(*model, tiny_vocab(100), GgmlType::F32, "tiny", &layout);
  EXPECT_EQ(layout.n_head, (std::vector<int64_t>{1, 3, 4}));
}

TEST(GgufModel, RefusesWhatGgufCannotSay) {
  auto gpt = test::make_model(test::Fam::DecoderLM);
  EXPECT_NE(test::error_of([&] { to_gguf(*gpt, tiny_vocab(100), GgmlType::F32, "x"); }).find("LLaMA family"),
            std::string::npos);
  auto bert = test::make_model(test::Fam::EncoderClassifier);
  EXPECT_NE(test::error_of([&] { check_gguf_family(bert->config()); }).find("encoder classifier"), std::string::npos);
  ModelConfig q = tiny_llama_config();
  q.qk_norm = true;
  q.decoder_self_heads.clear();
  q.finalize();
  auto qwen3 = test::make_model(q);
  EXPECT_NO_THROW(to_gguf(*qwen3, tiny_vocab(100), GgmlType::F32, "x"));
  auto uneven = remove_heads(*qwen3, {{AttnType::DecoderSelf, 0, 0}});
  EXPECT_NE(test::error_of([&] { to_gguf(*uneven, tiny_vocab(100), GgmlType::F32, "x"); }).find("--shape uniform"),
            std::string::npos);
  auto llama = test::make_model(test::Fam::Llama);
  EXPECT_NE(test::error_of([&] { to_gguf(*llama, tiny_vocab(101), GgmlType::F32, "x"); }).find("101 tokens"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { parse_gguf_dtype("q4_k"); }).find("f32, f16, bf16, q8_0 or q4_0"), std::string::npos);
  EXPECT_EQ(parse_gguf_dtype("q8_0"), GgmlType::Q8_0);
}

// Blocks worked out by hand from ggml's definitions (ggml-common.h, ggml-quants.c).
TEST(GgmlQuant, Q8_0AndQ4_0BlocksHoldGgmlsBytes) {
  // Q8_0 of x_j = j - 16: d = 16 / 127 (float16 0x3008, 0.12597656), q = round(x / d) from the unrounded d.
  auto x = torch::arange(32, torch::kFloat32).sub(16).reshape({1, 32});
  const auto q8 = quantize_blocks(x, GgmlType::Q8_0);
  ASSERT_EQ(q8.sizes(), (std::vector<int64_t>{1, 34}));
  const auto* b = q8.data_ptr<uint8_t>();
  EXPECT_EQ(b[0] | (b[1] << 8), 0x3008);
  EXPECT_EQ(static_cast<int8_t>(b[2 + 0]), -127);     // x = -16
  EXPECT_EQ(static_cast<int8_t>(b[2 + 16]), 0);       // x = 0
  EXPECT_EQ(static_cast<int8_t>(b[2 + 17]), 8);       // x = 1: 7.94
  EXPECT_EQ(static_cast<int8_t>(b[2 + 31]), 119);     // x = 15: 119.06
  EXPECT_FLOAT_EQ(dequantize_blocks(q8, GgmlType::Q8_0, 32)[0][17].item<float>(), 8 * 0.12597656f);
  // Q4_0 of x_j = (j mod 16) - 8: the largest magnitude is -8, so d = -8 / -8 = 1 (float16 0x3C00) and
  // q = trunc(x + 8.5) = x + 8; byte j holds values j and j + 16, equal here: j | j << 4.
  x = torch::arange(32, torch::kFloat32).remainder(16).sub(8).reshape({1, 32});
  const auto q4 = quantize_blocks(x, GgmlType::Q4_0);
  ASSERT_EQ(q4.sizes(), (std::vector<int64_t>{1, 18}));
  b = q4.data_ptr<uint8_t>();
  EXPECT_EQ(b[0] | (b[1] << 8), 0x3C00);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b[2 + j], j | (j << 4)) << j;
  EXPECT_TRUE(torch::equal(dequantize_blocks(q4, GgmlType::Q4_0, 32), x));
  // A block of zeros: scale 0, every value 0 (no division by zero); q4_0's top value clips to 15.
  EXPECT_EQ(dequantize_blocks(quantize_blocks(torch::zeros({2, 64}), GgmlType::Q8_0), GgmlType::Q8_0, 64).abs().sum().item<float>(), 0);
  auto clip = torch::zeros({1, 32});
  clip[0][0] = -4, clip[0][1] = 4;  // d = 0.5: 4 is 8 steps up, stored as 15 (3.5)
  EXPECT_FLOAT_EQ(dequantize_blocks(quantize_blocks(clip, GgmlType::Q4_0), GgmlType::Q4_0, 32)[0][1].item<float>(), 3.5f);
  EXPECT_NE(test::error_of([&] { quantize_blocks(torch::zeros({2, 40}), GgmlType::Q8_0); }).find("40 values"), std::string::npos);
}

TEST(GgmlQuant, ErrorsStayWithinHalfAStepPerBlock) {
  torch::manual_seed(3);
  const auto x = torch::randn({16, 256}) * torch::rand({16, 1}).mul(4);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    const auto back = dequantize_blocks(quantize_blocks(x, t), t, 256);
    const auto blocks = x.reshape({-1, 32}), err = (back - x).abs().reshape({-1, 32});
    const auto step = blocks.abs().amax(1) / (t == GgmlType::Q8_0 ? 127.0 : 8.0);
    // Half a step, plus the scale's float16 rounding over up to 127 (8) steps; q4_0 clips its top value
    // by a whole step.
    const double half = t == GgmlType::Q8_0 ? 0.5 + 127.0 / 2048 : 1.0 + 8.0 / 2048;
    EXPECT_TRUE((err.amax(1) <= step * half + 1e-7).all().item<bool>()) << to_string(t);
    EXPECT_GT(err.max().item<float>(), 0.0f) << to_string(t);  // rounded, not copied
  }
}

TEST(GgufModel, Q8_0AndQ4_0FilesHoldBlocksWhereRowsSplitAndF16Elsewhere) {
  ModelConfig cfg = tiny_llama_config();
  cfg.d_model = 64, cfg.d_ff = 72;  // the up and gate rows (64 values) split into blocks, the down rows (72) do not
  cfg.decoder_self_heads.clear();
  cfg.finalize();
  auto model = test::make_model(cfg);
  const auto s = state_dict(*model);
  TempDir dir;
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    GgufLayout layout;
    const std::string path = dir / (to_string(t) + ".gguf");
    write_file(path, to_gguf(*model, tiny_vocab(100), t, "tiny", &layout));
    const auto info = read_gguf_info(path);
    EXPECT_EQ(info.metadata.at("general.file_type").i, t == GgmlType::Q8_0 ? 7 : 2);
    EXPECT_EQ(info.metadata.at("general.quantization_version").i, 2);
    std::vector<std::string> f16;
    for (const auto& r : info.tensors) {
      if (r.ne.size() == 1) {
        EXPECT_EQ(r.type, GgmlType::F32) << r.name;
      }
      // The output projection (untied here) a step higher: f16 under q8_0, q8_0 under q4_0.
      if (r.name == "output.weight") {
        EXPECT_EQ(r.type, t == GgmlType::Q8_0 ? GgmlType::F16 : GgmlType::Q8_0);
        continue;
      }
      if (r.ne.size() == 2 && r.type == GgmlType::F16) f16.push_back(r.name);
      if (r.ne.size() == 2 && r.type != GgmlType::F16) {
        EXPECT_EQ(r.type, t) << r.name;
      }
    }
    EXPECT_EQ(f16, (std::vector<std::string>{"blk.0.ffn_down.weight", "blk.1.ffn_down.weight"}));
    EXPECT_EQ(layout.kept_f16, f16);
    const auto w = s.at("decoder.layers.1.ffn.fc1.weight");
    const auto back = gguf_tensor(path, info, "blk.1.ffn_up.weight");
    EXPECT_EQ(back.sizes(), w.sizes());
    EXPECT_EQ(back.scalar_type(), torch::kFloat32);
    EXPECT_LT((back - w).abs().max().item<float>(), w.abs().max().item<float>() / (t == GgmlType::Q8_0 ? 120 : 7));
    EXPECT_TRUE(torch::allclose(gguf_tensor(path, info, "blk.0.ffn_down.weight").to(torch::kFloat32),
                                s.at("decoder.layers.0.ffn.fc2.weight"), 1e-3, 1e-3));
    EXPECT_EQ(layout.output_type, default_gguf_output_type(t));
  }
  // An output type asked for is the output's, whatever the weights' type.
  {
    const std::string path = dir / "q4_out_q4.gguf";
    write_file(path, to_gguf(*model, tiny_vocab(100), GgufTypes{GgmlType::Q4_0, GgmlType::Q4_0}, "tiny"));
    const auto info = read_gguf_info(path);
    for (const auto& r : info.tensors)
      if (r.name == "output.weight" || r.name == "blk.0.attn_q.weight") {
        EXPECT_EQ(r.type, GgmlType::Q4_0) << r.name;
      }
  }
  // A block-typed tensor whose rows are not whole blocks is refused by the reader, naming it.
  GgufFile f;
  f.tensors.push_back(quantized_gguf_tensor("w", GgmlType::Q8_0, {2, 64}, [] { return torch::ones({2, 64}); }));
  write_file(dir / "w.gguf", f);
  std::string bytes = read_file(dir / "w.gguf");
  const uint64_t cols = 48;  // the record's first dimension: magic, version, counts, name length, "w", dims
  bytes.replace(4 + 4 + 8 + 8 + 8 + 1 + 4, 8, std::string(reinterpret_cast<const char*>(&cols), 8));
  test::write(dir / "bad.gguf", bytes);
  EXPECT_NE(test::error_of([&] { read_gguf_info(dir / "bad.gguf"); }).find("'w' is q8_0 with rows of 48 values"),
            std::string::npos);
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
