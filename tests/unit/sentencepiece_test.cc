// SentencePiece-family tokenizers: the protobuf wire reader, hand-built model files and
// tokenizer.json files whose segmentations are worked out by hand (BPE by score and by rank, Unigram
// by Viterbi, byte fallback, unknown runs), bad files, and a few encodings of the real Llama-2 and
// Marian files in ../shared/tokenizers against python3-sentencepiece's (the full comparison with the
// real clients is the e2e test tokenizer_clients).
#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "headprune/data/hf_tokenizers.h"
#include "headprune/data/tasks.h"
#include "headprune/data/sentencepiece.h"
#include "headprune/util/protowire.h"
#include "test_util.h"

namespace hp {
namespace {

using Ids = std::vector<int64_t>;
using Strings = std::vector<std::string>;
using test::error_of;

// ---- a tiny protobuf writer for hand-built model files ----------------------------------------

std::string varint(uint64_t v) {
  std::string out;
  do {
    out.push_back(static_cast<char>((v & 0x7F) | (v > 0x7F ? 0x80 : 0)));
    v >>= 7;
  } while (v);
  return out;
}
std::string tag(int field, int wire) { return varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire)); }
std::string bytes_field(int field, const std::string& v) { return tag(field, 2) + varint(v.size()) + v; }
std::string int_field(int field, int64_t v) { return tag(field, 0) + varint(static_cast<uint64_t>(v)); }
std::string float_field(int field, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  std::string out = tag(field, 5);
  for (int k = 0; k < 4; ++k) out.push_back(static_cast<char>((bits >> (8 * k)) & 0xFF));
  return out;
}

struct P {
  std::string text;
  float score;
  int type = 1;  // NORMAL
};

// A ModelProto: the pieces, model_type (1 Unigram, 2 BPE), byte_fallback; normalizer "identity"
// with a dummy prefix and extra whitespace removed.
std::string model_proto(const std::vector<P>& pieces, int model_type, bool byte_fallback = false) {
  std::string out;
  for (const auto& p : pieces) out += bytes_field(1, bytes_field(1, p.text) + float_field(2, p.score) + int_field(3, p.type));
  out += bytes_field(2, int_field(3, model_type) + int_field(35, byte_fallback) + int_field(40, 0) + int_field(41, 1) + int_field(42, 2));
  out += bytes_field(3, bytes_field(1, "identity") + int_field(3, 1) + int_field(4, 1) + int_field(5, 1));
  return out;
}

const std::string kSp = "\xE2\x96\x81";  // ▁

std::vector<P> small_pieces(float sp_a, float ab, float sp_ab) {
  return {{"<unk>", 0, 2}, {"<s>", 0, 3}, {"</s>", 0, 3}, {kSp, -3}, {"a", -2}, {"b", -2}, {kSp + "a", sp_a}, {"ab", ab}, {kSp + "ab", sp_ab}};
}

SentencePieceTokenizer from_proto(const std::string& bytes) {
  return SentencePieceTokenizer::from_model(SentencePieceModel::parse(bytes, "test.model"), "test.model");
}

TEST(ProtoWire, ReadsVarintsFloatsAndStringsAndNamesTheByteOfAnError) {
  const std::string msg = int_field(3, 300) + bytes_field(1, "ab") + float_field(2, 1.5f);
  ProtoReader r(msg, "msg");
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.field(), 3u);
  EXPECT_EQ(r.varint(), 300u);
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.bytes(), "ab");
  ASSERT_TRUE(r.next());
  EXPECT_FLOAT_EQ(r.float32(), 1.5f);
  EXPECT_FALSE(r.next());
  // A length past the end, a value of the wrong wire type, a group.
  // (The reader views its bytes: each message lives in a named string.)
  const std::string truncated = bytes_field(1, "abcdef").substr(0, 4), group_tag = tag(4, 3), varint_field = int_field(2, 1);
  ProtoReader cut(truncated, "cut");
  ASSERT_TRUE(cut.next());
  EXPECT_NE(error_of([&] { cut.bytes(); }).find("cut: byte 2: field 1 claims 6 bytes, 2 are left"), std::string::npos);
  ProtoReader wrong(varint_field, "wrong");
  ASSERT_TRUE(wrong.next());
  EXPECT_NE(error_of([&] { wrong.float32(); }).find("field 2 should be a 32-bit float"), std::string::npos);
  ProtoReader group(group_tag, "group");
  EXPECT_NE(error_of([&] { group.next(); }).find("wire type 3"), std::string::npos);
}

TEST(SentencePieceModel, BpeMergesTheHighestScoringPairFirst) {
  // "ab" is "▁ab": the pairs (▁, a) and (a, b) compete; no "▁ab" piece (score -100 would lose anyway,
  // so it is left out by giving it the unused type).
  auto pieces = small_pieces(-1, -2, -100);
  pieces.back().type = 5;  // UNUSED: never a result
  const auto left = from_proto(model_proto(pieces, 2));
  EXPECT_EQ(left.tokenize("ab"), (Strings{kSp + "a", "b"}));
  EXPECT_EQ(left.encode("  ab   "), (Ids{6, 5}));  // extra whitespace removed
  EXPECT_EQ(left.decode({6, 5}), "ab");
  EXPECT_EQ(left.kind(), "sentencepiece-bpe");
  auto swapped = small_pieces(-2, -1, -100);
  swapped.back().type = 5;
  EXPECT_EQ(from_proto(model_proto(swapped, 2)).encode("ab"), (Ids{3, 7}));
  // Unknown characters: one <unk> per run, its text kept as the piece; decode leaves <unk> out.
  EXPECT_EQ(left.encode("cc a"), (Ids{3, 0, 6}));
  EXPECT_EQ(left.tokenize("cc a"), (Strings{kSp, "cc", kSp + "a"}));
  EXPECT_EQ(left.decode({3, 0, 6, 2}), " a");
}

TEST(SentencePieceModel, UnigramTakesTheBestPathAndScoresUnknownsBelowEveryPiece) {
  // "▁ab": ▁ab = -2.6 beats ▁a + b = -3, ▁ + ab = -4.5 and ▁ + a + b = -7.
  const auto t = from_proto(model_proto(small_pieces(-1, -1.5f, -2.6f), 1));
  EXPECT_EQ(t.kind(), "sentencepiece-unigram");
  EXPECT_EQ(t.encode("ab"), (Ids{8}));
  EXPECT_EQ(from_proto(model_proto(small_pieces(-1, -1.5f, -3.5f), 1)).encode("ab"), (Ids{6, 5}));
  EXPECT_EQ(t.encode("abc ab"), (Ids{8, 0, 8}));  // c is unknown (score -3 - 10)
}

TEST(SentencePieceModel, ByteFallbackSpellsUnknownCharactersInBytes) {
  auto pieces = small_pieces(-1, -2, -3);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    pieces.push_back({name, 0, 6});  // BYTE
  }
  const auto t = from_proto(model_proto(pieces, 2, true));
  const int64_t c3 = 9 + 0xC3, a9 = 9 + 0xA9;
  EXPECT_EQ(t.encode("a\xC3\xA9"), (Ids{6, c3, a9}));  // "▁a", then é as its two UTF-8 bytes
  EXPECT_EQ(t.decode(t.encode("a\xC3\xA9 b")), "a\xC3\xA9 b");
  EXPECT_EQ(t.decode({c3}), "\xEF\xBF\xBD");  // a lone lead byte is U+FFFD
}

TEST(SentencePieceModel, BadFilesAreErrorsNamingTheFileAndField) {
  const auto good = model_proto(small_pieces(-1, -2, -3), 2);
  EXPECT_NE(error_of([&] { SentencePieceModel::parse(good.substr(0, good.size() / 2), "cut.model"); }).find("cut.model"),
            std::string::npos);
  auto no_unk = small_pieces(-1, -2, -3);
  no_unk[0].type = 1;
  EXPECT_NE(error_of([&] { SentencePieceModel::parse(model_proto(no_unk, 2), "m"); }).find("0 pieces of type UNKNOWN"),
            std::string::npos);
  auto dup = small_pieces(-1, -2, -3);
  dup[5].text = "a";
  EXPECT_NE(error_of([&] { SentencePieceModel::parse(model_proto(dup, 2), "m"); }).find("pieces[5]: 'a' is already pieces[4]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { SentencePieceModel::parse(model_proto(small_pieces(-1, -2, -3), 3), "m"); })
                .find("m: trainer_spec.model_type: WORD models are not supported"),
            std::string::npos);
  EXPECT_NE(error_of([&] { SentencePieceModel::parse("\x0a\x05hello", "garbage.model"); }).find("garbage.model"), std::string::npos);
  test::TempDir d;
  test::write(d / "tokenizer.model", "not a model at all");
  EXPECT_NE(error_of([&] { load_hf_tokenizer(d.path); }).find(d / "tokenizer.model"), std::string::npos);
  EXPECT_NE(error_of([&] { SentencePieceTokenizer::load(d / "missing.model"); }).find("missing.model: no such file"),
            std::string::npos);
}

// ---- tokenizer.json --------------------------------------------------------------------------

std::string unigram_json(const std::string& normalizer = "null") {
  return R"({"model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0], ["</s>", 0], ["▁", -3], ["a", -2], ["b", -2],
            ["▁a", -1], ["ab", -1.5], ["▁ab", -2.6]]},
     "added_tokens": [{"id": 1, "content": "</s>", "special": true}],
     "normalizer": )" + normalizer + R"(,
     "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                       {"type": "Metaspace", "replacement": "▁", "add_prefix_space": true}]},
     "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}},
                        {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                        "special_tokens": {"</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}},
     "decoder": {"type": "Metaspace", "replacement": "▁", "add_prefix_space": true}})";
}

TEST(SentencePieceJson, UnigramWithMetaspaceAndATemplate) {
  test::TempDir d;
  test::write(d / "tokenizer.json", unigram_json());
  const auto t = SentencePieceTokenizer::from_tokenizer_json(d / "tokenizer.json");
  EXPECT_EQ(t.encode("ab  ab</s>"), (Ids{7, 7, 1}));  // words apart, "</s>" an added token
  EXPECT_EQ(t.frame().after, (Ids{1}));
  EXPECT_EQ(t.decode({7, 5, 4, 1}), "ab ab");
  const auto tok = load_hf_tokenizer(d.path);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("ab", true), (Ids{7, 1}));
  EXPECT_EQ(tok->kind(), "sentencepiece-unigram");
}

TEST(SentencePieceJson, BpeWithByteFallbackMergesByRank) {
  test::TempDir d;
  test::write(d / "tokenizer.json", R"({"model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>",
      "vocab": {"<unk>": 0, "▁": 1, "a": 2, "b": 3, "▁a": 4, "ab": 5, "<0xC3>": 6, "<0xA9>": 7},
      "merges": ["a b", "▁ a"]},
    "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}})");
  const auto t = SentencePieceTokenizer::from_tokenizer_json(d / "tokenizer.json");
  EXPECT_EQ(t.encode("ab"), (Ids{1, 5}));  // (a, b) has rank 0: merged before (▁, a)
  EXPECT_EQ(t.encode("a\xC3\xA9"), (Ids{4, 6, 7}));
  EXPECT_EQ(t.encode("c"), (Ids{1, 0}));  // no byte piece for 'c': <unk>
  EXPECT_EQ(t.decode({4, 6, 7, 1, 5}), "a\xC3\xA9 ab");
}

TEST(SentencePieceJson, UnsupportedPartsAreErrorsNamingTheField) {
  test::TempDir d;
  test::write(d / "tokenizer.json", R"({"model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}})");
  EXPECT_NE(error_of([&] { load_hf_tokenizer(d.path); }).find("tokenizer.json: model.type: 'WordLevel' is not"), std::string::npos);
  test::write(d / "tokenizer.json", unigram_json(R"({"type": "BertNormalizer"})"));
  EXPECT_NE(error_of([&] { load_hf_tokenizer(d.path); }).find("normalizer: normalizer 'BertNormalizer' is not supported"),
            std::string::npos);
  test::write(d / "tokenizer.json", R"({"model": {"type": "Unigram", "vocab": [["a", 0]]}})");
  EXPECT_NE(error_of([&] { load_hf_tokenizer(d.path); }).find("model.unk_id: missing"), std::string::npos);
}

// ---- the real files ------------------------------------------------------------------------

std::string shared_tokenizers() { return test::shared_data() + "/../tokenizers"; }

#define SKIP_WITHOUT_TOKENIZERS()                                  \
  if (!std::ifstream(shared_tokenizers() + "/llama2/tokenizer.model")) \
  GTEST_SKIP() << "no tokenizers at " << shared_tokenizers()

TEST(SentencePieceFiles, Llama2AsSentencepieceEncodesIt) {
  SKIP_WITHOUT_TOKENIZERS();
  const auto m = SentencePieceModel::load(shared_tokenizers() + "/llama2/tokenizer.model");
  EXPECT_EQ(m.pieces.size(), 32000u);
  EXPECT_EQ(m.algorithm, SentencePieceModel::Algorithm::Bpe);
  EXPECT_TRUE(m.byte_fallback);
  const auto tok = load_hf_tokenizer(shared_tokenizers() + "/llama2");
  ASSERT_TRUE(tok);
  // python3-sentencepiece 0.1.97: sp.encode("Hello world"), sp.encode("héllo 🚀").
  EXPECT_EQ(tok->encode("Hello world", true), (Ids{1, 15043, 3186}));
  EXPECT_EQ(tok->encode("h\xC3\xA9llo \xF0\x9F\x9A\x80"), (Ids{298, 3610, 417, 29871, 243, 162, 157, 131}));
  EXPECT_EQ(tok->decode(tok->encode("h\xC3\xA9llo \xF0\x9F\x9A\x80", true)), "h\xC3\xA9llo \xF0\x9F\x9A\x80");
  EXPECT_EQ(tok->specials().bos, 1);
  EXPECT_EQ(tok->specials().eos, 2);
}

// Calibration text from an HF Llama folder: each line framed as tokenizer(text) frames it (<s> first),
// then </s> - not the bare pieces (a Llama model scored on text without <s> sees nothing it was trained on).
TEST(SentencePieceFiles, CalibrationLinesStartWithTheLlamaBos) {
  SKIP_WITHOUT_TOKENIZERS();
  const auto tok = load_hf_tokenizer(shared_tokenizers() + "/llama2");
  ASSERT_TRUE(tok);
  test::TempDir d;
  test::write(d / "calib.txt", "Hello world\nHello world\n");
  const auto blocks = calibration_blocks(tok, (d / "calib.txt"), 32000, 4, 2, 1);
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].src, (Ids{1, 15043, 3186, 2}));
  EXPECT_EQ(blocks[1].src, (Ids{1, 15043, 3186, 2}));
}

TEST(SentencePieceFiles, MarianMapsPiecesThroughVocabJson) {
  SKIP_WITHOUT_TOKENIZERS();
  const auto tok = load_hf_tokenizer(shared_tokenizers() + "/marian-opus-mt-en-mg");
  ASSERT_TRUE(tok);
  const auto ids = tok->encode("Hello  world", true);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(tok->piece(ids[0]), kSp + "Hello");
  EXPECT_EQ(tok->piece(ids[2]), "</s>");
  EXPECT_EQ(ids[2], 0);                       // vocab.json's </s>, not the .spm's id 2
  EXPECT_EQ(tok->specials().pad, 54687);      // <pad>: Marian's decoder start
  EXPECT_EQ(tok->specials().bos, 54687);
  EXPECT_EQ(tok->decode(ids), "Hello world");
}

// One rule for invalid UTF-8 (issue 78): every kind of tokenizer reads the same invalid bytes as the
// same text, valid_utf8()'s: one U+FFFD per maximal ill-formed subsequence, as Python's
// bytes.decode("utf-8", errors="replace") and Rust's String::from_utf8_lossy (what HF's tokenizers
// are given) read them. Before, a model file gave one U+FFFD per byte, a tokenizer.json kept the raw
// bytes, and a byte-level BPE without GPT-2's pattern spelled them as byte symbols.
TEST(TokenizerInvalidUtf8, EveryKindReadsInvalidBytesAsTheSameText) {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(valid_utf8("a\xFF b\xE2\x82 c\xC0\xAF"), "a" + r + " b" + r + " c" + r + r);  // as Python's
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), r + r + r);                                        // a surrogate
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80"), r + r + r + r);                                // past U+10FFFF
  EXPECT_EQ(valid_utf8("x\xF0\x9F\x99"), "x" + r);                                         // cut short: one
  EXPECT_EQ(valid_utf8("\x80\x80"), r + r);
  const std::string fine = "na\xC3\xAFve \xE6\x97\xA5 \xF0\x9F\x99\x82 " + r;
  EXPECT_EQ(valid_utf8(fine), fine);

  const std::string bad = "ab\xFF a\xE2\x82 b\xC0\xAF ab";
  const std::string text = valid_utf8(bad);
  ASSERT_NE(text, bad);
  test::TempDir d;
  // A model file (Unigram, U+FFFD a piece) and Marian (its pieces through vocab.json).
  auto pieces = small_pieces(-1, -2, -3);
  pieces.push_back({r, -2});
  const auto spm = from_proto(model_proto(pieces, 1));
  test::write(d / "vocab.json", "{\"<unk>\": 0, \"</s>\": 1, \"" + kSp + "a\": 2, \"" + r + "\": 3}");
  const auto marian = spm.with_vocabulary(d / "vocab.json");
  // tokenizer.json: Unigram, and BPE with byte fallback.
  test::write(d / "unigram.json", unigram_json());
  const auto unigram = SentencePieceTokenizer::from_tokenizer_json(d / "unigram.json");
  test::write(d / "bpe.json", R"({"model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>",
      "vocab": {"<unk>": 0, "▁": 1, "a": 2, "b": 3, "▁a": 4, "ab": 5, "<0xEF>": 6, "<0xBF>": 7, "<0xBD>": 8, "<0xFF>": 9},
      "merges": ["a b", "▁ a"]}, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}})");
  const auto bpe = SentencePieceTokenizer::from_tokenizer_json(d / "bpe.json");
  for (const auto* t : {&spm, &marian, &unigram, &bpe}) {
    EXPECT_EQ(t->tokenize(bad), t->tokenize(text)) << t->kind();
    EXPECT_EQ(t->encode(bad), t->encode(text)) << t->kind();
  }
  EXPECT_EQ(bpe.encode("\xFF"), (Ids{1, 6, 7, 8}));  // U+FFFD's bytes, not the raw byte's piece <0xFF>
  const auto spm_ids = spm.encode(bad);
  EXPECT_EQ(std::count(spm_ids.begin(), spm_ids.end(), 9), 4) << "U+FFFD's piece, once for each maximal subpart";
  // A byte-level tokenizer.json without GPT-2's pattern, GPT-2's files, BERT's WordPiece.
  nlohmann::json vocab = nlohmann::json::object();
  int64_t id = 0;
  for (const auto& sym : ByteLevelBpeTokenizer::byte_symbols()) vocab[sym] = id++;
  test::write(d / "tokenizer.json", nlohmann::json({{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
                                                    {"pre_tokenizer", {{"type", "ByteLevel"}, {"use_regex", false}}}}).dump());
  const auto level = ByteLevelBpeTokenizer::from_tokenizer_json(d / "tokenizer.json");
  const auto gpt2 = ByteLevelBpeTokenizer::from_parts(vocab.get<std::map<std::string, int64_t>>(), {});
  for (const auto* t : {&level, &gpt2}) {
    EXPECT_EQ(t->tokenize(bad), t->tokenize(text));
    EXPECT_EQ(t->encode(bad), t->encode(text));
    EXPECT_EQ(t->decode(t->encode(bad)), text);
  }
  WordPieceTokenizer::Options o;
  const auto wp = WordPieceTokenizer::from_vocab({"[UNK]", "a", "##b", "ab", r}, o);
  EXPECT_EQ(wp.tokenize(bad), wp.tokenize(text));
  EXPECT_EQ(wp.encode(bad), wp.encode(text));
  // headprune's own BPE, and every kind behind the Tokenizer interface.
  const auto own = Tokenizer::train({"ab a b", "a " + r}, TokenizerTrainOptions{});
  EXPECT_EQ(own.encode(bad), own.encode(text));
  EXPECT_EQ(as_tokenizer(marian).encode(bad), marian.encode(text));
}

}  // namespace
}  // namespace hp
