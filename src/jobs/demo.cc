// The built-in demo (see header): the same job calls as `headprune train`, `importance`, `prune` and
// `bench`, one family after another.
#include "headprune/jobs/demo.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/outputs.h"
#include "headprune/jobs/eval_job.h"
#include "headprune/jobs/importance_job.h"
#include "headprune/jobs/prune_job.h"
#include "headprune/jobs/train_job.h"

namespace hp {
namespace {

std::string per_layer_counts(const ModelConfig& c, AttnType t) {
  std::string s = "[";
  for (size_t l = 0; l < c.heads(t).size(); ++l) s += (l ? ", " : "") + std::to_string(c.heads(t)[l].size());
  return s + "]";
}

// One whole attention layer (the last of the first attention type: it will skip attention), plus the
// least important other heads up to `fraction` of all heads.
PruningPlan demo_plan(const ModelConfig& cfg, const HeadScores& importance, double fraction) {
  const AttnType first = cfg.attn_types().front();
  const int64_t empty_layer = cfg.n_layers(first) - 1;
  PruningPlan plan = plan_layers(cfg, {{first, empty_layer}});
  const auto n_drop = static_cast<size_t>(std::lround(fraction * static_cast<double>(importance.scores.size())));
  for (const auto& h : importance.ascending_importance())
    if (plan.heads.size() < n_drop && !(h.type == first && h.layer == empty_layer)) plan.heads.push_back(h);
  std::sort(plan.heads.begin(), plan.heads.end());
  plan.strategy = "demo:layer+gradient";
  plan.info = {{"emptied_layer", to_string(first) + ":" + std::to_string(empty_layer)}, {"fraction", fraction}};
  return plan;
}

}  // namespace

int64_t demo_train_steps(Arch family) {
  // The classifier and the language model learn their tasks in 300 steps; the translation model needs
  // the synthetic task's full 800 (train/run_config.cc).
  return family == Arch::EncoderDecoder ? synthetic_run_config(family).train.max_steps : 300;
}

OutputFile demo_json_output(const std::string& path) {
  OutputFile f{path, "--json", "a demo result (JSON)", nullptr};
  f.ours = [](const std::string& p) {  // {"families": [{"family", "stages", ...}], "environment", "wall_s"}
    try {
      const auto j = parse_json(read_file(p, 1 << 24), p);
      if (!j.is_object() || !j.contains("environment") || !j.contains("families") || !j["families"].is_array())
        return false;
      for (const auto& f : j["families"])
        if (!f.is_object() || !f.contains("family") || !f.contains("stages")) return false;
      return true;
    } catch (const std::exception&) {
      return false;
    }
  };
  return f;
}

namespace {

// --json inside OUT is written into the staged output (a file directly in it): its name there, or ""
// for a --json elsewhere, an output of its own, checked before any work.
std::string json_inside_output(const DemoOptions& opts) {
  if (opts.json_path.empty()) return "";
  if (!path_within(opts.json_path, opts.out_dir)) {
    check_output_file(demo_json_output(opts.json_path));
    return "";
  }
  const std::string r = resolved_path(opts.json_path), o = resolved_path(opts.out_dir);
  std::string inside = r.size() > o.size() ? r.substr(o.size() + 1) : "";
  if (inside.empty() || inside.find('/') != std::string::npos || inside.front() == '.')
    throw std::invalid_argument("--json " + opts.json_path + ": inside --out " + opts.out_dir +
                                " it must name a file directly in it (e.g. " + join_path(opts.out_dir, "summary.json") + ")");
  return inside;
}

// One family's steps. `dir` is where its output is written (in the demo's staging directory);
// `final_dir` is where it will be once the demo ends, the path every message names.
class FamilyDemo {
 public:
  FamilyDemo(Arch arch, std::string dir, std::string final_dir, const DemoOptions& opts, const Runtime& rt,
             std::ostream& out, const JobEvents& events)
      : arch_(arch), dir_(std::move(dir)), final_dir_(std::move(final_dir)), opts_(opts), rt_(rt), out_(out),
        events_(events) {}
  nlohmann::json run();  // the family's record of the demo's JSON

 private:
  TrainReport train();
  PruneResult prune(const std::string& checkpoint, const ImportanceResult& importance);
  BenchReport bench(const std::string& checkpoint, const std::string& pruned_model);

  Arch arch_;
  std::string dir_, final_dir_;
  const DemoOptions& opts_;
  const Runtime& rt_;
  std::ostream& out_;
  const JobEvents& events_;
};

// 1. Train on the synthetic task.
TrainReport FamilyDemo::train() {
  TrainRequest tr;
  tr.family = arch_;
  tr.out_dir = join_path(dir_, "train");
  tr.max_steps = opts_.train_steps > 0 ? opts_.train_steps : demo_train_steps(arch_);
  tr.eval_every = tr.max_steps;
  TrainReport trained = run_train(tr, rt_, events_);
  out_ << "trained " << trained.result.steps << " steps in " << fmt(trained.wall_s, 1) << " s\n";
  return trained;
}

// 3. One whole layer plus the weakest other heads; mask, remove, fine-tune, evaluate, save.
PruneResult FamilyDemo::prune(const std::string& checkpoint, const ImportanceResult& importance) {
  const HeadScores& scores = importance.maps.front();
  PruneRequest pr;
  pr.checkpoint = checkpoint;
  pr.out_dir = join_path(dir_, "pruned");
  pr.plan.strategy = PlanStrategy::Given;
  pr.plan.given = demo_plan(importance.config, scores, opts_.prune_fraction);
  pr.finetune.steps = opts_.finetune_steps;
  PruneResult pruned = run_prune(pr, rt_, events_);
  // The prune job recorded the paths it read and wrote, in the demo's staging directory; the summary
  // names where they are once the demo's output is committed.
  const std::string summary = join_path(pr.out_dir, "summary.json");
  nlohmann::json recorded = read_json_file(summary);
  recorded["checkpoint"] = join_path(final_dir_, "train/best");
  recorded["model"] = join_path(final_dir_, "pruned/model");
  write_json_file(summary, recorded);
  const ModelConfig after = load_config(join_path(pr.out_dir, "model"));
  pruned.out_dir = join_path(final_dir_, "pruned");  // what it prints: where the model will be
  out_ << "removed " << pruned.plan.heads.size() << " of " << scores.scores.size() << " heads ("
       << pruned.plan.info["emptied_layer"].get<std::string>() << " entirely and the least important others)\n";
  for (AttnType t : importance.config.attn_types())
    out_ << "  " << std::left << std::setw(13) << to_string(t) << std::right << " heads per layer "
         << per_layer_counts(importance.config, t) << " -> " << per_layer_counts(after, t) << "\n";
  pruned.print(out_);
  return pruned;
}

// 4. Speed before and after (a batch of 64 sequences of 16 tokens).
BenchReport FamilyDemo::bench(const std::string& checkpoint, const std::string& pruned_model) {
  BenchRequest br;
  br.checkpoints = {checkpoint, pruned_model};
  br.bench.batch_sizes = {64};
  br.bench.seq_lens = {16};
  br.bench.warmup = 1;
  br.bench.reps = 7;
  BenchReport bench = run_bench(br, rt_, events_);
  const auto& before = bench.records.front();
  const auto& smaller = bench.records.back();
  out_ << "forward pass, batch 64 x 16 tokens: " << fmt(before.median_ms, 2) << " ms -> " << fmt(smaller.median_ms, 2)
       << " ms (x" << fmt(smaller.paired_speedup, 2) << " measured, x" << fmt(smaller.ideal_speedup, 2)
       << " FLOP-ideal; median of 7, noisy at this size)\n\n";
  return bench;
}

nlohmann::json FamilyDemo::run() {
  out_ << "== " << to_string(arch_) << " ==\n";
  const TrainReport trained = train();
  const std::string checkpoint = join_path(dir_, "train/best");
  // 2. Head importance from mask gradients (Michel et al.), L2-normalized per layer.
  ImportanceRequest ir;
  ir.checkpoint = checkpoint;
  const ImportanceResult importance = run_importance(ir, rt_, events_);
  importance.print(out_);
  const PruneResult pruned = prune(checkpoint, importance);
  const BenchReport speed = bench(checkpoint, join_path(dir_, "pruned/model"));
  const auto& before = speed.records.front();
  const auto& smaller = speed.records.back();
  return {{"family", to_string(arch_)},
          {"metric", to_string(pruned.stages.metric)},
          {"train_steps", trained.result.steps},
          {"train_seconds", trained.wall_s},
          {"stages", pruned.stages.to_json()},
          {"heads_removed", pruned.plan.to_json()["heads"]},
          {"checks", pruned.to_json()["checks"]},
          {"speed", {{"before_ms", before.median_ms},
                     {"after_ms", smaller.median_ms},
                     {"paired_speedup", smaller.paired_speedup},
                     {"ideal_speedup", smaller.ideal_speedup}}},
          {"checkpoint", join_path(final_dir_, "pruned/model")}};
}

}  // namespace

nlohmann::json run_demo(const DemoOptions& opts, const Runtime& rt, std::ostream& out, const JobEvents& events) {
  refuse_dtype(rt, "demo", "the demo trains its own models, in fp32");
  const auto t0 = std::chrono::steady_clock::now();
  const std::string json_inside = json_inside_output(opts);
  nlohmann::json report = nlohmann::json::array();
  OutputDir::Options oo;
  oo.kind = "demo";
  oo.overwrite = opts.overwrite;
  oo.replace_own = true;  // an earlier demo's output is replaced; anything else is refused
  OutputDir demo_dir(opts.out_dir, oo);
  for (Arch arch : opts.families) {
    const std::string dir = join_path(demo_dir.path(), to_string(arch));
    const std::string final_dir = join_path(opts.out_dir, to_string(arch));  // where it is after commit()
    report.push_back(FamilyDemo(arch, dir, final_dir, opts, rt, out, events).run());
  }
  auto env = bench_environment();
  env["device"] = rt.device.str();
  nlohmann::json result = {{"families", report},
                           {"environment", env},
                           {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
  if (!json_inside.empty()) write_json_file(join_path(demo_dir.path(), json_inside), result);
  demo_dir.commit();
  if (!opts.json_path.empty() && json_inside.empty())
    write_output_file(demo_json_output(opts.json_path), result.dump(2) + "\n");
  return result;
}

}  // namespace hp
