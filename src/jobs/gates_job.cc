// The learned-gates job (see header).
#include "headprune/jobs/gates_job.h"

#include <chrono>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/outputs.h"
#include "headprune/io/formats.h"
#include "headprune/model/remove_heads.h"
#include "headprune/util/log.h"

namespace hp {

const OptionTable<GatesRequest>& gates_request_table() {
  using G = GatesRequest;
  using R = ValueRange;
  static const OptionTable<G> t =
      metric_option_rows<G>()
          .parsed("target", "--target",
                  "heads to prune: a fraction (0.5 or 50%) or a count; required by pass, passconc, dsp and cofi",
                  [](G& g, const std::string& s) { g.prune = parse_target(s); }, "")
          .integer("steps", "--steps", "training steps with gates", &G::steps, R::at_least(1))
          .real("lr", "--lr", "model learning rate (default: the run config's)", &G::lr, R::positive(), false)
          .yes_no("from_scratch", "--from-scratch", "train the checkpoint's architecture with gates from a fresh init",
                  &G::from_scratch, FlagStyle::Sets);
  return t;
}

namespace {

std::string kept_by_type(const ModelConfig& cfg, const std::vector<HeadId>& kept) {
  std::ostringstream o;
  bool first = true;
  for (auto t : cfg.attn_types()) {
    int64_t n = 0;
    for (const auto& h : kept) n += h.type == t;
    o << (first ? "" : " ") << to_string(t) << " " << n << "/" << cfg.n_heads_kept(t);
    first = false;
  }
  return o.str();
}

std::string period_line(const GatePeriod& p, const GateOptions& o) {
  std::ostringstream line;
  line << "step " << p.step << " | expected open " << fmt(p.expected_open, 1) << "/" << p.n_heads() << " | closed "
       << p.closed << (o.target_kept ? " (target " + std::to_string(p.n_heads() - *o.target_kept) + ")" : std::string())
       << (o.method == GateMethod::Dsp ? " | tau " : o.method == GateMethod::Cofi ? " | lambda1 " : " | coef ") << p.coef;
  if (o.method == GateMethod::PassConc) line << " | concentrator " << p.conc_coef;
  if (o.method == GateMethod::Cofi) line << " | lambda2 " << p.conc_coef;
  return line.str();
}

}  // namespace

nlohmann::json GatesResult::to_json() const {
  nlohmann::json head_names = nlohmann::json::array();
  for (const auto& h : gates.heads) head_names.push_back(to_string(h));
  nlohmann::json jempty = nlohmann::json::array();
  for (const auto& [t, l] : gates.emptied) jempty.push_back(to_string(t) + ":" + std::to_string(l));
  nlohmann::json j = {{"checkpoint", checkpoint},  {"from_scratch", from_scratch},
          {"options", options.to_json()}, {"train_steps", train_steps},
          {"result", gates.to_json()},  {"emptied_layers", jempty},
          {"heads", head_names},        {"wall_s", wall_s},
          {"metric", to_string(stages.metric)}, {"data", data},
          {"stages", stages.to_json()}, {"log", gates.log_json()}};
  if (!out_dir.empty()) j["model"] = join_path(out_dir, "model");  // what `bench` lists it as
  stamp_format(j, ResultKind::Gates);
  j["checks"] = checks.to_json();
  return j;
}

void GatesResult::print(std::ostream& out) const {
  stages.print(out);
  out << "kept " << gates.kept.size() << "/" << n_heads << " heads (" << kept_by_type(config, gates.kept) << ")"
      << (options.target_kept ? ", target " + std::to_string(*options.target_kept) : std::string()) << "; "
      << gates.emptied.size() << " attention layers emptied; " << gates.steps << " steps, " << fmt(wall_s, 1) << " s\n";
  checks.print(out);
  out << "saved " << out_dir << "/model, plan.json, gates.json, gates_log.csv\n";
}

namespace {
// --shape uniform removes heads in steps of whole per-layer shapes: the target becomes the most heads
// such a shape removes without passing it, said when it moved.
void lower_to_uniform_shape(GateOptions& o, const ModelConfig& cfg, int64_t n_heads, const JobEvents& events) {
  if (o.shape != PlanShape::Uniform || !o.target_kept) return;
  const int64_t asked = *o.target_kept;
  o.target_kept = uniform_heads_kept(cfg, uniform_kept_per_layer(cfg, n_heads - asked, 1));
  if (*o.target_kept != asked)
    events.say("gates", "--shape uniform: " + std::to_string(n_heads - asked) + " heads to remove is no uniform shape; " +
                            std::to_string(n_heads - *o.target_kept) + " are (every layer keeps as many)");
}
}  // namespace

GatesResult run_gates(const GatesRequest& req, const Runtime& rt, const JobEvents& events) {
  if (req.out_dir.empty()) throw std::invalid_argument("gates: an output directory is required (--out)");
  OutputDir out(req.out_dir, {"gates", req.overwrite, false, job_inputs(req.checkpoint, req.data)});
  const std::string& dir = out.path();
  JobInputs in(req.checkpoint, req.data, rt);
  GatesResult res;
  res.checkpoint = req.checkpoint;
  res.out_dir = req.out_dir;
  res.from_scratch = req.from_scratch;
  res.train_steps = req.steps;
  if (const auto masked = in.model()->masked_heads(); !masked.empty()) {
    // Masked heads are removed first, so that every gate belongs to a live head.
    in.loaded.model = remove_heads(*in.model(), masked);
    events.say("gates", "removed " + std::to_string(masked.size()) + " masked heads first");
  }
  res.config = in.config();
  const ModelConfig& cfg = res.config;
  res.n_heads = static_cast<int64_t>(kept_heads(cfg).size());
  res.options = req.gate;
  if (req.prune) res.options.target_kept = res.n_heads - req.prune->resolve(res.n_heads, "--target");
  lower_to_uniform_shape(res.options, cfg, res.n_heads, events);
  res.options.distill_temperature = req.finetune.distill_temperature;  // one temperature for both distillations
  res.options.validate(res.n_heads);
  const GateOptions& opts = res.options;
  res.stages.metric = metric_or_default(req.metric, cfg);
  const EvalSet& set = in.eval();
  res.data = set.name;
  MetricOptions mo;
  mo.decode.beam_size = req.beam;

  // One training set serves the gate training and the fine-tuning after it.
  const TrainData& td = in.train_data();
  FinetuneOptions gate_training = req.finetune;
  gate_training.steps = req.steps;
  gate_training.lr = req.lr;
  TrainOptions to = in.finetune_options(gate_training);
  // The recovery fine-tuning's distillation is apply_plan's; the gate training's own is GateOptions::distill_*.
  to.distill_weight = 0;
  to.distill_hidden_weight = 0;
  to.eval_every = req.steps + opts.max_extra_steps;
  if (req.from_scratch) {
    // Voita's second setting: the same architecture, trained with gates from a fresh init, with the
    // run config's warm-up as in ordinary training.
    to.warmup_steps = in.train_options().warmup_steps;
    torch::manual_seed(rt.seed);
    in.loaded.model = Transformer(cfg);
    in.loaded.model->to(rt.device);
  } else {
    in.model()->eval();
    res.stages.record("before", *in.model(), set, mo);
  }
  events.say("gates", to_string(opts.method) + " on " + std::to_string(res.n_heads) + " heads" +
                          (opts.target_kept ? ", target " + std::to_string(*opts.target_kept) + " kept" : std::string()) +
                          "; " + std::to_string(req.steps) + " steps" + (req.from_scratch ? " from scratch" : ""));
  std::string last_state;
  const int64_t total_steps = to.max_steps + opts.max_extra_steps;
  const auto t0 = std::chrono::steady_clock::now();
  res.gates = train_gates(
      in.model(), td, to, opts, join_path(dir, "train"),
      [&](const GatePeriod& p) {
        last_state = "open " + fmt(p.expected_open, 1) + " closed " + std::to_string(p.closed);
        log_info("gates", period_line(p, opts));
      },
      [&](const TrainProgress& p) {
        events.report({"gates", p.step, total_steps, "step", "loss " + fmt(p.loss, 4) + " " + last_state});
      });
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  res.plan.heads = res.gates.closed;
  res.plan.strategy = "gates:" + to_string(opts.method) + (opts.shape == PlanShape::Uniform ? ":uniform" : "");
  res.plan.info = res.gates.to_json();
  if (opts.shape == PlanShape::Uniform) res.plan.info["shape"] = "uniform";
  PlanApplication how;
  how.finetune = req.finetune;
  how.measure = mo;
  res.checks = apply_plan(in, res.plan, dir, set, how, res.stages);
  write_json_file(join_path(dir, "gates.json"), res.to_json(), 1);
  write_file_atomic(join_path(dir, "gates_log.csv"), res.gates.log_csv());
  out.commit();
  return res;
}

}  // namespace hp
