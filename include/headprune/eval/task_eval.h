// Task metrics as per-example sufficient statistics, for analyses that mask heads and evaluate
// the same examples many times (ablation, pruning curves): each run yields one row of statistics
// per example, so any subset or bootstrap resample can be re-aggregated without running the model
// again, and two runs can be compared with a paired significance test.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/data/dataset.h"
#include "headprune/data/tokenizer.h"
#include "headprune/decode/search.h"
#include "headprune/model/transformer.h"
#include "headprune/util/names.h"

namespace hp {

enum class Metric { Accuracy, Bleu, Perplexity, Loss };
std::string to_string(Metric m);
Metric parse_metric(const std::string& s);  // accuracy | bleu | perplexity | loss
const NameTable<Metric>& metric_names();
bool higher_is_better(Metric m);
Metric default_metric(Arch arch);  // accuracy, perplexity or BLEU

// The examples of one split, plus what decoding-based metrics need.
struct EvalSet {
  std::string name;  // e.g. "valid" or "synthetic", for reports
  std::vector<Example> examples;
  // Translation: raw (source, reference) per example, for BLEU on detokenized text. Empty for
  // synthetic tasks, whose BLEU compares token ids as words.
  std::vector<std::pair<std::string, std::string>> texts;
  std::optional<Tokenizer> tokenizer;
};

// A split's name as given: "train", "valid" or "test"; any other is std::invalid_argument
// ("split 'x' is not one of train, valid, test"). The one check of a split's name (load_eval_set, the
// data options of jobs/job.h).
const std::string& split_name(const std::string& split);

// Loads `split` ("train", "valid" or "test") of a data spec (a run config's "data" section, or
// synthetic_data_spec(); see data/tasks.h) with the checkpoint's tokenizer. `source` names the spec in
// messages (its file, or "the synthetic task"). max_examples > 0 keeps the first examples only.
EvalSet load_eval_set(const ModelConfig& cfg, const std::optional<Tokenizer>& tokenizer, const nlohmann::json& data_spec,
                      const std::string& source, const std::string& split, const std::string& data_root,
                      int64_t max_examples, uint64_t seed);

// Per-example statistics of one metric: rows of `width` numbers, one row per example.
//   accuracy    [correct]
//   loss        [summed nll, target tokens]        value = mean nll per target token
//   perplexity  [summed nll, target tokens]        value = exp(mean nll)
//   bleu        [matches 1-4, totals 1-4, hyp length, ref length]   value = corpus BLEU
struct MetricSample {
  Metric metric = Metric::Loss;
  int64_t width = 0;
  std::vector<double> rows;  // n x width
  int64_t size() const { return width > 0 ? static_cast<int64_t>(rows.size()) / width : 0; }
  double value() const;                                    // over every example
  double value_of(const std::vector<int64_t>& idx) const;  // over a subset / resample (repeats allowed)
};

struct MetricOptions {
  int64_t batch_tokens = 8192;
  int64_t max_batch = 256;
  DecodeOptions decode;  // BLEU: greedy by default
};

// One pass over the set in eval mode without gradients (plus decoding for BLEU); returns the
// statistics of each requested metric. Loss, accuracy and perplexity share one forward pass.
std::map<Metric, MetricSample> measure(TransformerImpl& model, const EvalSet& set, const std::vector<Metric>& metrics,
                                       const MetricOptions& opts = {});

// Paired bootstrap resampling (Koehn 2004): resample the examples with replacement `samples`
// times (seeded; the same resamples for every call with the same seed and size) and return the
// two-sided p-value of "a and b have the same metric": 2 * min(P(delta <= 0), P(delta >= 0))
// with delta = value_of(b) - value_of(a), capped at 1.
double paired_bootstrap_p(const MetricSample& a, const MetricSample& b, int64_t samples = 1000, uint64_t seed = 12345);

}  // namespace hp
