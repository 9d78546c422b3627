// Classification metrics and perplexity against values worked out by hand in the comments.
#include <cmath>

#include <gtest/gtest.h>

#include "headprune/eval/metrics.h"

namespace hp {
namespace {

TEST(Metrics, BinaryByHand) {
  // TP = 3 (items 0-2), FN = 1 (item 3), FP = 1 (item 4), TN = 5.
  // accuracy = 8/10; F1(class 1) = 2*3 / (2*3 + 1 + 1) = 0.75;
  // MCC = (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (15 - 1) / sqrt(4*4*6*6) = 14/24.
  auto m = classification_metrics({1, 1, 1, 1, 0, 0, 0, 0, 0, 0}, {1, 1, 1, 0, 1, 0, 0, 0, 0, 0}, 2);
  EXPECT_EQ(m.n, 10);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.8);
  EXPECT_DOUBLE_EQ(m.f1, 0.75);
  EXPECT_NEAR(m.mcc, 14.0 / 24.0, 1e-12);
}

TEST(Metrics, PerfectAndInverted) {
  auto m = classification_metrics({0, 1, 1, 0, 1}, {0, 1, 1, 0, 1}, 2);
  EXPECT_DOUBLE_EQ(m.accuracy, 1.0);
  EXPECT_DOUBLE_EQ(m.f1, 1.0);
  EXPECT_NEAR(m.mcc, 1.0, 1e-12);
  auto w = classification_metrics({0, 1, 1, 0, 1}, {1, 0, 0, 1, 0}, 2);
  EXPECT_DOUBLE_EQ(w.accuracy, 0.0);
  EXPECT_DOUBLE_EQ(w.f1, 0.0);
  EXPECT_NEAR(w.mcc, -1.0, 1e-12);
}

TEST(Metrics, AllOneClassPredictionHasMccZero) {
  // Every prediction is 1: TP = 3, FP = 2, FN = 0, TN = 0. accuracy 3/5; F1 = 6 / (6 + 2) = 0.75;
  // MCC's denominator has (TN+FP)(TN+FN) = 2 * 0 = 0: undefined, reported as 0.
  auto m = classification_metrics({0, 1, 1, 0, 1}, {1, 1, 1, 1, 1}, 2);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.6);
  EXPECT_DOUBLE_EQ(m.f1, 0.75);
  EXPECT_DOUBLE_EQ(m.mcc, 0.0);
  // All 0 predictions: no positive predicted or true-positive: F1 of class 1 is 0, MCC 0.
  auto z = classification_metrics({0, 1, 1, 0, 1}, {0, 0, 0, 0, 0}, 2);
  EXPECT_DOUBLE_EQ(z.f1, 0.0);
  EXPECT_DOUBLE_EQ(z.mcc, 0.0);
}

TEST(Metrics, ThreeClassesByHand) {
  // gold 0 0 1 1 2 2, pred 0 1 1 1 2 0.
  // class: true t_k, predicted p_k, correct c_k:  0: 2 2 1   1: 2 3 2   2: 2 1 1.   correct 4 of 6.
  // F1_k = 2 c_k / (t_k + p_k): 2/4 = 0.5, 4/5 = 0.8, 2/3; macro = (0.5 + 0.8 + 0.6667) / 3 = 0.65556.
  // Gorodkin: (c s - sum p t) / sqrt((s^2 - sum p^2)(s^2 - sum t^2))
  //         = (4*6 - (4 + 6 + 2)) / sqrt((36 - 14)(36 - 12)) = 12 / sqrt(528) = 0.52223.
  const std::vector<int64_t> gold = {0, 0, 1, 1, 2, 2}, pred = {0, 1, 1, 1, 2, 0};
  auto m = classification_metrics(gold, pred, 3);
  EXPECT_NEAR(m.accuracy, 4.0 / 6.0, 1e-12);
  EXPECT_NEAR(m.f1, (0.5 + 0.8 + 2.0 / 3.0) / 3.0, 1e-12);
  EXPECT_NEAR(m.mcc, 12.0 / std::sqrt(528.0), 1e-12);
  // A fourth class that never occurs does not enter the macro average (scikit-learn's default).
  auto m4 = classification_metrics(gold, pred, 4);
  EXPECT_NEAR(m4.f1, m.f1, 1e-12);
  EXPECT_NEAR(m4.mcc, m.mcc, 1e-12);
}

TEST(Metrics, RejectsBadInput) {
  EXPECT_THROW(classification_metrics({0, 1}, {0}, 2), std::invalid_argument);
  EXPECT_THROW(classification_metrics({0, 2}, {0, 1}, 2), std::invalid_argument);
  EXPECT_THROW(classification_metrics({0, 1}, {0, -1}, 2), std::invalid_argument);
  EXPECT_THROW(classification_metrics({0}, {0}, 1), std::invalid_argument);
  try {
    classification_metrics({0, 1, 5}, {0, 1, 1}, 3);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gold[2] = 5"), std::string::npos) << e.what();
  }
  auto empty = classification_metrics({}, {}, 2);
  EXPECT_EQ(empty.n, 0);
  EXPECT_DOUBLE_EQ(empty.accuracy, 0.0);
}

TEST(Metrics, Perplexity) {
  EXPECT_NEAR(perplexity(4 * std::log(8.0), 4), 8.0, 1e-12);
  EXPECT_DOUBLE_EQ(perplexity(0.0, 10), 1.0);
  EXPECT_THROW(perplexity(1.0, 0), std::invalid_argument);
  EXPECT_THROW(perplexity(1.0, -3), std::invalid_argument);
}

}  // namespace
}  // namespace hp
