// Loss-based evaluation (see header).
#include "headprune/eval/evaluate.h"

#include <chrono>
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "headprune/data/tasks.h"
#include "headprune/eval/graph_forward.h"
#include "headprune/util/dist.h"

namespace hp {

nlohmann::json EvalResult::to_json() const {
  nlohmann::json j = {{"loss", loss}, {"n_examples", n_examples}, {"n_tokens", n_tokens}};
  if (classification) {
    j["accuracy"] = classification->accuracy;
    j["f1"] = classification->f1;
    j["mcc"] = classification->mcc;
  } else {
    j["perplexity"] = perplexity;
  }
  return j;
}

void forward_batches(TransformerImpl& model, const std::vector<Example>& examples, int64_t batch_tokens,
                     int64_t max_batch, const BatchFn& fn, bool this_ranks_share, GraphReplay graphs) {
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  const auto& cfg = model.config();
  const auto device = model.parameters().front().device();
  try {
    std::unique_ptr<GraphForward> replay;
    if (graphs != GraphReplay::Off) replay = std::make_unique<GraphForward>(model, graphs, /*buckets=*/true);
    const auto batches = make_token_batches(examples, batch_tokens, max_batch, false, 0);
    for (size_t k = 0; k < batches.size(); ++k) {
      if (this_ranks_share && !dist::owns(static_cast<int64_t>(k))) continue;
      const auto& idx = batches[k];
      std::vector<const Example*> ex;
      for (size_t i : idx) ex.push_back(&examples[i]);
      Batch b = collate(ex, cfg.arch, cfg.pad_id).to(device);
      if (replay) {
        ModelOutput out;
        out.logits = replay->logits(b);
        fn(idx, b, out);
      } else {
        fn(idx, b, model.forward(b));
      }
    }
  } catch (...) {
    model.train(was_training);
    throw;
  }
  model.train(was_training);
}

std::pair<torch::Tensor, torch::Tensor> per_example_nll(const TransformerImpl& model, const ModelOutput& out,
                                                        const Batch& batch) {
  namespace F = torch::nn::functional;
  const auto logits = out.logits.scalar_type() == torch::kDouble ? out.logits : out.logits.to(torch::kFloat);
  auto opts = F::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex).reduction(torch::kNone);
  if (model.config().arch == Arch::EncoderClassifier)
    return {F::cross_entropy(logits, batch.labels, opts), torch::ones({batch.size()}, logits.options())};
  const int64_t B = logits.size(0), U = logits.size(1);
  auto nll = F::cross_entropy(logits.reshape({B * U, -1}), batch.labels.reshape({-1}), opts).view({B, U});
  return {nll.sum(1), batch.labels.ne(kIgnoreIndex).sum(1).to(logits.scalar_type())};
}

torch::Tensor distillation_kl(const TransformerImpl& model, const ModelOutput& student, const ModelOutput& teacher,
                              const Batch& batch, double temperature) {
  if (!(temperature > 0)) throw std::invalid_argument("distillation: temperature must be > 0");
  if (student.logits.sizes() != teacher.logits.sizes())
    throw std::invalid_argument("distillation: the teacher's logits do not have the student's shape (another vocabulary "
                                "or number of classes?)");
  const auto as = [](const torch::Tensor& t) { return t.scalar_type() == torch::kDouble ? t : t.to(torch::kFloat); };
  const auto log_s = torch::log_softmax(as(student.logits) / temperature, -1);
  const auto log_t = torch::log_softmax(as(teacher.logits).detach() / temperature, -1);
  auto kl = (log_t.exp() * (log_t - log_s)).sum(-1);  // [B] or [B, U]
  if (model.config().arch != Arch::EncoderClassifier) {
    const auto counted = batch.labels.ne(kIgnoreIndex).to(kl.scalar_type());
    kl = (kl * counted).sum() / counted.sum().clamp_min(1.0);
  } else {
    kl = kl.mean();
  }
  return kl * (temperature * temperature);
}

torch::Tensor hidden_state_mse(const std::vector<torch::Tensor>& student, const std::vector<torch::Tensor>& teacher) {
  if (student.size() != teacher.size() || student.empty())
    throw std::invalid_argument("distillation: the student passed " + std::to_string(student.size()) +
                                " attention layers and the teacher " + std::to_string(teacher.size()) +
                                " (hidden-state distillation needs the same layers, at least one)");
  torch::Tensor sum;
  for (size_t i = 0; i < student.size(); ++i) {
    if (student[i].sizes() != teacher[i].sizes())
      throw std::invalid_argument("distillation: hidden states of layer " + std::to_string(i) + " differ in shape");
    const auto as = [](const torch::Tensor& t) { return t.scalar_type() == torch::kDouble ? t : t.to(torch::kFloat); };
    auto term = (as(student[i]) - as(teacher[i]).detach()).pow(2).mean();
    sum = sum.defined() ? sum + term : term;
  }
  return sum / static_cast<double>(student.size());
}

HiddenStates::HiddenStates(TransformerImpl& model, bool on) {
  if (!on) return;
  for (const auto& g : model.head_masks()) {
    auto* m = &model.attention(g.type, g.layer);
    if (m->on_output) throw std::logic_error("hidden-state capture: an attention layer already has an output hook");
    m->on_output = [this](const torch::Tensor& residual, const torch::Tensor&) { states.push_back(residual); };
    modules_.push_back(m);
  }
}

HiddenStates::~HiddenStates() {
  for (auto* m : modules_) m->on_output = nullptr;
}

EvalResult evaluate(TransformerImpl& model, const std::vector<Example>& examples, const EvalOptions& opts) {
  if (examples.empty()) throw std::invalid_argument("evaluate: no examples");
  const auto& cfg = model.config();
  const bool cls = cfg.arch == Arch::EncoderClassifier;
  EvalResult r;
  r.n_examples = static_cast<int64_t>(examples.size());
  std::vector<int64_t> preds(examples.size(), -1), gold(examples.size(), -1);
  // Per batch: the mean loss times its target count, and the predictions, kept where the model
  // runs and read back once at the end.
  std::vector<torch::Tensor> weighted, counts, predicted;
  std::vector<std::vector<size_t>> order;
  forward_batches(model, examples, opts.batch_tokens, opts.max_batch,
                  [&](const std::vector<size_t>& idx, const Batch& b, const ModelOutput& out) {
                    const auto loss = model.loss(out, b).detach().to(torch::kDouble);
                    const auto n = cls ? torch::full({}, static_cast<double>(b.size()), loss.options())
                                       : b.labels.ne(kIgnoreIndex).sum().to(torch::kDouble);
                    weighted.push_back(loss * n);
                    counts.push_back(n);
                    if (cls) {
                      predicted.push_back(out.logits.argmax(-1));
                      order.push_back(idx);
                    }
                  },
                  /*this_ranks_share=*/true, opts.graphs);
  double total = 0;
  if (!weighted.empty()) {
    const auto w = torch::stack(weighted).to(torch::kCPU).contiguous();
    const auto c = torch::stack(counts).to(torch::kCPU).contiguous();
    for (int64_t i = 0; i < w.numel(); ++i) {
      total += w.data_ptr<double>()[i];
      r.n_tokens += static_cast<int64_t>(c.data_ptr<double>()[i]);
    }
  }
  if (cls && !predicted.empty()) {
    const auto p = torch::cat(predicted).to(torch::kCPU, torch::kLong).contiguous();
    int64_t k = 0;
    for (const auto& idx : order)
      for (size_t i : idx) preds[i] = p.data_ptr<int64_t>()[k++];
  }
  if (dist::active()) {
    // The other ranks' sums and predictions (each example is predicted by exactly one rank; -1 elsewhere).
    auto sums = torch::tensor({total, static_cast<double>(r.n_tokens)}, torch::kDouble);
    auto shifted = torch::tensor(preds, torch::kLong) + 1;
    dist::all_reduce_sum({sums, shifted});
    total = sums[0].item<double>();
    r.n_tokens = static_cast<int64_t>(sums[1].item<double>());
    const auto sp = shifted.contiguous();
    for (size_t i = 0; i < preds.size(); ++i) preds[i] = sp.data_ptr<int64_t>()[i] - 1;
  }
  if (cls)
    for (size_t i = 0; i < examples.size(); ++i) gold[i] = examples[i].label;
  r.loss = total / static_cast<double>(std::max<int64_t>(1, r.n_tokens));
  if (cls) {
    r.classification = classification_metrics(gold, preds, cfg.n_classes);
    r.predictions = preds;
  } else {
    r.perplexity = std::exp(r.loss);
  }
  return r;
}

DecodeOptions translation_decode(DecodeOptions decode, const Tokenizer& tokenizer) {
  const auto& sp = tokenizer.specials();
  decode.bos_id = sp.bos;
  decode.eos_id = sp.eos;
  if (sp.pad != sp.eos) decode.suppress.push_back(sp.pad);
  return decode;
}

TranslationEval evaluate_translation(TransformerImpl& model, const Tokenizer& tokenizer,
                                     const std::vector<std::pair<std::string, std::string>>& pairs,
                                     const DecodeOptions& decode, int64_t batch_tokens,
                                     const std::function<void(int64_t, int64_t)>& progress) {
  if (pairs.empty()) throw std::invalid_argument("evaluate_translation: no sentences");
  const DecodeOptions opts = translation_decode(decode, tokenizer);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Example> src;
  for (const auto& p : pairs) src.push_back(translation_source(tokenizer, p.first, model.config().max_positions));
  TranslationEval r;
  r.hypotheses.resize(pairs.size());
  auto batches = make_token_batches(src, batch_tokens, 128, false, 0);
  int64_t done = 0;
  const auto device = model.parameters().front().device();
  std::string mine;  // several processes: this rank's hypotheses as "index length text" records
  for (size_t k = 0; k < batches.size(); ++k) {
    if (!dist::owns(static_cast<int64_t>(k))) continue;
    const auto& idx = batches[k];
    std::vector<const Example*> ex;
    for (size_t i : idx) ex.push_back(&src[i]);
    Batch b = collate(ex, Arch::EncoderClassifier, model.config().pad_id).to(device);  // source side only
    Batch s;
    s.input_ids = b.input_ids;
    s.attention_mask = b.attention_mask;
    auto hyps = translate(model, s, opts);
    for (size_t k = 0; k < idx.size(); ++k) {
      auto& h = r.hypotheses[idx[k]] = tokenizer.decode(hyps[k]);
      if (dist::active()) mine += std::to_string(idx[k]) + " " + std::to_string(h.size()) + " " + h;
    }
    done += static_cast<int64_t>(idx.size());
    if (progress) progress(done, static_cast<int64_t>(pairs.size()));
  }
  if (dist::active()) {  // every rank gets every hypothesis
    for (const auto& theirs : dist::all_gather(mine)) {
      size_t at = 0;
      while (at < theirs.size()) {
        const size_t sp1 = theirs.find(' ', at), sp2 = theirs.find(' ', sp1 + 1);
        const size_t i = std::stoull(theirs.substr(at, sp1 - at)), n = std::stoull(theirs.substr(sp1 + 1, sp2 - sp1 - 1));
        r.hypotheses.at(i) = theirs.substr(sp2 + 1, n);
        at = sp2 + 1 + n;
      }
    }
  }
  std::vector<std::string> refs;
  for (const auto& p : pairs) refs.push_back(p.second);
  r.bleu = corpus_bleu(r.hypotheses, refs);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

namespace {
std::string ids_to_text(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t t : ids) s += (s.empty() ? "" : " ") + std::to_string(t);
  return s;
}
}  // namespace

TranslationEval evaluate_synthetic_translation(TransformerImpl& model, const std::vector<Example>& examples,
                                               const DecodeOptions& decode) {
  const auto t0 = std::chrono::steady_clock::now();
  TranslationEval r;
  std::vector<std::string> refs;
  for (size_t i = 0; i < examples.size(); i += 64) {
    std::vector<const Example*> chunk;
    for (size_t k = i; k < std::min(examples.size(), i + 64); ++k) {
      chunk.push_back(&examples[k]);
      const auto& t = examples[k].tgt;
      refs.push_back(ids_to_text(std::vector<int64_t>(t.begin() + 1, t.end() - 1)));
    }
    Batch b = collate(chunk, Arch::EncoderDecoder, model.config().pad_id).to(model.parameters().front().device());
    for (auto& h : translate(model, b, decode)) r.hypotheses.push_back(ids_to_text(h));
  }
  r.bleu = corpus_bleu(r.hypotheses, refs);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

double unigram_perplexity(const std::vector<Example>& train, const std::vector<Example>& eval, int64_t vocab_size) {
  std::vector<double> counts(static_cast<size_t>(vocab_size), 1.0);  // add-one
  double total = static_cast<double>(vocab_size);
  for (const auto& e : train)
    for (size_t j = 1; j < e.src.size(); ++j) {
      counts.at(static_cast<size_t>(e.src[j])) += 1;
      total += 1;
    }
  double nll = 0;
  int64_t n = 0;
  for (const auto& e : eval)
    for (size_t j = 1; j < e.src.size(); ++j) {
      nll -= std::log(counts.at(static_cast<size_t>(e.src[j])) / total);
      ++n;
    }
  if (n == 0) throw std::invalid_argument("unigram_perplexity: no evaluation tokens");
  return std::exp(nll / static_cast<double>(n));
}

}  // namespace hp
