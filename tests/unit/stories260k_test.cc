// stories260K (../shared/models/stories260K, llama2.c's GQA LLaMA trained on TinyStories by someone else)
// against an independent reference forward: tests/clients/llama2c_reference.py, plain PyTorch written
// from llama2.c's math (interleaved rotary embedding on the original rows; headprune rotates halves on
// HF's permuted rows). Skipped when the model or Debian's python3-torch is absent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "headprune/decode/search.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "test_util.h"

namespace hp {
namespace {

using test::TempDir;

std::string stories_dir() { return test::shared_data() + "/../models/stories260K"; }

// Runs the reference with `args`; false (and the test skipped) when python3-torch is missing.
bool reference(const std::string& args) {
  const std::string script = std::string(HP_FIXTURES_DIR) + "/../clients/llama2c_reference.py";
  return std::system(("/usr/bin/python3 " + script + " " + args + " --model " + stories_dir()).c_str()) == 0;
}

bool can_run() { return is_directory(stories_dir()) && std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") == 0; }

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

TEST(Stories260K, LogitsOfABatchWithoutAMaskEqualTheReferenceWithEndOfTextInside) {
  if (!can_run()) GTEST_SKIP() << stories_dir() << " or /usr/bin/python3 with torch is absent";
  TempDir tmp;
  ASSERT_TRUE(reference("sample --n 3 --length 96 --seed 5 --out " + tmp / "ids.json"));
  auto ids_json = read_json(tmp / "ids.json");
  // End-of-text (2, the checkpoint's only padding candidate: no pad_token_id) inside every row, at a
  // position of its own, whatever the samples hold already.
  const int64_t at[] = {38, 7, 70};
  for (size_t r = 0; r < 3; ++r) ids_json["sequences"][r][at[r]] = 2;
  {
    std::ofstream f(tmp / "ids.json");
    f << ids_json.dump();
  }
  ASSERT_TRUE(reference("logits --float64 --ids " + tmp / "ids.json" + " --out " + tmp / "ref.json"));
  const auto ref_json = read_json(tmp / "ref.json")["logits"];

  std::vector<std::vector<int64_t>> rows = ids_json["sequences"].get<std::vector<std::vector<int64_t>>>();
  auto model = load_checkpoint(stories_dir());
  ASSERT_EQ(model->config().pad_id, 2) << "the importer's pad id is end-of-text for a config without pad_token_id";
  Batch b;  // no attention_mask: every token is real
  b.input_ids = torch::empty({3, 96}, torch::kLong);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t t = 0; t < 96; ++t) b.input_ids[r][t] = rows[r][t];
  const auto got = test::logits(*model, b).to(torch::kDouble);
  const int64_t V = got.size(2);
  auto want = torch::empty({3, 96, V}, torch::kDouble);
  auto w = want.accessor<double, 3>();
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t t = 0; t < 96; ++t)
      for (int64_t v = 0; v < V; ++v) w[r][t][v] = ref_json[r][t][v].get<double>();
  // Every position, those after end-of-text included.
  const auto per_position = (got - want).abs().amax(2);  // [3, 96]
  EXPECT_LT(per_position.max().item<double>(), 1e-4) << per_position;
  for (int64_t r = 0; r < 3; ++r)
    EXPECT_LT(per_position[r].narrow(0, at[r], 96 - at[r]).max().item<double>(), 1e-4) << "row " << r;

  // The same batch with an explicit all-ones mask gives the same logits; one that marks the end-of-text
  // positions as padding does not (the difference the default must not make).
  b.attention_mask = torch::ones_like(b.input_ids);
  EXPECT_EQ(test::max_abs_diff(test::logits(*model, b), got.to(torch::kFloat)), 0.0);
  b.attention_mask = b.input_ids.ne(2);
  EXPECT_GT(test::max_abs_diff(test::logits(*model, b), got.to(torch::kFloat)), 1.0);
}

TEST(Stories260K, GreedyGenerationContinuesAsTheReference) {
  if (!can_run()) GTEST_SKIP() << stories_dir() << " or /usr/bin/python3 with torch is absent";
  TempDir tmp;
  // A prompt with end-of-text inside: the end of one story and the start of the next.
  const std::vector<int64_t> prompt = {1, 403, 261, 2, 1, 403};
  ASSERT_TRUE(reference("greedy --prompt 1,403,261,2,1,403 --new 40 --out " + tmp / "greedy.json"));
  const auto want = read_json(tmp / "greedy.json")["ids"].get<std::vector<int64_t>>();
  auto model = load_checkpoint(stories_dir());
  DecodeOptions o;
  o.max_len = 40;
  o.eos_id = 2;
  const auto got = generate(*model, prompt, o);  // stops at end-of-text, which it leaves out
  ASSERT_FALSE(got.empty());
  ASSERT_LE(got.size(), want.size());
  EXPECT_EQ(got, std::vector<int64_t>(want.begin(), want.begin() + static_cast<int64_t>(got.size())));
  if (got.size() < want.size()) {
    EXPECT_EQ(want[got.size()], 2) << "stopped before the reference's end-of-text";
  }
}

}  // namespace
}  // namespace hp
