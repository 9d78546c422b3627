// The command line, in-process: help, usage errors, info on a pruned checkpoint.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <new>
#include <set>
#include <variant>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

#include "headprune/util/runtime.h"
#include <nlohmann/json.hpp>

#include "app.h"
#include "headprune/data/tokenizer.h"
#include "headprune/io/checkpoint.h"
#include "headprune/eval/benchmark.h"
#include "headprune/jobs/export_job.h"
#include "headprune/jobs/gates_job.h"
#include "headprune/jobs/importance_job.h"
#include "headprune/jobs/job.h"
#include "headprune/jobs/prune_job.h"
#include "headprune/jobs/train_job.h"
#include "headprune/model/remove_heads.h"
#include "headprune/prune/budget.h"
#include "headprune/prune/gates.h"
#include "headprune/prune/strategy.h"
#include "headprune/util/options.h"
#include "headprune/util/torch_compat.h"
#include "test_util.h"

namespace hp {
namespace {

using Result = test::CliResult;
using test::run_cli;

TEST(Cli, ThreadsAreBoundedByTheMachine) {
  // --threads 1000 made a 20-example evaluation 40x slower; --threads -1 printed a 300-digit bound.
  for (const char* n : {"1000", "-1"}) {
    auto r = run_cli({"--threads", n, "info", "x"});
    EXPECT_NE(r.code, 0) << n;
    EXPECT_NE(r.err.find("--threads"), std::string::npos) << r.err;
    EXPECT_LT(r.err.size(), 300u) << r.err;
  }
  EXPECT_THROW(configure_threads(100000), std::invalid_argument);
}

TEST(Cli, HelpAndUsageErrors) {
  auto r = run_cli({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("info"), std::string::npos);
  EXPECT_NE(r.out.find("--threads"), std::string::npos);
  r = run_cli({"info", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("checkpoint directory"), std::string::npos) << r.out;
  r = run_cli({});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error:"), std::string::npos);
  r = run_cli({"frobnicate"});
  EXPECT_EQ(r.code, 2);
  r = run_cli({"--threads", "-3", "info", "x"});
  EXPECT_EQ(r.code, 2);
}

TEST(Cli, InfoOnPrunedCheckpoint) {
  test::TempDir dir;
  auto model = test::make_model(Arch::EncoderDecoder);
  auto pruned = remove_heads(*model, {{AttnType::Cross, 1, 0}, {AttnType::Cross, 1, 1}, {AttnType::Cross, 1, 2},
                                      {AttnType::Cross, 1, 3}, {AttnType::EncoderSelf, 0, 2}});
  pruned->set_head_mask({AttnType::DecoderSelf, 0, 1}, 0.0);
  save_checkpoint(dir.path, *pruned);
  auto r = run_cli({"--threads", "1", "info", dir.path});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("encoder_self heads  7/8 kept: [3, 4] per layer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layer 0 keeps [0, 1, 3]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cross heads         4/8 kept: [4, 0] per layer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("masked heads        1 (decoder_self:0:1)"), std::string::npos) << r.out;
  r = run_cli({"info", dir.path, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["heads_per_layer"]["cross"], nlohmann::json({4, 0}));
  EXPECT_EQ(j["heads"]["encoder_self"][0], nlohmann::json({0, 1, 3}));
  EXPECT_EQ(j["n_parameters"].get<int64_t>(), pruned->n_parameters());
}

TEST(Cli, ErrorsGoToStderrWithNonZeroExit) {
  test::TempDir dir;
  auto r = run_cli({"info", dir / "missing"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("error: checkpoint '"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not a directory"), std::string::npos) << r.err;
}

// ---- bad input gets a short message and a non-zero exit (issue 50, finding 6) ---------------------

// An error a user can act on: a non-zero exit, one "error: ..." naming `name`, two lines at most
// (the message and "Run with --help"), no C++ stack frames, no number of more than 20 digits.
void expect_short_error(const Result& r, const std::string& name) {
  SCOPED_TRACE(r.err);
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u);
  EXPECT_NE(r.err.find(name), std::string::npos) << "does not name " << name;
  EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 2);
  EXPECT_EQ(r.err.find("frame #"), std::string::npos);
  size_t digits = 0, longest = 0;
  for (char c : r.err) {
    digits = std::isdigit(static_cast<unsigned char>(c)) ? digits + 1 : 0;
    longest = std::max(longest, digits);
  }
  EXPECT_LE(longest, 20u) << "a number of " << longest << " digits";
}

TEST(Cli, UnknownSubcommandIsNamedWithTheChoices) {
  // It said "A subcommand is required", whatever the word was.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"frobnicate"}, {"--threads", "1", "frobnicate", "x", "--out", "y"}}) {
    auto r = run_cli(args);
    EXPECT_EQ(r.code, 2);
    expect_short_error(r, "unknown subcommand 'frobnicate'");
    for (const char* name : {"train", "generate", "prune", "launch"}) EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
  }
  auto r = run_cli({});
  EXPECT_EQ(r.code, 2);
  expect_short_error(r, "a subcommand is required; expected one of: demo, info");
}

TEST(Cli, NumericOptionsRefuseBadValuesNamingTheOptionBriefly) {
  // Each was accepted (--max-steps -3 trained the config's 600 steps, --beam 0 printed nothing and
  // exited 0), failed deep inside LibTorch, or printed a 300-digit bound (CLI11's PositiveNumber).
  test::TempDir tmp;
  const std::string out = tmp / "out";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--dist-timeout", "0", "info", "x"}, "--dist-timeout"},
      {{"--seed", "-1", "info", "x"}, "--seed"},
      {{"demo", "--out", out, "--train-steps", "0"}, "--train-steps"},
      {{"demo", "--out", out, "--finetune-steps", "-2"}, "--finetune-steps"},
      {{"demo", "--out", out, "--fraction", "1.5"}, "--fraction"},
      {{"train", "--out", out, "--max-steps", "-3"}, "--max-steps"},
      {{"train", "--out", out, "--eval-every", "0"}, "--eval-every"},
      {{"train", "--out", out, "--keep-every", "-1"}, "--keep-every"},
      {{"eval", "x", "--synthetic", "0"}, "--synthetic"},
      {{"eval", "x", "--max-examples", "-1"}, "--max-examples"},
      {{"eval", "x", "--beam", "0"}, "--beam"},
      {{"bench", "x", "--batch", "0"}, "--batch"},
      {{"bench", "x", "--seq", "-5"}, "--seq"},
      {{"bench", "x", "--reps", "0"}, "--reps"},
      {{"bench", "x", "--warmup", "-1"}, "--warmup"},
      {{"generate", "x", "--ids", "1", "--beam", "0"}, "--beam"},
      {{"generate", "x", "--ids", "1", "--beam", "-3"}, "--beam"},
      {{"generate", "x", "--ids", "1", "--max-new", "0"}, "--max-new"},
      {{"generate", "x", "--ids", "-1"}, "--ids"},
      {{"generate", "x", "--ids", "1", "--top-p", "0"}, "--top-p"},
      {{"generate", "x", "--ids", "1", "--top-k", "-1"}, "--top-k"},
      {{"generate", "x", "--ids", "1", "--temperature", "-1"}, "--temperature"},
      {{"importance", "x", "--bootstrap", "-1"}, "--bootstrap"},
      {{"importance", "x", "--alpha", "1"}, "--alpha"},
      {{"importance", "x", "--beam", "0"}, "--beam"},
      {{"prune", "x", "--out", out, "--finetune-steps", "-1"}, "--finetune-steps"},
      {{"prune", "x", "--out", out, "--finetune-lr", "-1"}, "--finetune-lr"},
      {{"prune", "x", "--out", out, "--finetune-batch-tokens", "-1"}, "--finetune-batch-tokens"},
      {{"prune", "x", "--out", out, "--synthetic-train", "0"}, "--synthetic-train"},
      {{"prune", "x", "--out", out, "--step", "2"}, "--step"},
      {{"prune", "x", "--out", out, "--min-per-layer", "-1"}, "--min-per-layer"},
      {{"curve", "x", "--fractions", "1.5"}, "--fractions"},
      {{"gates", "x", "--out", out, "--steps", "0"}, "--steps"},
      {{"gates", "x", "--out", out, "--period", "0"}, "--period"},
      {{"gates", "x", "--out", out, "--gate-lr", "0"}, "--gate-lr"},
      {{"gates", "x", "--out", out, "--coef", "-1"}, "--coef"},
      {{"gates", "x", "--out", out, "--coef-growth", "0.5"}, "--coef-growth"},
      {{"gates", "x", "--out", out, "--extra-steps", "-1"}, "--extra-steps"},
      {{"gates", "x", "--out", out, "--concentrator-until", "2"}, "--concentrator-until"},
      {{"roles", "x", "--max-sentences", "-1"}, "--max-sentences"},
      {{"roles", "x", "--rare-share", "2"}, "--rare-share"},
      {{"launch", "--grace", "-1", "--", "info", "x"}, "--grace"},
      {{"launch", "--nproc", "0", "--", "info", "x"}, "--nproc"},
      {{"plot", "r.json", "--out", out, "--batch", "0"}, "--batch"},
  };
  for (const auto& [args, option] : cases) {
    std::string line;
    for (const auto& a : args) line += a + " ";
    SCOPED_TRACE(line);
    const auto r = run_cli(args);
    EXPECT_EQ(r.code, 2);
    expect_short_error(r, option);
  }
  EXPECT_FALSE(std::filesystem::exists(out));
}

// An option table (util/options.h) as both front ends use it: keys and flags once each, every flag in
// its subcommand's --help, every shown default inside its own range.
template <class S>
void check_option_table(const OptionTable<S>& t, const std::string& subcommand) {
  SCOPED_TRACE(subcommand);
  const auto help = run_cli({subcommand, "--help"});
  ASSERT_EQ(help.code, 0);
  std::set<std::string> keys, flags;
  S d;  // the defaults
  for (const auto& f : t.fields()) {
    EXPECT_TRUE(keys.insert(f.key).second) << "key " << f.key << " twice";
    EXPECT_EQ(f.key.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string::npos) << f.key;
    if (!f.flag.empty()) {
      const std::string first = f.flag.substr(0, f.flag.find(','));
      EXPECT_TRUE(flags.insert(first).second) << "flag " << first << " twice";
      EXPECT_NE(help.out.find(first), std::string::npos) << first << " is not in " << subcommand << " --help";
    }
    if (auto* i = std::get_if<typename OptionField<S>::IntRef>(&f.at); i && f.show_default) {
      EXPECT_TRUE(f.range.contains(static_cast<double>((*i)(d)))) << f.key << "'s default is outside " << f.range.text();
    }
    if (auto* r = std::get_if<typename OptionField<S>::RealRef>(&f.at); r && f.show_default) {
      EXPECT_TRUE(f.range.contains((*r)(d))) << f.key << "'s default is outside " << f.range.text();
    }
  }
}

TEST(Cli, OptionTablesHaveOneRowPerOptionInBothFrontEnds) {
  check_option_table(bench_option_table(), "bench");
  check_option_table(budget_shape_table(), "prune");
  check_option_table(finetune_option_table(), "prune");
  check_option_table(finetune_option_table(), "gates");
  check_option_table(gate_option_table(), "gates");
  check_option_table(data_source_table(), "prune");
  check_option_table(plan_option_table(), "prune");
  check_option_table(prune_request_table(), "prune");
  check_option_table(curve_request_table(), "curve");
  check_option_table(gates_request_table(), "gates");
  check_option_table(importance_request_table(), "importance");
  check_option_table(export_request_table(), "export");
  check_option_table(train_request_table(), "train");
}

TEST(Cli, OptionTablesReadJsonWithTheRangesTheCommandLineChecks) {
  const JsonStyle style{"argument", "is required", JsonStyle::Nulls::Absent, JsonStyle::Error::InvalidArgument};
  auto read_bench = [&](const nlohmann::json& j) {
    BenchOptions b;
    bench_option_table().read(JsonFields(j, "headprune.bench", style), b);
    return b;
  };
  const BenchOptions b = read_bench({{"reps", 3}, {"batch_sizes", {2, 8}}, {"min_seconds", 0.5}, {"gemm_probe", false}});
  EXPECT_EQ(b.reps, 3);
  EXPECT_EQ(b.batch_sizes, (std::vector<int64_t>{2, 8}));
  EXPECT_DOUBLE_EQ(b.min_seconds, 0.5);
  EXPECT_FALSE(b.gemm_probe);
  EXPECT_EQ(b.warmup, BenchOptions{}.warmup);  // absent: the struct's default
  auto message = [&](const nlohmann::json& j) {
    try {
      read_bench(j);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(message({{"reps", 0}}), "headprune.bench: argument 'reps' must be an integer >= 1, not 0");
  EXPECT_EQ(message({{"min_seconds", 4000}}), "headprune.bench: argument 'min_seconds' must be a number in [0, 3600], not 4000");
  EXPECT_EQ(message({{"batch_sizes", {1, 0}}}), "headprune.bench: argument 'batch_sizes' must hold integers >= 1, not 0");
  EXPECT_EQ(message({{"reps", 1.5}}), "headprune.bench: argument 'reps' must be an integer, got 1.5");
  // The same bound on the command line, in the same words.
  const auto r = run_cli({"bench", "x", "--min-time", "4000"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("must be a number in [0, 3600], not '4000'"), std::string::npos) << r.err;
  // The one number parser of option texts: the whole text, finite.
  EXPECT_EQ(parse_finite_number("0.5"), 0.5);
  EXPECT_EQ(parse_finite_number("-1e-3"), -1e-3);
  for (const char* bad : {"", " 1", "1 ", "1x", "nan", "inf", "1e400", "--"}) EXPECT_FALSE(parse_finite_number(bad)) << bad;
  // A parsed value: the parser's words after the field's name.
  BudgetShape shape;
  try {
    budget_shape_table().read(JsonFields(nlohmann::json{{"table", "sideways"}}, "headprune.plan", style), shape);
    ADD_FAILURE() << "a budget table named sideways was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("argument 'table' is not valid: expected \"linear\""), std::string::npos)
        << e.what();
  }
}

TEST(Cli, BeamSizeIsBetweenOneAndTheVocabulary) {
  // --beam 1000000 failed in LibTorch's allocator with 27 lines of C++ frames; --beam 0 printed
  // nothing and exited 0.
  test::TempDir dir;
  save_checkpoint(dir.path, *test::make_model(Arch::DecoderLM));
  auto r = run_cli({"--threads", "1", "generate", dir.path, "--ids", "3", "4", "--beam", "1000000"});
  EXPECT_EQ(r.code, 1);
  expect_short_error(r, "beam size 1000000 is outside [1, 100]");
  r = run_cli({"--threads", "1", "generate", dir.path, "--ids", "3", "4", "--beam", "0"});
  expect_short_error(r, "--beam");
  r = run_cli({"--threads", "1", "generate", dir.path, "--ids", "3", "4", "--beam", "100", "--max-new", "3"});
  EXPECT_EQ(r.code, 0) << r.err;  // the whole vocabulary is a valid beam
}

// Issue 78's low items: --prompt with --ids dropped the prompt silently, --max-new was capped without a
// word, and tokenize --decode read [1.5] as id 1.
TEST(Cli, GenerateSaysWhatItDoesWithThePromptAndItsLengthAndDecodeTakesIntegersOnly) {
  test::TempDir dir;
  save_checkpoint(dir.path, *test::make_model(Arch::DecoderLM));  // 64 positions
  auto r = run_cli({"--threads", "1", "generate", dir.path, "--ids", "3", "4", "--prompt", "hello"});
  EXPECT_EQ(r.code, 1);
  expect_short_error(r, "give the prompt as text (--prompt) or as token ids (--ids), not both");
  r = run_cli({"--threads", "1", "generate", dir.path, "--ids", "3", "4", "--max-new", "100"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("--max-new 100 capped at 62: the model has 64 positions and the prompt takes 2"), std::string::npos)
      << r.err;
  TokenizerTrainOptions o;
  o.vocab_size = 40;
  Tokenizer::train({"the cat sat on the mat", "the hat"}, o).save(dir / "tokenizer.json");
  test::write(dir / "ids.txt", "[5, 6]\n[1.5]\n");
  r = run_cli({"tokenize", dir.path, "--decode", "--file", dir / "ids.txt"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("ids.txt:2: expected a JSON array of token ids, got '[1.5]'"), std::string::npos) << r.err;
}

TEST(Cli, GraphsOptionsReplayOrSayWhyNot) {
  // --graphs on the command line: emulate gives the ids and metrics of a plain run; cuda on a LibTorch
  // without CUDA is refused in one line; a translation's generate and an unknown mode are refused.
  test::TempDir dir;
  save_checkpoint(dir / "lm", *test::make_model(test::Fam::Llama));
  save_checkpoint(dir / "cls", *test::make_model(Arch::EncoderClassifier));
  save_checkpoint(dir / "mt", *test::make_model(Arch::EncoderDecoder));
  const std::vector<std::string> gen = {"--threads", "1", "generate", dir / "lm", "--ids", "3", "4", "5",
                                        "--max-new", "9", "--json"};
  auto with = [](std::vector<std::string> args, std::vector<std::string> more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  const auto plain = run_cli(gen), replayed = run_cli(with(gen, {"--graphs", "emulate"}));
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(replayed.code, 0) << replayed.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out)["ids"], nlohmann::json::parse(replayed.out)["ids"]);
  const std::vector<std::string> ev = {"--threads", "1", "eval", dir / "cls", "--synthetic", "40"};
  const auto e0 = nlohmann::json::parse(run_cli(ev).out), e1 = nlohmann::json::parse(run_cli(with(ev, {"--graphs", "emulate"})).out);
  EXPECT_NEAR(e0["loss"].get<double>(), e1["loss"].get<double>(), 1e-6);
  EXPECT_EQ(e0["accuracy"], e1["accuracy"]);
  EXPECT_EQ(e1["graphs"], "emulate");
  if (!compat::has_cuda_graphs()) {
    const auto r = run_cli(with(gen, {"--graphs", "cuda"}));
    EXPECT_EQ(r.code, 1);
    expect_short_error(r, "CUDA graphs need a LibTorch built with CUDA");
  }
  auto r = run_cli({"--threads", "1", "generate", dir / "mt", "--ids", "3", "4", "--graphs", "emulate"});
  expect_short_error(r, "a translation runs without");
  r = run_cli(with(ev, {"--graphs", "always"}));
  expect_short_error(r, "expected off, cuda or emulate");
}

TEST(Cli, MemoryIsCheckedBeforeAnythingIsAllocated) {
  // bench --batch 1000000 and a length at max_positions' limit (2^22) failed in LibTorch's
  // allocator with 28 lines of C++ frames (or were killed by the kernel); --synthetic 1000000000
  // ended in a bare std::bad_alloc after minutes.
  test::TempDir dir;
  save_checkpoint(dir / "cls", *test::make_model(Arch::EncoderClassifier));
  ModelConfig long_cfg = tiny_llama_config();  // rotary: no table of max_positions rows
  long_cfg.max_positions = ConfigLimits::positions;
  save_checkpoint(dir / "long", *test::make_model(long_cfg));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_cli({"--threads", "1", "bench", dir / "cls", "--batch", "1000000000", "--seq", "32", "--reps", "1",
                    "--warmup", "0", "--no-gemm-probe"});
  expect_short_error(r, "--batch");
  EXPECT_NE(r.err.find("GiB available"), std::string::npos);
  r = run_cli({"--threads", "1", "bench", dir / "long", "--batch", "1", "--seq", std::to_string(ConfigLimits::positions),
               "--reps", "1", "--warmup", "0", "--no-gemm-probe"});
  expect_short_error(r, "--seq");
  EXPECT_NE(r.err.find("GiB available"), std::string::npos);
  r = run_cli({"--threads", "1", "eval", dir / "cls", "--synthetic", "1000000000000"});
  expect_short_error(r, "--synthetic");
  EXPECT_NE(r.err.find("GiB available"), std::string::npos);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
}

TEST(Cli, LibTorchErrorsAreOneLineAndFailedAllocationsSayOutOfMemory) {
  // What still reaches the top from LibTorch printed its 24-30 C++ frames; a failed allocation was a
  // bare "std::bad_alloc".
  try {
    (void)torch::empty({-3});
    ADD_FAILURE() << "no error";
  } catch (const c10::Error& e) {
    ASSERT_NE(std::string(e.what()).find('\n'), std::string::npos);  // LibTorch's own text has its frames
    const std::string t = cli::error_text(e, "bench");
    EXPECT_EQ(t, "Trying to create tensor with negative dimension -3: [-3]");
    EXPECT_EQ(t.find('\n'), std::string::npos) << t;
    EXPECT_EQ(t.find("frame #"), std::string::npos) << t;
  }
  EXPECT_EQ(cli::error_text(std::bad_alloc(), "eval").rfind("out of memory while running 'eval'", 0), 0u);
  const c10::Error oom({"alloc_cpu.cpp", "alloc_cpu", 75},
                       "[enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory: you "
                       "tried to allocate 8192000000 bytes. Error code 12 (Cannot allocate memory)");
  EXPECT_EQ(cli::error_text(oom, "bench"), "out of memory while running 'bench': an allocation of 7.6 GiB failed");
  // The library's own messages are printed whole.
  EXPECT_EQ(cli::error_text(std::invalid_argument("two\nlines"), "info"), "two\nlines");
}

}  // namespace
}  // namespace hp
