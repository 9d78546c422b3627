// Score maps (normalization, correlation, JSON/CSV) and the metric samples behind the
// ablation significance test (paired bootstrap, BLEU sufficient statistics).
#include <cmath>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "headprune/eval/metrics.h"
#include "headprune/eval/task_eval.h"
#include "headprune/score/head_scores.h"
#include "test_util.h"

namespace hp {
namespace {

HeadScores two_layer_map() {
  HeadScores s;
  s.method = "gradient";
  s.scores[{AttnType::EncoderSelf, 0, 0}] = 3;
  s.scores[{AttnType::EncoderSelf, 0, 1}] = 4;
  s.scores[{AttnType::EncoderSelf, 1, 0}] = 0;
  s.scores[{AttnType::EncoderSelf, 1, 2}] = 0;
  s.scores[{AttnType::Cross, 0, 5}] = 1;
  return s;
}

TEST(HeadScores, LayerNormalizationDividesEachLayerByItsL2Norm) {
  auto s = two_layer_map();
  normalize(s, Normalization::Layer);
  EXPECT_DOUBLE_EQ(s.at({AttnType::EncoderSelf, 0, 0}), 0.6);
  EXPECT_DOUBLE_EQ(s.at({AttnType::EncoderSelf, 0, 1}), 0.8);
  EXPECT_EQ(s.at({AttnType::EncoderSelf, 1, 0}), 0.0);  // a layer of zeros stays zero
  EXPECT_DOUBLE_EQ(s.at({AttnType::Cross, 0, 5}), 1.0);
  EXPECT_EQ(s.normalization, Normalization::Layer);

  auto g = two_layer_map();
  normalize(g, Normalization::Global);
  EXPECT_DOUBLE_EQ(g.at({AttnType::EncoderSelf, 0, 1}), 1.0);
  EXPECT_DOUBLE_EQ(g.at({AttnType::EncoderSelf, 0, 0}), 0.75);
  EXPECT_DOUBLE_EQ(g.at({AttnType::EncoderSelf, 1, 2}), 0.0);
  EXPECT_THROW(parse_normalization("l3"), std::invalid_argument);
}

// A rank within each layer: k/n from the least important, whatever the map's orientation; a global
// ranking then takes the same share of every layer, however the layers' raw values differ in scale.
TEST(HeadScores, RankNormalizationScoresEachHeadByItsPlaceInItsLayer) {
  HeadScores s;
  s.method = "all_but_one";
  s.higher_is_important = false;  // a perplexity: lower is more important
  for (int64_t h = 0; h < 4; ++h) {
    s.scores[{AttnType::DecoderSelf, 0, h}] = 1000.0 + 10 * h;  // every head of layer 0 far above layer 1's
    s.scores[{AttnType::DecoderSelf, 1, h}] = 4.0 - h;
  }
  normalize(s, Normalization::Rank);
  EXPECT_TRUE(s.higher_is_important);
  EXPECT_EQ(s.normalization, Normalization::Rank);
  EXPECT_DOUBLE_EQ(s.at({AttnType::DecoderSelf, 0, 3}), 0.25);  // the highest perplexity: least important
  EXPECT_DOUBLE_EQ(s.at({AttnType::DecoderSelf, 0, 0}), 1.0);
  EXPECT_DOUBLE_EQ(s.at({AttnType::DecoderSelf, 1, 0}), 0.25);
  EXPECT_DOUBLE_EQ(s.at({AttnType::DecoderSelf, 1, 3}), 1.0);
  const auto order = s.ascending_importance();  // the least important of every layer first
  EXPECT_EQ(order[0], (HeadId{AttnType::DecoderSelf, 0, 3}));
  EXPECT_EQ(order[1], (HeadId{AttnType::DecoderSelf, 1, 0}));
  EXPECT_EQ(order[2].layer + order[3].layer, 1);
  EXPECT_EQ(parse_normalization("rank"), Normalization::Rank);
}

TEST(HeadScores, RanksAndCorrelations) {
  EXPECT_EQ(average_ranks({10, 20, 20, 5}), (std::vector<double>{2, 3.5, 3.5, 1}));
  // Hand-computed: x = 1..5, y = 2,4,5,4,5 -> Pearson 0.7745967 (= sqrt(0.6)).
  EXPECT_NEAR(pearson({1, 2, 3, 4, 5}, {2, 4, 5, 4, 5}), std::sqrt(0.6), 1e-12);
  // Spearman = Pearson of the average ranks {1..5} and {1, 2.5, 4.5, 2.5, 4.5}.
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {2, 4, 5, 4, 5}), pearson({1, 2, 3, 4, 5}, {1, 2.5, 4.5, 2.5, 4.5}), 1e-12);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3}, {30, 20, 10}), -1.0);
  EXPECT_EQ(pearson({1, 1, 1}, {1, 2, 3}), 0.0);  // constant: defined as 0

  auto a = two_layer_map(), b = two_layer_map();
  b.scores.erase({AttnType::Cross, 0, 5});
  for (auto& [h, v] : b.scores) v = 2 * v + 1;
  const auto ag = agreement(a, b);
  EXPECT_EQ(ag.n, 4);
  EXPECT_NEAR(ag.pearson, 1.0, 1e-12);
  EXPECT_NEAR(ag.spearman, 1.0, 1e-12);
  const AttnType cross = AttnType::Cross;
  EXPECT_EQ(agreement(a, b, &cross).n, 0);
}

TEST(HeadScores, JsonAndCsvRoundTrip) {
  auto s = two_layer_map();
  s.higher_is_important = false;
  s.columns["p_value"][{AttnType::EncoderSelf, 0, 0}] = 0.004;
  s.info["examples"] = 12;
  const auto back = HeadScores::from_json(nlohmann::json::parse(s.to_json().dump()));
  EXPECT_EQ(back.scores, s.scores);
  EXPECT_EQ(back.columns, s.columns);
  EXPECT_EQ(back.method, "gradient");
  EXPECT_FALSE(back.higher_is_important);
  EXPECT_EQ(back.info["examples"], 12);
  // Least important first: with lower = more important, the largest score comes first.
  EXPECT_EQ(back.ascending_importance().front(), (HeadId{AttnType::EncoderSelf, 0, 1}));

  const std::string csv = maps_to_csv({s});
  std::istringstream in(csv);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header.rfind("method,attn_type,layer,head,score,p_value", 0), 0u) << header;
  int rows = 0;
  while (std::getline(in, line)) ++rows;
  EXPECT_EQ(rows, 5);

  test::TempDir dir;
  {
    std::ofstream(dir / "bad.json") << "{\"maps\": [{\"method\": \"x\", \"scores\": 3}]}";
  }
  try {
    read_maps(dir / "bad.json");
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_maps(dir / "missing.json"), std::exception);
  EXPECT_THROW(two_layer_map().at({AttnType::DecoderSelf, 0, 0}), std::invalid_argument);
}

MetricSample accuracy_sample(const std::vector<int>& correct) {
  MetricSample s;
  s.metric = Metric::Accuracy;
  s.width = 1;
  for (int c : correct) s.rows.push_back(c);
  return s;
}

TEST(Significance, PairedBootstrap) {
  std::vector<int> base(200), same(200), worse(200);
  for (int i = 0; i < 200; ++i) {
    base[i] = same[i] = i % 5 != 0;  // 80 %
    worse[i] = i % 2 == 0;           // 50 %
  }
  const auto a = accuracy_sample(base);
  EXPECT_DOUBLE_EQ(a.value(), 0.8);
  EXPECT_DOUBLE_EQ(a.value_of({0, 0, 1, 5}), 0.25);  // examples 0 and 5 wrong, 1 right
  EXPECT_EQ(paired_bootstrap_p(a, accuracy_sample(same), 500, 1), 1.0);
  EXPECT_LT(paired_bootstrap_p(a, accuracy_sample(worse), 500, 1), 0.01);
  // One differing example out of 200 is not significant.
  same[3] = 0;
  EXPECT_GT(paired_bootstrap_p(a, accuracy_sample(same), 500, 1), 0.01);
  EXPECT_THROW(paired_bootstrap_p(a, accuracy_sample({1, 0}), 10, 1), std::invalid_argument);
}

TEST(Significance, BleuStatisticsAddUpToCorpusBleu) {
  const std::vector<std::string> hyp = {"the cat sat on the mat .", "a dog runs in the park", "hello world"};
  const std::vector<std::string> ref = {"the cat sat on a mat .", "a dog is running in the park", "hello there world"};
  BleuStats total;
  for (size_t i = 0; i < hyp.size(); ++i) total += sentence_bleu_stats(hyp[i], ref[i]);
  const auto from_stats = bleu_from_stats(total);
  const auto corpus = corpus_bleu(hyp, ref);
  EXPECT_DOUBLE_EQ(from_stats.score, corpus.score);
  EXPECT_EQ(from_stats.matches, corpus.matches);
  EXPECT_EQ(from_stats.totals, corpus.totals);
}

}  // namespace
}  // namespace hp
