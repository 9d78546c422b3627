// Per-example metric statistics and paired bootstrap (see header).
#include "headprune/eval/task_eval.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "headprune/data/tasks.h"
#include "headprune/eval/evaluate.h"
#include "headprune/eval/metrics.h"
#include "headprune/util/dist.h"
#include "headprune/util/names.h"

namespace hp {

const NameTable<Metric>& metric_names() {
  static const NameTable<Metric> t{"metric",
                                   {{Metric::Accuracy, {"accuracy"}},
                                    {Metric::Bleu, {"bleu"}},
                                    {Metric::Perplexity, {"perplexity"}},
                                    {Metric::Loss, {"loss"}}}};
  return t;
}
std::string to_string(Metric m) { return metric_names().name(m); }
Metric parse_metric(const std::string& s) { return metric_names().parse(s); }

bool higher_is_better(Metric m) { return m == Metric::Accuracy || m == Metric::Bleu; }

Metric default_metric(Arch arch) {
  switch (arch) {
    case Arch::EncoderClassifier: return Metric::Accuracy;
    case Arch::DecoderLM: return Metric::Perplexity;
    case Arch::EncoderDecoder: return Metric::Bleu;
  }
  return Metric::Loss;
}

const std::string& split_name(const std::string& split) {
  if (split != "train" && split != "valid" && split != "test")
    throw std::invalid_argument("split '" + split + "' is not one of train, valid, test");
  return split;
}

EvalSet load_eval_set(const ModelConfig& cfg, const std::optional<Tokenizer>& tokenizer, const nlohmann::json& spec,
                      const std::string& source, const std::string& split, const std::string& data_root,
                      int64_t max_examples, uint64_t seed) {
  split_name(split);
  const bool synthetic = is_synthetic(spec);
  if (!synthetic && !tokenizer)
    throw std::runtime_error("the checkpoint has no tokenizer, but " + source + " needs one to read its data");
  TaskData d = load_task(spec, cfg, data_root, tokenizer, {split}, seed);
  EvalSet set;
  set.name = synthetic ? "synthetic/" + split : split;
  set.examples = split == "train" ? std::move(d.train) : split == "valid" ? std::move(d.valid) : std::move(d.test);
  if (cfg.arch == Arch::EncoderDecoder && !synthetic)
    set.texts = split == "test" ? std::move(d.test_text) : std::move(d.valid_text);
  set.tokenizer = tokenizer;
  if (set.examples.empty()) throw std::runtime_error("split '" + split + "' of " + source + " has no examples");
  if (max_examples > 0 && static_cast<int64_t>(set.examples.size()) > max_examples) {
    set.examples.resize(static_cast<size_t>(max_examples));
    if (!set.texts.empty()) set.texts.resize(static_cast<size_t>(max_examples));
  }
  return set;
}

namespace {

int64_t width_of(Metric m) {
  switch (m) {
    case Metric::Accuracy: return 1;
    case Metric::Loss:
    case Metric::Perplexity: return 2;
    case Metric::Bleu: return 10;
  }
  return 0;
}

// Sums the columns of the chosen rows (all rows when idx is null).
std::vector<double> column_sums(const MetricSample& s, const std::vector<int64_t>* idx) {
  std::vector<double> sum(static_cast<size_t>(s.width), 0.0);
  const int64_t n = idx ? static_cast<int64_t>(idx->size()) : s.size();
  for (int64_t k = 0; k < n; ++k) {
    const int64_t r = idx ? (*idx)[static_cast<size_t>(k)] : k;
    if (r < 0 || r >= s.size()) throw std::out_of_range("MetricSample: row " + std::to_string(r) + " out of range");
    const double* row = s.rows.data() + r * s.width;
    for (int64_t c = 0; c < s.width; ++c) sum[static_cast<size_t>(c)] += row[c];
  }
  return sum;
}

double aggregate(Metric m, const std::vector<double>& sum, int64_t n) {
  switch (m) {
    case Metric::Accuracy: return n > 0 ? sum[0] / static_cast<double>(n) : 0.0;
    case Metric::Loss: return sum[1] > 0 ? sum[0] / sum[1] : 0.0;
    case Metric::Perplexity: return sum[1] > 0 ? std::exp(sum[0] / sum[1]) : 0.0;
    case Metric::Bleu: {
      BleuStats st;
      for (int k = 0; k < 4; ++k) {
        st.matches[k] = std::llround(sum[k]);
        st.totals[k] = std::llround(sum[4 + k]);
      }
      st.sys_len = std::llround(sum[8]);
      st.ref_len = std::llround(sum[9]);
      return bleu_from_stats(st).score;
    }
  }
  return 0.0;
}

std::string ids_to_words(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t t : ids) s += (s.empty() ? "" : " ") + std::to_string(t);
  return s;
}

void append_bleu_rows(MetricSample& s, const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  for (size_t i = 0; i < hyps.size(); ++i) {
    const BleuStats st = sentence_bleu_stats(hyps[i], refs[i]);
    for (int k = 0; k < 4; ++k) s.rows.push_back(static_cast<double>(st.matches[k]));
    for (int k = 0; k < 4; ++k) s.rows.push_back(static_cast<double>(st.totals[k]));
    s.rows.push_back(static_cast<double>(st.sys_len));
    s.rows.push_back(static_cast<double>(st.ref_len));
  }
}

MetricSample bleu_sample(TransformerImpl& model, const EvalSet& set, const MetricOptions& opts) {
  MetricSample s{Metric::Bleu, width_of(Metric::Bleu), {}};
  std::vector<std::string> refs;
  TranslationEval te;
  if (!set.texts.empty()) {
    if (!set.tokenizer) throw std::invalid_argument("BLEU on text needs the checkpoint's tokenizer");
    te = evaluate_translation(model, *set.tokenizer, set.texts, opts.decode);
    for (const auto& p : set.texts) refs.push_back(p.second);
  } else {
    te = evaluate_synthetic_translation(model, set.examples, opts.decode);
    for (const auto& e : set.examples) refs.push_back(ids_to_words({e.tgt.begin() + 1, e.tgt.end() - 1}));
  }
  append_bleu_rows(s, te.hypotheses, refs);
  return s;
}

}  // namespace

double MetricSample::value() const { return aggregate(metric, column_sums(*this, nullptr), size()); }

double MetricSample::value_of(const std::vector<int64_t>& idx) const {
  return aggregate(metric, column_sums(*this, &idx), static_cast<int64_t>(idx.size()));
}

std::map<Metric, MetricSample> measure(TransformerImpl& model, const EvalSet& set, const std::vector<Metric>& metrics,
                                       const MetricOptions& opts) {
  if (set.examples.empty()) throw std::invalid_argument("measure: the evaluation set '" + set.name + "' is empty");
  const auto& cfg = model.config();
  std::map<Metric, MetricSample> out;
  bool need_forward = false;
  for (Metric m : metrics) {
    if (m == Metric::Accuracy && cfg.arch != Arch::EncoderClassifier)
      throw std::invalid_argument("accuracy needs an encoder_classifier, the model is " + to_string(cfg.arch));
    if (m == Metric::Bleu && cfg.arch != Arch::EncoderDecoder)
      throw std::invalid_argument("BLEU needs an encoder_decoder, the model is " + to_string(cfg.arch));
    if (m != Metric::Bleu) need_forward = true;
  }
  if (need_forward) {
    const size_t n = set.examples.size();
    std::vector<double> nll(n, 0.0), tokens(n, 0.0), correct(n, 0.0);
    // Per batch [B, 3] rows (nll, target count, correct) stay where the model runs; one read at the end.
    std::vector<torch::Tensor> rows;
    std::vector<size_t> order;
    forward_batches(model, set.examples, opts.batch_tokens, opts.max_batch,
                    [&](const std::vector<size_t>& idx, const Batch& b, const ModelOutput& o) {
                      auto [loss, count] = per_example_nll(model, o, b);
                      auto hit = cfg.arch == Arch::EncoderClassifier ? o.logits.argmax(-1).eq(b.labels)
                                                                      : torch::zeros_like(loss, torch::kBool);
                      rows.push_back(torch::stack({loss.to(torch::kDouble), count.to(torch::kDouble),
                                                   hit.to(torch::kDouble)}, 1));
                      order.insert(order.end(), idx.begin(), idx.end());
                    },
                    /*this_ranks_share=*/true);
    if (!rows.empty()) {
      const auto all = torch::cat(rows).to(torch::kCPU).contiguous();
      const double* r = all.data_ptr<double>();
      for (size_t k = 0; k < order.size(); ++k) {
        nll[order[k]] = r[3 * k];
        tokens[order[k]] = r[3 * k + 1];
        correct[order[k]] = r[3 * k + 2];
      }
    }
    if (dist::active()) {  // every example was measured by one rank; the others hold zeros for it
      auto per_example = torch::stack({torch::tensor(nll, torch::kDouble), torch::tensor(tokens, torch::kDouble),
                                       torch::tensor(correct, torch::kDouble)});
      dist::all_reduce_sum({per_example});
      const auto pe = per_example.contiguous();
      const double* v = pe.data_ptr<double>();
      for (size_t i = 0; i < n; ++i) {
        nll[i] = v[i];
        tokens[i] = v[n + i];
        correct[i] = v[2 * n + i];
      }
    }
    for (Metric m : metrics) {
      if (m == Metric::Bleu) continue;
      MetricSample s{m, width_of(m), {}};
      for (size_t i = 0; i < n; ++i) {
        if (m == Metric::Accuracy) {
          s.rows.push_back(correct[i]);
        } else {
          s.rows.push_back(nll[i]);
          s.rows.push_back(tokens[i]);
        }
      }
      out[m] = std::move(s);
    }
  }
  if (std::find(metrics.begin(), metrics.end(), Metric::Bleu) != metrics.end()) {
    const bool was_training = model.is_training();
    model.eval();
    out[Metric::Bleu] = bleu_sample(model, set, opts);
    model.train(was_training);
  }
  return out;
}

double paired_bootstrap_p(const MetricSample& a, const MetricSample& b, int64_t samples, uint64_t seed) {
  if (a.metric != b.metric || a.size() != b.size())
    throw std::invalid_argument("paired_bootstrap_p: the samples must measure the same metric on the same examples");
  if (samples <= 0) throw std::invalid_argument("paired_bootstrap_p: samples must be positive");
  const int64_t n = a.size();
  if (n == 0) return 1.0;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  int64_t le = 0, ge = 0;
  for (int64_t s = 0; s < samples; ++s) {
    for (auto& i : idx) i = pick(rng);
    const double delta = b.value_of(idx) - a.value_of(idx);
    if (delta <= 0) ++le;
    if (delta >= 0) ++ge;
  }
  const double p = 2.0 * static_cast<double>(std::min(le, ge)) / static_cast<double>(samples);
  return std::min(1.0, p);
}

}  // namespace hp
