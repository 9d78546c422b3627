// ONNX: the ModelProto the writer streams (read back field by field with util/protowire.h), the graph a
// model becomes (fused, standard and empty layers; grouped heads gathered), and the refusals. ONNX
// Runtime itself runs the files in tests/e2e/onnx.sh.
#include <cstring>
#include <sstream>

#include <gtest/gtest.h>

#include "headprune/io/onnx.h"
#include "headprune/io/onnx_model.h"
#include "headprune/model/remove_heads.h"
#include "headprune/util/protowire.h"
#include "test_util.h"

namespace hp {
namespace {

std::string serialize(const OnnxGraph& g) {
  std::ostringstream out;
  g.write(out, "g", {{"k", "v"}});
  return out.str();
}

// The embedded messages of field `f` of a message.
std::vector<std::string> messages(std::string_view m, uint32_t f) {
  std::vector<std::string> out;
  ProtoReader r(m, "test");
  while (r.next())
    if (r.field() == f && r.wire() == ProtoReader::Wire::Bytes) out.emplace_back(r.bytes());
    else r.skip();
  return out;
}

std::map<std::string, int> op_counts(const std::string& model) {
  std::map<std::string, int> n;
  for (const auto& graph : messages(model, 7))
    for (const auto& node : messages(graph, 1))
      for (const auto& op : messages(node, 4)) n[op]++;
  return n;
}

TEST(Onnx, WritesAModelProtoThatReadsBack) {
  OnnxGraph g;
  g.input("x", OnnxType::Float, {std::string("batch"), int64_t{3}});
  const auto w = torch::arange(6, torch::kFloat).view({3, 2});
  const auto y = g.node("MatMul", {"x", g.initializer("w", LazyTensor::of(w))});
  g.node("Relu", {y}, {OnnxAttr::of("unused", 1)}, "", {"y"});
  g.output("y", OnnxType::Float, {std::string("batch"), int64_t{2}});
  const std::string m = serialize(g);
  // ir_version 8, producer "headprune", two opset imports, the metadata, one graph.
  ProtoReader r(m, "model");
  int64_t ir = 0;
  int opsets = 0;
  std::string producer;
  while (r.next()) {
    if (r.field() == 1) ir = r.int_value();
    else if (r.field() == 2) producer = std::string(r.bytes());
    else if (r.field() == 8) ++opsets, r.skip();
    else r.skip();
  }
  EXPECT_EQ(ir, 8);
  EXPECT_EQ(producer, "headprune");
  EXPECT_EQ(opsets, 2);
  const auto graphs = messages(m, 7);
  ASSERT_EQ(graphs.size(), 1u);
  EXPECT_EQ(op_counts(m), (std::map<std::string, int>{{"MatMul", 1}, {"Relu", 1}}));
  // The initializer: dims 3, 2; FLOAT; its name; the raw bytes as the tensor holds them.
  const auto inits = messages(graphs[0], 5);
  ASSERT_EQ(inits.size(), 1u);
  ProtoReader t(inits[0], "tensor");
  std::vector<int64_t> dims;
  std::string raw, name;
  while (t.next()) {
    if (t.field() == 1) dims.push_back(t.int_value());
    else if (t.field() == 8) name = std::string(t.bytes());
    else if (t.field() == 9) raw = std::string(t.bytes());
    else t.skip();
  }
  EXPECT_EQ(dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(name, "w");
  ASSERT_EQ(raw.size(), 24u);
  EXPECT_EQ(std::memcmp(raw.data(), w.data_ptr(), 24), 0);
  EXPECT_EQ(messages(graphs[0], 11).size(), 1u);  // inputs
  EXPECT_EQ(messages(graphs[0], 12).size(), 1u);  // outputs
}

TEST(Onnx, RefusesModelsPastTheProtobufLimitBeforeMakingATensor) {
  OnnxGraph g;
  bool made = false;
  g.initializer("big", LazyTensor{torch::kFloat32, {int64_t{1} << 29, 2}, [&] { made = true; return torch::Tensor(); }});
  EXPECT_NE(test::error_of([&] { serialize(g); }).find("2 GiB"), std::string::npos);
  EXPECT_FALSE(made);
}

TEST(Onnx, ExternalDataHoldsTheLargeInitializersAtAlignedOffsets) {
  OnnxGraph g;
  g.input("x", OnnxType::Float, {int64_t{1}, int64_t{300}});
  const auto w = torch::arange(300 * 2, torch::kFloat).view({300, 2}), w2 = w * 2;
  auto y = g.node("MatMul", {"x", g.initializer("w", LazyTensor::of(w))});
  y = g.node("Add", {y, g.scalar(1.0f)});
  g.node("MatMul", {y, g.initializer("w2", LazyTensor::of(w2.t().contiguous()))}, {}, "", {"y"});
  g.output("y", OnnxType::Float, {int64_t{1}, int64_t{300}});
  std::ostringstream model, data;
  OnnxExternalData ext;
  ext.out = &data, ext.location = "m.onnx_data";
  g.write(model, "g", {}, &ext);
  // Each large tensor: no raw_data, data_location EXTERNAL, location/offset/length pointing at its bytes.
  std::map<std::string, std::map<std::string, std::string>> where;
  int inside = 0;
  for (const auto& t : messages(messages(model.str(), 7).at(0), 5)) {
    ProtoReader r(t, "tensor");
    std::string name;
    std::map<std::string, std::string> kv;
    int64_t location = 0;
    bool raw = false;
    while (r.next()) {
      if (r.field() == 8) name = std::string(r.bytes());
      else if (r.field() == 9) raw = true, r.skip();
      else if (r.field() == 14) location = r.int_value();
      else if (r.field() == 13) {
        ProtoReader e(r.bytes(), "entry");
        std::string k, v;
        while (e.next()) (e.field() == 1 ? k : v) = std::string(e.bytes());
        kv[k] = v;
      } else r.skip();
    }
    if (raw) { ++inside; EXPECT_EQ(location, 0); continue; }
    EXPECT_EQ(location, 1) << name;
    where[name] = kv;
  }
  EXPECT_EQ(inside, 1);  // the scalar
  ASSERT_EQ(where.size(), 2u);
  EXPECT_EQ(where["w"]["location"], "m.onnx_data");
  EXPECT_EQ(where["w"]["offset"], "0");
  EXPECT_EQ(where["w2"]["offset"], "4096");  // 2400 bytes, then the next 4 KiB boundary
  EXPECT_EQ(where["w2"]["length"], "2400");
  const std::string d = data.str();
  ASSERT_EQ(d.size(), 8192u);
  EXPECT_EQ(std::memcmp(d.data(), w.data_ptr(), 2400), 0);
  const auto w2t = w2.t().contiguous();
  EXPECT_EQ(std::memcmp(d.data() + 4096, w2t.data_ptr(), 2400), 0);
}

// The names of a graph's inputs or outputs (field 11 or 12), in order.
std::vector<std::string> value_names(const std::string& model, uint32_t field) {
  std::vector<std::string> out;
  for (const auto& v : messages(messages(model, 7).at(0), field)) {
    ProtoReader r(v, "value");
    while (r.next())
      if (r.field() == 1) out.emplace_back(r.bytes());
      else r.skip();
  }
  return out;
}

TEST(OnnxModel, KeyValueCacheHasOptimumsNamesForEveryLayerWithHeads) {
  auto llama = test::make_model(test::Fam::Llama);
  const int64_t L = llama->config().n_layers(AttnType::DecoderSelf);
  std::vector<HeadId> layer0;
  for (int64_t h : llama->config().heads(AttnType::DecoderSelf)[0]) layer0.push_back({AttnType::DecoderSelf, 0, h});
  auto pruned = remove_heads(*llama, layer0);  // layer 0 emptied: no cache there
  const auto e = to_onnx(*pruned, OnnxAttention::Auto, /*kv_cache=*/true);
  EXPECT_TRUE(e.kv_cache);
  EXPECT_EQ(e.cached_layers, static_cast<size_t>(L - 1));
  EXPECT_EQ(e.empty_layers, 1u);
  const std::string m = serialize(e.graph);
  std::vector<std::string> in = {"input_ids", "attention_mask", "position_ids"}, out = {"logits"};
  for (int64_t l = 1; l < L; ++l)
    for (const char* what : {"key", "value"}) {
      in.push_back("past_key_values." + std::to_string(l) + "." + what);
      out.push_back("present." + std::to_string(l) + "." + what);
    }
  EXPECT_EQ(value_names(m, 11), in);
  EXPECT_EQ(value_names(m, 12), out);
  EXPECT_EQ(value_names(serialize(to_onnx(*llama).graph), 11), (std::vector<std::string>{"input_ids", "attention_mask"}));
  auto bert = test::make_model(test::Fam::EncoderClassifier);
  EXPECT_NE(test::error_of([&] { to_onnx(*bert, OnnxAttention::Auto, true); }).find("key/value cache is for decoder LMs"),
            std::string::npos);
}

// --onnx-attention fused with a cache: GroupQueryAttention in every layer with heads, the same inputs and
// outputs as standard ops (its outputs are the present tensors); auto keeps standard ops.
TEST(OnnxModel, CachedDecoderFusedIsGroupQueryAttentionOnRequest) {
  ModelConfig cfg = tiny_config(Arch::DecoderLM);
  cfg.n_kv_heads = 2;
  cfg.head_dim = 8;
  cfg.decoder_self_heads.clear();
  cfg.finalize();
  auto llama = test::make_model(cfg);
  const int64_t L = cfg.n_layers(AttnType::DecoderSelf);
  const auto fused = to_onnx(*llama, OnnxAttention::Fused, true);
  EXPECT_EQ(fused.fused_layers, static_cast<size_t>(L));
  EXPECT_EQ(fused.cached_layers, static_cast<size_t>(L));
  const std::string m = serialize(fused.graph);
  EXPECT_EQ(op_counts(m)["GroupQueryAttention"], L);
  EXPECT_EQ(op_counts(m).count("Softmax"), 0u);
  const std::string standard = serialize(to_onnx(*llama, OnnxAttention::Standard, true).graph);
  EXPECT_EQ(value_names(m, 11), value_names(standard, 11));
  EXPECT_EQ(value_names(m, 12), value_names(standard, 12));
  EXPECT_EQ(to_onnx(*llama, OnnxAttention::Auto, true).fused_layers, 0u);
  // A layer whose groups serve different numbers of query heads cannot be fused.
  auto uneven = remove_heads(*llama, {{AttnType::DecoderSelf, 0, 0}});
  EXPECT_NE(test::error_of([&] { to_onnx(*uneven, OnnxAttention::Fused, true); }).find("layer 0 cannot be ONNX Runtime's fused GroupQueryAttention"),
            std::string::npos);
}

TEST(OnnxModel, FusedStandardAndEmptyLayers) {
  auto bert = test::make_model(test::Fam::EncoderClassifier);
  auto e = to_onnx(*bert);
  EXPECT_EQ(e.fused_layers, 2u);
  EXPECT_EQ(op_counts(serialize(e.graph))["Attention"], 2);
  auto pruned = remove_heads(*bert, {{AttnType::EncoderSelf, 0, 1}, {AttnType::EncoderSelf, 1, 0}, {AttnType::EncoderSelf, 1, 1},
                                     {AttnType::EncoderSelf, 1, 2}, {AttnType::EncoderSelf, 1, 3}});
  e = to_onnx(*pruned);
  EXPECT_EQ(e.fused_layers, 1u);
  EXPECT_EQ(e.empty_layers, 1u);
  e = to_onnx(*pruned, OnnxAttention::Standard);
  EXPECT_EQ(e.standard_layers, 1u);
  EXPECT_EQ(op_counts(serialize(e.graph)).count("Attention"), 0u);
  EXPECT_EQ(e.graph.count("Softmax"), 1u);
}

TEST(OnnxModel, GroupedHeadsAreGatheredAndRotaryIsNeverFused) {
  auto llama = test::make_model(test::Fam::Llama);
  auto e = to_onnx(*llama);
  EXPECT_EQ(e.standard_layers, 2u);
  const auto gathers = e.graph.count("Gather");
  // Query head 1 removed from layer 0: its groups keep 1 and 2 heads, still gathered per query head.
  auto pruned = remove_heads(*llama, {{AttnType::DecoderSelf, 0, 1}});
  EXPECT_EQ(to_onnx(*pruned).graph.count("Gather"), gathers);
  EXPECT_NE(test::error_of([&] { to_onnx(*llama, OnnxAttention::Fused); }).find("--onnx-attention standard"),
            std::string::npos);
  auto seq2seq = test::make_model(test::Fam::EncoderDecoder);
  EXPECT_NE(test::error_of([&] { to_onnx(*seq2seq); }).find("encoder-decoders"), std::string::npos);
  EXPECT_NE(test::error_of([&] { parse_onnx_attention("flash"); }).find("auto, fused or standard"), std::string::npos);
}

}  // namespace
}  // namespace hp
