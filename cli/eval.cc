// `headprune eval CHECKPOINT`: loss and task metrics (accuracy/F1/MCC, perplexity, BLEU with
// greedy and beam search) on a split of a run config's data, or on the synthetic task.
// JSON on stdout, one human-readable line on stderr.
#include <memory>
#include <ostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app.h"
#include "headprune/data/synthetic.h"
#include "headprune/data/tasks.h"
#include "headprune/eval/evaluate.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/train/run_config.h"
#include "headprune/util/progress.h"

namespace hp::cli {
namespace {

struct EvalCliOptions {
  std::string checkpoint, config_path, split = "valid", data_root = "../shared/data", hyps_path;
  std::vector<int64_t> beams = {1, 4};
  double length_penalty = 1.0;
  int64_t synthetic_n = 500, max_sentences = 0;
  bool unigram_baseline = false;
};

void run_eval(const EvalCliOptions& o, Context& ctx) {
  Transformer model = load_checkpoint(o.checkpoint);
  const ModelConfig& cfg = model->config();
  std::optional<Tokenizer> tok;
  const std::string tok_path = join_path(o.checkpoint, kTokenizerFile);
  if (is_file(tok_path)) tok = Tokenizer::load(tok_path);

  TaskData data;
  std::vector<Example> examples;
  std::vector<std::pair<std::string, std::string>> texts;
  nlohmann::json out = {{"checkpoint", o.checkpoint}, {"arch", to_string(cfg.arch)}};
  if (o.config_path.empty()) {
    examples = synthetic_examples(cfg, o.synthetic_n, 4, 20, ctx.seed + 2);
    out["data"] = "synthetic";
  } else {
    RunConfig rc = read_run_config(o.config_path);
    if (rc.data.value("kind", "synthetic") != "synthetic" && !tok)
      throw std::runtime_error("checkpoint '" + o.checkpoint + "' has no " + kTokenizerFile +
                               " but the data needs a vocabulary");
    std::vector<std::string> splits = {o.split};
    if (o.unigram_baseline) splits.push_back("train");
    data = load_task(rc.data, cfg, o.data_root, tok, splits, ctx.seed);
    examples = o.split == "test" ? data.test : o.split == "valid" ? data.valid : data.train;
    texts = o.split == "test" ? data.test_text : data.valid_text;
    out["data"] = o.config_path;
  }
  if (examples.empty()) throw std::runtime_error("split '" + o.split + "' has no examples in " + o.config_path);
  if (o.max_sentences > 0 && static_cast<int64_t>(examples.size()) > o.max_sentences) {
    examples.resize(o.max_sentences);
    if (!texts.empty()) texts.resize(o.max_sentences);
  }
  out["split"] = o.split;
  auto r = evaluate(*model, examples);
  out.update(r.to_json());
  std::string line = "[eval] " + std::to_string(r.n_examples) + " examples | loss " + std::to_string(r.loss);
  if (r.classification) {
    line += " | accuracy " + std::to_string(r.classification->accuracy) + " | f1 " +
            std::to_string(r.classification->f1) + " | mcc " + std::to_string(r.classification->mcc);
  } else {
    line += " | perplexity " + std::to_string(r.perplexity);
  }
  if (cfg.arch == Arch::DecoderLM && o.unigram_baseline && !data.train.empty()) {
    out["unigram_perplexity"] = unigram_perplexity(data.train, examples, cfg.vocab_size);
    line += " | unigram perplexity " + std::to_string(out["unigram_perplexity"].get<double>());
  }
  if (cfg.arch == Arch::EncoderDecoder) {
    nlohmann::json bleu = nlohmann::json::object();
    for (int64_t beam : o.beams) {
      DecodeOptions d;
      d.beam_size = beam;
      d.length_penalty = o.length_penalty;
      TranslationEval te;
      if (tok && !texts.empty()) {
        ProgressBar bar("decode beam " + std::to_string(beam), static_cast<int64_t>(texts.size()), "sent");
        te = evaluate_translation(*model, *tok, texts, d, 4096, [&](int64_t done, int64_t) { bar.update(done); });
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
  sub->add_option("--config", o->config_path, "run config whose data section to evaluate on (default: synthetic task)");
  sub->add_option("--split", o->split, "valid or test")->check(CLI::IsMember({"valid", "test"}))->capture_default_str();
  sub->add_option("--data-root", o->data_root, "directory that relative data paths start from")->capture_default_str();
  sub->add_option("--beam", o->beams, "beam sizes for translation BLEU (1 = greedy)")->capture_default_str();
  sub->add_option("--length-penalty", o->length_penalty, "beam score / length^penalty")->capture_default_str();
  sub->add_option("--synthetic", o->synthetic_n, "synthetic examples when no --config")->capture_default_str();
  sub->add_option("--max-sentences", o->max_sentences, "evaluate only the first N examples (0 = all)");
  sub->add_option("--hyps", o->hyps_path, "write the translations of the last beam size to this file");
  sub->add_flag("--unigram-baseline", o->unigram_baseline, "LM: also report a unigram model's perplexity");
  sub->callback([&ctx, o] {
    apply_globals(ctx);
    run_eval(*o, ctx);
  });
}

}  // namespace hp::cli
