// float16 end to end (issue 78): masks that fp16 holds, "f16 weights, f32 compute" on the CPU (LibTorch
// 1.13 has no fp16 CPU kernels), F16-stored HF checkpoints under --dtype auto, and the global --dtype
// honoured (or refused by name) by every subcommand that loads a model.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <sstream>

#include "app.h"
#include "headprune/data/model_dir.h"
#include "headprune/data/tokenizer.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/hf.h"
#include "headprune/io/outputs.h"
#include "headprune/io/safetensors.h"
#include "headprune/jobs/export_job.h"
#include "headprune/jobs/generate_job.h"
#include "headprune/jobs/prune_job.h"
#include "headprune/model/precision.h"
#include "test_util.h"

namespace hp {
namespace f16_test {

using test::Fam;

// The largest |a - b| and the largest |b| (the scale the difference is judged against).
struct Gap {
  double max_abs = 0, scale = 0;
};
Gap gap(const torch::Tensor& got, const torch::Tensor& want) {
  return {test::max_abs_diff(got.to(torch::kFloat), want.to(torch::kFloat)), want.abs().max().item<double>()};
}

// Every floating weight of `m` is the fp16 rounding of `ref`'s, held in fp32.
void expect_f16_values_of(TransformerImpl& m, TransformerImpl& ref) {
  auto want = ref.named_parameters();
  for (const auto& p : m.named_parameters()) {
    ASSERT_EQ(p.value().scalar_type(), torch::kFloat) << p.key();
    const auto r = want[p.key()].detach().to(torch::kHalf).to(torch::kFloat);
    ASSERT_TRUE(torch::equal(p.value().detach(), r)) << p.key();
  }
}

TEST(F16Masks, BlockedScoresStayFiniteInFp16WhenAdded) {
  EXPECT_EQ(masked_score(torch::kFloat), -1e9);  // fp32 and bf16 as before: the numbers do not move
  EXPECT_EQ(masked_score(torch::kBFloat16), -1e9);
  const double h = masked_score(torch::kHalf);
  EXPECT_LT(h, -1e4);  // far below any score: exp() of it is 0 in fp16 and fp32
  EXPECT_GT(h, -65504.0 / 3);
  EXPECT_THROW(masked_score(torch::kLong), std::invalid_argument);
  // A causal mask plus a padding mask plus a T5 position bias: finite in fp16 (-1e9 was LibTorch's
  // "value cannot be converted to type at::Half without overflow").
  auto keep = torch::tensor({{0, 1, 1}, {1, 1, 0}}, torch::kLong);
  const auto pad = padding_mask(keep, torch::kHalf);
  const auto causal = causal_mask(3, torch::kCPU, torch::kHalf, /*window=*/2);
  ASSERT_EQ(pad.scalar_type(), torch::kHalf);
  const auto sum = (pad + causal + torch::full({1, 1, 3, 3}, -500.0, torch::kHalf)).to(torch::kFloat);
  EXPECT_TRUE(torch::isfinite(sum).all().item<bool>());
  EXPECT_EQ(pad[0][0][0][0].item<double>(), h);
  EXPECT_EQ(causal_mask_at(torch::tensor({1}, torch::kLong), 4, torch::kHalf)[0][0][0][3].item<double>(), h);
  // A row with every key blocked (the padded first query): finite probabilities, not NaN.
  const auto probs = torch::softmax((pad + causal).to(torch::kFloat), -1);
  EXPECT_TRUE(torch::isfinite(probs).all().item<bool>());
}

TEST(F16Cpu, AModelConvertedByHandIsRefusedByNameNotByAMissingKernel) {
  auto m = test::make_model(Fam::DecoderLM);
  m->to(torch::kHalf);
  const auto b = test::make_batch(m->config());
  const auto msg = test::error_of([&] { test::logits(*m, b); });
  EXPECT_NE(msg.find("f16 weights on the CPU"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--dtype f16"), std::string::npos) << msg;
  EXPECT_TRUE(widen_f16_on_cpu(*m));
  EXPECT_EQ(m->parameters().front().scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::isfinite(test::logits(*m, b)).all().item<bool>());
  EXPECT_FALSE(widen_f16_on_cpu(*m));  // fp32 (and bf16) models are left alone
}

class F16Families : public ::testing::TestWithParam<Fam> {};

// --dtype f16 of the built-in families: the fp16 values of the weights, computed in fp32, on a
// padded batch (make_batch's rows have different lengths); within fp16 weight rounding of fp32.
TEST_P(F16Families, LoadedAsF16AgreeWithFp32WithinFp16Rounding) {
  auto ref = test::make_model(GetParam());
  test::TempDir dir;
  save_checkpoint(dir.path, *ref);
  LoadOptions lo;
  lo.dtype = torch::kHalf;
  LoadedModel m = open_model(dir.path, torch::kCPU, lo);
  EXPECT_EQ(m.dtype, torch::kHalf);
  expect_f16_values_of(*m.model, *ref);
  const auto b = test::make_batch(ref->config(), 5, 6);
  ASSERT_TRUE(b.attention_mask.defined());
  ASSERT_TRUE(b.attention_mask.eq(0).any().item<bool>()) << "the batch should have padding";
  const Gap g = gap(test::logits(*m.model, b), test::logits(*ref, b));
  std::cout << "[ f16 ] " << test::name_of(GetParam()) << ": max |f16 - f32| = " << g.max_abs << " (max |f32| "
            << g.scale << ")\n";
  // fp16 keeps 11 bits: weights off by at most 2^-12 of themselves; measured about 1e-4 of the scale.
  EXPECT_LT(g.max_abs, 5e-3 * g.scale + 1e-4);
  EXPECT_GT(g.max_abs, 0.0) << "unchanged: the weights were not rounded to fp16?";
}

INSTANTIATE_TEST_SUITE_P(F16, F16Families, HP_ALL_FAMILIES);

// An HF checkpoint of the fixture's with every floating tensor stored as F16 (config and the rest copied).
std::string write_f16_copy(const std::string& fixture, const std::string& dir) {
  test::copy_tree(test::hf_fixture(fixture), dir);
  remove_tree(join_path(dir, "golden.safetensors"));
  TensorMap half;
  for (const auto& [name, t] : read_safetensors(join_path(dir, "model.safetensors")).tensors)
    half[name] = at::isFloatingType(t.scalar_type()) ? t.to(torch::kHalf) : t.clone();
  write_safetensors(join_path(dir, "model.safetensors"), half);
  return dir;
}

class F16Hf : public ::testing::TestWithParam<std::string> {};

// An F16-stored HF checkpoint under --dtype auto (and a fp32 one under --dtype f16): loads, computes
// in fp32 from its fp16 values on the CPU, and agrees with the fp32 checkpoint on a padded batch.
TEST_P(F16Hf, StoredAsF16LoadsUnderAutoAndAgreesWithFp32) {
  const std::string name = GetParam();
  test::TempDir dir;
  const std::string f16 = write_f16_copy(name, dir / "f16");
  ASSERT_EQ(read_safetensors_header(join_path(f16, "model.safetensors")).tensors.begin()->second.dtype, torch::kHalf);
  LoadedModel ref = open_model(test::hf_fixture(name));
  LoadedModel m = open_model(f16);  // auto: as stored
  EXPECT_EQ(m.dtype, torch::kHalf);
  LoadOptions lo;
  lo.dtype = torch::kHalf;
  LoadedModel asked = open_model(test::hf_fixture(name), torch::kCPU, lo);
  expect_f16_values_of(*m.model, *ref.model);
  const auto b = test::make_batch(ref.model->config(), 5, 6);
  const auto want = test::logits(*ref.model, b), got = test::logits(*m.model, b);
  const Gap g = gap(got, want);
  std::cout << "[ f16 ] hf " << name << ": max |f16 - f32| = " << g.max_abs << " (max |f32| " << g.scale << ")\n";
  // Random HF fixtures (T5's unscaled attention, gated FFNs) carry the rounding further: measured
  // 0.16 % (BERT) to 0.64 % (T5 gated) of the logits' largest value.
  EXPECT_LT(g.max_abs, 1e-2 * g.scale);
  EXPECT_TRUE(torch::equal(test::logits(*asked.model, b), got)) << "--dtype f16 and an F16 file differ";
}

INSTANTIATE_TEST_SUITE_P(F16, F16Hf,
                         ::testing::Values("bert", "gpt2", "llama_gqa", "t5_gated", "t5_relu", "marian_tiny",
                                           "qwen3_qk_norm", "phi3_fused", "mistral_window", "qwen2_tied"),
                         [](const auto& info) { return info.param; });

// ---------------------------------------------------------------------------------------
// The global --dtype in the subcommands that load a model.

using CliRun = test::CliResult;
const auto headprune = test::run_cli;

TEST(F16Cli, GenerateHonoursTheGlobalDtype) {
  const std::string gpt2 = test::hf_fixture("gpt2");
  std::map<std::string, nlohmann::json> runs;
  for (const char* dt : {"auto", "fp32", "bf16", "f16"}) {
    const auto r = headprune({"--log-level", "warn", "--dtype", dt, "generate", gpt2, "--ids", "1", "2", "3",
                              "--max-new", "4", "--json"});
    ASSERT_EQ(r.code, 0) << dt << ": " << r.err;
    runs[dt] = nlohmann::json::parse(r.out);
    EXPECT_EQ(runs[dt]["ids"].size(), 4u) << dt;
  }
  EXPECT_EQ(runs["auto"]["dtype"], "fp32");
  EXPECT_EQ(runs["fp32"]["dtype"], "fp32");
  EXPECT_EQ(runs["bf16"]["dtype"], "bf16");
  EXPECT_EQ(runs["f16"]["dtype"], "f16");
  // An F16 checkpoint generates under auto as under --dtype f16.
  test::TempDir dir;
  const auto r = headprune({"--log-level", "warn", "generate", write_f16_copy("gpt2", dir / "f16"), "--ids", "1", "2", "3",
                            "--max-new", "4", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["dtype"], "f16");
  EXPECT_EQ(j["ids"], runs["f16"]["ids"]);
  // Translation too (an encoder-decoder: the masks of both stacks).
  const auto t = headprune({"--log-level", "warn", "--dtype", "f16", "generate", test::hf_fixture("marian_tiny"), "--ids",
                            "5", "6", "7", "--max-new", "3", "--json"});
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_EQ(nlohmann::json::parse(t.out)["dtype"], "f16");
}

TEST(F16Cli, ExportLoadsAndWritesInTheGlobalDtype) {
  test::TempDir dir;
  const std::string gpt2 = test::hf_fixture("gpt2");
  auto r = headprune({"--log-level", "warn", "--dtype", "f16", "export", gpt2, "--hf", dir / "hf", "--native", dir / "native"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const auto& [name, e] : read_safetensors_header(dir / "hf/model.safetensors").tensors)
    EXPECT_EQ(e.dtype, torch::kHalf) << name;
  EXPECT_EQ(read_json_file(dir / "hf/config.json").at("torch_dtype"), "float16");
  LoadOptions keep;
  EXPECT_EQ(load_checkpoint(dir / "native", keep)->parameters().front().scalar_type(), torch::kHalf);
  // bf16 the same way; auto keeps what is stored (the F16 export stays F16).
  r = headprune({"--log-level", "warn", "--dtype", "bf16", "export", gpt2, "--hf", dir / "bf16"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_safetensors_header(dir / "bf16/model.safetensors").tensors.begin()->second.dtype, torch::kBFloat16);
  r = headprune({"--log-level", "warn", "export", dir / "hf", "--hf", dir / "again"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_safetensors_header(dir / "again/model.safetensors").tensors.begin()->second.dtype, torch::kHalf);
  // `--dtype` after `export` is the GGUF file's: without --gguf it is refused, naming the global one.
  r = headprune({"export", gpt2, "--hf", dir / "x", "--dtype", "f16"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("needs --gguf"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("headprune --dtype f16 export"), std::string::npos) << r.err;
  EXPECT_TRUE(path_type(dir / "x").empty());
}

TEST(F16Cli, RolesHonoursTheGlobalDtype) {
  auto made = test::tiny_classifier_with_tokenizer();
  const Tokenizer& tok = made.tok;
  Transformer& model = made.model;
  test::TempDir dir;
  save_checkpoint(dir / "ckpt", *model, {{kTokenizerFile, tok.serialized()}});
  test::write(dir / "a.conllu",
              "1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n"
              "3\tchased\tchase\tVERB\tVBD\t_\t0\troot\t_\t_\n4\tcats\tcat\tNOUN\tNNS\t_\t3\tobj\t_\t_\n\n"
              "1\tthe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tcats\tcat\tNOUN\tNNS\t_\t3\tnsubj\t_\t_\n"
              "3\trun\trun\tVERB\tVBP\t_\t0\troot\t_\t_\n\n");
  for (const char* dt : {"f16", "bf16", "auto"}) {
    const std::string out = dir / (std::string("roles_") + dt);
    const auto r = headprune({"--log-level", "warn", "--dtype", dt, "roles", dir / "ckpt", "--conllu", "a.conllu",
                              "--freq-conllu", "a.conllu", "--data-root", dir.path, "--out", out});
    ASSERT_EQ(r.code, 0) << dt << ": " << r.err;
    EXPECT_EQ(read_json_file(join_path(out, "roles.json")).at("dtype"), std::string(dt) == "auto" ? "fp32" : dt) << dt;
  }
}

// prune under --dtype f16 computes in fp32 on the CPU and saves the pruned model in f16, as it came;
// the reloaded file gives the logits of the model it was saved from (fine-tuned: rounded back first).
TEST(F16Jobs, PruneInF16SavesF16AndReloadsTheSameModel) {
  test::TempDir dir;
  auto model = test::make_model(Fam::EncoderClassifier);
  save_checkpoint(dir / "ckpt", *model);
  PruneRequest r;
  r.checkpoint = dir / "ckpt";
  r.out_dir = dir / "prune";
  r.plan.strategy = PlanStrategy::Score;
  r.plan.target = parse_target("0.5");
  r.data.synthetic_examples = 24;
  r.data.synthetic_train = 64;
  r.finetune.steps = 2;
  Runtime rt;
  rt.dtype = torch::kHalf;
  const PruneResult res = run_prune(r, rt);
  EXPECT_EQ(res.checks.reloaded, 0.0);
  for (const auto& [name, e] : read_safetensors_header(dir / "prune/model/model.safetensors").tensors)
    if (at::isFloatingType(e.dtype)) {
      EXPECT_EQ(e.dtype, torch::kHalf) << name;
    }
  EXPECT_EQ(load_checkpoint(dir / "prune/model")->n_active_heads(), 4);
}

TEST(F16Cli, SubcommandsWhereDtypeCannotApplyRefuseItByName) {
  test::TempDir dir;
  auto model = test::make_model(Fam::DecoderLM);
  save_checkpoint(dir / "ckpt", *model);
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  for (const auto& c : std::vector<Case>{
           {{"--dtype", "f16", "info", dir / "ckpt"}, "info: --dtype f16 does not apply"},
           {{"--dtype", "bf16", "train", "--out", dir / "t"}, "train: --dtype bf16 does not apply"},
           {{"--dtype", "f16", "demo", "--train-steps", "1"}, "demo: --dtype f16 does not apply"},
       }) {
    const auto r = headprune(c.args);
    EXPECT_EQ(r.code, 1) << c.says << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
  // fp32 and auto are what these jobs do anyway.
  EXPECT_EQ(headprune({"--dtype", "auto", "info", dir / "ckpt"}).code, 0);
}

}  // namespace f16_test
}  // namespace hp
