// Classification metrics (accuracy, F1, Matthews correlation) and perplexity (see header).
// BLEU lives in bleu.cc.
#include "headprune/eval/metrics.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace hp {

ClassificationMetrics classification_metrics(const std::vector<int64_t>& gold, const std::vector<int64_t>& pred,
                                             int64_t n_classes) {
  if (n_classes < 2)
    throw std::invalid_argument("classification_metrics: n_classes must be >= 2, got " + std::to_string(n_classes));
  if (gold.size() != pred.size())
    throw std::invalid_argument("classification_metrics: " + std::to_string(gold.size()) + " gold labels but " +
                                std::to_string(pred.size()) + " predictions");
  const size_t K = static_cast<size_t>(n_classes);
  auto check = [&](const char* what, size_t i, int64_t v) {
    if (v < 0 || v >= n_classes)
      throw std::invalid_argument(std::string("classification_metrics: ") + what + "[" + std::to_string(i) +
                                  "] = " + std::to_string(v) + ", expected a class in [0, " +
                                  std::to_string(n_classes) + ")");
  };
  // Per class: true count t_k (gold), predicted count p_k, correct count c_k.
  std::vector<double> t(K, 0), p(K, 0), c(K, 0);
  for (size_t i = 0; i < gold.size(); ++i) {
    check("gold", i, gold[i]);
    check("pred", i, pred[i]);
    t[gold[i]] += 1;
    p[pred[i]] += 1;
    if (gold[i] == pred[i]) c[gold[i]] += 1;
  }

  ClassificationMetrics m;
  m.n = static_cast<int64_t>(gold.size());
  if (m.n == 0) return m;
  const double n = static_cast<double>(m.n);
  double correct = 0;
  for (size_t k = 0; k < K; ++k) correct += c[k];
  m.accuracy = correct / n;

  // F1_k = 2 tp / (2 tp + fp + fn) = 2 c_k / (t_k + p_k); 0 when the class never occurs.
  auto f1_of = [&](size_t k) { return t[k] + p[k] > 0 ? 2 * c[k] / (t[k] + p[k]) : 0.0; };
  if (n_classes == 2) {
    m.f1 = f1_of(1);
  } else {
    double sum = 0;
    int64_t present = 0;
    for (size_t k = 0; k < K; ++k) {
      if (t[k] + p[k] == 0) continue;
      sum += f1_of(k);
      ++present;
    }
    m.f1 = present > 0 ? sum / static_cast<double>(present) : 0.0;
  }

  // Gorodkin's R_K: (c s - sum_k p_k t_k) / sqrt((s^2 - sum_k p_k^2) (s^2 - sum_k t_k^2)).
  double pt = 0, pp = 0, tt = 0;
  for (size_t k = 0; k < K; ++k) {
    pt += p[k] * t[k];
    pp += p[k] * p[k];
    tt += t[k] * t[k];
  }
  const double denom = (n * n - pp) * (n * n - tt);
  m.mcc = denom > 0 ? (correct * n - pt) / std::sqrt(denom) : 0.0;
  return m;
}

double perplexity(double total_nll, int64_t n_tokens) {
  if (n_tokens <= 0)
    throw std::invalid_argument("perplexity: n_tokens must be > 0, got " + std::to_string(n_tokens));
  return std::exp(total_nll / static_cast<double>(n_tokens));
}

}  // namespace hp
