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

nlohmann::json run_demo(const DemoOptions& opts, const Runtime& rt, std::ostream& out, const JobEvents& events) {
  const auto t0 = std::chrono::steady_clock::now();
  // --json inside OUT is written into the staged output (a file directly in it); elsewhere it is an
  // output of its own, checked before any work.
  std::string json_inside;
  if (!opts.json_path.empty() && path_within(opts.json_path, opts.out_dir)) {
    const std::string r = resolved_path(opts.json_path), o = resolved_path(opts.out_dir);
    json_inside = r.size() > o.size() ? r.substr(o.size() + 1) : "";
    if (json_inside.empty() || json_inside.find('/') != std::string::npos || json_inside.front() == '.')
      throw std::invalid_argument("--json " + opts.json_path + ": inside --out " + opts.out_dir +
                                  " it must name a file directly in it (e.g. " + join_path(opts.out_dir, "summary.json") + ")");
  } else if (!opts.json_path.empty()) {
    check_output_file(demo_json_output(opts.json_path));
  }
  nlohmann::json report = nlohmann::json::array();
  OutputDir::Options oo;
  oo.kind = "demo";
  oo.overwrite = opts.overwrite;
  oo.replace_own = true;  // an earlier demo's output is replaced; anything else is refused
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
