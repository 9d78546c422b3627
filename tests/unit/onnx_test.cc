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
