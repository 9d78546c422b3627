// Head roles on hand-made data: the CoNLL-U reader, subword-to-word pointers from attention maps,
// and the positional, syntactic and rare-word classifiers (model-free), plus one model run.
#include <fstream>

#include <gtest/gtest.h>

#include "headprune/score/roles.h"
#include "test_util.h"

namespace hp {
namespace {

using test::write;

const char* kTwoSentences =
    "# sent_id = s1\n"
    "# text = The dog chased cats .\n"
    "1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n"
    "2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n"
    "3\tchased\tchase\tVERB\tVBD\t_\t0\troot\t_\t_\n"
    "4\tcats\tcat\tNOUN\tNNS\t_\t3\tobj\t_\t_\n"
    "5\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_\n"
    "\n"
    "# sent_id = s2\n"
    "1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "1\tDo\tdo\tAUX\tVB\t_\t3\tnsubj:pass\t_\t_\n"
    "2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_\n"
    "3\trun\trun\tVERB\tVB\t_\t0\troot\t_\t_\n"
    "3.1\tgo\tgo\tVERB\tVB\t_\t_\t_\t3:conj\t_\n"
    "4\tquickly\tquickly\tADV\tRB\t_\t3\tadvmod\t_\t_\n";

TEST(Conllu, ReadsWordsSkippingRangesAndEmptyNodes) {
  test::TempDir dir;
  write(dir / "a.conllu", kTwoSentences);
  const auto s = read_conllu(dir / "a.conllu");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].id, "s1");
  ASSERT_EQ(s[0].words.size(), 5u);
  EXPECT_EQ(s[0].words[1].form, "dog");
  EXPECT_EQ(s[0].words[1].head, 3);
  EXPECT_EQ(s[0].words[1].deprel, "nsubj");
  ASSERT_EQ(s[1].words.size(), 4u);  // no "Don't" range, no empty node
  EXPECT_EQ(s[1].words[0].deprel, "nsubj:pass");
  EXPECT_EQ(read_conllu(dir / "a.conllu", 1).size(), 1u);
}

TEST(Conllu, MalformedLinesNameFileAndLine) {
  test::TempDir dir;
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    write(dir / "bad.conllu", text);
    try {
      read_conllu(dir / "bad.conllu");
      FAIL() << "expected an error containing " << needle;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("1\tThe\tthe\tDET\n", "bad.conllu:1: expected 10 tab-separated CoNLL-U fields, got 4");
  expect_error("1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n3\tb\tb\tX\tX\t_\t1\tdep\t_\t_\n", "bad.conllu:2: expected word ID 2");
  expect_error("1\ta\ta\tX\tX\t_\tx\troot\t_\t_\n", "bad.conllu:1: HEAD must be a non-negative integer");
  expect_error("1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n2\tb\tb\tX\tX\t_\t7\tdep\t_\t_\n\n", "bad.conllu:2: HEAD 7 is beyond");
  expect_error("# only a comment\n", "no sentences");
}

TEST(RolePointers, WordWeightsSumSubwordsAndIgnoreSpecialTokens) {
  // Tokens: 0 <s>, 1-2 word 0 (two subwords), 3 word 1, 4 word 2, 5 </s>.
  auto a = torch::zeros({2, 6, 6});
  a[0][1] = torch::tensor({0.0, 0.3, 0.3, 0.4, 0.0, 0.0});  // word 0: 0.6 on itself beats 0.4 on word 1
  a[0][3] = torch::tensor({0.9, 0.0, 0.0, 0.0, 0.1, 0.0});  // <s> is not a word: word 2 wins
  a[0][4] = torch::tensor({0.0, 0.0, 0.0, 0.0, 0.2, 0.8});  // neither is </s>
  a[1][1] = torch::tensor({0.0, 0.0, 0.0, 0.0, 1.0, 0.0});
  a[1][2] = torch::tensor({0.0, 1.0, 0.0, 0.0, 0.0, 0.0});  // a non-first subword's row is not used
  a[1][3] = torch::tensor({0.0, 0.0, 0.6, 0.4, 0.0, 0.0});
  a[1][4] = torch::tensor({0.0, 0.0, 0.0, 0.7, 0.3, 0.0});
  const auto p = word_pointers(a, {{1, 3}, {3, 4}, {4, 5}});
  EXPECT_EQ(p[0], (std::vector<int64_t>{0, 2, 2}));
  EXPECT_EQ(p[1], (std::vector<int64_t>{2, 0, 1}));
  EXPECT_THROW(word_pointers(a, {{4, 9}}), std::invalid_argument);
}

TEST(RoleClassifiers, PositionalHeads) {
  // Always the previous word (the first word points at itself): 8 of 10 at offset -1.
  Pointers prev = {{0, 0, 1, 2, 3}, {0, 0, 1, 2, 3}};
  auto r = classify_positional(prev);
  EXPECT_EQ(r.offset, -1);
  EXPECT_DOUBLE_EQ(r.share, 0.8);
  EXPECT_FALSE(r.is_role);  // 80% < 90%
  Pointers next = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10}};
  r = classify_positional(next);
  EXPECT_EQ(r.offset, 1);
  EXPECT_NEAR(r.share, 10.0 / 11.0, 1e-12);
  EXPECT_TRUE(r.is_role);
}

TEST(RoleClassifiers, SyntacticHeadsAgainstTheBaseline) {
  test::TempDir dir;
  write(dir / "a.conllu", kTwoSentences);
  const auto s = read_conllu(dir / "a.conllu");
  // nsubj: dog(1) -> chased(2). obj: cats(3) -> chased(2). advmod: n't(1) -> run(2), quickly(3) -> run(2).
  // This head points each dependent at its head word, and heads at the previous word.
  Pointers p = {{1, 2, 1, 2, 2}, {2, 2, 1, 2}};
  auto rel = score_relations(p, s);
  ASSERT_EQ(rel.size(), 8u);  // 4 relations x 2 directions
  auto find = [&](const std::string& r, const std::string& d) {
    for (const auto& x : rel)
      if (x.relation == r && x.direction == d) return x;
    ADD_FAILURE() << r << " " << d;
    return RelationScore{};
  };
  const auto nsubj = find("nsubj", "dep->head");
  EXPECT_EQ(nsubj.pairs, 1);  // labels match exactly: "nsubj:pass" is not nsubj
  EXPECT_DOUBLE_EQ(nsubj.accuracy, 1.0);
  EXPECT_EQ(nsubj.baseline_offset, 1);
  EXPECT_DOUBLE_EQ(nsubj.baseline, 1.0);
  const auto advmod = find("advmod", "dep->head");
  EXPECT_EQ(advmod.pairs, 2);
  EXPECT_DOUBLE_EQ(advmod.accuracy, 1.0);
  EXPECT_DOUBLE_EQ(advmod.baseline, 0.5);  // offsets +1 and -1: the baseline gets one of two
  const auto advmod_back = find("advmod", "head->dep");
  EXPECT_DOUBLE_EQ(advmod_back.accuracy, 0.5);  // run(2) points at n't(1), not at quickly(3)
  const auto amod = find("amod", "dep->head");
  EXPECT_EQ(amod.pairs, 0);
  auto roles = classify_head({AttnType::EncoderSelf, 0, 0}, p, s, {0, 0});
  EXPECT_TRUE(roles.syntactic);  // advmod dep->head: 100% against a 50% baseline
  Pointers self = {{0, 1, 2, 3, 4}, {0, 1, 2, 3}};
  EXPECT_FALSE(classify_head({AttnType::EncoderSelf, 0, 1}, self, s, {0, 0}).syntactic);
  EXPECT_THROW(score_relations({{0}}, s), std::invalid_argument);
}

TEST(RoleClassifiers, RareWordHeads) {
  test::TempDir dir;
  write(dir / "a.conllu", kTwoSentences);
  const auto s = read_conllu(dir / "a.conllu");
  std::vector<UdSentence> corpus = s;
  corpus.push_back(corpus[0]);  // the first sentence again, with "cats" replaced by "Dog"
  corpus[2].words[3].form = "Dog";
  const auto freq = word_frequencies(corpus);
  EXPECT_EQ(freq.at("dog"), 3);  // lower-cased
  const auto rarest = rarest_words(s, freq);
  EXPECT_EQ(rarest[0], 3);  // "cats", seen once
  EXPECT_EQ(rarest[1], 0);  // every word seen once: the first
  Pointers p = {{3, 3, 3, 0, 3}, {0, 0, 2, 0}};
  auto r = classify_rare(p, rarest);
  EXPECT_NEAR(r.share, 7.0 / 9.0, 1e-12);
  EXPECT_TRUE(r.is_role);
  Pointers half = {{3, 3, 0, 0, 1}, {0, 1, 2, 3}};
  EXPECT_FALSE(classify_rare(half, rarest).is_role);  // 3 of 9
}

TEST(RoleClassifiers, PointersFromAModel) {
  // A tiny classifier with a trained-on-the-fly tokenizer: every head gets one pointer per word.
  auto made = test::tiny_classifier_with_tokenizer();
  const Tokenizer& tok = made.tok;
  Transformer& model = made.model;
  test::TempDir dir;
  write(dir / "a.conllu", kTwoSentences);
  const auto s = read_conllu(dir / "a.conllu");
  const auto mp = head_pointers(*model, tok, s, 1);
  EXPECT_EQ(mp.type, AttnType::EncoderSelf);
  ASSERT_EQ(mp.heads.size(), 8u);
  ASSERT_EQ(mp.sentences.size(), 2u);
  for (const auto& [h, p] : mp.heads) {
    ASSERT_EQ(p.size(), 2u);
    EXPECT_EQ(p[0].size(), 5u);
    EXPECT_EQ(p[1].size(), 4u);
    for (const auto& sent : p)
      for (auto x : sent) EXPECT_TRUE(x >= 0 && x < static_cast<int64_t>(sent.size()));
  }
  // Batching does not change the pointers.
  const auto batched = head_pointers(*model, tok, s, 2);
  EXPECT_EQ(batched.heads, mp.heads);
}

}  // namespace
}  // namespace hp
