// Regression tests for what a hostile or careless user found (hardening issue): outputs never
// destroyed silently, sizes checked before allocating, no undefined behaviour, and every error
// naming the file (and field or line) and what was expected.
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "headprune/data/hf_tokenizers.h"
#include "headprune/data/model_dir.h"
#include "headprune/data/readers.h"
#include "headprune/data/synthetic.h"
#include "headprune/data/tasks.h"
#include "headprune/data/tokenizer.h"
#include "headprune/decode/search.h"
#include "headprune/eval/benchmark.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/outputs.h"
#include "headprune/io/hf.h"
#include "headprune/io/safetensors.h"
#include "headprune/jobs/job.h"
#include "headprune/jobs/train_job.h"
#include "headprune/prune/plan.h"
#include "headprune/score/head_scores.h"
#include "headprune/train/trainer.h"
#include "headprune/util/log.h"
#include "headprune/util/mapped_files.h"
#include "headprune/util/runtime.h"
#include "test_util.h"

namespace hp {
namespace {
namespace fs = std::filesystem;

using test::error_of;

using test::write;

std::string slurp(const std::string& path) { return read_file(path); }

// ---- outputs are never destroyed silently ----------------------------------------------------

struct SmallRun {
  ModelConfig cfg = tiny_config(Arch::EncoderClassifier);
  TrainData data;
  TrainOptions opts;
  SmallRun() {
    cfg.n_classes = 2;
    data = {synthetic_examples(cfg, 64, 3, 10, 1), synthetic_examples(cfg, 16, 3, 10, 2)};
    opts.max_steps = 6;
    opts.batch_tokens = 256;
    opts.warmup_steps = 1;
    opts.eval_every = 3;
    opts.log_every = 1000;
  }
  TrainResult train(const std::string& dir, const TrainOptions& o) {
    torch::manual_seed(1);
    Transformer model(cfg);
    return train_model(model, data, o, dir);
  }
};

TEST(HostileInput, TrainRefusesToStartOverAFinishedRun) {
  set_log_level(LogLevel::Warn);
  test::TempDir tmp;
  SmallRun run;
  const std::string dir = tmp / "run";
  run.train(dir, run.opts);
  const std::string history = slurp(dir + "/history.json");
  const std::string best = slurp(dir + "/best/model.safetensors");

  // Again without --resume: refused, naming the directory and both ways out; nothing touched.
  const std::string again = error_of([&] { run.train(dir, run.opts); });
  EXPECT_NE(again.find(dir), std::string::npos) << again;
  EXPECT_NE(again.find("already holds a training run (at step 6)"), std::string::npos) << again;
  EXPECT_NE(again.find("--overwrite"), std::string::npos) << again;
  EXPECT_EQ(slurp(dir + "/history.json"), history);
  EXPECT_EQ(slurp(dir + "/best/model.safetensors"), best);

  // --resume of a finished run ends at once with its history intact.
  TrainOptions resume = run.opts;
  resume.resume = true;
  EXPECT_EQ(run.train(dir, resume).history.size(), 2u);
  EXPECT_EQ(slurp(dir + "/best/model.safetensors"), best);

  // --resume without a resume point says why; the run is untouched.
  ASSERT_EQ(remove_tree(dir + "/last"), "");
  const std::string no_last = error_of([&] { run.train(dir, resume); });
  EXPECT_NE(no_last.find("cannot resume: no last/trainer_state.json"), std::string::npos) << no_last;
  EXPECT_EQ(slurp(dir + "/history.json"), history);
  const std::string nothing = error_of([&] { run.train(tmp / "never-started", resume); });
  EXPECT_NE(nothing.find("nothing to resume"), std::string::npos) << nothing;

  // A directory holding something else is refused too, even with --overwrite (issue 50).
  fs::create_directories(tmp / "foreign");
  write(tmp / "foreign/notes.txt", "mine");
  const std::string foreign = error_of([&] { run.train(tmp / "foreign", run.opts); });
  EXPECT_NE(foreign.find("not a headprune training run"), std::string::npos) << foreign;
  TrainOptions force = run.opts;
  force.overwrite = true;
  const std::string forced = error_of([&] { run.train(tmp / "foreign", force); });
  EXPECT_NE(forced.find("never replaces it, even with --overwrite"), std::string::npos) << forced;
  EXPECT_EQ(slurp(tmp / "foreign/notes.txt"), "mine");

  // --overwrite starts again from scratch: the old files are gone.
  TrainOptions overwrite = run.opts;
  overwrite.overwrite = true;
  write(dir + "/stale.txt", "old");
  EXPECT_EQ(run.train(dir, overwrite).steps, 6);
  EXPECT_FALSE(fs::exists(dir + "/stale.txt"));
}

TEST(HostileInput, CorruptResumePointNamesTheFile) {
  set_log_level(LogLevel::Warn);
  test::TempDir tmp;
  SmallRun run;
  const std::string dir = tmp / "run";
  TrainOptions cut = run.opts;
  cut.stop_after = 4;
  cut.save_every = 2;
  run.train(dir, cut);
  TrainOptions resume = run.opts;
  resume.resume = true;
  write(dir + "/last/trainer_state.json", R"({"step": 2})");
  const std::string missing = error_of([&] { run.train(dir, resume); });
  EXPECT_NE(missing.find(dir + "/last/trainer_state.json: not a valid trainer state"), std::string::npos) << missing;
  write(dir + "/last/trainer_state.json", "{not json");
  const std::string broken = error_of([&] { run.train(dir, resume); });
  EXPECT_NE(broken.find("trainer_state.json: not valid JSON"), std::string::npos) << broken;
}

TEST(HostileInput, OutputDirectoryIsRefusedReplacedWholeAndLocked) {
  test::TempDir tmp;
  const std::string out = tmp / "out";
  const OutputDir::Options plain{"prune"};
  {
    OutputDir o(out, plain);
    write(o.path() + "/a.txt", "first");
    EXPECT_FALSE(fs::exists(out));  // nothing at OUT until the commit
    o.commit();
  }
  EXPECT_EQ(slurp(out + "/a.txt"), "first");
  EXPECT_EQ(output_kind(out).value_or(""), "prune");
  for (const auto& e : fs::directory_iterator(tmp.path))  // no lock, no staging left beside OUT
    EXPECT_EQ(e.path().filename().string(), "out");

  // An earlier output of the same kind: refused without overwrite, before anything is written.
  const std::string refused = error_of([&] { OutputDir o(out, plain); });
  EXPECT_NE(refused.find(out + ": holds an earlier 'prune' output"), std::string::npos) << refused;
  EXPECT_NE(refused.find("--overwrite"), std::string::npos) << refused;

  // A second writer fails at once while the first holds the lock.
  OutputDir::Options ow = plain;
  ow.overwrite = true;
  {
    OutputDir first(out, ow);
    const std::string locked = error_of([&] { OutputDir second(out, ow); });
    EXPECT_NE(locked.find("another process (pid " + std::to_string(::getpid()) + ")"), std::string::npos) << locked;
    write(first.path() + "/b.txt", "second");
    first.commit();
  }
  // Replaced as a whole: the stale a.txt is gone.
  EXPECT_FALSE(fs::exists(out + "/a.txt"));
  EXPECT_EQ(slurp(out + "/b.txt"), "second");

  // A job that fails (no commit) leaves OUT as it was and no staging directory.
  {
    OutputDir failed(out, ow);
    write(failed.path() + "/half.txt", "x");
  }
  EXPECT_EQ(slurp(out + "/b.txt"), "second");
  EXPECT_FALSE(fs::exists(out + "/half.txt"));
  for (const auto& e : fs::directory_iterator(tmp.path)) EXPECT_EQ(e.path().filename().string(), "out");
}

// ---- sizes are checked before anything is allocated ---------------------------------------------

TEST(HostileInput, ConfigSizesAreBoundedAndNamed) {
  nlohmann::json j = tiny_config(Arch::EncoderClassifier).to_json();
  j.erase("heads");
  auto msg = [&](const char* field, const nlohmann::json& v) {
    nlohmann::json k = j;
    k[field] = v;
    return error_of([&] { ModelConfig::from_json(k); });
  };
  EXPECT_NE(msg("n_heads", 1000000000000LL).find("field 'n_heads' is 1000000000000, above the limit"), std::string::npos);
  EXPECT_NE(msg("vocab_size", UINT64_MAX).find("field 'vocab_size' is 18446744073709551615, too large"), std::string::npos);
  EXPECT_NE(msg("d_ff", 1LL << 40).find("field 'd_ff'"), std::string::npos);
  EXPECT_NE(msg("max_positions", 1LL << 40).find("field 'max_positions'"), std::string::npos);
}

TEST(HostileInput, CheckpointConfigLargerThanItsWeightsAllocatesNothing) {
  test::TempDir tmp;
  auto model = test::make_model(Arch::EncoderClassifier);
  save_checkpoint(tmp.path, *model);
  nlohmann::json cfg = read_json_file(tmp / "config.json");
  cfg["vocab_size"] = 10000000;  // 10^7: gigabytes if built
  write_json_file(tmp / "config.json", cfg);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { load_checkpoint(tmp.path); });
  EXPECT_NE(e.find(tmp / "model.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("the config asks for about"), std::string::npos) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);  // no 2.6 GB built
}

TEST(HostileInput, SafetensorsShapeOverflowAndDuplicateKeys) {
  auto file = [](const std::string& header, size_t data_bytes) {
    std::string bytes(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(&bytes[0], &n, 8);
    return bytes + header + std::string(data_bytes, '\0');
  };
  const std::string overflow =
      error_of([&] { parse_safetensors(file(R"({"x":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})", 0), "evil.safetensors"); });
  EXPECT_EQ(overflow.rfind("evil.safetensors: tensor 'x'", 0), 0u) << overflow;
  const std::string product =
      error_of([&] { parse_safetensors(file(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}})", 0), "evil.safetensors"); });
  EXPECT_NE(product.find("needs more than 2^62 bytes"), std::string::npos) << product;
  const std::string dup = error_of([&] {
    parse_safetensors(file(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"x":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2),
                      "dup.safetensors");
  });
  EXPECT_NE(dup.find("dup.safetensors: header: duplicate key 'x'"), std::string::npos) << dup;
}

TEST(HostileInput, JsonFilesRejectDuplicateKeys) {
  test::TempDir tmp;
  write(tmp / "a.json", R"({"a": 1, "b": {"c": 1, "c": 2}})");
  EXPECT_NE(error_of([&] { read_json_file(tmp / "a.json"); }).find("a.json: duplicate key 'c'"), std::string::npos);
  write(tmp / "ok.json", R"({"a": {"c": 1}, "b": {"c": 2}})");  // the same key in two objects is fine
  EXPECT_EQ(read_json_file(tmp / "ok.json")["b"]["c"], 2);
}

// Issue 78: one unused key holding 300,000 nested arrays (a 600 KB config.json) crashed info, generate,
// export and headprune.load (the tree was copied recursively). The depth is refused while parsing.
TEST(HostileInput, JsonNestedDeeperThanAnyRealFileIsRefusedWhileParsing) {
  test::TempDir tmp;
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  test::copy_tree(test::hf_fixture("llama_gqa"), tmp / "m");
  auto cfg = read_json_file(tmp / "m/config.json");
  std::string text = cfg.dump();
  text.insert(text.size() - 1, ", \"unused\": " + deep);
  write(tmp / "m/config.json", text);
  const auto t0 = std::chrono::steady_clock::now();
  std::string e = error_of([&] { open_model(tmp / "m"); });
  EXPECT_NE(e.find("config.json: JSON nested deeper than 256 levels"), std::string::npos) << e;
  e = error_of([&] { parse_json("{\"a\": " + deep + "}", "the text"); });
  EXPECT_EQ(e.rfind("the text: JSON nested deeper than 256", 0), 0u) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  // Depth up to the bound is read.
  EXPECT_EQ(parse_json(std::string(255, '[') + "7" + std::string(255, ']'), "ok").dump().size(), 511u);
}

// Issue 78: text inputs are bounded while reading, not through the file's size (which a device has not):
// --calibration /dev/zero and tokenize --file /dev/zero read without end.
TEST(HostileInput, TextReadersStopAtTheirBoundOnDevicesAndHugeLines) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string e = error_of([] { read_lines("/dev/zero"); });
  EXPECT_NE(e.find("/dev/zero:1: a line longer than 16777216 bytes"), std::string::npos) << e;
  e = error_of([] { read_file("/dev/zero", 1 << 20); });
  EXPECT_NE(e.find("/dev/zero: more than 1048576 bytes, more than the 1048576 this reader accepts"), std::string::npos) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  EXPECT_LT(peak_rss_bytes(), 1ull << 30);
  // Lines as before: a BOM dropped, '\r' stripped, no line after a final newline, a last line without one.
  test::TempDir tmp;
  write(tmp / "t.txt", "\xEF\xBB\xBF" "a\r\n\nb\nc");
  EXPECT_EQ(read_lines(tmp / "t.txt"), (std::vector<std::string>{"a", "", "b", "c"}));
  write(tmp / "u.txt", "x\n");
  EXPECT_EQ(read_lines(tmp / "u.txt"), (std::vector<std::string>{"x"}));
  // Random calibration data is estimated against the machine before any is made (2^20 x 2^20 tokens).
  e = error_of([] { calibration_blocks(std::nullopt, "random", 100, 1 << 20, 1 << 20, 1); });
  EXPECT_NE(e.find("calibration: 1048576 samples x 1048576 tokens needs about"), std::string::npos) << e;
}

// Issue 78: a checkpoint truncated while mapped (re-saved in place by another program) killed the CLI
// and the Python interpreter with "Bus error". Reads past the new end now see zeros, and the file is
// named by the next check, which loading, publishing an output and the Python forward make.
TEST(HostileInput, ACheckpointTruncatedWhileMappedIsAnErrorNotABusError) {
  test::TempDir tmp;
  const std::string path = tmp / "w.safetensors";
  TensorMap tensors;
  for (int i = 0; i < 4; ++i) tensors["t" + std::to_string(i)] = torch::ones({256, 256}) * (i + 1);
  write_safetensors(path, tensors);
  {
    auto f = read_safetensors(path);
    EXPECT_NO_THROW(check_mapped_files());
    ASSERT_EQ(::truncate(path.c_str(), 4096), 0);  // the header and a few values stay
    double sum = 0;
    for (const auto& [name, t] : f.tensors) sum += t.sum().item<double>();  // would be SIGBUS
    EXPECT_LT(sum, 256.0 * 256.0) << "the bytes past the new end read as zeros";
    std::string e = error_of([] { check_mapped_files(); });
    EXPECT_NE(e.find(path + ": the file was truncated while headprune had it mapped"), std::string::npos) << e;
    e = error_of([&] { write_file_atomic(tmp / "out.json", "{}"); });
    EXPECT_NE(e.find("truncated while headprune had it mapped"), std::string::npos) << e;
    EXPECT_FALSE(fs::exists(tmp / "out.json"));
  }
  EXPECT_NO_THROW(check_mapped_files()) << "the mapping is gone with its tensors";
}

// Found by fuzz_tokenizer_json: a number too large for a double escaped the tokenizer's JSON reader as
// nlohmann's out_of_range error, naming no file.
TEST(HostileInput, TokenizerJsonNumberOverflowNamesTheFile) {
  test::TempDir tmp;
  write(tmp / "tokenizer.json", R"({"type": "headprune-bpe", "x": 91e999223372033720355})");
  const std::string e = error_of([&] { Tokenizer::load(tmp / "tokenizer.json"); });
  EXPECT_NE(e.find(tmp / "tokenizer.json"), std::string::npos) << e;
  EXPECT_NE(e.find("number overflow"), std::string::npos) << e;
}

// ---- undefined behaviour and messages from other libraries -------------------------------------

// A fuzz finding (CI smoke run): a float where an integer belongs was converted to int64_t, which
// is undefined behaviour for 1.18e20.
TEST(HostileInput, ImportanceMapFloatLayerIsAnError) {
  test::TempDir tmp;
  write(tmp / "importance.json",
        R"({"method": "gradient", "heads": [{"attn_type": "encoder_self", "layer": 1.18447e20, "head": 0, "score": 1}]})");
  const std::string e = error_of([&] { read_maps(tmp / "importance.json"); });
  EXPECT_NE(e.find(tmp / "importance.json"), std::string::npos) << e;
  EXPECT_NE(e.find("'layer' must be an integer, got 1.18447e+20"), std::string::npos) << e;
  write(tmp / "importance.json",
        R"({"method": "gradient", "heads": [{"attn_type": "encoder_self", "layer": 0, "head": 2.5, "score": 1}]})");
  EXPECT_NE(error_of([&] { read_maps(tmp / "importance.json"); }).find("'head' must be an integer, got 2.5"),
            std::string::npos);
}

TEST(HostileInput, BpeTokenIdOfInt64MaxIsAnErrorNotAnOverflow) {
  test::TempDir tmp;
  write(tmp / "vocab.json", R"({"a": 0, "b": 9223372036854775807})");
  write(tmp / "merges.txt", "#version: 0.2\n");
  const std::string e = error_of([&] { ByteLevelBpeTokenizer::load(tmp / "vocab.json", tmp / "merges.txt"); });
  EXPECT_NE(e.find(tmp / "vocab.json"), std::string::npos) << e;
  EXPECT_NE(e.find("'b' has id 9223372036854775807, outside [0, 16777216)"), std::string::npos) << e;
  write(tmp / "vocab.json", R"({"a": 0, "b": 18446744073709551615})");
  EXPECT_NE(error_of([&] { ByteLevelBpeTokenizer::load(tmp / "vocab.json", tmp / "merges.txt"); }).find("outside [0,"),
            std::string::npos);
}

TEST(HostileInput, HfConfigFaultsNameConfigJson) {
  test::TempDir tmp;
  test::copy_tree(test::hf_fixture("bert"), tmp.path);
  nlohmann::json cfg = read_json_file(tmp / "config.json");
  cfg["hidden_act"] = 3;
  write_json_file(tmp / "config.json", cfg);
  const std::string act = error_of([&] { import_hf(tmp.path); });
  EXPECT_NE(act.find(tmp / "config.json: config field 'hidden_act' must be a string, got 3"), std::string::npos) << act;
  cfg["hidden_act"] = "gelu";
  cfg.erase("num_attention_heads");
  write_json_file(tmp / "config.json", cfg);
  const std::string missing = error_of([&] { import_hf(tmp.path); });
  EXPECT_EQ(missing.rfind(tmp / "config.json: config field 'num_attention_heads'", 0), 0u) << missing;
}

TEST(HostileInput, BertClassifierUnderThePrefixIsReadNotMapAt) {
  test::TempDir tmp;
  test::copy_tree(test::hf_fixture("bert"), tmp.path);
  auto f = read_safetensors(tmp / "model.safetensors");
  TensorMap renamed;
  for (auto& [k, v] : f.tensors) renamed[k.rfind("classifier.", 0) == 0 ? "bert." + k : k] = v;
  write_safetensors(tmp / "model.safetensors", renamed);
  const auto hf = import_hf(tmp.path);  // bert.classifier.* is the classifier
  EXPECT_EQ(hf.model->config().n_classes, f.tensors.at("classifier.weight").size(0));
  renamed["bert.classifier.weight"] = torch::zeros({3});  // not a matrix: a named error
  write_safetensors(tmp / "model.safetensors", renamed);
  const std::string e = error_of([&] { import_hf(tmp.path); });
  EXPECT_NE(e.find("model.safetensors: tensor 'bert.classifier.weight' has shape [3], expected a matrix"),
            std::string::npos)
      << e;
}

TEST(HostileInput, PickleOnlyDirectoryNeverSuggestsAnUnsafeLoad) {
  test::TempDir tmp;
  fs::copy(test::hf_fixture("bert") + "/config.json", tmp / "config.json");
  write(tmp / "pytorch_model.bin", "not opened");
  const std::string e = error_of([&] { import_hf(tmp.path); });
  EXPECT_NE(e.find("torch.load('pytorch_model.bin', weights_only=True)"), std::string::npos) << e;
}

TEST(HostileInput, LabelOutsideTheClassesNamesFileAndLine) {
  test::TempDir tmp;
  write(tmp / "train.tsv", "sentence\tlabel\na b\t1\nc d\t7\n");
  ModelConfig cfg = tiny_config(Arch::EncoderClassifier);
  cfg.n_classes = 2;
  const nlohmann::json spec = {{"kind", "tsv"}, {"train", "train.tsv"}, {"vocab_size", 40}};
  const std::string e = error_of([&] { load_task(spec, cfg, tmp.path, std::nullopt, {"train"}, 1); });
  EXPECT_NE(e.find(tmp / "train.tsv:3: label 7 is outside the model's 2 classes [0, 2)"), std::string::npos) << e;
}

// ---- NaN and Inf are reported, not propagated -----------------------------------------------------

TEST(HostileInput, NonFiniteWeightsAndScoresAreReported) {
  test::TempDir tmp;
  auto model = test::make_model(Arch::EncoderClassifier);
  save_checkpoint(tmp.path, *model);
  auto f = read_safetensors(tmp / "model.safetensors");
  f.tensors.at("classifier.weight")[0][0] = std::nan("");
  write_safetensors(tmp / "model.safetensors", f.tensors);
  const std::string w = error_of([&] { load_checkpoint(tmp.path); });
  EXPECT_NE(w.find("model.safetensors: tensor 'classifier.weight' holds 1 NaN or infinite values"), std::string::npos) << w;

  const ModelConfig cfg = model->config();
  HeadScores s;
  s.method = "gradient";
  for (const auto& h : kept_heads(cfg)) s.scores[h] = 1.0 + h.head;
  s.scores[kept_heads(cfg).back()] = std::nan("");
  ScorePlanOptions o;
  o.target.count = 2;
  const std::string p = error_of([&] { plan_by_score(s, cfg, o); });
  EXPECT_NE(p.find("NaN or infinite"), std::string::npos) << p;
}

// ---- requests and resources are checked before any work (issue 50, finding 6) ---------------------

TEST(HostileInput, RequestCountsAreCheckedBeforeAnyWork) {
  // train --max-steps -3 silently trained the config's 600 steps.
  test::TempDir tmp;
  TrainRequest train;
  train.out_dir = tmp / "run";
  train.max_steps = -3;
  std::string e = error_of([&] { run_train(train, Runtime{}); });
  EXPECT_NE(e.find("max_steps -3 must be >= 1"), std::string::npos) << e;
  train.max_steps = 0;
  train.eval_every = -1;
  e = error_of([&] { run_train(train, Runtime{}); });
  EXPECT_NE(e.find("eval_every -1"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(tmp / "run"));

  // Beam sizes outside [1, vocabulary]: 0 generated nothing without a word, -3 and 10^6 failed in
  // LibTorch.
  auto lm = test::make_model(Arch::DecoderLM);
  DecodeOptions o;
  o.max_len = 3;
  for (int64_t beam : {int64_t{0}, int64_t{-3}, int64_t{101}, int64_t{1000000}}) {
    o.beam_size = beam;
    e = error_of([&] { generate(*lm, {3, 4}, o); });
    EXPECT_NE(e.find("generate: beam size " + std::to_string(beam) + " is outside [1, 100]"), std::string::npos) << e;
  }
  auto ed = test::make_model(Arch::EncoderDecoder);
  o.beam_size = 91;  // the target vocabulary has 90 tokens
  e = error_of([&] { translate(*ed, test::make_batch(ed->config()), o); });
  EXPECT_NE(e.find("translate: beam size 91 is outside [1, 90]"), std::string::npos) << e;
  // A prompt that fills the model's positions names both numbers.
  o.beam_size = 1;
  e = error_of([&] { generate(*lm, std::vector<int64_t>(64, 3), o); });
  EXPECT_NE(e.find("64 tokens leave no room in the model's 64 positions"), std::string::npos) << e;

  // The data and fine-tuning counts of every job, before its checkpoint is opened.
  DataSource data;
  data.synthetic_examples = -1;  // 0 means "not given"
  e = error_of([&] { JobInputs("no-such-checkpoint", data, Runtime{}); });
  EXPECT_NE(e.find("synthetic_examples -1"), std::string::npos) << e;
  data.synthetic_examples = 500;
  data.max_examples = -1;
  e = error_of([&] { JobInputs("no-such-checkpoint", data, Runtime{}); });
  EXPECT_NE(e.find("max_examples -1"), std::string::npos) << e;
}

TEST(HostileInput, MemoryIsEstimatedAndCheckedBeforeAllocating) {
  const uint64_t avail = available_memory_bytes();
  EXPECT_GT(avail, 0u);
  EXPECT_LE(avail, physical_memory_bytes());
  std::string e = error_of([] { check_memory(1e30, torch::kCPU, "the thing", "use less"); });
  EXPECT_EQ(e.rfind("the thing needs about ", 0), 0u) << e;
  EXPECT_NE(e.find(" GiB of memory, "), std::string::npos) << e;
  EXPECT_NE(e.find(" GiB available; use less"), std::string::npos) << e;
  EXPECT_LT(e.size(), 100u) << e;
  EXPECT_NO_THROW(check_memory(1024, torch::kCPU, "a little", ""));
  EXPECT_NO_THROW(check_memory(1e30, torch::Device(torch::kCUDA, 0), "a GPU's", ""));  // the CPU's memory only

  // The estimate grows with the batch and faster than linearly with the length (attention scores),
  // holds at least the logits, and training keeps more than inference.
  const ModelConfig lm = tiny_config(Arch::DecoderLM);
  const double one = forward_memory_bytes(lm, 1, 32, false);
  EXPECT_GE(one, 32.0 * static_cast<double>(lm.vocab_size) * 4);
  EXPECT_NEAR(forward_memory_bytes(lm, 2, 32, false), 2 * one, 1e-9 * one);
  EXPECT_GT(forward_memory_bytes(lm, 1, 64, false), 2 * one);
  EXPECT_GT(forward_memory_bytes(lm, 1, 32, true), one);
  EXPECT_EQ(forward_memory_bytes(lm, 1, 32, false, 2), one / 2);  // bf16

  // Callers check before allocating: a batch of 10^9, 10^12 synthetic examples.
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<BenchModel> models;
  models.emplace_back("lm", test::make_model(Arch::DecoderLM));
  BenchOptions bo;
  bo.batch_sizes = {1000000000};
  bo.seq_lens = {32};
  bo.gemm_probe = false;
  e = error_of([&] { bench_models(models, bo); });
  EXPECT_NE(e.find("bench: batch 1000000000 x length 32 of lm needs about"), std::string::npos) << e;
  e = error_of([&] { synthetic_examples(lm, 1000000000000, 3, 24, 1); });
  EXPECT_NE(e.find("synthetic task: 1000000000000 examples needs about"), std::string::npos) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

}  // namespace
}  // namespace hp
