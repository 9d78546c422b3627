// Tokenizer files and texts from a hostile probe (issue 78): a tokenizer.json regex that backtracks
// catastrophically stops with an error naming the file and the pattern; {"String": ...} patterns
// are literal; ICU errors are never swallowed; BPE merging stays O(n log n) in a word's length;
// Marian's vocab.json ids are bounded by its entry count before anything is allocated.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "headprune/data/hf_tokenizers.h"
#include "headprune/data/sentencepiece.h"
#include "headprune/io/files.h"
#include "test_util.h"

namespace hp {
namespace {

using Strings = std::vector<std::string>;
using test::error_of;

// A byte-level tokenizer.json: every byte a token, a few merges, and the given pre-tokenizer.
nlohmann::json byte_level_json(const nlohmann::json& pre_tokenizer) {
  nlohmann::json vocab = nlohmann::json::object();
  int64_t id = 0;
  for (const auto& sym : ByteLevelBpeTokenizer::byte_symbols()) vocab[sym] = id++;
  for (const char* t : {"ab", "abc", "cd", "abcd"}) vocab[t] = id++;  // 256..259
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b", "c d", "ab cd", "ab c"}}}},
          {"added_tokens", {{{"id", 260}, {"content", "<|endoftext|>"}, {"special", true}}}},
          {"pre_tokenizer", pre_tokenizer},
          {"decoder", {{"type", "ByteLevel"}}}};
}

// A Split by `pattern` ({"Regex": ...} or {"String": ...}), then ByteLevel without GPT-2's pattern.
nlohmann::json split_then_bytes(const nlohmann::json& pattern) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", pattern}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
}

ByteLevelBpeTokenizer load_json(const test::TempDir& dir, const nlohmann::json& j) {
  write_json_file(dir / "tokenizer.json", j);
  return ByteLevelBpeTokenizer::from_tokenizer_json(dir / "tokenizer.json");
}

// (a+)+$ on 40 a's and a b: about 2^40 backtracking steps without a limit (31 characters took 69 s
// and each one more doubles it). ICU's time limit stops it with an error naming the file, the field
// and the pattern, in about a second.
TEST(TokenizerHostile, CatastrophicRegexStopsWithAnErrorNamingFileAndPattern) {
  test::TempDir dir;
  const auto t = load_json(dir, byte_level_json(split_then_bytes({{"Regex", "(a+)+$"}})));
  EXPECT_EQ(t.pre_tokenize("xaaa"), (Strings{"x", "aaa"}));  // a short text matches as usual
  const std::string e = error_of([&] { t.encode(std::string(40, 'a') + "b"); });
  EXPECT_NE(e.find(dir / "tokenizer.json"), std::string::npos) << e;
  EXPECT_NE(e.find("pre_tokenizer.pretokenizers.pattern: the regex '(a+)+$'"), std::string::npos) << e;
  EXPECT_NE(e.find("time limit"), std::string::npos) << e;
  // Through the Tokenizer interface (what `headprune tokenize` runs) the same error comes out.
  const auto tok = load_hf_tokenizer(dir.path);
  ASSERT_TRUE(tok);
  EXPECT_NE(error_of([&] { tok->encode(std::string(40, 'a') + "b"); }).find("the regex '(a+)+$'"), std::string::npos);
}

// The limit is per match: a legitimate pattern over a long text with many matches, and one long
// linear match, are not cut short.
TEST(TokenizerHostile, RegexLimitIsPerMatchNotPerText) {
  test::TempDir dir;
  const auto t = load_json(dir, byte_level_json(split_then_bytes({{"Regex", R"(\p{L}+|\s+(?!\S)|\s+)"}})));
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "ab ";
  EXPECT_EQ(t.pre_tokenize(text).size(), 200000u);
  // \s+(?!\S) takes all spaces but the last, which \s+ takes alone.
  EXPECT_EQ(t.pre_tokenize(std::string(1 << 20, ' ') + "x"), (Strings{std::string((1 << 20) - 1, ' '), " ", "x"}));
}

// {"String": ...} is matched as it is: a string holding \E (which would end a \Q...\E quote) or regex
// characters splits where those characters are, and nowhere else.
TEST(TokenizerHostile, StringPatternsAreLiteral) {
  test::TempDir dir;
  const auto t = load_json(dir, byte_level_json(split_then_bytes({{"String", R"(\E.*)"}})));
  EXPECT_EQ(t.pre_tokenize(R"(ab\E.*cd)"), (Strings{"ab", R"(\E.*)", "cd"}));
  EXPECT_EQ(t.pre_tokenize("ab\\Excd"), (Strings{"ab\\Excd"}));  // "." is no wildcard
  EXPECT_EQ(t.tokenize(R"(ab\E.*cd)"), (Strings{"ab", "\\", "E", ".", "*", "cd"}));
  const auto dots = load_json(dir, byte_level_json(split_then_bytes({{"String", "a+"}})));
  EXPECT_EQ(dots.pre_tokenize("aaa+a"), (Strings{"aa", "a+", "a"}));
}

// An ICU failure in a split (here its backtracking stack running out on (?:x|y)+ over 4M characters)
// is an error naming the file and the pattern, not the rest of the text quietly left as one piece.
TEST(TokenizerHostile, IcuErrorsInASplitAreNeverSwallowed) {
  test::TempDir dir;
  const auto t = load_json(dir, byte_level_json(split_then_bytes({{"Regex", "(?:x|y)+"}})));
  EXPECT_EQ(t.pre_tokenize("axyxb"), (Strings{"a", "xyx", "b"}));
  const std::string e = error_of([&] { t.pre_tokenize("a" + std::string(4 << 20, 'x')); });
  EXPECT_NE(e.find(dir / "tokenizer.json"), std::string::npos) << e;
  EXPECT_NE(e.find("the regex '(?:x|y)+'"), std::string::npos) << e;
  EXPECT_NE(e.find("stack"), std::string::npos) << e;
}

// BPE merging is O(n log n) in a word's length (it was quadratic: a 1 MB word ran past 2 minutes),
// and gives what merging the best-ranked pair everywhere, pass by pass, gives.
TEST(TokenizerHostile, LongWordsMergeInNLogN) {
  test::TempDir dir;
  const auto t = load_json(dir, byte_level_json({{"type", "ByteLevel"}, {"use_regex", false}}));
  // a b -> ab everywhere, then c d -> cd, then ab cd -> abcd, then ab c -> abc.
  EXPECT_EQ(t.tokenize("abcdabcabab"), (Strings{"abcd", "abc", "ab", "ab"}));
  EXPECT_EQ(t.tokenize("aabcdd"), (Strings{"a", "abcd", "d"}));
  EXPECT_EQ(t.tokenize("abcd"), (Strings{"abcd"}));
  std::string word;
  for (int i = 0; i < 250000; ++i) word += "abcd";  // 1 MB, one piece
  const auto toks = t.tokenize(word + "abc");
  ASSERT_EQ(toks.size(), 250001u);
  EXPECT_EQ(toks.front(), "abcd");
  EXPECT_EQ(toks.back(), "abc");
  EXPECT_EQ(t.decode(t.encode(word)), word);
}

// Added tokens are found in one pass per token, however many times they occur.
TEST(TokenizerHostile, ManyAddedTokenMatchesStayLinear) {
  test::TempDir dir;
  auto j = byte_level_json({{"type", "ByteLevel"}, {"use_regex", false}});
  j["added_tokens"] = {{{"id", 300}, {"content", "<s>"}, {"special", true}}, {{"id", 301}, {"content", "<never>"}}};
  const auto t = load_json(dir, j);
  std::string text;
  for (int i = 0; i < 200000; ++i) text += "<s>ab";
  const auto ids = t.encode(text);
  ASSERT_EQ(ids.size(), 400000u);
  EXPECT_EQ(ids[0], 300);
  EXPECT_EQ(ids[1], 256);  // "ab"
}

// Marian's vocab.json: an id at or past the number of entries is an error naming the file, the
// token and the id, before any table is sized by it (an id of 1e8 cost 3.3 GB).
TEST(TokenizerHostile, MarianVocabularyIdsAreBoundedByTheEntryCount) {
  const std::string spm = join_path(test::shared_data(), "../tokenizers/marian-opus-mt-en-mg/source.spm");
  if (!is_file(spm)) GTEST_SKIP() << "no " << spm;
  const auto base = SentencePieceTokenizer::load(spm);
  test::TempDir dir;
  test::write(dir / "vocab.json", R"({"<unk>": 0, "</s>": 1, "<pad>": 2, "▁a": 100000000})");
  const std::string e = error_of([&] { base.with_vocabulary(dir / "vocab.json"); });
  EXPECT_NE(e.find(dir / "vocab.json"), std::string::npos) << e;
  EXPECT_NE(e.find("'▁a' is 100000000"), std::string::npos) << e;
  EXPECT_NE(e.find("[0, 4)"), std::string::npos) << e;
  test::write(dir / "vocab.json", R"({"<unk>": 0, "</s>": 1, "<pad>": 2, "▁a": -1})");
  EXPECT_NE(error_of([&] { base.with_vocabulary(dir / "vocab.json"); }).find("'▁a' is -1"), std::string::npos);
  test::write(dir / "vocab.json", R"({"<unk>": 0, "</s>": 1, "<pad>": 2, "▁a": 18446744073709551615})");
  EXPECT_NE(error_of([&] { base.with_vocabulary(dir / "vocab.json"); }).find("'▁a' is 18446744073709551615"), std::string::npos);
  test::write(dir / "vocab.json", R"({"<unk>": 0, "</s>": 1, "<pad>": 2, "▁a": 3})");
  const auto t = base.with_vocabulary(dir / "vocab.json");
  EXPECT_EQ(t.vocab_size(), 4);
  for (const int64_t i : t.encode("a b c")) EXPECT_LT(i, 4);
}

}  // namespace
}  // namespace hp
