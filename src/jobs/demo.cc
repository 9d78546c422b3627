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

nlohmann::json run_demo(const DemoOptions& opts, const Runtime& rt, std::ostream& out, const JobEvents& events) {
  const auto t0 = std::chrono::steady_clock::now();
  nlohmann::json report = nlohmann::json::array();
  OutputDir::Options oo;
  oo.overwrite = opts.overwrite;
  oo.replaceable = [](const std::string& d) {  // an earlier demo's output: family directories and JSON summaries
    const auto names = arch_names().names();
    for (const auto& e : list_directory(d)) {
      const std::string& name = e.name;
      const bool family = e.is_dir && std::find(names.begin(), names.end(), name) != names.end();
      const bool summary = e.is_file && name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0;
      if (!family && !summary) return false;
    }
    return true;
  };
  OutputDir demo_dir(opts.out_dir, oo);
  for (Arch arch : opts.families) {
    const std::string dir = join_path(demo_dir.path(), to_string(arch));
    const std::string final_dir = join_path(opts.out_dir, to_string(arch));  // where it is after commit()
    out << "== " << to_string(arch) << " ==\n";

    // 1. Train on the synthetic task.
    TrainRequest tr;
    tr.family = arch;
    tr.out_dir = join_path(dir, "train");
    tr.max_steps = opts.train_steps > 0 ? opts.train_steps : demo_train_steps(arch);
    tr.eval_every = tr.max_steps;
    const TrainReport trained = run_train(tr, rt, events);
    const std::string checkpoint = join_path(tr.out_dir, "best");
    out << "trained " << trained.result.steps << " steps in " << fmt(trained.wall_s, 1) << " s\n";

    // 2. Head importance from mask gradients (Michel et al.), L2-normalized per layer.
    ImportanceRequest ir;
    ir.checkpoint = checkpoint;
    const ImportanceResult importance = run_importance(ir, rt, events);
    importance.print(out);
    const HeadScores& scores = importance.maps.front();

    // 3. One whole layer plus the weakest other heads; mask, remove, fine-tune, evaluate, save.
    PruneRequest pr;
    pr.checkpoint = checkpoint;
    pr.out_dir = join_path(dir, "pruned");
    pr.plan.strategy = PlanStrategy::Given;
    pr.plan.given = demo_plan(importance.config, scores, opts.prune_fraction);
    pr.finetune.steps = opts.finetune_steps;
    const PruneResult pruned = run_prune(pr, rt, events);
    const ModelConfig after = load_config(join_path(pr.out_dir, "model"));
    out << "removed " << pruned.plan.heads.size() << " of " << scores.scores.size() << " heads ("
        << pruned.plan.info["emptied_layer"].get<std::string>() << " entirely and the least important others)\n";
    for (AttnType t : importance.config.attn_types())
      out << "  " << std::left << std::setw(13) << to_string(t) << std::right << " heads per layer "
          << per_layer_counts(importance.config, t) << " -> " << per_layer_counts(after, t) << "\n";
    pruned.print(out);

    // 4. Speed before and after (a batch of 64 sequences of 16 tokens).
    BenchRequest br;
    br.checkpoints = {checkpoint, join_path(pr.out_dir, "model")};
    br.bench.batch_sizes = {64};
    br.bench.seq_lens = {16};
    br.bench.warmup = 1;
    br.bench.reps = 7;
    const BenchReport bench = run_bench(br, rt, events);
    const auto& before = bench.records.front();
    const auto& smaller = bench.records.back();
    out << "forward pass, batch 64 x 16 tokens: " << fmt(before.median_ms, 2) << " ms -> " << fmt(smaller.median_ms, 2)
        << " ms (x" << fmt(smaller.paired_speedup, 2) << " measured, x" << fmt(smaller.ideal_speedup, 2)
        << " FLOP-ideal; median of 7, noisy at this size)\n\n";

    report.push_back({{"family", to_string(arch)},
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
                      {"checkpoint", join_path(final_dir, "pruned/model")}});
  }
  demo_dir.commit();
  auto env = bench_environment();
  env["device"] = rt.device.str();
  return {{"families", report},
          {"environment", env},
          {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
}

}  // namespace hp
