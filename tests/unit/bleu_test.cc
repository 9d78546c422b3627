// BLEU: the 13a tokenizer on punctuation, numbers, dashes and entities, and corpus BLEU on small
// cases whose n-gram counts are worked out by hand in the comments (sacreBLEU's defaults).
#include <cmath>

#include <gtest/gtest.h>

#include "headprune/eval/metrics.h"

namespace hp {
namespace {

// Geometric mean of four precisions (percent) times the brevity penalty, as BLEU combines them.
double combine(double p1, double p2, double p3, double p4, double bp) {
  return bp * std::exp((std::log(p1) + std::log(p2) + std::log(p3) + std::log(p4)) / 4);
}

TEST(Bleu, TokenizerSplitsPunctuationAndSymbols) {
  EXPECT_EQ(tokenize_13a("Hello, world!"), "Hello , world !");
  EXPECT_EQ(tokenize_13a("(a+b)/c=d; e:f? [g] {h} #1 @x ~y ^z |w `q"),
            "( a + b ) / c = d ; e : f ? [ g ] { h } # 1 @ x ~ y ^ z | w ` q");
  EXPECT_EQ(tokenize_13a("don't stop"), "don't stop");  // apostrophes stay
  EXPECT_EQ(tokenize_13a("well-known"), "well-known");  // dash not after a digit stays
  EXPECT_EQ(tokenize_13a("U.S.A."), "U . S . A .");
  EXPECT_EQ(tokenize_13a("   many    spaces \t here  \n"), "many spaces here");
  EXPECT_EQ(tokenize_13a(""), "");
}

TEST(Bleu, TokenizerKeepsPeriodsAndCommasInsideNumbers) {
  EXPECT_EQ(tokenize_13a("It costs $3.50, ok?"), "It costs $ 3.50 , ok ?");
  EXPECT_EQ(tokenize_13a("1,000 people"), "1,000 people");
  EXPECT_EQ(tokenize_13a("in 2019."), "in 2019 .");      // '.' after a digit but before the end
  EXPECT_EQ(tokenize_13a(".5 and 5."), ". 5 and 5 .");  // a leading '.' is split off (space before it)
  EXPECT_EQ(tokenize_13a("a.,b"), "a . , b");           // non-overlapping matches, as Python's re.sub
}

TEST(Bleu, TokenizerSplitsDashAfterDigit) {
  EXPECT_EQ(tokenize_13a("pages 10-20"), "pages 10 - 20");
  EXPECT_EQ(tokenize_13a("-5 degrees"), "-5 degrees");
  EXPECT_EQ(tokenize_13a("1990-ish"), "1990 - ish");
}

TEST(Bleu, TokenizerUndoesEntitiesAndSkipped) {
  EXPECT_EQ(tokenize_13a("&quot;Hi&quot; &amp; bye &lt;3 &gt;"), "\" Hi \" & bye < 3 >");
  EXPECT_EQ(tokenize_13a("&amp;quot;"), "& quot ;");  // one pass per entity, in sacreBLEU's order
  EXPECT_EQ(tokenize_13a("a <skipped> b"), "a b");
  EXPECT_EQ(tokenize_13a("line-\nbreak\nhere"), "linebreak here");
}

TEST(Bleu, TokenizerUsesUnicodeWhitespace) {
  EXPECT_EQ(tokenize_13a("a\xC2\xA0" "b\xE3\x80\x80" "c"), "a b c");  // NBSP, ideographic space
  EXPECT_EQ(tokenize_13a("gr\xC3\xBC\xC3\x9F" "e."), "gr\xC3\xBC\xC3\x9F" "e .");  // non-ASCII letters kept
}

TEST(Bleu, PerfectMatchIs100) {
  // 7 tokens: 7/6/5/4 n-grams, all matched.
  auto r = corpus_bleu({"The cat sat on the mat."}, {"The cat sat on the mat."});
  EXPECT_NEAR(r.score, 100.0, 1e-9);
  EXPECT_EQ(r.matches, (std::array<int64_t, 4>{7, 6, 5, 4}));
  EXPECT_EQ(r.totals, (std::array<int64_t, 4>{7, 6, 5, 4}));
  EXPECT_DOUBLE_EQ(r.brevity_penalty, 1.0);
  EXPECT_EQ(r.sys_len, 7);
  EXPECT_EQ(r.ref_len, 7);
  EXPECT_EQ(r.signature, "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:headprune");
}

TEST(Bleu, PartialMatchWithBrevityPenalty) {
  // hyp: the quick brown fox jumped over              (6 tokens)
  // ref: the quick brown fox jumps over the lazy dog  (9 tokens)
  // 1-grams: the quick brown fox over match, jumped not             5/6
  // 2-grams: the-quick quick-brown brown-fox match; fox-jumped, jumped-over not   3/5
  // 3-grams: the-quick-brown, quick-brown-fox match; 2 others not   2/4
  // 4-grams: the-quick-brown-fox matches; 2 others not              1/3
  // BP = exp(1 - 9/6) = exp(-0.5) = 0.6065
  // BLEU = 0.6065 * (83.33 * 60 * 50 * 33.33)^(1/4) = 0.6065 * 53.73 = 32.588
  auto r = corpus_bleu({"the quick brown fox jumped over"}, {"the quick brown fox jumps over the lazy dog"});
  EXPECT_EQ(r.matches, (std::array<int64_t, 4>{5, 3, 2, 1}));
  EXPECT_EQ(r.totals, (std::array<int64_t, 4>{6, 5, 4, 3}));
  EXPECT_NEAR(r.brevity_penalty, std::exp(-0.5), 1e-12);
  EXPECT_NEAR(r.precisions[0], 500.0 / 6, 1e-9);
  EXPECT_NEAR(r.precisions[3], 100.0 / 3, 1e-9);
  EXPECT_NEAR(r.score, combine(500.0 / 6, 60, 50, 100.0 / 3, std::exp(-0.5)), 1e-9);
  EXPECT_NEAR(r.score, 32.58798, 1e-4);
}

TEST(Bleu, ExpSmoothingWhenHigherOrdersHaveNoMatch) {
  // hyp: the cat is on a mat     ref: the cat sat on the mat   (6 and 6 tokens, BP = 1)
  // 1-grams: the cat on mat match (ref's second "the" is unused), is a not   4/6
  // 2-grams: the-cat matches; cat-is is-on on-a a-mat not                    1/5
  // 3-grams: 0/4 -> first zero order: factor 2, precision 100 / (2 * 4) = 12.5
  // 4-grams: 0/3 -> factor doubles to 4:      precision 100 / (4 * 3) = 8.333
  // BLEU = (66.67 * 20 * 12.5 * 8.333)^(1/4) = 19.3049
  auto r = corpus_bleu({"the cat is on a mat"}, {"the cat sat on the mat"});
  EXPECT_EQ(r.matches, (std::array<int64_t, 4>{4, 1, 0, 0}));
  EXPECT_EQ(r.totals, (std::array<int64_t, 4>{6, 5, 4, 3}));
  EXPECT_NEAR(r.precisions[2], 12.5, 1e-12);
  EXPECT_NEAR(r.precisions[3], 100.0 / 12, 1e-12);
  EXPECT_DOUBLE_EQ(r.brevity_penalty, 1.0);
  EXPECT_NEAR(r.score, combine(400.0 / 6, 20, 12.5, 100.0 / 12, 1.0), 1e-9);
  EXPECT_NEAR(r.score, 19.30487, 1e-4);
}

TEST(Bleu, CorpusSumsCountsBeforeTakingPrecisions) {
  // Segment 1 is the perfect match 6/6 5/5 4/4 3/3; segment 2 is the case above, 4/6 1/5 0/4 0/3.
  // Summed: 10/12 6/10 4/8 3/6 -> no order is zero, no smoothing; BP = 1 (12 vs 12 tokens).
  // BLEU = (83.33 * 60 * 50 * 50)^(1/4) = 59.4604 (not the mean of the two sentence scores).
  auto r = corpus_bleu({"the cat sat on the mat", "the cat is on a mat"},
                       {"the cat sat on the mat", "the cat sat on the mat"});
  EXPECT_EQ(r.matches, (std::array<int64_t, 4>{10, 6, 4, 3}));
  EXPECT_EQ(r.totals, (std::array<int64_t, 4>{12, 10, 8, 6}));
  EXPECT_NEAR(r.score, combine(1000.0 / 12, 60, 50, 50, 1.0), 1e-9);
  EXPECT_NEAR(r.score, 59.46036, 1e-4);
}

TEST(Bleu, NoFourGramsAtAllScoresZero) {
  // 3 tokens: there are no 4-grams (total 0), so that precision stays 0 and log(0) zeroes the
  // score although everything that exists matches. sacreBLEU does the same.
  auto r = corpus_bleu({"the cat sat"}, {"the cat sat"});
  EXPECT_EQ(r.totals, (std::array<int64_t, 4>{3, 2, 1, 0}));
  EXPECT_DOUBLE_EQ(r.precisions[2], 100.0);
  EXPECT_DOUBLE_EQ(r.precisions[3], 0.0);
  EXPECT_DOUBLE_EQ(r.score, 0.0);
}

TEST(Bleu, EmptyHypothesisScoresZero) {
  // sys_len 0 < ref_len 2: BP 0; no matches at all: score 0 and every precision 0 (no smoothing).
  auto r = corpus_bleu({""}, {"the cat"});
  EXPECT_DOUBLE_EQ(r.score, 0.0);
  EXPECT_DOUBLE_EQ(r.brevity_penalty, 0.0);
  EXPECT_EQ(r.sys_len, 0);
  EXPECT_EQ(r.ref_len, 2);
  EXPECT_EQ(r.precisions, (std::array<double, 4>{0, 0, 0, 0}));
  // Completely wrong words: also 0, precisions not smoothed because nothing matched.
  auto w = corpus_bleu({"a b c d e"}, {"v w x y z"});
  EXPECT_DOUBLE_EQ(w.score, 0.0);
  EXPECT_EQ(w.precisions, (std::array<double, 4>{0, 0, 0, 0}));
}

TEST(Bleu, TokenizationAndCaseMatter) {
  // 13a splits "mat." into "mat ." on both sides, so it matches "mat ." exactly.
  EXPECT_NEAR(corpus_bleu({"the cat sat on the mat."}, {"the cat sat on the mat ."}).score, 100.0, 1e-9);
  // Case-sensitive: "The" does not match "the".
  auto r = corpus_bleu({"The cat sat on the mat"}, {"the cat sat on the mat"});
  EXPECT_EQ(r.matches[0], 5);
}

TEST(Bleu, RejectsMismatchedListsAndEmptyReferences) {
  EXPECT_THROW(corpus_bleu({"a", "b"}, {"a"}), std::invalid_argument);
  EXPECT_THROW(corpus_bleu({"a"}, {""}), std::invalid_argument);
  auto r = corpus_bleu({}, {});
  EXPECT_DOUBLE_EQ(r.score, 0.0);
}

}  // namespace
}  // namespace hp
