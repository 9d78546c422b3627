// BERT WordPiece and GPT-2 byte-level BPE tokenization on hand-checked examples.
#include <fstream>

#include <gtest/gtest.h>

#include "headprune/data/hf_tokenizers.h"
#include "test_util.h"

namespace hp {
namespace {

using Strings = std::vector<std::string>;

WordPieceTokenizer bert(bool lower = true) {
  WordPieceTokenizer::Options o;
  o.do_lower_case = lower;
  return WordPieceTokenizer::from_vocab({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "un", "##aff", "##able", "hello",
                                         "!", ",", "world", "a", "##b", "cafe", "café", "Hello", "你", "'", "s"},
                                        o);
}

TEST(WordPiece, BasicTokenizationLowerCasesStripsAccentsAndSplitsPunctuation) {
  const auto t = bert();
  EXPECT_EQ(t.basic_tokenize("  Héllo,World!\tCAFÉ  "), (Strings{"hello", ",", "world", "!", "cafe"}));
  EXPECT_EQ(t.basic_tokenize("it's"), (Strings{"it", "'", "s"}));
  EXPECT_EQ(t.basic_tokenize("a\x01" "b\xc2\xa0" "c"), (Strings{"ab", "c"}));  // control dropped, NBSP splits
  EXPECT_EQ(t.basic_tokenize("你好a"), (Strings{"你", "好", "a"}));           // CJK characters stand alone
  EXPECT_EQ(t.basic_tokenize("cafe\xcc\x81"), (Strings{"cafe"}));           // decomposed accent stripped
  const auto cased = bert(false);
  EXPECT_EQ(cased.basic_tokenize("Héllo cafe\xcc\x81!"), (Strings{"Héllo", "café", "!"}));  // NFC, accents kept
}

TEST(WordPiece, GreedyLongestMatchFirstWithContinuations) {
  const auto t = bert();
  EXPECT_EQ(t.tokenize("unaffable"), (Strings{"un", "##aff", "##able"}));
  EXPECT_EQ(t.tokenize("ab AB"), (Strings{"a", "##b", "a", "##b"}));
  EXPECT_EQ(t.tokenize("unknownword hello"), (Strings{"[UNK]", "hello"}));  // one bad piece: whole word unknown
  EXPECT_EQ(t.tokenize("unaffablex"), (Strings{"[UNK]"}));
  EXPECT_EQ(t.tokenize(std::string(101, 'a')), (Strings{"[UNK]"}));  // longer than max_chars_per_word
  EXPECT_EQ(t.encode("Hello, world!"), (std::vector<int64_t>{8, 10, 11, 9}));
  EXPECT_EQ(bert(false).tokenize("Hello hello"), (Strings{"Hello", "hello"}));
  EXPECT_EQ(*t.id("[SEP]"), 3);
  EXPECT_FALSE(t.id("nope").has_value());
}

TEST(WordPiece, BadVocabulariesAreClearErrors) {
  test::TempDir dir;
  std::ofstream(dir / "vocab.txt") << "[UNK]\nthe\na\nthe\n";
  try {
    WordPieceTokenizer::load(dir / "vocab.txt", {});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("vocab.txt: token 'the' on lines 2 and 4"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "nounk.txt") << "the\na\n";
  EXPECT_THROW(WordPieceTokenizer::load(dir / "nounk.txt", {}), std::invalid_argument);
  EXPECT_THROW(WordPieceTokenizer::load(dir / "missing.txt", {}), std::runtime_error);
}

TEST(ByteLevelBpe, PreTokenizationFollowsGpt2sPattern) {
  const auto t = ByteLevelBpeTokenizer::from_parts({}, {});
  EXPECT_EQ(t.pre_tokenize("Hello world's  test\n123 ünï!!"),
            (Strings{"Hello", " world", "'s", " ", " test", "\n", "123", " ünï", "!!"}));
  EXPECT_EQ(t.pre_tokenize("I'll go 'sand' "), (Strings{"I", "'ll", " go", " '", "sand", "'", " "}));
  EXPECT_EQ(t.pre_tokenize("a  \n\nb"), (Strings{"a", "  \n", "\n", "b"}));
  EXPECT_EQ(t.pre_tokenize("x3.5"), (Strings{"x", "3", ".", "5"}));
  EXPECT_EQ(t.pre_tokenize("  lead"), (Strings{" ", " lead"}));
  EXPECT_EQ(t.pre_tokenize("end  "), (Strings{"end", "  "}));
  EXPECT_EQ(t.pre_tokenize("a\u3000b  \u00a0c"), (Strings{"a", "\u3000", "b", "  ", "\u00a0", "c"}));
  EXPECT_EQ(t.pre_tokenize("mixé日本語 42nd\t\tx"), (Strings{"mixé日本語", " 42", "nd", "\t", "\t", "x"}));
  // (Every expectation above is what Python's `regex` module gives for GPT-2's pattern.)
}

TEST(ByteLevelBpe, BytesMapToPrintableSymbols) {
  const auto& s = ByteLevelBpeTokenizer::byte_symbols();
  EXPECT_EQ(s['a'], "a");
  EXPECT_EQ(s[' '], "\xc4\xa0");    // U+0120 'Ġ'
  EXPECT_EQ(s['\n'], "\xc4\x8a");   // U+010A 'Ċ'
  EXPECT_EQ(s[0xC3], "\xc3\x83");   // 'Ã' (printable Latin-1 maps to itself)
  EXPECT_EQ(s[0xAD], "\xc5\x83");   // soft hyphen is not printable: U+0143
}

TEST(ByteLevelBpe, MergesByRankAndRoundTrips) {
  std::map<std::string, int64_t> vocab;
  const auto& sym = ByteLevelBpeTokenizer::byte_symbols();
  for (int b = 0; b < 256; ++b) vocab[sym[static_cast<size_t>(b)]] = b;
  vocab["ll"] = 256;
  vocab["he"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  vocab["\xc4\xa0" "w"] = 260;  // "Ġw"
  const auto t = ByteLevelBpeTokenizer::from_parts(
      vocab, {{"l", "l"}, {"h", "e"}, {"he", "ll"}, {"hell", "o"}, {"\xc4\xa0", "w"}});
  EXPECT_EQ(t.tokenize("hello"), (Strings{"hello"}));
  EXPECT_EQ(t.tokenize("hellow wall"), (Strings{"hello", "w", "\xc4\xa0" "w", "a", "ll"}));
  EXPECT_EQ(t.tokenize("é"), (Strings{"\xc3\x83", "\xc2\xa9"}));  // bytes C3 A9 -> "Ã©"
  EXPECT_EQ(t.encode("hello"), (std::vector<int64_t>{259}));
  for (const std::string text : {"hello world", "naïve café 日本 \xf0\x9f\x99\x82!\n\ttabs  and  spaces "})
    EXPECT_EQ(t.decode(t.encode(text)), text);
  EXPECT_THROW(t.decode({9999}), std::invalid_argument);
  const auto no_bytes = ByteLevelBpeTokenizer::from_parts({{"a", 0}}, {});
  EXPECT_THROW(no_bytes.encode("b"), std::invalid_argument);
}

TEST(ByteLevelBpe, FilesAreReadWithClearErrors) {
  test::TempDir dir;
  std::ofstream(dir / "vocab.json") << R"({"h": 0, "i": 1, "hi": 2})";
  std::ofstream(dir / "merges.txt") << "#version: 0.2\nh i\n";
  const auto t = ByteLevelBpeTokenizer::load(dir / "vocab.json", dir / "merges.txt");
  EXPECT_EQ(t.encode("hi"), (std::vector<int64_t>{2}));
  EXPECT_EQ(t.vocab_size(), 3);
  std::ofstream(dir / "bad_merges.txt") << "#version: 0.2\nh i\nhi\n";
  try {
    ByteLevelBpeTokenizer::load(dir / "vocab.json", dir / "bad_merges.txt");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad_merges.txt:3: expected two symbols"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "bad.json") << R"({"h": "zero"})";
  EXPECT_THROW(ByteLevelBpeTokenizer::load(dir / "bad.json", dir / "merges.txt"), std::runtime_error);
  std::ofstream(dir / "dup.json") << R"({"h": 0, "i": 0})";
  EXPECT_THROW(ByteLevelBpeTokenizer::load(dir / "dup.json", dir / "merges.txt"), std::runtime_error);
}

}  // namespace
}  // namespace hp
