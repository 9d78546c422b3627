// The built-in demo (see header).
#include "headprune/demo.h"

#include "headprune/score/importance.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "headprune/data/tasks.h"
#include "headprune/eval/evaluate.h"
#include "headprune/io/checkpoint.h"
#include "headprune/prune/remove_heads.h"
#include "headprune/train/run_config.h"
#include "headprune/train/trainer.h"
#include "headprune/util/log.h"

namespace hp {
namespace {

struct Stage {
  std::string name;
  int64_t heads = 0, params = 0;
  double metric = 0, loss = 0, forward_ms = 0;
};

// The family's headline metric on the validation set: accuracy, perplexity or greedy BLEU.
std::pair<std::string, double> task_metric(TransformerImpl& m, const std::vector<Example>& valid, EvalResult* r_out) {
  EvalResult r = evaluate(m, valid);
  if (r_out) *r_out = r;
  switch (m.config().arch) {
    case Arch::EncoderClassifier: return {"accuracy", r.classification->accuracy};
    case Arch::DecoderLM: return {"perplexity", r.perplexity};
    case Arch::EncoderDecoder: return {"BLEU", evaluate_synthetic_translation(m, valid, DecodeOptions{}).bleu.score};
  }
  return {"", 0};
}

double median_forward_ms(TransformerImpl& model, const Batch& batch, int reps) {
  c10::InferenceMode guard;
  model.eval();
  model.forward(batch);  // warm-up
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    model.forward(batch);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int64_t count_heads(const ModelConfig& c) {
  int64_t n = 0;
  for (AttnType t : c.attn_types()) n += c.n_heads_kept(t);
  return n;
}

std::string fmt(double v, int prec) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << v;
  return o.str();
}

std::string per_layer_counts(const ModelConfig& c, AttnType t) {
  std::string s = "[";
  for (size_t l = 0; l < c.heads(t).size(); ++l) s += (l ? ", " : "") + std::to_string(c.heads(t)[l].size());
  return s + "]";
}

}  // namespace

nlohmann::json run_demo(const DemoOptions& opts, std::ostream& out) {
  nlohmann::json report = nlohmann::json::array();
  for (Arch arch : opts.families) {
    RunConfig rc = synthetic_run_config(arch);
    const ModelConfig& cfg = rc.model;
    const std::string dir = opts.out_dir + "/" + to_string(arch);
    TaskData data = load_task(rc.data, cfg, "", std::nullopt, {"train", "valid"}, opts.seed);
    out << "== " << to_string(arch) << " ==\n";

    // 1. Train on the synthetic task.
    torch::manual_seed(opts.seed);
    Transformer model(cfg);
    TrainOptions to = rc.train;
    to.max_steps = opts.train_steps;
    to.eval_every = opts.train_steps;
    to.seed = opts.seed;
    auto t0 = std::chrono::steady_clock::now();
    train_model(model, {data.train, data.valid}, to, dir + "/train");
    const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    model->eval();
    Batch bench = collate(std::vector<Example>(data.valid.begin(), data.valid.begin() + 64), arch, cfg.pad_id);
    std::vector<Stage> stages;
    auto record = [&](const std::string& name, TransformerImpl& m) {
      EvalResult r;
      auto mt = task_metric(m, data.valid, &r);
      stages.push_back({name, count_heads(m.config()), m.n_parameters(), mt.second, r.loss,
                        median_forward_ms(m, bench, 7)});
      return mt.first;
    };
    const std::string metric_name = record("trained", *model);
    out << "trained " << opts.train_steps << " steps in " << fmt(train_s, 1) << " s on " << data.train.size()
        << " synthetic examples\n";

    // 2. Head importance from gate gradients (Michel et al.), L2-normalized per layer.
    EvalSet valid_set;
    valid_set.name = "synthetic valid";
    valid_set.examples = data.valid;
    const HeadScores importance = score_heads(*model, valid_set, ScoreMethod::Gradient);
    print_heat_map(out, importance, cfg);
    std::vector<std::pair<HeadId, double>> scores(importance.scores.begin(), importance.scores.end());

    // 3. Choose heads: one whole layer (it will skip attention) plus the weakest others.
    std::sort(scores.begin(), scores.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    const AttnType first = cfg.attn_types().front();
    const int64_t empty_layer = cfg.n_layers(first) - 1;
    const auto n_drop = static_cast<size_t>(std::lround(opts.prune_fraction * static_cast<double>(scores.size())));
    std::vector<HeadId> drop;
    for (int64_t h : cfg.heads(first)[empty_layer]) drop.push_back({first, empty_layer, h});
    for (const auto& s : scores)
      if (drop.size() < n_drop && !(s.first.type == first && s.first.layer == empty_layer)) drop.push_back(s.first);
    std::sort(drop.begin(), drop.end());

    // 4. Mask, remove physically, fine-tune.
    model->mask_heads(drop);
    record("masked", *model);
    Transformer pruned = remove_heads(*model, drop);
    record("pruned", *pruned);
    double max_diff = 0;
    {
      torch::NoGradGuard g;
      max_diff = (model->forward(bench).logits - pruned->forward(bench).logits).abs().max().item<double>();
    }
    model->reset_gates();
    TrainOptions ft = to;
    ft.max_steps = opts.finetune_steps;
    ft.eval_every = opts.finetune_steps;
    ft.warmup_steps = std::min<int64_t>(ft.warmup_steps, opts.finetune_steps / 5);
    train_model(pruned, {data.train, data.valid}, ft, dir + "/finetune");
    record("pruned + fine-tuned", *pruned);
    save_checkpoint(dir + "/pruned", *pruned);
    Transformer reloaded = load_checkpoint(dir + "/pruned");
    double reload_diff = 0;
    {
      torch::NoGradGuard g;
      reload_diff = (reloaded->forward(bench).logits - pruned->forward(bench).logits).abs().max().item<double>();
    }

    out << "removed " << drop.size() << " of " << scores.size() << " heads: all " << cfg.n_heads << " of "
        << to_string(first) << " layer " << empty_layer << " and the " << drop.size() - cfg.n_heads
        << " least important others\n";
    for (AttnType t : cfg.attn_types())
      out << "  " << std::left << std::setw(13) << to_string(t) << std::right << " heads per layer "
          << per_layer_counts(cfg, t) << " -> " << per_layer_counts(pruned->config(), t) << "\n";
    out << "  " << std::left << std::setw(22) << "stage" << std::right << std::setw(8) << "heads" << std::setw(10)
        << "params" << std::setw(12) << metric_name << std::setw(10) << "loss" << std::setw(12) << "forward ms" << "\n";
    for (const auto& s : stages)
      out << "  " << std::left << std::setw(22) << s.name << std::right << std::setw(8) << s.heads << std::setw(10)
          << s.params << std::setw(12) << fmt(s.metric, arch == Arch::EncoderClassifier ? 4 : 2) << std::setw(10)
          << fmt(s.loss, 4) << std::setw(12) << fmt(s.forward_ms, 2) << "\n";
    out << "  masked vs physically pruned outputs: max |diff| " << std::scientific << std::setprecision(1) << max_diff
        << "; reloaded checkpoint: max |diff| " << reload_diff << std::defaultfloat << "\n";
    out << "  saved " << dir << "/pruned (forward ms: batch of 64, median of 7; noisy at this size)\n\n";

    nlohmann::json st = nlohmann::json::array();
    for (const auto& s : stages)
      st.push_back({{"stage", s.name}, {"heads", s.heads}, {"parameters", s.params}, {metric_name, s.metric},
                    {"loss", s.loss}, {"forward_ms", s.forward_ms}});
    nlohmann::json removed = nlohmann::json::array();
    for (const auto& h : drop) removed.push_back(to_string(h));
    report.push_back({{"family", to_string(arch)}, {"metric", metric_name}, {"train_seconds", train_s},
                      {"stages", st}, {"heads_removed", removed}, {"max_abs_diff_masked_vs_pruned", max_diff},
                      {"max_abs_diff_reloaded", reload_diff}, {"checkpoint", dir + "/pruned"}});
  }
  return report;
}

}  // namespace hp
