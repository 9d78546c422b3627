// Task metrics that need no tensors: accuracy / F1 / MCC for classification, corpus BLEU
// computed exactly as sacreBLEU does by default (13a tokenization, exp smoothing), and
// perplexity from a summed negative log-likelihood.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace hp {

struct ClassificationMetrics {
  int64_t n = 0;
  double accuracy = 0, f1 = 0, mcc = 0;
};

// Binary (n_classes == 2): F1 of class 1; multi-class: macro F1 over the classes that occur in
// gold or pred (scikit-learn's default label set). MCC: Matthews correlation, Gorodkin's
// multi-class generalisation (equal to the usual one for two classes); 0 when undefined (a zero
// denominator). Every label must be in [0, n_classes); throws std::invalid_argument otherwise,
// on n_classes < 2, or on gold/pred of different sizes. Empty input gives all zeros.
ClassificationMetrics classification_metrics(const std::vector<int64_t>& gold, const std::vector<int64_t>& pred,
                                             int64_t n_classes);

// sacreBLEU's default "13a" tokenizer (mteval-v13a rules), applied to one line: the line is
// right-stripped, "<skipped>" and the entities &quot; &amp; &lt; &gt; are undone, punctuation and
// symbols are split off, '.' and ',' unless next to a digit, '-' after a digit; tokens are joined
// by single spaces. UTF-8 aware where it matters (Python's notion of whitespace).
std::string tokenize_13a(const std::string& line);

struct BleuResult {
  double score = 0;  // 0..100
  std::array<int64_t, 4> matches{}, totals{};
  std::array<double, 4> precisions{};  // percent, after smoothing
  double brevity_penalty = 0;
  int64_t sys_len = 0, ref_len = 0;
  std::string signature;  // "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:headprune"
};

// Sufficient statistics of BLEU for one segment (or, summed, a corpus): clipped n-gram matches and
// n-gram totals per order, hypothesis and reference lengths in 13a tokens. Summing the statistics
// of any subset of segments and calling bleu_from_stats gives that subset's corpus BLEU, which is
// what paired bootstrap resampling needs.
struct BleuStats {
  std::array<int64_t, 4> matches{}, totals{};
  int64_t sys_len = 0, ref_len = 0;
  BleuStats& operator+=(const BleuStats& o);
};
BleuStats sentence_bleu_stats(const std::string& hypothesis, const std::string& reference);
BleuResult bleu_from_stats(const BleuStats& stats);

// Corpus BLEU with one reference per segment, matching sacreBLEU's defaults exactly:
// 13a tokenization, case-sensitive, max order 4, 'exp' smoothing, brevity penalty.
// Throws std::invalid_argument when the lists differ in size or a reference is "" (as sacreBLEU).
BleuResult corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references);

// exp(total_nll / n_tokens); throws std::invalid_argument on n_tokens <= 0.
double perplexity(double total_nll, int64_t n_tokens);

}  // namespace hp
