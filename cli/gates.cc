// `headprune gates CHECKPOINT`: train learned head gates (Hard Concrete L0, PASS, PASSCONC)
// jointly with the model to a head budget, fix them to 0/1, remove the closed heads physically,
// optionally fine-tune with the gates fixed, and report heads kept per attention type, emptied
// layers and the metric at every stage. Writes OUT/model, plan.json, gates.json (result, options,
// per-period log) and gates_log.csv (step, head, P(open), log alpha) for plots.
#include <chrono>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app.h"
#include "common.h"
#include "headprune/io/files.h"
#include "headprune/prune/gates.h"
#include "headprune/prune/pruning.h"
#include "headprune/util/log.h"
#include "headprune/util/progress.h"

namespace hp::cli {
namespace {

struct GatesCliOptions {
  std::string checkpoint, out_dir, method = "passconc", target, metric, concentrator = "adaptive",
                                                                         hc_target = "controller";
  bool from_scratch = false;
  int64_t steps = 1000, beam = 1;
  double lr = 0;
  GateOptions gate;
  DataArgs data;
  FinetuneArgs ft;
};

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

void run_gates(GatesCliOptions o, Context& ctx) {
  LoadedModel lm = open_model(o.checkpoint);
  o.gate.method = parse_gate_method(o.method);
  o.gate.hc_target = parse_hc_target(o.hc_target);
  o.gate.concentrator_adaptive = o.concentrator == "adaptive";
  if (!o.gate.concentrator_adaptive) {
    try {
      size_t used = 0;
      o.gate.concentrator_weight = std::stod(o.concentrator, &used);
      if (used != o.concentrator.size()) throw std::invalid_argument("trailing characters");
    } catch (const std::exception&) {
      throw std::invalid_argument("--concentrator: expected 'adaptive' or a number, got '" + o.concentrator + "'");
    }
  }
  if (const auto masked = lm.model->masked_heads(); !masked.empty()) {
    // Masked heads are removed first, so that every gate belongs to a live head.
    PruningPlan p;
    p.heads = masked;
    lm.model = apply_plan_remove(*lm.model, p);
    ctx.err << "[gates] removed " << masked.size() << " masked heads first\n";
  }
  const ModelConfig cfg = lm.model->config();
  const int64_t n_heads = static_cast<int64_t>(kept_heads(cfg).size());
  if (!o.target.empty()) o.gate.target_kept = n_heads - parse_target(o.target).resolve(n_heads, "--target");
  o.gate.validate(n_heads);
  const Metric metric = o.metric.empty() ? default_metric(cfg.arch) : parse_metric(o.metric);
  const EvalSet set = load_data(o.data, lm, ctx.seed);
  MetricOptions mo;
  mo.decode.beam_size = o.beam;
  StageTable table{metric, set, mo, {}};
  const auto extras = tokenizer_extras(o.checkpoint);

  // One training set serves the gate training and the fine-tuning after it.
  const TrainData td = finetune_data(o.data, o.ft, lm, ctx.seed);
  FinetuneArgs train_args = o.ft;
  train_args.steps = o.steps;
  train_args.lr = o.lr;
  TrainOptions to = finetune_options(o.data, train_args, lm, ctx.seed);
  to.max_steps = o.steps;
  to.eval_every = o.steps + o.gate.max_extra_steps;
  if (o.from_scratch) {
    // Voita's second setting: the same architecture, trained with gates from a fresh init, with the
    // run config's warm-up as in ordinary training.
    to.warmup_steps = run_train_options(o.data, lm).warmup_steps;
    torch::manual_seed(ctx.seed);
    lm.model = Transformer(cfg);
  } else {
    lm.model->eval();
    table.record("before", *lm.model);
  }
  make_directories(o.out_dir);
  ctx.err << "[gates] " << to_string(o.gate.method) << " on " << n_heads << " heads"
          << (o.gate.target_kept ? ", target " + std::to_string(*o.gate.target_kept) + " kept" : std::string()) << "; "
          << o.steps << " steps" << (o.from_scratch ? " from scratch" : "") << "\n";
  ProgressBar bar("gates", to.max_steps + o.gate.max_extra_steps, "step");
  std::string last_state;
  const auto t0 = std::chrono::steady_clock::now();
  auto res = train_gates(
      lm.model, td, to, o.gate, o.out_dir + "/train",
      [&](const GateProgress& p) {
        std::ostringstream line;
        line << "step " << p.step << " | expected open " << fmt(p.expected_open, 1) << "/" << p.n_heads << " | closed "
             << p.closed << (o.gate.target_kept ? " (target " + std::to_string(p.n_heads - *o.gate.target_kept) + ")"
                                                : std::string())
             << " | coef " << p.coef;
        if (o.gate.method == GateMethod::PassConc) line << " | concentrator " << p.conc_coef;
        last_state = "open " + fmt(p.expected_open, 1) + " closed " + std::to_string(p.closed);
        log_info("gates", line.str());
      },
      [&](const TrainProgress& p) { bar.update(p.step, "loss " + fmt(p.loss, 4) + " " + last_state); });
  bar.finish();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  PruningPlan plan;
  plan.heads = res.closed;
  plan.strategy = "gates:" + to_string(o.gate.method);
  plan.info = res.to_json();
  auto& model = *lm.model;
  model.eval();
  apply_plan_mask(model, plan);
  table.record("masked", model);
  Transformer result = apply_plan_remove(model, plan);
  table.record("removed", *result);
  if (o.ft.steps > 0) {
    TrainOptions fto = finetune_options(o.data, o.ft, lm, ctx.seed);
    fto.max_steps = o.ft.steps;
    fto.eval_every = o.ft.steps;
    fto.save_every = o.ft.steps;
    train_model(result, td, fto, o.out_dir + "/finetune", extras);
    result->eval();
    table.record("fine-tuned", *result);
  }
  save_checkpoint(o.out_dir + "/model", *result, extras);
  save_plan(o.out_dir + "/plan.json", plan);

  std::ostringstream csv;
  csv << "step,head,p_open,log_alpha\n";
  nlohmann::json head_names = nlohmann::json::array();
  for (const auto& h : res.heads) head_names.push_back(to_string(h));
  for (const auto& r : res.log)
    for (size_t i = 0; i < head_names.size(); ++i)
      csv << r.at("step").get<int64_t>() << "," << head_names[i].get<std::string>() << ","
          << r.at("p_open")[i].get<double>() << "," << r.at("log_alpha")[i].get<double>() << "\n";
  nlohmann::json jempty = nlohmann::json::array();
  for (const auto& [t, l] : res.emptied) jempty.push_back(to_string(t) + ":" + std::to_string(l));
  nlohmann::json gates_json = {{"checkpoint", o.checkpoint}, {"from_scratch", o.from_scratch},
                               {"options", o.gate.to_json()}, {"train_steps", o.steps},
                               {"result", res.to_json()},     {"emptied_layers", jempty},
                               {"heads", head_names},         {"wall_s", wall},
                               {"metric", to_string(metric)}, {"data", set.name},
                               {"stages", table.to_json()},   {"log", res.log}};
  write_file_atomic(o.out_dir + "/gates.json", gates_json.dump(1) + "\n");
  write_file_atomic(o.out_dir + "/gates_log.csv", csv.str());

  table.print(ctx.out);
  ctx.out << "kept " << res.kept.size() << "/" << n_heads << " heads (" << kept_by_type(cfg, res.kept) << ")"
          << (o.gate.target_kept ? ", target " + std::to_string(*o.gate.target_kept) : std::string()) << "; "
          << res.emptied.size() << " attention layers emptied; " << res.steps << " steps, " << fmt(wall, 1) << " s\n";
  ctx.out << "saved " << o.out_dir << "/model, plan.json, gates.json, gates_log.csv\n";
  if (!res.reached_target)
    throw std::runtime_error("gates: kept " + std::to_string(res.kept.size()) + " heads, not the target " +
                             std::to_string(*o.gate.target_kept) +
                             " (results saved; train longer, allow --extra-steps or raise --coef)");
}

}  // namespace

void register_gates(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<GatesCliOptions>();
  auto* sub = app.add_subcommand("gates", "Learn which heads to keep with Hard Concrete, PASS or PASSCONC gates");
  sub->add_option("checkpoint", o->checkpoint, "checkpoint directory")->required();
  sub->add_option("--method", o->method, "hard_concrete, pass or passconc")->capture_default_str();
  sub->add_option("--target", o->target,
                  "heads to prune: a fraction (0.5 or 50%) or a count; required by pass and passconc");
  sub->add_option("--steps", o->steps, "training steps with gates")->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--lr", o->lr, "model learning rate (default: the run config's)");
  sub->add_flag("--from-scratch", o->from_scratch, "train the checkpoint's architecture with gates from a fresh init");
  sub->add_option("--coef,--lambda", o->gate.coef, "L0 weight (hard_concrete) or PASS's starting coefficient")
      ->capture_default_str();
  sub->add_option("--hc-target", o->hc_target,
                  "hard_concrete with --target: 'controller' (Voita's penalty; lambda searched each period, gates "
                  "rolled back when too many closed) or 'quadratic' (pull the expected open count to the target)")
      ->capture_default_str();
  sub->add_option("--coef-growth", o->gate.coef_growth, "coefficient factor per period while off target")
      ->capture_default_str();
  sub->add_option("--concentrator", o->concentrator,
                  "passconc: 'adaptive' (re-set every period so a nearly empty layer's last heads close) or a "
                  "fixed weight relative to the PASS coefficient")
      ->capture_default_str();
  sub->add_option("--concentrator-margin", o->gate.concentrator_margin,
                  "adaptive concentrator: how many times the pull to close must exceed the P(g=1) term's pull")
      ->capture_default_str();
  sub->add_option("--concentrator-max", o->gate.concentrator_max, "adaptive concentrator: upper bound of its weight")
      ->capture_default_str();
  sub->add_option("--concentrator-until", o->gate.concentrator_until,
                  "adaptive concentrator: fraction of --steps after which it is off")
      ->capture_default_str();
  sub->add_option("--temperature", o->gate.dist.beta, "Hard Concrete temperature beta")->capture_default_str();
  sub->add_option("--period", o->gate.period, "steps between checks, coefficient updates and log lines")
      ->capture_default_str();
  sub->add_option("--clip", o->gate.clip, "pass/passconc: clip log alpha to [-clip, clip] (0 = off)")
      ->capture_default_str();
  sub->add_option("--reopen", o->gate.reopen, "pass/passconc: reopen closed gates by confidence")->capture_default_str();
  sub->add_option("--reopen-decay", o->gate.reopen_decay, "reopening probability factor per period")
      ->capture_default_str();
  sub->add_option("--gate-lr", o->gate.gate_lr, "Adam learning rate of log alpha")->capture_default_str();
  sub->add_option("--init-log-alpha", o->gate.init_log_alpha, "starting log alpha of every gate")->capture_default_str();
  sub->add_option("--extra-steps", o->gate.max_extra_steps,
                  "train up to this many more steps, a period at a time, until the head count is exact")
      ->capture_default_str();
  sub->add_option("--metric", o->metric, "accuracy, bleu, perplexity or loss (default: the task's)");
  sub->add_option("--beam", o->beam, "beam size for BLEU")->capture_default_str();
  sub->add_option("--out", o->out_dir, "output directory")->required();
  add_data_options(sub, o->data);
  add_finetune_options(sub, o->ft);
  sub->callback([&ctx, o] {
    apply_globals(ctx);
    run_gates(*o, ctx);
  });
}

}  // namespace hp::cli
