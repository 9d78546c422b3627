// The importance jobs (see header).
#include "headprune/jobs/importance_job.h"

#include <algorithm>
#include <map>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "headprune/io/files.h"
#include "headprune/io/outputs.h"
#include "headprune/model/memory.h"
#include "headprune/util/dist.h"
#include "headprune/util/runtime.h"
#include "headprune/util/torch_compat.h"

namespace hp {

const OptionTable<ImportanceRequest>& importance_request_table() {
  using I = ImportanceRequest;
  using R = ValueRange;
  static const OptionTable<I> t =
      metric_option_rows<I>("ablation metric: accuracy, bleu, perplexity or loss (default: the task's)",
                            "beam size when the ablation metric is BLEU")
          .parsed_list("methods", "--method", score_methods_help() + "; all for every one (repeat for several)",
                       [](I& r, const std::vector<std::string>& v) {
                         r.methods.clear();
                         for (const auto& s : v)
                           for (ScoreMethod m : parse_score_methods(s)) r.methods.push_back(m);
                       },
                       "[gradient]")
          .parsed_list("units", "--unit",
                       "head (query heads) and/or kv_group (key/value groups of grouped-query attention); repeat for both",
                       [](I& r, const std::vector<std::string>& v) {
                         r.units.clear();
                         for (const auto& s : v) r.units.push_back(parse_score_unit(s));
                       },
                       "[head]")
          .parsed("normalize", "--normalize", "auto (each scorer's own: layer for gradient, rank for all_but_one and activation, none for the rest), "
                  "none, layer, global or rank (within each layer)",
                  [](I& r, const std::string& s) {
                    r.normalize = s == "auto" ? std::optional<Normalization>() : parse_normalization(s);
                  },
                  "auto")
          .parsed("granularity", "--granularity", "gradient: example (|dL(x)/dxi| per example) or token",
                  [](I& r, const std::string& s) { r.granularity = granularity_names().parse(s); }, "example")
          .integer("bootstrap", "--bootstrap", "paired bootstrap resamples for the significance test", &I::bootstrap,
                   R::at_least(1))
          .real("alpha", "--alpha", "significance level", &I::alpha, R::between(0, 1, true, true))
          .integers("special_ids", "--special-ids",
                    "confidence: key token ids excluded (default: the tokenizer's eos / [SEP])", &I::special_ids,
                    R::at_least(0))
          .yes_no("cost", "--cost",
                  "also time one forward and one forward+backward pass over the data and report each method's cost "
                  "as a multiple of them",
                  &I::cost, FlagStyle::Sets)
          .yes_no("layerwise", "--layerwise",
                  "gradient, taylor: one layer's graph at a time (memory: the weights and one layer; chosen by itself "
                  "when the whole graph would not fit)",
                  &I::layerwise, FlagStyle::Sets)
          .yes_no("pipeline", "--pipeline",
                  "gradient, several processes (launch, torchrun): each holds a contiguous slice of the layers and "
                  "sees every batch, instead of each seeing a share of the batches",
                  &I::pipeline, FlagStyle::Sets);
  return t;
}

void ImportanceResult::print(std::ostream& out) const {
  for (const auto& s : maps) {
    print_heat_map(out, s, config);
    if (s.info.contains("per_layer")) {
      out << "  best single head per layer (" << s.info["metric"].get<std::string>() << ", base "
          << s.info["base_metric"].get<double>() << "):\n";
      for (const auto& r : s.info["per_layer"])
        out << "    " << r["attn_type"].get<std::string>() << " L" << r["layer"].get<int64_t>() << ": head "
            << r["best_head"].get<int64_t>() << " -> " << r["best_head_metric"].get<double>()
            << " (whole layer masked: " << r["layer_masked_metric"].get<double>() << ")\n";
    }
    out << "\n";
  }
}


ScoreOptions score_options(const ImportanceRequest& req, const Tokenizer* tokenizer, const Runtime& rt,
                           const JobEvents& events) {
  ScoreOptions so;
  so.normalize = req.normalize;
  so.granularity = req.granularity;
  so.metric = req.metric;
  so.decode.beam_size = req.beam;
  so.bootstrap_samples = req.bootstrap;
  so.significance = req.alpha;
  so.special_ids = req.special_ids;
  if (so.special_ids.empty()) so.special_ids = {tokenizer ? tokenizer->specials().eos : Tokenizer::kEos};
  so.seed = rt.seed;
  so.progress = events.phase_callback();
  so.layerwise = req.layerwise;
  return so;
}

namespace {

// The status line of one map: its time, its cost in passes and, with a significance test, how many
// heads change the metric significantly.
std::string map_line(const HeadScores& s, const ImportanceRequest& req) {
  const bool groups = s.unit == ScoreUnit::KvGroup;
  std::ostringstream line;
  line << s.method << (groups ? " (key/value groups)" : "") << ": " << s.info["seconds"].get<double>() << " s";
  if (s.info.contains("cost"))
    line << " (" << s.info["cost"]["x_forward"].get<double>() << "x a forward pass, "
         << s.info["cost"]["x_forward_backward"].get<double>() << "x a forward+backward pass)";
  if (s.info.contains("n_significant"))
    line << "; " << s.info["n_significant"].get<int64_t>() << " of " << s.info[groups ? "n_groups" : "n_heads"].get<int64_t>()
         << (groups ? " groups change " : " heads change ") << s.info["metric"].get<std::string>()
         << " significantly (p < " << req.alpha << ")";
  return line.str();
}

}  // namespace

std::vector<HeadScores> score_importance(LoadedModel& model, const EvalSet& set, const ImportanceRequest& req,
                                         const Runtime& rt, const JobEvents& events) {
  TransformerImpl& m = *model.model;
  ScoreOptions so = score_options(req, model.tokenizer ? &*model.tokenizer : nullptr, rt, events);
  so.pipeline = req.pipeline;
  plan_scoring_memory(m, set, so, scoring_cost(req.methods), events);
  bool needs_data = false;
  for (ScoreMethod method : req.methods) needs_data = needs_data || uses_data(method);
  std::optional<PassCost> cost;
  if (req.cost && needs_data) cost = measure_pass_cost(m, set, so);
  std::vector<std::pair<ScoreMethod, ScoreUnit>> runs;
  for (ScoreUnit u : req.units)
    for (ScoreMethod method : req.methods)
      if (u == ScoreUnit::Head || scorer(method).groups != GroupRule::None) runs.push_back({method, u});
  // Gradient of query heads and key/value groups: one pass gives both maps.
  std::map<ScoreUnit, HeadScores> shared;
  if (req.units.size() > 1 && std::count(req.methods.begin(), req.methods.end(), ScoreMethod::Gradient) > 0)
    for (auto& s : score_gradient_units(m, set, so, req.units)) shared.emplace(s.unit, std::move(s));
  std::vector<HeadScores> maps;
  for (const auto& [method, unit] : runs) {
    so.unit = unit;
    HeadScores s = method == ScoreMethod::Gradient && shared.count(unit) ? shared.at(unit) : score_heads(m, set, method, so);
    s.info["checkpoint"] = req.checkpoint;
    if (cost && uses_data(method)) {
      const double sec = s.info["seconds"].get<double>();
      s.info["cost"] = {{"forward_s", cost->forward_s},
                        {"forward_backward_s", cost->forward_backward_s},
                        {"x_forward", sec / cost->forward_s},
                        {"x_forward_backward", sec / cost->forward_backward_s}};
    }
    events.say("importance", map_line(s, req));
    maps.push_back(std::move(s));
  }
  return maps;
}

ImportanceResult run_importance(const ImportanceRequest& req, const Runtime& rt, const JobEvents& events) {
  const bool taylor = std::find(req.methods.begin(), req.methods.end(), ScoreMethod::Taylor) != req.methods.end();
  if (taylor && req.pipeline)  // before the model loads
    throw std::invalid_argument("importance: --pipeline splits the layers for the gradient scorer only, and taylor is "
                                "among the methods; score taylor with --layerwise in a run of its own");
  std::optional<OutputDir> out;  // refused before any work (io/outputs.h)
  if (!req.out_dir.empty())
    out.emplace(req.out_dir, OutputDir::Options{"importance", req.overwrite, false, job_inputs(req.checkpoint, req.data)});
  JobInputs in(req.checkpoint, req.data, rt);
  bool needs_data = false;
  for (ScoreMethod m : req.methods) needs_data = needs_data || uses_data(m);
  const EvalSet empty;
  const EvalSet& set = needs_data ? in.eval() : empty;

  ImportanceResult res;
  res.config = in.config();
  res.maps = score_importance(in.loaded, set, req, rt, events);
  res.json = maps_to_json(res.maps);
  res.json["checkpoint"] = req.checkpoint;
  res.json["dtype"] = dtype_name(in.loaded.dtype);  // as loaded (f16 on the CPU computes in fp32)
  res.json["peak_rss_bytes"] = peak_rss_bytes();
  if (const auto device = in.model()->parameters().front().device(); device.is_cuda())
    res.json["device_peak_bytes"] = compat::peak_memory_bytes(device);
  res.json["data"] = needs_data ? set.name : "none";
  res.json["config"] = res.config.to_json();
  if (out) {
    write_json_file(join_path(out->path(), "importance.json"), res.json);
    write_file_atomic(join_path(out->path(), "importance.csv"), maps_to_csv(res.maps));
    out->commit();
    events.say("importance", "wrote " + join_path(req.out_dir, "importance.json") + " and importance.csv");
  }
  return res;
}

namespace {

const HeadScores& pick(const std::vector<HeadScores>& maps, const std::string& method, const std::string& file) {
  for (const auto& m : maps)
    if (m.method == method) return m;
  throw std::invalid_argument(file + " has no map for method '" + method + "'");
}

}  // namespace

nlohmann::json run_agreement(const AgreementRequest& req, const JobEvents& events) {
  const auto A = read_maps(req.a), B = read_maps(req.b);
  std::vector<std::pair<const HeadScores*, const HeadScores*>> pairs;
  if (!req.method.empty()) {
    pairs.push_back({&pick(A, req.method, req.a), &pick(B, req.method, req.b)});
  } else if (A.size() == 1 && B.size() == 1) {
    pairs.push_back({&A[0], &B[0]});
  } else {
    for (const auto& m : A)
      for (const auto& n : B)
        if (m.method == n.method) pairs.push_back({&m, &n});
    if (pairs.empty()) throw std::invalid_argument(req.a + " and " + req.b + " share no scoring method");
  }
  nlohmann::json out = nlohmann::json::array();
  auto record = [&](const HeadScores& x, const HeadScores& y, const AttnType* t) {
    const Agreement ag = agreement(x, y, t);
    const std::string type = t ? to_string(*t) : "all";
    out.push_back({{"a", x.method}, {"b", y.method}, {"attn_type", type}, {"n_heads", ag.n},
                   {"spearman", ag.spearman}, {"pearson", ag.pearson}});
    std::ostringstream line;
    line << x.method << " vs " << y.method << " (" << type << ", " << ag.n << " heads): spearman " << ag.spearman
         << ", pearson " << ag.pearson;
    events.say("agreement", line.str());
  };
  for (const auto& [x, y] : pairs) {
    record(*x, *y, nullptr);
    if (req.by_type)
      for (AttnType t : x->attn_types()) record(*x, *y, &t);
  }
  return out;
}

}  // namespace hp
