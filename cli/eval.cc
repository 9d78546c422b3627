// `headprune eval CHECKPOINT`: loss and task metrics (accuracy/F1/MCC, perplexity, BLEU with
// greedy and beam search) on a split of a run config's data, or on the synthetic task.
// JSON on stdout, one human-readable line on stderr.
#include <memory>
#include <ostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app.h"
#include "common.h"
#include "headprune/data/synthetic.h"
#include "headprune/data/tasks.h"
#include "headprune/eval/evaluate.h"
#include "headprune/model/precision.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/train/run_config.h"
#include "headprune/util/progress.h"

namespace hp::cli {
namespace {

struct EvalCliOptions {
  std::string checkpoint, hyps_path, precision = "fp32";
  DataArgs data;
  std::vector<int64_t> beams = {1, 4};
  double length_penalty = 1.0;
  bool unigram_baseline = false;
};

void run_eval(const EvalCliOptions& o, Context& ctx) {
  LoadedModel lm = open_model(o.checkpoint);
  Transformer& model = lm.model;
  const ModelConfig& cfg = model->config();
  apply_precision(*model, parse_precision(o.precision));
  EvalSet set = load_data(o.data, lm, ctx.seed);
  const auto& examples = set.examples;
  const auto& texts = set.texts;
  nlohmann::json out = {{"checkpoint", o.checkpoint}, {"arch", to_string(cfg.arch)}};
  out["data"] = o.data.config_path.empty() ? "synthetic" : o.data.config_path;
  out["split"] = o.data.split;
  out["precision"] = o.precision;
  auto r = evaluate(*model, examples);
  out.update(r.to_json());
  std::string line = "[eval] " + std::to_string(r.n_examples) + " examples | loss " + std::to_string(r.loss);
  if (r.classification) {
    line += " | accuracy " + std::to_string(r.classification->accuracy) + " | f1 " +
            std::to_string(r.classification->f1) + " | mcc " + std::to_string(r.classification->mcc);
  } else {
    line += " | perplexity " + std::to_string(r.perplexity);
  }
  if (cfg.arch == Arch::DecoderLM && o.unigram_baseline) {
    DataArgs train_args = o.data;
    train_args.split = "train";
    train_args.max_examples = 0;
    out["unigram_perplexity"] = unigram_perplexity(load_data(train_args, lm, ctx.seed).examples, examples, cfg.vocab_size);
    line += " | unigram perplexity " + std::to_string(out["unigram_perplexity"].get<double>());
  }
  if (cfg.arch == Arch::EncoderDecoder) {
    nlohmann::json bleu = nlohmann::json::object();
    for (int64_t beam : o.beams) {
      DecodeOptions d;
      d.beam_size = beam;
      d.length_penalty = o.length_penalty;
      TranslationEval te;
      if (lm.tokenizer && !texts.empty()) {
        ProgressBar bar("decode beam " + std::to_string(beam), static_cast<int64_t>(texts.size()), "sent");
        te = evaluate_translation(*model, *lm.tokenizer, texts, d, 4096, [&](int64_t done, int64_t) { bar.update(done); });
      } else {
        te = evaluate_synthetic_translation(*model, examples, d);
      }
      bleu["beam" + std::to_string(beam)] = {{"score", te.bleu.score}, {"signature", te.bleu.signature},
                                             {"brevity_penalty", te.bleu.brevity_penalty},
                                             {"precisions", te.bleu.precisions}, {"seconds", te.seconds}};
      line += " | BLEU beam " + std::to_string(beam) + " " + std::to_string(te.bleu.score);
      if (!o.hyps_path.empty() && beam == o.beams.back()) {
        std::string all;
        for (const auto& h : te.hypotheses) all += h + "\n";
        write_file_atomic(o.hyps_path, all);
      }
    }
    out["bleu"] = bleu;
  }
  ctx.err << line << "\n";
  ctx.out << out.dump(2) << "\n";
}

}  // namespace

void register_eval(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<EvalCliOptions>();
  auto* sub = app.add_subcommand("eval", "Evaluate a checkpoint: loss, accuracy/F1/MCC, perplexity or BLEU");
  sub->add_option("checkpoint", o->checkpoint, "checkpoint directory")->required();
  add_data_options(sub, o->data);
  sub->add_option("--precision", o->precision, "fp32, bf16 or int8 (dynamic int8 linear layers)")
      ->capture_default_str();
  sub->add_option("--beam", o->beams, "beam sizes for translation BLEU (1 = greedy)")->capture_default_str();
  sub->add_option("--length-penalty", o->length_penalty, "beam score / length^penalty")->capture_default_str();
  sub->add_option("--hyps", o->hyps_path, "write the translations of the last beam size to this file");
  sub->add_flag("--unigram-baseline", o->unigram_baseline, "LM: also report a unigram model's perplexity");
  sub->callback([&ctx, o] {
    apply_globals(ctx);
    run_eval(*o, ctx);
  });
}

}  // namespace hp::cli
