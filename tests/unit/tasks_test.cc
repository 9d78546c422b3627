// Data specs -> examples: synthetic, TSV, parallel and plain-text tasks, on small temporary
// files; the TasksData suite reads slices of the real data in ../shared/data.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "headprune/data/tasks.h"
#include "headprune/eval/evaluate.h"
#include "test_util.h"

namespace hp {
namespace {

using test::write;

ModelConfig model_for(Arch a) {
  ModelConfig c = tiny_config(a);
  if (a == Arch::EncoderClassifier) c.n_classes = 2;
  c.finalize();
  return c;
}

std::string sentences_tsv() {
  std::string s = "sentence\tlabel\n";
  const char* words[] = {"good", "bad", "movie", "plot", "great", "awful", "\"quoted\"", "the", "a", "film"};
  for (int i = 0; i < 200; ++i)
    s += std::string(words[i % 10]) + " " + words[(i * 7) % 10] + " " + words[(i * 3) % 10] + " \t" +
         std::to_string(i % 2) + "\n";
  return s;
}

TEST(Tasks, SyntheticSplitsAreSizedAndDistinct) {
  auto cfg = model_for(Arch::DecoderLM);
  auto d = load_task({{"kind", "synthetic"}, {"n_train", 30}, {"n_valid", 7}}, cfg, "", std::nullopt,
                     {"train", "valid"}, 1);
  EXPECT_EQ(d.train.size(), 30u);
  EXPECT_EQ(d.valid.size(), 7u);
  EXPECT_TRUE(d.test.empty());
  EXPECT_FALSE(d.tokenizer.has_value());
  EXPECT_THROW(load_task({{"kind", "synthetic"}, {"n_trian", 3}}, cfg, "", std::nullopt, {"train"}, 1),
               std::invalid_argument);
  EXPECT_THROW(load_task({{"kind", "csv"}}, cfg, "", std::nullopt, {"train"}, 1), std::invalid_argument);
}

TEST(Tasks, TsvClassificationTrainsAVocabularyAndFramesSentences) {
  test::TempDir dir;
  write(dir / "train.tsv", sentences_tsv());
  write(dir / "dev.tsv", "sentence\tlabel\ngood movie \t1\nawful plot \t0\n");
  auto cfg = model_for(Arch::EncoderClassifier);
  nlohmann::json spec = {{"kind", "tsv"}, {"train", "train.tsv"}, {"valid", "dev.tsv"}, {"vocab_size", 40},
                         {"max_len", 6}};
  auto d = load_task(spec, cfg, dir.path, std::nullopt, {"train", "valid"}, 1);
  ASSERT_TRUE(d.tokenizer.has_value());
  EXPECT_EQ(d.tokenizer->vocab_size(), 40);
  ASSERT_EQ(d.valid.size(), 2u);
  EXPECT_EQ(d.valid[0].label, 1);
  EXPECT_EQ(d.valid[0].src.front(), Tokenizer::kBos);
  EXPECT_EQ(d.valid[0].src.back(), Tokenizer::kEos);
  for (const auto& e : d.train) EXPECT_LE(e.src.size(), 6u);
  // Reusing the vocabulary gives identical examples.
  auto again = load_task(spec, cfg, dir.path, d.tokenizer, {"valid"}, 99);
  EXPECT_EQ(again.valid[1].src, d.valid[1].src);
  // A label outside the model's classes is an error.
  write(dir / "dev.tsv", "sentence\tlabel\ngood \t5\n");
  EXPECT_THROW(load_task(spec, cfg, dir.path, d.tokenizer, {"valid"}, 1), std::invalid_argument);
  EXPECT_THROW(load_task(spec, model_for(Arch::DecoderLM), dir.path, d.tokenizer, {"valid"}, 1), std::invalid_argument);
}

TEST(Tasks, TsvClassesNamedInTheSpec) {
  test::TempDir dir;
  std::string tsv = sentences_tsv();
  for (const char* from : {"\t0\n", "\t1\n"}) {  // 0 -> entailment, 1 -> not_entailment
    const std::string to = std::string(from) == "\t0\n" ? "\tentailment\n" : "\tnot_entailment\n";
    for (size_t at = tsv.find(from); at != std::string::npos; at = tsv.find(from, at + to.size())) tsv.replace(at, 3, to);
  }
  write(dir / "train.tsv", tsv);
  write(dir / "dev.tsv", "sentence\tlabel\ngood movie \tnot_entailment\nawful plot \tentailment\n");
  auto cfg = model_for(Arch::EncoderClassifier);
  nlohmann::json spec = {{"kind", "tsv"}, {"train", "train.tsv"}, {"valid", "dev.tsv"}, {"vocab_size", 40},
                         {"labels", {"entailment", "not_entailment"}}};
  auto d = load_task(spec, cfg, dir.path, std::nullopt, {"train", "valid"}, 1);
  ASSERT_EQ(d.valid.size(), 2u);
  EXPECT_EQ(d.valid[0].label, 1);
  EXPECT_EQ(d.valid[1].label, 0);
  EXPECT_EQ(d.train[0].label, 0);
  EXPECT_EQ(d.train[1].label, 1);
  // as many names as the model has classes, each once
  auto error = [&](const nlohmann::json& labels) {
    nlohmann::json s = spec;
    s["labels"] = labels;
    return test::error_of([&] { load_task(s, cfg, dir.path, d.tokenizer, {"valid"}, 1); });
  };
  EXPECT_NE(error({"a", "b", "c"}).find("'labels' names 3 classes, the model has n_classes 2"), std::string::npos);
  EXPECT_NE(error({"a", "a"}).find("names 'a' twice"), std::string::npos);
  EXPECT_NE(error(nlohmann::json::array()).find("non-empty array"), std::string::npos);
}

TEST(Tasks, TsvSelectionSplitIsHeldOutOfTrain) {
  test::TempDir dir;
  std::string tsv = "sentence\tlabel\n";  // 200 different rows: a number word makes each unique
  for (int i = 0; i < 200; ++i) tsv += "good film n" + std::to_string(i) + " \t" + std::to_string(i % 2) + "\n";
  write(dir / "train.tsv", tsv);
  write(dir / "dev.tsv", "sentence\tlabel\ngood film \t1\nbad film \t0\n");
  auto cfg = model_for(Arch::EncoderClassifier);
  const nlohmann::json whole = {{"kind", "tsv"}, {"train", "train.tsv"}, {"vocab_size", 60}};
  nlohmann::json spec = whole;
  spec["valid_fraction"] = 0.1;
  spec["test"] = "dev.tsv";
  auto d = load_task(spec, cfg, dir.path, std::nullopt, {"train", "valid", "test"}, 1);
  ASSERT_EQ(d.valid.size(), 20u);  // round(0.1 * 200)
  ASSERT_EQ(d.train.size(), 180u);
  EXPECT_EQ(d.test.size(), 2u);
  // Together the two parts are the file's rows, each once.
  auto all = load_task(whole, cfg, dir.path, d.tokenizer, {"train"}, 1).train;
  auto srcs = [](const std::vector<Example>& v) {
    std::vector<std::vector<int64_t>> s;
    for (const auto& e : v) s.push_back(e.src);
    return s;
  };
  auto parts = srcs(d.train), held = srcs(d.valid), every = srcs(all);
  parts.insert(parts.end(), held.begin(), held.end());
  std::sort(parts.begin(), parts.end());
  std::sort(every.begin(), every.end());
  EXPECT_EQ(parts, every);
  // A sample, not the file's head, and the same one for every run seed and split request.
  EXPECT_NE(held, std::vector<std::vector<int64_t>>(every.begin(), every.begin() + 20));
  EXPECT_EQ(srcs(load_task(spec, cfg, dir.path, d.tokenizer, {"valid"}, 99).valid), held);
  EXPECT_EQ(srcs(load_task(spec, cfg, dir.path, d.tokenizer, {"train"}, 7).train), srcs(d.train));
  // Errors name what is wrong.
  auto error = [&](nlohmann::json s) {
    return test::error_of([&] { load_task(s, cfg, dir.path, d.tokenizer, {"valid"}, 1); });
  };
  nlohmann::json both = spec;
  both["valid"] = "dev.tsv";
  EXPECT_NE(error(both).find("not both"), std::string::npos);
  for (double bad : {0.0, 1.0, -0.5}) {
    nlohmann::json s = spec;
    s["valid_fraction"] = bad;
    EXPECT_NE(error(s).find("valid_fraction must be in (0, 1)"), std::string::npos) << bad;
  }
  nlohmann::json tiny = spec;
  tiny["valid_fraction"] = 0.001;
  EXPECT_NE(error(tiny).find("leaves an empty split"), std::string::npos);
}

TEST(Tasks, ParallelAndTextTasks) {
  test::TempDir dir;
  std::string en, de;
  for (int i = 0; i < 120; ++i) {
    en += "a dog runs " + std::to_string(i % 13) + "\n";
    de += "ein hund laeuft " + std::to_string(i % 13) + "\n";
  }
  write(dir / "t.en", en);
  write(dir / "t.de", de);
  auto cfg = model_for(Arch::EncoderDecoder);
  nlohmann::json spec = {{"kind", "parallel"}, {"train", {"t.en", "t.de"}}, {"test", {"t.en", "t.de"}},
                         {"vocab_size", 40}};
  auto d = load_task(spec, cfg, dir.path, std::nullopt, {"train", "test"}, 1);
  ASSERT_EQ(d.train.size(), 120u);
  EXPECT_EQ(d.test_text.size(), 120u);
  EXPECT_EQ(d.test_text[3].second, "ein hund laeuft 3");
  EXPECT_EQ(d.train[0].tgt.front(), Tokenizer::kBos);
  EXPECT_EQ(d.train[0].tgt.back(), Tokenizer::kEos);
  EXPECT_EQ(d.train[0].src.back(), Tokenizer::kEos);

  auto lm = model_for(Arch::DecoderLM);
  write(dir / "text.txt", en + de);
  auto t = load_task({{"kind", "text"}, {"train", "text.txt"}, {"vocab_size", 40}, {"max_len", 16}}, lm, dir.path,
                     std::nullopt, {"train", "valid"}, 1);
  ASSERT_FALSE(t.train.empty());
  ASSERT_FALSE(t.valid.empty());
  for (size_t i = 0; i + 1 < t.train.size(); ++i) {
    EXPECT_EQ(t.train[i].src.size(), 16u);
    EXPECT_EQ(t.train[i].src.back(), t.train[i + 1].src.front());  // blocks overlap by one token
  }
  const double uni = unigram_perplexity(t.train, t.valid, t.tokenizer->vocab_size());
  EXPECT_GT(uni, 1.0);
  EXPECT_LT(uni, 40.0);

  // test_fraction: the file's last lines become the test split, after the valid part; the training
  // part shrinks by as much and the valid split is the same share of the file as before.
  std::string lines;  // 100 lines, each naming its number, so the parts can be told apart
  for (int i = 0; i < 100; ++i) lines += "line " + std::to_string(i) + " of the text\n";
  write(dir / "lines.txt", lines);
  const nlohmann::json held = {{"kind", "text"}, {"train", "lines.txt"}, {"vocab_size", 60}, {"max_len", 8},
                               {"valid_fraction", 0.1}, {"test_fraction", 0.2}};
  auto h = load_task(held, lm, dir.path, std::nullopt, {"train", "valid", "test"}, 1);
  auto text_of = [&](const std::vector<Example>& blocks) {
    std::vector<int64_t> ids;
    for (const auto& b : blocks)  // consecutive blocks share a token: take it once
      ids.insert(ids.end(), b.src.begin() + (ids.empty() ? 0 : 1), b.src.end());
    return h.tokenizer->decode(ids);
  };
  const std::string train_text = text_of(h.train), valid_text = text_of(h.valid), test_text = text_of(h.test);
  EXPECT_NE(train_text.find("line 69 "), std::string::npos);
  EXPECT_EQ(train_text.find("line 70 "), std::string::npos);
  EXPECT_NE(valid_text.find("line 70 "), std::string::npos);
  EXPECT_NE(valid_text.find("line 79 "), std::string::npos);
  EXPECT_EQ(valid_text.find("line 80 "), std::string::npos);
  EXPECT_NE(test_text.find("line 80 "), std::string::npos);
  EXPECT_NE(test_text.find("line 99 "), std::string::npos);
  EXPECT_EQ(test_text.find("line 79 "), std::string::npos);
  auto lm_error = [&](nlohmann::json s) {
    return test::error_of([&] { load_task(s, lm, dir.path, h.tokenizer, {"test"}, 1); });
  };
  nlohmann::json both = held;
  both["test"] = "lines.txt";
  EXPECT_NE(lm_error(both).find("not both"), std::string::npos);
  for (double bad : {0.0, 0.9, -0.1}) {
    nlohmann::json s = held;
    s["test_fraction"] = bad;
    EXPECT_NE(lm_error(s).find("test_fraction must be > 0 and valid_fraction + test_fraction < 1"), std::string::npos)
        << bad;
  }
  write(dir / "three.txt", "one line\nanother line\na third line\n");  // 10 % of 3 lines is no line
  nlohmann::json tiny = held;
  tiny["train"] = "three.txt";
  tiny["test_fraction"] = 0.1;
  EXPECT_NE(lm_error(tiny).find("valid_fraction 0.1 and test_fraction 0.1 of three.txt's 3 lines leave an empty split"),
            std::string::npos)
      << lm_error(tiny);
}

// ---- real data (label: data) ----
using test::shared_data;

TEST(TasksData, RealFilesSlices) {
  const std::string root = shared_data();
  if (!std::filesystem::is_directory(root)) GTEST_SKIP() << root << " not found";
  auto cls = model_for(Arch::EncoderClassifier);
  cls.max_positions = 64;
  auto sst = load_task({{"kind", "tsv"}, {"train", "glue/SST-2/dev.tsv.gz"}, {"valid", "glue/SST-2/dev.tsv.gz"},
                        {"vocab_size", 500}, {"max_len", 64}},
                       cls, root, std::nullopt, {"train", "valid"}, 1);
  EXPECT_EQ(sst.valid.size(), 872u);
  auto mt = model_for(Arch::EncoderDecoder);
  mt.max_positions = 64;
  auto m30 = load_task({{"kind", "parallel"}, {"train", {"multi30k/val.en.gz", "multi30k/val.de.gz"}},
                        {"test", {"multi30k/test_2016_flickr.en.gz", "multi30k/test_2016_flickr.de.gz"}},
                        {"vocab_size", 1000}, {"max_len", 64}},
                       mt, root, std::nullopt, {"train", "test"}, 1);
  EXPECT_EQ(m30.test.size(), 1000u);
  EXPECT_GT(m30.train.size(), 1000u);
  EXPECT_EQ(m30.test_text.front().first.substr(0, 10), "A man in a");
}

}  // namespace
}  // namespace hp
