// `headprune prune CHECKPOINT`: score -> plan -> apply (mask or remove) -> optional recovery
// fine-tuning -> evaluate -> save, with a before/after summary.
// `headprune curve CHECKPOINT`: the metric against the fraction of heads pruned, for several
// strategies in one run, optionally with recovery fine-tuning at every point (JSON + CSV).
#include <filesystem>
#include <iomanip>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app.h"
#include "common.h"
#include "headprune/io/files.h"
#include "headprune/prune/pruning.h"
#include "headprune/train/run_config.h"

namespace hp::cli {
namespace {

struct PruneCliOptions {
  std::string checkpoint, out_dir, strategy = "score", method = "gradient", target, layer_strategy = "uniform", heads,
                          layers, plan_file, metric, hf_type;
  bool per_layer = false, mask_only = false;
  int64_t min_per_layer = 0, beam = 1;
  double step = 0.1;
  std::optional<double> min_ratio;
  DataArgs data;
  FinetuneArgs ft;
};

PruningPlan build_plan(const PruneCliOptions& o, LoadedModel& lm, const EvalSet& set, const ScoreOptions& so,
                       const MetricOptions& mo, Metric metric, Context& ctx) {
  const ModelConfig& cfg = lm.model->config();
  if (o.strategy == "plan") {
    if (o.plan_file.empty()) throw std::invalid_argument("--strategy plan needs --plan FILE");
    return read_plan(o.plan_file);
  }
  if (o.strategy == "manual") {
    if (o.heads.empty()) throw std::invalid_argument("--strategy manual needs --heads");
    std::optional<AttnType> t;
    if (!o.hf_type.empty()) t = parse_attn_type(o.hf_type);
    return plan_manual(o.heads, cfg, t);
  }
  if (o.strategy == "layers") {
    if (o.layers.empty()) throw std::invalid_argument("--strategy layers needs --layers TYPE:LAYER[,...]");
    std::vector<std::pair<AttnType, int64_t>> ls;
    std::stringstream in(o.layers);
    std::string item;
    while (std::getline(in, item, ',')) {
      const auto c = item.rfind(':');
      if (c == std::string::npos) throw std::invalid_argument("--layers: '" + item + "' is not TYPE:LAYER");
      try {
        ls.push_back({parse_attn_type(item.substr(0, c)), std::stoll(item.substr(c + 1))});
      } catch (const std::logic_error& e) {
        throw std::invalid_argument("--layers: '" + item + "' is not TYPE:LAYER (" + e.what() + ")");
      }
    }
    return plan_layers(cfg, ls);
  }
  if (o.target.empty()) throw std::invalid_argument("--strategy " + o.strategy + " needs --target (0.3, 30% or a count)");
  const PruneTarget target = parse_target(o.target);
  const auto masked = lm.model->masked_heads();
  if (o.strategy == "random") {
    RandomPlanOptions ro;
    ro.target = target;
    ro.layers = parse_layer_strategy(o.layer_strategy);
    ro.seed = ctx.seed;
    ro.exclude = masked;
    return plan_random(cfg, ro);
  }
  if (o.strategy == "iterative") {
    if (!target.fraction) throw std::invalid_argument("--strategy iterative: --target must be a fraction");
    IterativeOptions io;
    io.step = o.step;
    io.target = *target.fraction;
    io.min_metric_ratio = o.min_ratio;
    io.min_per_layer = o.min_per_layer;
    io.method = parse_score_method(o.method);
    io.score = so;
    io.metric = metric;
    io.measure = mo;
    io.on_step = [&ctx](const PrunePoint& p) {
      ctx.err << "[prune] iterative: " << p.n_pruned << " heads pruned, metric " << p.metric << "\n";
    };
    return prune_iteratively(*lm.model, set, set, io).plan;
  }
  if (o.strategy != "score")
    throw std::invalid_argument("unknown --strategy '" + o.strategy +
                                "' (expected score, iterative, random, layers, manual or plan)");
  ScorePlanOptions po;
  po.target = target;
  po.per_layer = o.per_layer;
  po.min_per_layer = o.min_per_layer;
  po.exclude = masked;
  const HeadScores s = score_heads(*lm.model, set, parse_score_method(o.method), so);
  return plan_by_score(s, cfg, po);
}

void run_prune(const PruneCliOptions& o, Context& ctx) {
  LoadedModel lm = open_model(o.checkpoint);
  if (o.out_dir.empty()) throw std::invalid_argument("--out is required");
  const Metric metric = o.metric.empty() ? default_metric(lm.model->config().arch) : parse_metric(o.metric);
  const EvalSet set = load_data(o.data, lm, ctx.seed);
  ScoreOptions so;
  so.seed = ctx.seed;
  so.metric = metric;
  so.decode.beam_size = o.beam;
  PhaseProgress progress;
  so.progress = progress.callback();
  MetricOptions mo;
  mo.decode.beam_size = o.beam;

  PruningPlan plan = build_plan(o, lm, set, so, mo, metric, ctx);
  validate_plan(plan, lm.model->config());
  auto& model = *lm.model;
  model.eval();
  StageTable table{metric, set, mo, {}};
  auto record = [&](const std::string& stage, TransformerImpl& m) { table.record(stage, m); };
  record("before", model);
  apply_plan_mask(model, plan);
  record("masked", model);
  Transformer result{nullptr};
  if (o.mask_only) {
    result = Transformer(lm.model);
  } else {
    result = apply_plan_remove(model, plan);  // other masked heads keep their gate
    record("removed", *result);
  }
  make_directories(o.out_dir);
  nlohmann::json compensation_table;
  const auto extras = tokenizer_extras(o.checkpoint);  // the tokenizer travels with the pruned model
  if (o.ft.steps > 0) {
    auto [td, to] = finetune_setup(o.data, o.ft, lm, ctx.seed);
    to.max_steps = o.ft.steps;
    to.eval_every = o.ft.steps;
    to.save_every = o.ft.steps;
    // Budhraja et al.: how the kept heads' importance shifts with fine-tuning (unnormalized
    // gradient importance before and after, on the evaluation data).
    ScoreOptions raw = so;
    raw.normalize = Normalization::None;
    raw.progress = nullptr;
    const HeadScores before = score_heads(*result, set, ScoreMethod::Gradient, raw);
    train_model(result, td, to, o.out_dir + "/finetune", extras);
    result->eval();
    record("fine-tuned", *result);
    compensation_table = compensation(before, score_heads(*result, set, ScoreMethod::Gradient, raw));
  }
  save_checkpoint(o.out_dir + "/model", *result, extras);
  save_plan(o.out_dir + "/plan.json", plan);

  ctx.err << "[prune] " << plan.strategy << ": " << plan.heads.size() << " heads\n";
  table.print(ctx.out);
  if (!compensation_table.is_null()) {
    ctx.out << "compensation (gradient importance of the kept heads, before -> after fine-tuning):\n";
    for (const auto& l : compensation_table["layers"])
      ctx.out << "  " << std::left << std::setw(13) << l["attn_type"].get<std::string>() << std::right << " L"
              << l["layer"].get<int64_t>() << "  kept " << l["kept_heads"].get<int64_t>() << "  mean "
              << fmt(l["mean_before"].get<double>()) << " -> " << fmt(l["mean_after"].get<double>()) << "  x"
              << fmt(l["ratio"].get<double>(), 2) << "\n";
    ctx.out << "  all kept heads: x" << fmt(compensation_table["total_ratio"].get<double>(), 2)
            << ", Spearman before/after " << fmt(compensation_table["spearman"].get<double>(), 3) << "\n";
  }
  const uint64_t before_bytes = dir_bytes(o.checkpoint), after_bytes = dir_bytes(o.out_dir + "/model");
  ctx.out << "checkpoint " << before_bytes << " -> " << after_bytes << " bytes; saved " << o.out_dir << "/model and "
          << o.out_dir << "/plan.json\n";
  nlohmann::json summary = {{"checkpoint", o.checkpoint}, {"metric", to_string(metric)}, {"data", set.name},
                            {"plan", plan.to_json()},     {"stages", table.to_json()},                {"bytes_before", before_bytes},
                            {"bytes_after", after_bytes}, {"mask_only", o.mask_only}};
  if (!compensation_table.is_null()) summary["compensation"] = compensation_table;
  write_file_atomic(o.out_dir + "/summary.json", summary.dump(2) + "\n");
}

struct CurveCliOptions {
  std::string checkpoint, out_dir, metric;
  std::vector<std::string> strategies = {"gradient", "iterative:gradient", "random:uniform"};
  std::vector<double> fractions = {0, .1, .2, .3, .4, .5, .6, .7, .8, .9};
  int64_t min_per_layer = 0, beam = 1;
  DataArgs data;
  FinetuneArgs ft;
};

void run_curve(const CurveCliOptions& o, Context& ctx) {
  LoadedModel lm = open_model(o.checkpoint);
  const Metric metric = o.metric.empty() ? default_metric(lm.model->config().arch) : parse_metric(o.metric);
  const EvalSet set = load_data(o.data, lm, ctx.seed);
  CurveOptions co;
  co.fractions = o.fractions;
  for (const auto& s : o.strategies) {
    auto st = parse_curve_strategy(s);
    st.seed = ctx.seed;
    co.strategies.push_back(st);
  }
  co.metric = metric;
  co.measure.decode.beam_size = o.beam;
  co.score.seed = ctx.seed;
  co.score.metric = metric;
  co.min_per_layer = o.min_per_layer;
  TrainData td;
  if (o.ft.steps > 0) {
    auto [d, to] = finetune_setup(o.data, o.ft, lm, ctx.seed);
    td = std::move(d);
    co.finetune = to;
    co.finetune_steps = o.ft.steps;
    co.train = &td;
    co.work_dir = o.out_dir.empty() ? std::filesystem::temp_directory_path().string() + "/headprune-curve" : o.out_dir;
  }
  const size_t total = co.strategies.size() * o.fractions.size();
  size_t done = 0;
  co.on_point = [&](const PrunePoint& p) {
    ctx.err << "[curve] " << ++done << "/" << total << " " << p.strategy << " " << fmt(p.fraction, 2) << ": "
            << to_string(metric) << " " << fmt(p.metric)
            << (p.metric_finetuned ? " -> fine-tuned " + fmt(*p.metric_finetuned) : std::string()) << "\n";
  };
  co.on_skip = [&](const std::string& why) { ctx.err << "[curve] skipped: " << why << "\n"; };
  lm.model->eval();
  const auto points = pruning_curve(*lm.model, set, set, co);

  nlohmann::json jp = nlohmann::json::array();
  std::ostringstream csv;
  csv << "strategy,fraction,n_pruned,metric,loss,metric_finetuned,loss_finetuned\n";
  ctx.out << std::left << std::setw(28) << "strategy" << std::right << std::setw(9) << "fraction" << std::setw(8)
          << "pruned" << std::setw(12) << to_string(metric) << std::setw(14) << "fine-tuned" << "\n";
  for (const auto& p : points) {
    nlohmann::json hs = nlohmann::json::array();
    for (const auto& h : p.pruned) hs.push_back(to_string(h));
    nlohmann::json j = {{"strategy", p.strategy}, {"fraction", p.fraction}, {"n_pruned", p.n_pruned},
                        {"metric", p.metric},     {"loss", p.loss},         {"pruned", hs}};
    if (p.metric_finetuned) {
      j["metric_finetuned"] = *p.metric_finetuned;
      j["loss_finetuned"] = *p.loss_finetuned;
    }
    jp.push_back(j);
    csv << p.strategy << "," << p.fraction << "," << p.n_pruned << "," << std::setprecision(10) << p.metric << ","
        << p.loss << "," << (p.metric_finetuned ? std::to_string(*p.metric_finetuned) : "") << ","
        << (p.loss_finetuned ? std::to_string(*p.loss_finetuned) : "") << "\n";
    ctx.out << std::left << std::setw(28) << p.strategy << std::right << std::setw(9) << fmt(p.fraction, 3)
            << std::setw(8) << p.n_pruned << std::setw(12) << fmt(p.metric) << std::setw(14)
            << (p.metric_finetuned ? fmt(*p.metric_finetuned) : "-") << "\n";
  }
  if (!o.out_dir.empty()) {
    make_directories(o.out_dir);
    nlohmann::json out = {{"checkpoint", o.checkpoint}, {"metric", to_string(metric)},  {"data", set.name},
                          {"finetune_steps", o.ft.steps}, {"min_per_layer", o.min_per_layer}, {"points", jp}};
    write_file_atomic(o.out_dir + "/curve.json", out.dump(2) + "\n");
    write_file_atomic(o.out_dir + "/curve.csv", csv.str());
    ctx.err << "[curve] wrote " << o.out_dir << "/curve.json and curve.csv\n";
  }
}

}  // namespace

void register_prune(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<PruneCliOptions>();
  auto* sub = app.add_subcommand("prune", "Prune heads: score, plan, mask or remove, fine-tune, evaluate, save");
  sub->add_option("checkpoint", o->checkpoint, "checkpoint directory")->required();
  sub->add_option("--strategy", o->strategy, "score, iterative, random, layers, manual or plan")->capture_default_str();
  sub->add_option("--method", o->method, "scoring method for score and iterative")->capture_default_str();
  sub->add_option("--target", o->target, "how many heads: a fraction (0.3 or 30%) or a count (12)");
  sub->add_flag("--per-layer", o->per_layer, "score: the target fraction of every layer instead of globally");
  sub->add_option("--min-per-layer", o->min_per_layer, "keep at least this many heads in every layer")
      ->capture_default_str();
  sub->add_option("--layer-strategy", o->layer_strategy, "random: uniform, avoid_middle, avoid_consecutive, top, bottom")
      ->capture_default_str();
  sub->add_option("--step", o->step, "iterative: fraction of the heads pruned per step")->capture_default_str();
  sub->add_option("--min-ratio", o->min_ratio, "iterative: stop before the metric falls below this fraction of the start");
  sub->add_option("--heads", o->heads, "manual: TYPE:LAYER:HEAD,... or HF's {\"layer\": [heads]} JSON");
  sub->add_option("--hf-type", o->hf_type, "manual, HF form: the attention type its layers refer to");
  sub->add_option("--layers", o->layers, "layers: TYPE:LAYER,... whole attention layers");
  sub->add_option("--plan", o->plan_file, "plan: a plan JSON (from an earlier prune's plan.json)");
  sub->add_flag("--mask-only", o->mask_only, "save the model with gates at 0 instead of removing the heads");
  sub->add_option("--metric", o->metric, "accuracy, bleu, perplexity or loss (default: the task's)");
  sub->add_option("--beam", o->beam, "beam size for BLEU")->capture_default_str();
  sub->add_option("--out", o->out_dir, "output directory: model/, plan.json, summary.json")->required();
  add_data_options(sub, o->data);
  add_finetune_options(sub, o->ft);
  sub->callback([&ctx, o] {
    apply_globals(ctx);
    run_prune(*o, ctx);
  });

  auto c = std::make_shared<CurveCliOptions>();
  auto* cs = app.add_subcommand("curve", "Metric vs. fraction of heads pruned, for several strategies");
  cs->add_option("checkpoint", c->checkpoint, "checkpoint directory")->required();
  cs->add_option("--strategy", c->strategies,
                 "METHOD[:per_layer], iterative[:METHOD], random[:uniform|avoid_middle|avoid_consecutive|top|bottom]; "
                 "append @TYPE[+TYPE] to prune only those attention types (repeat for several)")
      ->capture_default_str();
  cs->add_option("--fractions", c->fractions, "fractions of heads pruned")->capture_default_str();
  cs->add_option("--min-per-layer", c->min_per_layer, "score and iterative: keep this many heads per layer")
      ->capture_default_str();
  cs->add_option("--metric", c->metric, "accuracy, bleu, perplexity or loss (default: the task's)");
  cs->add_option("--beam", c->beam, "beam size for BLEU")->capture_default_str();
  cs->add_option("--out", c->out_dir, "write curve.json and curve.csv here");
  add_data_options(cs, c->data);
  add_finetune_options(cs, c->ft);
  cs->callback([&ctx, c] {
    apply_globals(ctx);
    run_curve(*c, ctx);
  });
}

}  // namespace hp::cli
