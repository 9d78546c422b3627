// Tokenizer: in-memory SentencePiece training on a tiny synthetic corpus, fixed special ids,
// encode/decode round trips, save/load, determinism and clear errors.
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <sentencepiece_trainer.h>

#include "headprune/data/tokenizer.h"

namespace hp {
namespace {
namespace fs = std::filesystem;

struct Scratch {
  Scratch() {
    std::random_device rd;
    path = (fs::temp_directory_path() / ("hp_tokenizer_" + std::to_string(rd()))).string();
    fs::create_directories(path);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
  std::string path;
};

// 48 sentences over a small vocabulary, built deterministically.
std::vector<std::string> corpus() {
  const std::vector<std::string> subj = {"the cat", "a dog", "my neighbour", "the old farmer"};
  const std::vector<std::string> verb = {"sees", "chases", "paints", "quietly watches"};
  const std::vector<std::string> obj = {"the red ball.", "a yellow bird!", "its shadow, again."};
  std::vector<std::string> out;
  for (const auto& s : subj)
    for (const auto& v : verb)
      for (const auto& o : obj) out.push_back(s + " " + v + " " + o);
  return out;
}

TokenizerTrainOptions small(const std::string& type = "bpe") {
  TokenizerTrainOptions o;
  o.vocab_size = 40;  // the unigram trainer allows at most 42 on this corpus
  o.model_type = type;
  return o;
}

TEST(Tokenizer, TrainsRequestedVocabularyWithFixedSpecialIds) {
  const Tokenizer tok = Tokenizer::train(corpus(), small());
  EXPECT_EQ(tok.vocab_size(), 40);
  EXPECT_EQ(Tokenizer::kPad, 0);
  EXPECT_EQ(Tokenizer::kBos, 1);
  EXPECT_EQ(Tokenizer::kEos, 2);
  EXPECT_EQ(Tokenizer::kUnk, 3);
  const auto ids = tok.encode("the cat sees a yellow bird!");
  ASSERT_FALSE(ids.empty());
  for (int64_t id : ids) {
    EXPECT_GT(id, Tokenizer::kUnk);  // known text: no special ids, and no bos/eos added
    EXPECT_LT(id, tok.vocab_size());
  }
  // A character never seen in training is <unk>.
  const auto unk = tok.encode("the \xE2\x82\xAC cat");  // euro sign
  EXPECT_NE(std::find(unk.begin(), unk.end(), Tokenizer::kUnk), unk.end());
}

TEST(Tokenizer, EncodeDecodeRoundTrip) {
  for (const std::string type : {"bpe", "unigram"}) {
    const Tokenizer tok = Tokenizer::train(corpus(), small(type));
    for (const auto& s : corpus()) EXPECT_EQ(tok.decode(tok.encode(s)), s) << type;
    // A new sentence made of known pieces round-trips as well.
    const std::string fresh = "the old farmer paints a dog, again!";
    EXPECT_EQ(tok.decode(tok.encode(fresh)), fresh) << type;
    EXPECT_EQ(tok.decode({}), "");
  }
}

TEST(Tokenizer, DecodeSkipsSpecialIds) {
  const Tokenizer tok = Tokenizer::train(corpus(), small());
  const auto ids = tok.encode("a dog chases the red ball.");
  std::vector<int64_t> wrapped = {Tokenizer::kBos};
  wrapped.insert(wrapped.end(), ids.begin(), ids.end());
  wrapped.insert(wrapped.end(), {Tokenizer::kUnk, Tokenizer::kEos, Tokenizer::kPad, Tokenizer::kPad});
  EXPECT_EQ(tok.decode(wrapped), "a dog chases the red ball.");
  EXPECT_THROW(tok.decode({5, tok.vocab_size()}), std::invalid_argument);
  EXPECT_THROW(tok.decode({-1}), std::invalid_argument);
}

TEST(Tokenizer, SaveLoadGivesIdenticalEncodings) {
  Scratch d;
  const Tokenizer tok = Tokenizer::train(corpus(), small("unigram"));
  tok.save(d / "tok.model");
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path), fs::directory_iterator{}), 1);  // no temp file left
  const Tokenizer back = Tokenizer::load(d / "tok.model");
  EXPECT_EQ(back.serialized(), tok.serialized());
  EXPECT_EQ(back.vocab_size(), tok.vocab_size());
  for (const auto& s : corpus()) EXPECT_EQ(back.encode(s), tok.encode(s));
  const Tokenizer copy = back;  // copies share the processor
  EXPECT_EQ(copy.encode("my neighbour sees its shadow"), tok.encode("my neighbour sees its shadow"));
  EXPECT_EQ(Tokenizer::from_serialized(tok.serialized()).encode("a dog"), tok.encode("a dog"));
}

TEST(Tokenizer, TrainingIsDeterministic) {
  for (const std::string type : {"bpe", "unigram"}) {
    EXPECT_EQ(Tokenizer::train(corpus(), small(type)).serialized(),
              Tokenizer::train(corpus(), small(type)).serialized())
        << type;
  }
  // A seeded sample of the sentences: same seed, same model.
  TokenizerTrainOptions o = small();
  o.vocab_size = 30;
  o.max_sentences = 20;
  o.seed = 7;
  EXPECT_EQ(Tokenizer::train(corpus(), o).serialized(), Tokenizer::train(corpus(), o).serialized());
}

TEST(Tokenizer, LoadErrorsNameThePath) {
  Scratch d;
  {
    std::ofstream out(d / "garbage.model", std::ios::binary);
    out << "this is not a sentencepiece model \x01\x02\x03";
  }
  try {
    Tokenizer::load(d / "garbage.model");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(d / "garbage.model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a SentencePiece model"), std::string::npos) << e.what();
  }
  try {
    Tokenizer::load(d / "missing.model");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(d / "missing.model"), std::string::npos) << e.what();
  }
}

TEST(Tokenizer, RejectsModelsWithOtherSpecialIds) {
  // SentencePiece's own defaults put <unk> at 0 and have no <pad>.
  std::vector<std::string> sentences = corpus();
  struct It : sentencepiece::SentenceIterator {
    explicit It(const std::vector<std::string>& sentences) : all(sentences) {}
    bool done() const override { return i >= all.size(); }
    void Next() override { ++i; }
    const std::string& value() const override { return all[i]; }
    sentencepiece::util::Status status() const override { return {}; }
    const std::vector<std::string>& all;
    size_t i = 0;
  } it(sentences);
  std::string bytes;
  ASSERT_TRUE(sentencepiece::SentencePieceTrainer::Train(
                  {{"vocab_size", "40"}, {"num_threads", "1"}, {"minloglevel", "2"}}, &it, &bytes)
                  .ok());
  try {
    Tokenizer::from_serialized(bytes, "other.model");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("other.model: expected special piece <pad> at id 0"), std::string::npos)
        << e.what();
  }
}

TEST(Tokenizer, RejectsBadOptions) {
  TokenizerTrainOptions o = small();
  o.model_type = "wordpiece";
  EXPECT_THROW(Tokenizer::train(corpus(), o), std::invalid_argument);
  o = small();
  o.vocab_size = 4;
  EXPECT_THROW(Tokenizer::train(corpus(), o), std::invalid_argument);
  o = small();
  o.character_coverage = 0;
  EXPECT_THROW(Tokenizer::train(corpus(), o), std::invalid_argument);
  EXPECT_THROW(Tokenizer::train({}, small()), std::invalid_argument);
  o = small();
  o.vocab_size = 5000;  // more pieces than the corpus allows: SentencePiece's message comes through
  try {
    Tokenizer::train(corpus(), o);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("Vocabulary size too high"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hp
