// The command line, in-process: help, usage errors, info on a pruned checkpoint.
#include <sstream>

#include <gtest/gtest.h>

#include "headprune/util/runtime.h"
#include <nlohmann/json.hpp>

#include "app.h"
#include "headprune/io/checkpoint.h"
#include "headprune/model/remove_heads.h"
#include "test_util.h"

namespace hp {
namespace {

struct Result {
  int code;
  std::string out, err;
};

Result run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "headprune");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  int code = cli::run(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

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

}  // namespace
}  // namespace hp
