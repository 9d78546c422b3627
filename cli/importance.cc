// `headprune importance` and `headprune agreement`: options -> requests -> jobs/importance_job.h.
#include <memory>
#include <ostream>

#include "common.h"
#include "headprune/jobs/importance_job.h"

namespace hp::cli {

void register_importance(CLI::App& app, Context& ctx) {
  auto r = std::make_shared<ImportanceRequest>();
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("importance", "Score every attention head (gradient, ablation, confidence, LRP, ...)");
  sub->add_option("checkpoint", r->checkpoint, "checkpoint directory")->required();
  add_parsed_list(sub, "--unit", r->units, parse_score_unit,
                  "head (query heads) and/or kv_group (key/value groups of grouped-query attention); repeat for both",
                  "[head]");
  sub->add_option_function<std::vector<std::string>>(
         "--method",
         [r](const std::vector<std::string>& v) {
           r->methods.clear();
           for (const auto& s : v)
             for (ScoreMethod m : parse_score_methods(s)) r->methods.push_back(m);
         },
         score_methods_help() + "; all for every one (repeat for several)")
      ->default_str("[gradient]");
  add_data_options(sub, r->data);
  add_parsed(
      sub, "--normalize", r->normalize,
      [](const std::string& s) { return s == "auto" ? std::optional<Normalization>() : parse_normalization(s); },
      "auto (layer for gradient and lrp), none, layer or global", "auto");
  add_parsed(
      sub, "--granularity", r->granularity, [](const std::string& s) { return granularity_names().parse(s); },
      "gradient: example (|dL(x)/dxi| per example) or token", "example");
  add_parsed(sub, "--metric", r->metric, parse_metric, "ablation metric: accuracy, bleu, perplexity or loss (default: the task's)");
  sub->add_option("--beam", r->beam, "beam size when the ablation metric is BLEU")->check(at_least(1))->capture_default_str();
  sub->add_option("--bootstrap", r->bootstrap, "paired bootstrap resamples for the significance test")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--alpha", r->alpha, "significance level")->check(real_range(0, 1, true, true))->capture_default_str();
  sub->add_option("--special-ids", r->special_ids, "confidence: key token ids excluded (default: the tokenizer's eos / [SEP])")
      ->check(at_least(0));
  add_out_option(sub, r->out_dir, r->overwrite, "write importance.json and importance.csv here");
  sub->add_flag("--json", *json, "print the maps as JSON instead of heat maps");
  sub->add_flag("--layerwise", r->layerwise,
                "gradient, taylor: one layer's graph at a time (memory: the weights and one layer; chosen by itself when the "
                "whole graph would not fit)");
  sub->add_flag("--pipeline", r->pipeline,
                "gradient, several processes (launch, torchrun): each holds a contiguous slice of the layers and "
                "sees every batch, instead of each seeing a share of the batches");
  sub->add_flag("--cost", r->cost, "also time one forward and one forward+backward pass over the data and report "
                                   "each method's cost as a multiple of them");
  sub->callback([&ctx, r, json] {
    const ImportanceResult res = run_importance(*r, start(ctx), stderr_events(ctx));
    if (*json) ctx.out << res.json.dump(2) << "\n";
    else res.print(ctx.out);
  });

  auto a = std::make_shared<AgreementRequest>();
  auto* ag = app.add_subcommand("agreement", "Spearman and Pearson correlation between two importance files");
  ag->add_option("a", a->a, "importance JSON (from importance --out or --json)")->required();
  ag->add_option("b", a->b, "importance JSON")->required();
  ag->add_option("--method", a->method, "compare this method's maps (default: every method both files have)");
  ag->add_flag("--by-type", a->by_type, "also per attention type");
  ag->callback([&ctx, a] {
    start(ctx);
    ctx.out << run_agreement(*a, stderr_events(ctx)).dump(2) << "\n";
  });
}

}  // namespace hp::cli
