// `headprune importance CHECKPOINT`: score every head with one or more methods; heat maps on
// stdout (or JSON with --json), importance.json / importance.csv under --out.
// `headprune agreement A.json B.json`: Spearman and Pearson correlation between score maps.
#include <memory>
#include <ostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app.h"
#include "common.h"
#include "headprune/io/files.h"
#include "headprune/score/importance.h"

namespace hp::cli {
namespace {

struct ImportanceCliOptions {
  std::string checkpoint, out_dir, normalize = "auto", granularity = "example", metric;
  std::vector<std::string> methods = {"gradient"};
  DataArgs data;
  int64_t beam = 1, bootstrap = 1000;
  double alpha = 0.01;
  std::vector<int64_t> special_ids;  // empty: the tokenizer's eos ([SEP]), or </s> without one
  bool json = false, cost = false;
};

void run_importance(const ImportanceCliOptions& o, Context& ctx) {
  std::vector<ScoreMethod> methods;
  for (const auto& m : o.methods) methods.push_back(parse_score_method(m));
  LoadedModel lm = open_model(o.checkpoint);
  bool needs_data = false;
  for (ScoreMethod m : methods) needs_data = needs_data || uses_data(m);
  EvalSet set;
  if (needs_data) set = load_data(o.data, lm, ctx.seed);

  ScoreOptions so;
  if (o.normalize != "auto") so.normalize = parse_normalization(o.normalize);
  if (o.granularity != "example" && o.granularity != "token")
    throw std::invalid_argument("--granularity must be example or token, got '" + o.granularity + "'");
  so.granularity = o.granularity == "token" ? Granularity::Token : Granularity::Example;
  if (!o.metric.empty()) so.metric = parse_metric(o.metric);
  so.decode.beam_size = o.beam;
  so.bootstrap_samples = o.bootstrap;
  so.significance = o.alpha;
  so.special_ids = o.special_ids;
  if (so.special_ids.empty()) so.special_ids = {lm.tokenizer ? lm.tokenizer->specials().eos : Tokenizer::kEos};
  so.seed = ctx.seed;
  PhaseProgress progress;
  so.progress = progress.callback();

  std::optional<PassCost> cost;
  if (o.cost && needs_data) cost = measure_pass_cost(*lm.model, set, so);
  std::vector<HeadScores> maps;
  for (ScoreMethod m : methods) {
    HeadScores s = score_heads(*lm.model, set, m, so);
    s.info["checkpoint"] = o.checkpoint;
    if (cost && uses_data(m)) {
      const double sec = s.info["seconds"].get<double>();
      s.info["cost"] = {{"forward_s", cost->forward_s},
                        {"forward_backward_s", cost->forward_backward_s},
                        {"x_forward", sec / cost->forward_s},
                        {"x_forward_backward", sec / cost->forward_backward_s}};
    }
    ctx.err << "[importance] " << s.method << ": " << s.info["seconds"].get<double>() << " s";
    if (s.info.contains("cost"))
      ctx.err << " (" << s.info["cost"]["x_forward"].get<double>() << "x a forward pass, "
              << s.info["cost"]["x_forward_backward"].get<double>() << "x a forward+backward pass)";
    if (s.info.contains("n_significant"))
      ctx.err << "; " << s.info["n_significant"].get<int64_t>() << " of " << s.info["n_heads"].get<int64_t>()
              << " heads change " << s.info["metric"].get<std::string>() << " significantly (p < " << o.alpha << ")";
    ctx.err << "\n";
    maps.push_back(std::move(s));
  }

  nlohmann::json all = maps_to_json(maps);
  all["checkpoint"] = o.checkpoint;
  all["data"] = needs_data ? set.name : "none";
  all["config"] = lm.model->config().to_json();
  if (!o.out_dir.empty()) {
    make_directories(o.out_dir);
    write_file_atomic(join_path(o.out_dir, "importance.json"), all.dump(2) + "\n");
    write_file_atomic(join_path(o.out_dir, "importance.csv"), maps_to_csv(maps));
    ctx.err << "[importance] wrote " << join_path(o.out_dir, "importance.json") << " and importance.csv\n";
  }
  if (o.json) {
    ctx.out << all.dump(2) << "\n";
    return;
  }
  for (const auto& s : maps) {
    print_heat_map(ctx.out, s, lm.model->config());
    if (s.info.contains("per_layer")) {
      ctx.out << "  best single head per layer (" << s.info["metric"].get<std::string>() << ", base "
              << s.info["base_metric"].get<double>() << "):\n";
      for (const auto& r : s.info["per_layer"])
        ctx.out << "    " << r["attn_type"].get<std::string>() << " L" << r["layer"].get<int64_t>() << ": head "
                << r["best_head"].get<int64_t>() << " -> " << r["best_head_metric"].get<double>()
                << " (whole layer masked: " << r["layer_masked_metric"].get<double>() << ")\n";
    }
    ctx.out << "\n";
  }
}

struct AgreementCliOptions {
  std::string a, b, method;
  bool by_type = false;
};

const HeadScores& pick(const std::vector<HeadScores>& maps, const std::string& method, const std::string& file) {
  for (const auto& m : maps)
    if (m.method == method) return m;
  throw std::invalid_argument(file + " has no map for method '" + method + "'");
}

void run_agreement(const AgreementCliOptions& o, Context& ctx) {
  const auto A = read_maps(o.a), B = read_maps(o.b);
  std::vector<std::pair<const HeadScores*, const HeadScores*>> pairs;
  if (!o.method.empty()) {
    pairs.push_back({&pick(A, o.method, o.a), &pick(B, o.method, o.b)});
  } else if (A.size() == 1 && B.size() == 1) {
    pairs.push_back({&A[0], &B[0]});
  } else {
    for (const auto& m : A)
      for (const auto& n : B)
        if (m.method == n.method) pairs.push_back({&m, &n});
    if (pairs.empty()) throw std::invalid_argument(o.a + " and " + o.b + " share no scoring method");
  }
  nlohmann::json out = nlohmann::json::array();
  auto record = [&](const HeadScores& x, const HeadScores& y, const AttnType* t) {
    Agreement ag = agreement(x, y, t);
    out.push_back({{"a", x.method}, {"b", y.method}, {"attn_type", t ? to_string(*t) : "all"}, {"n_heads", ag.n},
                   {"spearman", ag.spearman}, {"pearson", ag.pearson}});
    ctx.err << "[agreement] " << x.method << " vs " << y.method << " (" << (t ? to_string(*t) : "all") << ", " << ag.n
            << " heads): spearman " << ag.spearman << ", pearson " << ag.pearson << "\n";
  };
  for (const auto& [x, y] : pairs) {
    record(*x, *y, nullptr);
    if (o.by_type)
      for (AttnType t : x->attn_types()) record(*x, *y, &t);
  }
  ctx.out << out.dump(2) << "\n";
}

}  // namespace

void register_importance(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<ImportanceCliOptions>();
  auto* sub = app.add_subcommand("importance", "Score every attention head (gradient, ablation, confidence, LRP, ...)");
  sub->add_option("checkpoint", o->checkpoint, "checkpoint directory")->required();
  sub->add_option("--method", o->methods,
                  "gradient, ablation, all_but_one, confidence, entropy, magnitude, output_norm, lrp, random "
                  "(repeat for several)")
      ->capture_default_str();
  add_data_options(sub, o->data);
  sub->add_option("--normalize", o->normalize, "auto (layer for gradient and lrp), none, layer or global")
      ->capture_default_str();
  sub->add_option("--granularity", o->granularity, "gradient: example (|dL(x)/dgate| per example) or token")
      ->capture_default_str();
  sub->add_option("--metric", o->metric, "ablation metric: accuracy, bleu, perplexity or loss (default: the task's)");
  sub->add_option("--beam", o->beam, "beam size when the ablation metric is BLEU")->capture_default_str();
  sub->add_option("--bootstrap", o->bootstrap, "paired bootstrap resamples for the significance test")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--alpha", o->alpha, "significance level")->capture_default_str();
  sub->add_option("--special-ids", o->special_ids, "confidence: key token ids excluded (default: the tokenizer's eos / [SEP])")
      ->capture_default_str();
  sub->add_option("--out", o->out_dir, "write importance.json and importance.csv here");
  sub->add_flag("--json", o->json, "print the maps as JSON instead of heat maps");
  sub->add_flag("--cost", o->cost, "also time one forward and one forward+backward pass over the data and report "
                                   "each method's cost as a multiple of them");
  sub->callback([&ctx, o] {
    apply_globals(ctx);
    run_importance(*o, ctx);
  });

  auto a = std::make_shared<AgreementCliOptions>();
  auto* ag = app.add_subcommand("agreement", "Spearman and Pearson correlation between two importance files");
  ag->add_option("a", a->a, "importance JSON (from importance --out or --json)")->required();
  ag->add_option("b", a->b, "importance JSON")->required();
  ag->add_option("--method", a->method, "compare this method's maps (default: every method both files have)");
  ag->add_flag("--by-type", a->by_type, "also per attention type");
  ag->callback([&ctx, a] {
    apply_globals(ctx);
    run_agreement(*a, ctx);
  });
}

}  // namespace hp::cli
