// Tokenizer: BPE training on tiny synthetic corpora, fixed special ids, merges applied by rank,
// encode/decode round trips (unknown and non-ASCII characters), save/load, determinism, thread
// safety and clear errors.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "headprune/io/files.h"
#include "headprune/data/tokenizer.h"
#include "test_util.h"

namespace hp {
namespace {
namespace fs = std::filesystem;

using Scratch = test::TempDir;  // a fresh temporary directory, removed afterwards

using test::write;

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

// corpus() plus some German with non-ASCII letters.
std::vector<std::string> mixed_corpus() {
  auto out = corpus();
  for (int i = 0; i < 5; ++i) {
    out.push_back("die Straße ist über der Brücke");
    out.push_back("große Hunde laufen über die Straße");
  }
  return out;
}

TokenizerTrainOptions small(int64_t vocab_size = 40) {
  TokenizerTrainOptions o;
  o.vocab_size = vocab_size;
  return o;
}

std::vector<std::string> pieces_of(const Tokenizer& tok, const std::vector<int64_t>& ids) {
  std::vector<std::string> out;
  for (int64_t id : ids) out.push_back(tok.piece(id));
  return out;
}

TEST(Tokenizer, TrainsRequestedVocabularyWithFixedSpecialIds) {
  const Tokenizer tok = Tokenizer::train(corpus(), small());
  EXPECT_EQ(tok.vocab_size(), 40);
  EXPECT_EQ(Tokenizer::kPad, 0);
  EXPECT_EQ(Tokenizer::kBos, 1);
  EXPECT_EQ(Tokenizer::kEos, 2);
  EXPECT_EQ(Tokenizer::kUnk, 3);
  EXPECT_EQ(tok.piece(0), "<pad>");
  EXPECT_EQ(tok.piece(1), "<s>");
  EXPECT_EQ(tok.piece(2), "</s>");
  EXPECT_EQ(tok.piece(3), "<unk>");
  EXPECT_THROW(tok.piece(40), std::invalid_argument);
  EXPECT_THROW(tok.piece(-1), std::invalid_argument);
  std::set<std::string> distinct;
  for (int64_t id = 0; id < tok.vocab_size(); ++id) distinct.insert(tok.piece(id));
  EXPECT_EQ(static_cast<int64_t>(distinct.size()), tok.vocab_size());
  const auto ids = tok.encode("the cat sees a yellow bird!");
  ASSERT_FALSE(ids.empty());
  for (int64_t id : ids) {
    EXPECT_GT(id, Tokenizer::kUnk);  // known text: no special ids, and no bos/eos added
    EXPECT_LT(id, tok.vocab_size());
  }
  EXPECT_EQ(tok.encode(""), std::vector<int64_t>{});
  EXPECT_EQ(tok.encode(" \t\n "), std::vector<int64_t>{});
}

// The classic example: with the word marker, the first merges can be worked out by hand.
TEST(Tokenizer, MergesFollowFrequencyThenBytesAndApplyByRank) {
  const std::vector<std::string> text = {"low low low low low lower lower",
                                         "newest newest newest newest newest", "newest widest widest widest"};
  const Tokenizer tok = Tokenizer::train(text, small(24));
  ASSERT_EQ(tok.vocab_size(), 24);
  // Alphabet, sorted by code point ("▁" U+2581 is last).
  const std::vector<std::string> alphabet = {"d", "e", "i", "l", "n", "o", "r", "s", "t", "w", "\u2581"};
  for (size_t i = 0; i < alphabet.size(); ++i) EXPECT_EQ(tok.piece(4 + i), alphabet[i]) << i;
  // es and st both occur 9 times: ("e","s") is the smaller pair. Then est (9); then ▁l, lo, ow (7 each):
  // "l" < "▁" picks lo, then low, ▁low; then ne, ew, ▁n, w+est (6 each) pick ew, ewest, newest, ▁newest.
  const std::vector<std::string> merged = {"es", "est",   "lo",     "low",         "\u2581low",
                                           "ew", "ewest", "newest", "\u2581newest"};
  for (size_t i = 0; i < merged.size(); ++i) EXPECT_EQ(tok.piece(15 + i), merged[i]) << i;

  // Encoding replays the merges lowest rank first.
  EXPECT_EQ(pieces_of(tok, tok.encode("lowest")), (std::vector<std::string>{"\u2581low", "est"}));
  EXPECT_EQ(pieces_of(tok, tok.encode("newer")), (std::vector<std::string>{"\u2581", "n", "ew", "e", "r"}));
  EXPECT_EQ(pieces_of(tok, tok.encode("newest low")),
            (std::vector<std::string>{"\u2581newest", "\u2581low"}));
  EXPECT_EQ(pieces_of(tok, tok.encode("wider")),
            (std::vector<std::string>{"\u2581", "w", "i", "d", "e", "r"}));

  // With room to spare, training stops once no pair occurs twice: lower and widest become whole
  // words (3 times: dest, idest, widest, ▁widest; then twice: er, ▁lower), 15 merges in all.
  const Tokenizer all = Tokenizer::train(text, small(1000));
  EXPECT_EQ(all.vocab_size(), 4 + 11 + 15);
  EXPECT_EQ(all.piece(all.vocab_size() - 3), "\u2581widest");
  EXPECT_EQ(all.piece(all.vocab_size() - 1), "\u2581lower");
  EXPECT_EQ(all.encode("lower widest").size(), 2u);
}

TEST(Tokenizer, EncodeDecodeRoundTrip) {
  const Tokenizer tok = Tokenizer::train(mixed_corpus(), small(60));
  for (const auto& s : mixed_corpus()) EXPECT_EQ(tok.decode(tok.encode(s)), s);
  // A new sentence made of known characters round-trips as well.
  const std::string fresh = "the old farmer paints a dog, again!";
  EXPECT_EQ(tok.decode(tok.encode(fresh)), fresh);
  EXPECT_EQ(tok.decode(tok.encode("Straße über")), "Straße über");
  EXPECT_EQ(tok.decode(tok.encode("über")), "über");
  EXPECT_EQ(tok.decode({}), "");
  // Any whitespace separates words; decoding joins them with single spaces.
  EXPECT_EQ(tok.decode(tok.encode("  a dog\t\tsees\nthe\u00A0cat \r")), "a dog sees the cat");
  EXPECT_EQ(tok.encode("a dog"), tok.encode(" a   dog "));

  // Characters never seen in training are one <unk> each, dropped by decode.
  const auto unk = tok.encode("the \xE2\x82\xAC cat zq");  // euro sign; z and q as well
  EXPECT_EQ(std::count(unk.begin(), unk.end(), Tokenizer::kUnk), 2);
  const auto word = tok.encode("cazt");
  EXPECT_EQ(std::count(word.begin(), word.end(), Tokenizer::kUnk), 1);
  EXPECT_EQ(tok.decode(word), "cat");
  // Malformed UTF-8 bytes are single unknown symbols.
  const auto bad = tok.encode("a\xFF\xC3 dog");
  EXPECT_EQ(std::count(bad.begin(), bad.end(), Tokenizer::kUnk), 2);
  EXPECT_EQ(tok.decode(bad), "a dog");
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

TEST(Tokenizer, CharacterCoverageMapsRareCharactersToUnk) {
  std::vector<std::string> text(50, "aaaa bbb cc");
  text.push_back("d");
  TokenizerTrainOptions o = small(7);  // 4 specials + a, b, ▁
  o.character_coverage = 0.8;          // a (200), ▁ (151) and b (150) cover 501 of 602
  const Tokenizer tok = Tokenizer::train(text, o);
  EXPECT_EQ(tok.vocab_size(), 7);
  EXPECT_EQ(tok.piece(4), "a");
  EXPECT_EQ(tok.piece(5), "b");
  EXPECT_EQ(tok.piece(6), "\u2581");
  EXPECT_EQ(tok.encode("cd"), (std::vector<int64_t>{6, Tokenizer::kUnk, Tokenizer::kUnk}));
  o.character_coverage = 1.0;  // now c and d are needed too
  try {
    Tokenizer::train(text, o);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("vocab_size must be at least 9"), std::string::npos) << e.what();
  }
}

TEST(Tokenizer, SaveLoadGivesIdenticalEncodings) {
  Scratch d;
  const Tokenizer tok = Tokenizer::train(mixed_corpus(), small(60));
  EXPECT_EQ(tok.serialized().rfind("{\"type\":\"headprune-bpe\",\"version\":1,\"vocab\":[\"<pad>\",", 0), 0u)
      << tok.serialized().substr(0, 80);
  tok.save(d / "tokenizer.json");
  EXPECT_EQ(list_directory(d.path).size(), 1u);  // no temp file left
  const Tokenizer back = Tokenizer::load(d / "tokenizer.json");
  EXPECT_EQ(back.serialized(), tok.serialized());
  EXPECT_EQ(back.vocab_size(), tok.vocab_size());
  for (const auto& s : mixed_corpus()) EXPECT_EQ(back.encode(s), tok.encode(s));
  for (int64_t id = 0; id < tok.vocab_size(); ++id) EXPECT_EQ(back.piece(id), tok.piece(id));
  const Tokenizer copy = back;  // copies share the model
  EXPECT_EQ(copy.encode("my neighbour sees its shadow"), tok.encode("my neighbour sees its shadow"));
  EXPECT_EQ(Tokenizer::from_serialized(tok.serialized()).encode("a dog"), tok.encode("a dog"));
}

TEST(Tokenizer, TrainingIsDeterministic) {
  EXPECT_EQ(Tokenizer::train(mixed_corpus(), small(60)).serialized(),
            Tokenizer::train(mixed_corpus(), small(60)).serialized());
  // The order of the sentences does not matter, only the word counts.
  auto reversed = mixed_corpus();
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(Tokenizer::train(reversed, small(60)).serialized(),
            Tokenizer::train(mixed_corpus(), small(60)).serialized());
  // A seeded sample of the sentences: same seed, same model.
  TokenizerTrainOptions o = small(30);
  o.max_sentences = 20;
  o.seed = 7;
  EXPECT_EQ(Tokenizer::train(corpus(), o).serialized(), Tokenizer::train(corpus(), o).serialized());
}

TEST(Tokenizer, CopiesEncodeConcurrently) {
  const Tokenizer tok = Tokenizer::train(mixed_corpus(), small(60));
  const auto sentences = mixed_corpus();
  std::vector<std::vector<int64_t>> expected;
  for (const auto& s : sentences) expected.push_back(Tokenizer::from_serialized(tok.serialized()).encode(s));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t, copy = tok] {
      for (int round = 0; round < 20; ++round)
        for (size_t i = 0; i < sentences.size(); ++i)
          mismatches[t] += copy.encode(sentences[i]) != expected[i];
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << t;
}

void expect_load_error(const std::string& path, const std::string& contents, const std::string& expected) {
  write(path, contents);
  try {
    Tokenizer::load(path);
    ADD_FAILURE() << "expected an error for " << contents;
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(Tokenizer, LoadErrorsNameThePath) {
  Scratch d;
  const std::string path = d / "tokenizer.json";
  expect_load_error(path, "this is not a tokenizer \x01\x02\x03", "not JSON");
  expect_load_error(path, "[1, 2]", "expected a JSON object");
  const std::string ok = R"("vocab":["<pad>","<s>","</s>","<unk>","a","b","▁","ab"],"merges":[["a","b"]]})";
  EXPECT_EQ(Tokenizer::from_serialized(R"({"type":"headprune-bpe","version":1,)" + ok).vocab_size(), 8);
  expect_load_error(path, R"({"type":"sentencepiece","version":1,)" + ok,
                    "expected \"type\": \"headprune-bpe\", got \"sentencepiece\"");
  expect_load_error(path, R"({"version":1,)" + ok, "expected a \"type\" field");
  expect_load_error(path, R"({"type":"headprune-bpe","version":2,)" + ok, "expected \"version\": 1, got 2");
  expect_load_error(path, R"({"type":"headprune-bpe","version":1,"extra":0,)" + ok,
                    "unexpected field \"extra\"");
  const std::string head = R"({"type":"headprune-bpe","version":1,)";
  expect_load_error(path, head + R"("vocab":["<s>","<pad>","</s>","<unk>","a","▁"],"merges":[]})",
                    "expected special piece <pad> at id 0, got \"<s>\"");
  expect_load_error(path, head + R"("vocab":["<pad>","<s>","</s>","<unk>","b","a","▁"],"merges":[]})",
                    "sorted by code point");
  expect_load_error(path, head + R"("vocab":["<pad>","<s>","</s>","<unk>","a","b"],"merges":[]})",
                    "word marker");
  expect_load_error(path,
                    head + R"("vocab":["<pad>","<s>","</s>","<unk>","a","b","▁","ba"],"merges":[["a","b"]]})",
                    "merge 0 (piece 7): expected \"a\" + \"b\" at id 7, got \"ba\"");
  expect_load_error(path,
                    head + R"("vocab":["<pad>","<s>","</s>","<unk>","a","b","▁","ab"],"merges":[["a","c"]]})",
                    "merge 0: expected \"c\" in the vocabulary");
  expect_load_error(path, head + R"("vocab":["<pad>","<s>","</s>","<unk>","a","▁","a"],"merges":[]})",
                    "appears twice");
  expect_load_error(path,
                    head + R"("vocab":["<pad>","<s>","</s>","<unk>","a","b","▁","ab"],"merges":[["a"]]})",
                    "merge 0: expected a [left, right] pair of strings");
  try {
    Tokenizer::load(d / "missing.json");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(d / "missing.json"), std::string::npos) << e.what();
  }
  try {
    Tokenizer::from_serialized("{}", "checkpoint.safetensors[tokenizer]");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("checkpoint.safetensors[tokenizer]: ", 0), 0u) << e.what();
  }
}

TEST(Tokenizer, RejectsBadOptions) {
  TokenizerTrainOptions o = small();
  o.kind = "unigram";
  EXPECT_THROW(Tokenizer::train(corpus(), o), std::invalid_argument);
  o = small(4);
  EXPECT_THROW(Tokenizer::train(corpus(), o), std::invalid_argument);
  o = small();
  o.character_coverage = 0;
  EXPECT_THROW(Tokenizer::train(corpus(), o), std::invalid_argument);
  o = small();
  o.max_sentences = -1;
  EXPECT_THROW(Tokenizer::train(corpus(), o), std::invalid_argument);
  EXPECT_THROW(Tokenizer::train({}, small()), std::invalid_argument);
  // Fewer pieces than the alphabet needs: the message says the minimum.
  const Tokenizer full = Tokenizer::train(corpus(), small(1000));
  int64_t chars = 0;
  for (int64_t id = 4; id < full.vocab_size(); ++id)  // ASCII text: the characters are 1 byte, and "▁"
    chars += full.piece(id) == "\u2581" || full.piece(id).size() == 1;
  try {
    Tokenizer::train(corpus(), small(10));
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("vocab_size must be at least " + std::to_string(4 + chars)),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(Tokenizer::train(corpus(), small(4 + chars)).vocab_size(), 4 + chars);  // no merges at all
  EXPECT_LT(full.vocab_size(), 1000);  // stops when no pair occurs twice
}

}  // namespace
}  // namespace hp
