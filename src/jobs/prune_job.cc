// The pruning jobs (see header).
#include "headprune/jobs/prune_job.h"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "headprune/data/dataset.h"
#include "headprune/data/model_dir.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/formats.h"
#include "headprune/io/safetensors.h"
#include "headprune/util/runtime.h"
#include "headprune/model/remove_heads.h"

namespace hp {

const OptionTable<PruneRequest>& prune_request_table() {
  static const OptionTable<PruneRequest> t = metric_option_rows<PruneRequest>().yes_no(
      "mask_only", "--mask-only", "save the model with the heads masked instead of removing them", &PruneRequest::mask_only,
      FlagStyle::Sets);
  return t;
}

const OptionTable<CurveRequest>& curve_request_table() {
  using C = CurveRequest;
  static const OptionTable<C> t =
      metric_option_rows<C>()
          .parsed_list("series", "--strategy",
                       "METHOD[:per_layer|:group|:balanced], iterative[:METHOD], "
                       "random[:uniform|avoid_middle|avoid_consecutive|top|bottom]; "
                       "append @TYPE[+TYPE] to prune only those attention types (repeat for several)",
                       [](C& c, const std::vector<std::string>& v) {
                         c.series.clear();
                         for (const auto& s : v) c.series.push_back(parse_curve_series(s));
                       },
                       "[gradient,iterative:gradient,random:uniform]")
          .integer("min_per_layer", "--min-per-layer", "score and iterative: keep this many heads per layer",
                   &C::min_per_layer, ValueRange::at_least(0));
  return t;
}

namespace {

// The files a plan specification reads (a given plan).
std::vector<NamedPath> plan_inputs(const PlanSpec& spec) {
  std::vector<NamedPath> v;
  if (!spec.plan_file.empty()) v.push_back({spec.plan_file, "--plan"});
  if (!spec.scores_file.empty()) v.push_back({spec.scores_file, "--scores"});
  return v;
}

}  // namespace

nlohmann::json PruneResult::to_json() const {
  nlohmann::json j = {{"checkpoint", checkpoint},      {"metric", to_string(stages.metric)},
                      {"data", data},                  {"score_data", score_data},
                      {"plan", plan.to_json()},
                      {"stages", stages.to_json()},    {"bytes_before", bytes_before},
                      {"bytes_after", bytes_after},    {"mask_only", mask_only}};
  if (!out_dir.empty()) j["model"] = join_path(out_dir, "model");  // what `bench` lists it as
  stamp_format(j, ResultKind::Summary);
  if (!checks.compensation.is_null()) j["compensation"] = checks.compensation;
  j["checks"] = checks.to_json();
  if (!budget.is_null()) j["budget"] = budget;
  return j;
}

void PruneResult::print(std::ostream& out) const {
  stages.print(out);
  if (const auto& compensation = checks.compensation; !compensation.is_null()) {
    out << "compensation (gradient importance of the kept heads, before -> after fine-tuning):\n";
    for (const auto& l : compensation["layers"])
      out << "  " << std::left << std::setw(13) << l["attn_type"].get<std::string>() << std::right << " L"
          << l["layer"].get<int64_t>() << "  kept " << l["kept_heads"].get<int64_t>() << "  mean "
          << fmt(l["mean_before"].get<double>()) << " -> " << fmt(l["mean_after"].get<double>()) << "  x"
          << fmt(l["ratio"].get<double>(), 2) << "\n";
    out << "  all kept heads: x" << fmt(compensation["total_ratio"].get<double>(), 2) << ", Spearman before/after "
        << fmt(compensation["spearman"].get<double>(), 3) << "\n";
  }
  checks.print(out);
  if (!budget.is_null())
    out << "budget " << budget["kind"].get<std::string>() << ": limit " << fmt(budget["limit"].get<double>(), 4) << " "
        << budget["unit"].get<std::string>() << ", predicted " << fmt(budget["predicted"].get<double>(), 4) << ", measured "
        << fmt(budget["measured"].get<double>(), 4) << " (error " << fmt(100 * budget["error"].get<double>(), 1) << " %)"
        << (budget.contains("measured_unpruned")
                ? ", unpruned " + fmt(budget["measured_unpruned"].get<double>(), 4) + " beside it (" +
                      fmt(100 * budget["drift"].get<double>(), 1) + " % from the table's); share of the unpruned model predicted " +
                      fmt(budget["predicted_share"].get<double>(), 4) + ", measured " +
                      fmt(budget["measured_share"].get<double>(), 4) + " (error " +
                      fmt(100 * budget["share_error"].get<double>(), 1) + " %)"
                : std::string())
        << (budget["met"].get<bool>() ? "; met" : "; NOT met") << "\n";
  out << "checkpoint " << bytes_before << " -> " << bytes_after << " bytes; saved " << out_dir << "/model and "
      << out_dir << "/plan.json\n";
}

const OptionTable<PlanRequest>& plan_request_table() {
  static const OptionTable<PlanRequest> t = metric_option_rows<PlanRequest>();
  return t;
}

PlanScoring plan_scoring(const ModelConfig& cfg, const std::optional<Metric>& metric, int64_t beam, const Runtime& rt,
                         const JobEvents& events) {
  PlanScoring ps;
  ps.metric = metric_or_default(metric, cfg);
  ps.score.seed = rt.seed;
  ps.score.metric = ps.metric;
  ps.score.decode.beam_size = beam;
  ps.score.progress = events.phase_callback();
  ps.measure.decode.beam_size = beam;
  return ps;
}

ScorerCost plan_scoring_cost(const PlanSpec& spec) {
  const bool scores_here = (spec.strategy == PlanStrategy::Score && spec.scores_file.empty()) ||
                           spec.strategy == PlanStrategy::Iterative;
  return scores_here ? scorer(spec.method).cost : ScorerCost::Forward;
}

PruningPlan plan_heads(TransformerImpl& model, PlanSpec spec, const EvalSet& set, PlanScoring& ps,
                       const JobEvents& events, const std::string& tag) {
  spec.seed = ps.score.seed;
  plan_scoring_memory(model, set, ps.score, plan_scoring_cost(spec), events);
  return make_plan(spec, model, set, ps.score, ps.measure, ps.metric, [&](const PrunePoint& p) {
    std::ostringstream line;
    line << "iterative: " << p.n_pruned << " heads pruned, metric " << p.metric;
    events.say(tag, line.str());
  });
}

PruningPlan run_plan(const PlanRequest& req, const Runtime& rt, const JobEvents& events) {
  JobInputs in(req.checkpoint, req.data, rt);
  PlanScoring ps = plan_scoring(in.config(), req.metric, req.beam, rt, events);
  const EvalSet no_data;  // a plan that reads none needs none (a real model then needs no --calibration)
  const EvalSet& set = plan_reads_data(req.plan) ? in.score_set() : no_data;
  return plan_heads(*in.model(), req.plan, set, ps, events, "plan");
}

PruneResult run_prune(const PruneRequest& req, const Runtime& rt, const JobEvents& events) {
  if (req.out_dir.empty()) throw std::invalid_argument("prune: an output directory is required (--out)");
  OutputDir out(req.out_dir, {"prune", req.overwrite, false, job_inputs(req.checkpoint, req.data, plan_inputs(req.plan))});
  const std::string& dir = out.path();
  JobInputs in(req.checkpoint, req.data, rt);
  PruneResult res;
  res.checkpoint = req.checkpoint;
  res.out_dir = req.out_dir;
  res.mask_only = req.mask_only;
  PlanScoring ps = plan_scoring(in.config(), req.metric, req.beam, rt, events);
  res.stages.metric = ps.metric;
  const EvalSet& set = in.eval();
  res.data = set.name;
  const EvalSet& score_set = in.score_set();
  res.score_data = score_set.name;
  res.plan = plan_heads(*in.model(), req.plan, score_set, ps, events, "prune");
  in.model()->eval();
  res.stages.record("before", *in.model(), set, ps.measure);
  PlanApplication how;
  how.mask_only = req.mask_only;
  how.finetune = req.finetune;
  how.compensation = true;
  how.score = ps.score;
  how.measure = ps.measure;
  res.checks = apply_plan(in, res.plan, dir, set, how, res.stages);
  res.bytes_before = dir_bytes(req.checkpoint);
  res.bytes_after = dir_bytes(join_path(dir, "model"));
  if (req.plan.strategy == PlanStrategy::Budget && !req.mask_only) {
    // The chosen model (as saved) beside the model it came from.
    events.say("prune", "checking the budget on the saved model");
    const LoadOptions lo = load_options(rt);
    LoadedModel unpruned = open_model(req.checkpoint, rt.device, lo), pruned = open_model(join_path(dir, "model"), rt.device, lo);
    res.budget = check_budget(*unpruned.model, *pruned.model, res.plan, req.plan.budget_shape);
  }
  write_json_file(join_path(dir, "summary.json"), res.to_json());
  out.commit();
  events.say("prune", res.plan.strategy + ": " + std::to_string(res.plan.heads.size()) + " heads");
  return res;
}

nlohmann::json CurveResult::to_json() const {
  nlohmann::json jp = nlohmann::json::array();
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
  }
  nlohmann::json j = {{"checkpoint", checkpoint},         {"metric", to_string(metric)},
                      {"data", data},                     {"score_data", score_data},
                      {"n_heads", n_heads},
                      {"finetune_steps", finetune_steps}, {"min_per_layer", min_per_layer},
                      {"points", jp}};
  stamp_format(j, ResultKind::Curve);
  return j;
}

std::string CurveResult::to_csv() const {
  std::ostringstream csv;
  csv << "strategy,fraction,n_pruned,metric,loss,metric_finetuned,loss_finetuned\n";
  for (const auto& p : points)
    csv << p.strategy << "," << p.fraction << "," << p.n_pruned << "," << std::setprecision(10) << p.metric << ","
        << p.loss << "," << (p.metric_finetuned ? std::to_string(*p.metric_finetuned) : "") << ","
        << (p.loss_finetuned ? std::to_string(*p.loss_finetuned) : "") << "\n";
  return csv.str();
}

void CurveResult::print(std::ostream& out) const {
  out << std::left << std::setw(28) << "strategy" << std::right << std::setw(9) << "fraction" << std::setw(8)
      << "pruned" << std::setw(12) << to_string(metric) << std::setw(14) << "fine-tuned" << "\n";
  for (const auto& p : points)
    out << std::left << std::setw(28) << p.strategy << std::right << std::setw(9) << fmt(p.fraction, 3) << std::setw(8)
        << p.n_pruned << std::setw(12) << fmt(p.metric) << std::setw(14)
        << (p.metric_finetuned ? fmt(*p.metric_finetuned) : "-") << "\n";
}

CurveResult run_curve(const CurveRequest& req, const Runtime& rt, const JobEvents& events) {
  std::optional<OutputDir> out;  // refused before any work (io/outputs.h)
  if (!req.out_dir.empty())
    out.emplace(req.out_dir, OutputDir::Options{"curve", req.overwrite, false, job_inputs(req.checkpoint, req.data)});
  JobInputs in(req.checkpoint, req.data, rt);
  CurveResult res;
  res.checkpoint = req.checkpoint;
  res.metric = metric_or_default(req.metric, in.config());
  res.finetune_steps = req.finetune.steps;
  res.min_per_layer = req.min_per_layer;
  const EvalSet& set = in.eval();
  res.data = set.name;
  CurveOptions co;
  co.fractions = req.fractions;
  co.series = req.series;
  for (auto& st : co.series) st.seed = rt.seed;
  co.metric = res.metric;
  co.measure.decode.beam_size = req.beam;
  co.score.seed = rt.seed;
  co.score.metric = res.metric;
  co.min_per_layer = req.min_per_layer;
  std::optional<ScratchDir> scratch;
  if (req.finetune.steps > 0) {
    co.finetune = in.finetune_options(req.finetune);
    co.finetune_steps = req.finetune.steps;
    co.train = &in.train_data();
    if (out) {
      co.work_dir = out->path();
    } else {  // a directory of this run's own, removed at the end
      scratch.emplace("curve");
      co.work_dir = scratch->path();
    }
  }
  const size_t total = co.series.size() * req.fractions.size();
  size_t done = 0;
  co.on_point = [&](const PrunePoint& p) {
    events.say("curve", std::to_string(++done) + "/" + std::to_string(total) + " " + p.strategy + " " +
                            fmt(p.fraction, 2) + ": " + to_string(res.metric) + " " + fmt(p.metric) +
                            (p.metric_finetuned ? " -> fine-tuned " + fmt(*p.metric_finetuned) : std::string()));
  };
  co.on_skip = [&](const std::string& why) { events.say("curve", "skipped: " + why); };
  in.model()->eval();
  const EvalSet& score_set = in.score_set();
  res.score_data = score_set.name;
  res.points = pruning_curve(*in.model(), score_set, set, co);
  for (AttnType t : in.config().attn_types()) res.n_heads += in.config().n_heads_kept(t);
  if (out) {
    write_json_file(join_path(out->path(), "curve.json"), res.to_json());
    write_file_atomic(join_path(out->path(), "curve.csv"), res.to_csv());
    out->commit();
    events.say("curve", "wrote " + req.out_dir + "/curve.json and curve.csv");
  }
  return res;
}

}  // namespace hp
