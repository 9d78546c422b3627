// Checkpoint directories: round trips (full and pruned), strict loading, bad inputs.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/safetensors.h"
#include "headprune/model/remove_heads.h"
#include "test_util.h"

namespace hp {
namespace {

std::string load_error(const std::string& dir) {
  try {
    load_checkpoint(dir);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

class CheckpointRoundTrip : public ::testing::TestWithParam<test::Fam> {};

TEST_P(CheckpointRoundTrip, SaveLoadGivesIdenticalOutputs) {
  test::TempDir dir;
  auto model = test::make_model(GetParam());
  model->to(test::device());  // HP_TEST_DEVICE=cuda: saved from and loaded onto the GPU
  model->set_head_mask({model->config().attn_types().back(), 1, 3}, 0.0);  // masks survive too
  Batch b = test::make_batch(model->config()).to(test::device());
  save_checkpoint(dir.path, *model);
  auto loaded = load_checkpoint(dir.path);
  loaded->to(test::device());
  torch::NoGradGuard g;
  EXPECT_EQ(test::max_abs_diff(model->forward(b).logits, loaded->forward(b).logits), 0.0);
  EXPECT_EQ(loaded->masked_heads(), model->masked_heads());
}

TEST_P(CheckpointRoundTrip, PrunedModelKeepsShapeAndOriginalIds) {
  test::TempDir dir;
  auto model = test::make_model(GetParam());
  const AttnType t = model->config().attn_types().back();
  auto pruned = remove_heads(*model, {{t, 0, 0}, {t, 0, 2}, {t, 1, 0}, {t, 1, 1}, {t, 1, 2}, {t, 1, 3}});
  save_checkpoint(dir.path, *pruned);
  auto loaded = load_checkpoint(dir.path);
  EXPECT_EQ(loaded->config().heads(t)[0], (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(loaded->config().heads(t)[1].empty());
  EXPECT_EQ(loaded->attention(t, 0).kept_heads(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(loaded->n_parameters(), pruned->n_parameters());
  Batch b = test::make_batch(model->config());
  torch::NoGradGuard g;
  EXPECT_EQ(test::max_abs_diff(pruned->forward(b).logits, loaded->forward(b).logits), 0.0);
  // The file itself records the sliced shapes.
  auto f = read_safetensors(dir / "model.safetensors");
  EXPECT_EQ(f.tensors.at(attention_prefix(t, 0) + ".q_proj.weight").size(0), 2 * model->config().head_dim);
  EXPECT_EQ(f.tensors.at(attention_prefix(t, 1) + ".o_proj.weight").size(1), 0);
}

INSTANTIATE_TEST_SUITE_P(Families, CheckpointRoundTrip,
                         HP_ALL_FAMILIES);

// Version 1 checkpoints named the mask buffers head_gate: they load as they were saved.
TEST(Checkpoint, ReadsVersionOneAndRefusesLaterVersions) {
  test::TempDir dir;
  auto model = test::make_model(Arch::EncoderDecoder);
  model->set_head_mask({AttnType::Cross, 1, 2}, 0.0);
  save_checkpoint(dir.path, *model);
  auto config = read_json_file(dir / "config.json");
  EXPECT_EQ(config.at("version").get<int64_t>(), kCheckpointVersion);
  TensorMap v1;
  for (const auto& [name, t] : read_safetensors(dir / "model.safetensors").tensors) {
    const auto at = name.rfind(".head_mask");
    v1[at == std::string::npos ? name : name.substr(0, at) + ".head_gate"] = t;
  }
  write_safetensors(dir / "model.safetensors", v1);
  config["version"] = 1;
  write_json_file(dir / "config.json", config);
  auto loaded = load_checkpoint(dir.path);
  EXPECT_EQ(loaded->masked_heads(), model->masked_heads());
  Batch b = test::make_batch(model->config());
  torch::NoGradGuard g;
  EXPECT_EQ(test::max_abs_diff(model->forward(b).logits, loaded->forward(b).logits), 0.0);
  config["version"] = kCheckpointVersion + 1;
  write_json_file(dir / "config.json", config);
  EXPECT_NE(load_error(dir.path).find("checkpoint version 3 is not supported"), std::string::npos) << load_error(dir.path);
}

// A saved tiny checkpoint whose files the bad-input tests then damage.
struct Saved {
  test::TempDir dir;
  Saved() {
    auto m = test::make_model(Arch::EncoderClassifier);
    save_checkpoint(dir.path, *m);
  }
  std::string weights() const { return dir / "model.safetensors"; }
  std::string config() const { return dir / "config.json"; }
  TensorMap tensors() const { return read_safetensors(weights()).tensors; }
};

TEST(Checkpoint, TruncatedWeightsFile) {
  Saved s;
  auto bytes = read_file(s.weights());
  write_file_atomic(s.weights(), bytes.substr(0, bytes.size() / 2));
  auto e = load_error(s.dir.path);
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

TEST(Checkpoint, WrongShape) {
  Saved s;
  auto t = s.tensors();
  t["encoder.layers.1.self_attn.k_proj.weight"] = torch::zeros({24, 32});
  write_safetensors(s.weights(), t);
  auto e = load_error(s.dir.path);
  EXPECT_NE(e.find("'encoder.layers.1.self_attn.k_proj.weight' has the wrong shape: expected [32, 32], got [24, 32]"),
            std::string::npos)
      << e;
}

TEST(Checkpoint, MissingAndUnexpectedTensors) {
  Saved s;
  auto t = s.tensors();
  t.erase("pooler.dense.weight");  // not a real name: erase does nothing
  t.erase("classifier.bias");
  write_safetensors(s.weights(), t);
  auto e = load_error(s.dir.path);
  EXPECT_NE(e.find("missing tensor 'classifier.bias' (expected shape [3])"), std::string::npos) << e;
  t = s.tensors();
  write_safetensors(s.weights(), t);
  t["classifier.bias"] = torch::zeros({3});
  t["extra.weight"] = torch::zeros({2});
  write_safetensors(s.weights(), t);
  e = load_error(s.dir.path);
  EXPECT_NE(e.find("unexpected tensor 'extra.weight'"), std::string::npos) << e;
}

TEST(Checkpoint, WrongDtype) {
  Saved s;
  auto t = s.tensors();
  t["encoder.embed_norm.weight"] = torch::ones({32}, torch::kLong);
  write_safetensors(s.weights(), t);
  auto e = load_error(s.dir.path);
  EXPECT_NE(e.find("'encoder.embed_norm.weight' has the wrong dtype: expected Float, got Long"), std::string::npos) << e;
  // Another floating dtype is converted (e.g. a bf16 checkpoint into an fp32 model).
  t["encoder.embed_norm.weight"] = torch::full({32}, 0.5, torch::kBFloat16);
  write_safetensors(s.weights(), t);
  EXPECT_EQ(load_checkpoint(s.dir.path)->encoder->embed_norm->weight[0].item<float>(), 0.5f);
}

TEST(Checkpoint, CorruptOrInvalidConfig) {
  Saved s;
  write_file_atomic(s.config(), std::string("{\"arch\": \"encoder_classifier\", "));
  auto e = load_error(s.dir.path);
  EXPECT_NE(e.find("config.json: not valid JSON"), std::string::npos) << e;
  write_file_atomic(s.config(), std::string(R"({"arch": "encoder_classifier", "vocab_size": 100})"));
  e = load_error(s.dir.path);
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("'d_model' is required"), std::string::npos) << e;
}

TEST(Checkpoint, ConfigAndWeightsDisagree) {
  Saved s;
  auto j = nlohmann::json::parse(read_file(s.config()));
  j["heads"]["encoder_self"][0] = {0, 1};  // config says 2 heads, weights hold 4
  write_file_atomic(s.config(), j.dump());
  auto e = load_error(s.dir.path);
  EXPECT_NE(e.find("encoder.layers.0.self_attn"), std::string::npos) << e;
  EXPECT_NE(e.find("has the wrong shape: expected [2], got [4]"), std::string::npos) << e;
}

TEST(Checkpoint, MissingFilesAndDirectories) {
  test::TempDir d;
  EXPECT_NE(load_error(d / "nope").find("not a directory"), std::string::npos);
  EXPECT_NE(load_error(d.path).find("missing config.json"), std::string::npos);
  Saved s;
  std::filesystem::remove(s.weights());
  std::ofstream(s.dir / "pytorch_model.bin") << "x";
  auto e = load_error(s.dir.path);
  EXPECT_NE(e.find("missing model.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("convert it to safetensors"), std::string::npos) << e;
}

TEST(Checkpoint, AtomicWriteKeepsOldFileWhenWriterFails) {
  test::TempDir d;
  const std::string path = d / "f.txt";
  write_file_atomic(path, std::string("old"));
  EXPECT_THROW(write_file_atomic(path,
                                 [](std::ostream& o) {
                                   o << "half of the new";
                                   throw std::runtime_error("disk on fire");
                                 }),
               std::runtime_error);
  EXPECT_EQ(read_file(path), "old");
  int n = 0;
  for (const auto& e : list_directory(d.path)) n += e.is_file;
  EXPECT_EQ(n, 1);
}

// The POSIX directory helpers that replace std::filesystem's recursive functions (io/files.h).
TEST(Files, ListWalkAndRemoveTreesWithoutFollowingLinks) {
  test::TempDir d;
  make_directories(d / "run/b/deep");
  write_file_atomic(d / "run/z.json", "{}");
  write_file_atomic(d / "run/a.txt", "a");
  write_file_atomic(d / "run/b/deep/x.json", "{}");
  make_directories(d / "outside");
  write_file_atomic(d / "outside/keep.txt", "keep");
  std::filesystem::create_directory_symlink(d / "outside", d / "run/link");
  std::vector<std::string> names;
  for (const auto& e : list_directory(d / "run")) names.push_back(e.name + (e.is_dir ? "/" : e.is_file ? "" : "@"));
  EXPECT_EQ(names, (std::vector<std::string>{"a.txt", "b/", "link@", "z.json"}));
  std::vector<std::string> walked;
  walk_directory(d / "run", [&](const DirEntry& e) {
    walked.push_back(std::to_string(e.depth) + ":" + e.name);
    return e.name != "deep";  // not entered
  });
  EXPECT_EQ(walked, (std::vector<std::string>{"0:a.txt", "0:b", "1:deep", "0:link", "0:z.json"}));
  EXPECT_EQ(list_directory(d / "run").front().size, 1u) << "a.txt holds one byte";
  EXPECT_EQ(remove_tree(d / "run"), "");
  EXPECT_FALSE(std::filesystem::exists(d / "run"));
  EXPECT_EQ(read_file(d / "outside/keep.txt"), "keep") << "a link's target is not removed";
  EXPECT_EQ(remove_tree(d / "run"), "") << "nothing to remove is no error";
  // What cannot be removed (a path through a file) is said; the throwing form puts the caller's context first.
  EXPECT_NE(remove_tree(d / "outside/keep.txt/x"), "");
  EXPECT_EQ(test::error_of([&] { remove_tree_or_throw(d / "outside/keep.txt/x", "fine-tuning"); })
                .rfind("fine-tuning: cannot remove " + d / "outside/keep.txt/x", 0),
            0u);
  EXPECT_NE(test::error_of([&] { list_directory(d / "run"); }).find("cannot read the directory"), std::string::npos);
  // test::copy_tree copies what the walker sees.
  test::copy_tree(d / "outside", d / "copy");
  EXPECT_EQ(read_file(d / "copy/keep.txt"), "keep");
}

TEST(Checkpoint, DescribeShowsPerLayerHeads) {
  ModelConfig c = tiny_config(Arch::EncoderDecoder);
  c.cross_heads = {{0, 1, 2}, {}};
  c.finalize();
  auto text = describe(c);
  EXPECT_NE(text.find("encoder_self heads  8/8 kept: 4 x 2 layers"), std::string::npos) << text;
  EXPECT_NE(text.find("cross heads         3/8 kept: [3, 0] per layer"), std::string::npos) << text;
  EXPECT_NE(text.find("layer 1 keeps [] (attention skipped)"), std::string::npos) << text;
  EXPECT_EQ(text.find("grouped-query"), std::string::npos) << text;
  c.n_kv_heads = 2;
  c.o_bias = false;
  c.finalize();
  text = describe(c);
  EXPECT_NE(text.find("grouped-query: 2 key/value heads for 4 query heads per layer"), std::string::npos) << text;
  EXPECT_NE(text.find("biases              q/k/v yes, output no"), std::string::npos) << text;
}

}  // namespace
}  // namespace hp
