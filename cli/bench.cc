// `headprune bench CHECKPOINT...`: inference latency and throughput of one or several
// checkpoints side by side, over a grid of batch sizes and sequence lengths, with the FLOP-ideal
// speedup against the first checkpoint next to the measured one (table and JSON).
#include <iomanip>
#include <memory>
#include <ostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app.h"
#include "common.h"
#include "headprune/eval/benchmark.h"
#include "headprune/eval/textbook.h"
#include "headprune/model/precision.h"
#include "headprune/io/files.h"
#include "headprune/util/progress.h"

namespace hp::cli {
namespace {

struct BenchCliOptions {
  std::vector<std::string> checkpoints;
  std::vector<std::string> precisions = {"fp32"};
  bool textbook = false;
  std::string json_path;
  BenchOptions bench;
};

void run_bench(const BenchCliOptions& o, Context& ctx) {
  std::vector<Precision> precisions;
  for (const auto& p : o.precisions) precisions.push_back(parse_precision(p));
  std::vector<BenchModel> models;
  for (const auto& c : o.checkpoints) {
    for (auto p : precisions) {
      BenchModel m{c, open_model(c).model};
      m.model->eval();
      apply_precision(*m.model, p);
      m.precision = to_string(p);
      if (precisions.size() > 1) m.name += " [" + m.precision + "]";
      models.push_back(m);
    }
    if (o.textbook && c == o.checkpoints.front()) {
      // The first checkpoint again, through the plain-LibTorch forward (fp32).
      BenchModel m{"textbook nn::Linear", open_model(c).model};
      m.model->eval();
      auto tb = TextbookClassifier(*m.model);
      tb->eval();
      m.run = [tb](const Batch& b) mutable { return tb->forward(b); };
      models.push_back(m);
    }
  }
  const auto total = static_cast<int64_t>(o.bench.batch_sizes.size() * o.bench.seq_lens.size());
  ProgressBar bar("bench", total, "shape");
  const auto recs = bench_models(models, o.bench, [&](int64_t done, int64_t) { bar.update(done); });
  bar.finish();
  const auto env = bench_environment();  // after the runs: peak memory included
  ctx.out << "threads " << env["threads"] << ", " << env["blas"].get<std::string>() << ", int8 engine "
          << env["int8_engine"].get<std::string>() << ", LibTorch "
          << env["torch"].get<std::string>() << "; " << o.bench.reps << " repetitions after " << o.bench.warmup
          << " warm-up, models interleaved\n";
  ctx.out << std::left << std::setw(34) << "model" << std::right << std::setw(6) << "batch" << std::setw(5) << "seq"
          << std::setw(7) << "heads" << std::setw(11) << "median ms" << std::setw(19) << "p10-p90 ms" << std::setw(10)
          << "ex/s" << std::setw(11) << "tok/s" << std::setw(9) << "GFLOP" << std::setw(8) << "ideal" << std::setw(10)
          << "measured" << std::setw(8) << "paired" << "\n";
  nlohmann::json jr = nlohmann::json::array();
  for (const auto& r : recs) {
    std::string name = r.model.size() > 33 ? "..." + r.model.substr(r.model.size() - 30) : r.model;
    ctx.out << std::left << std::setw(34) << name << std::right << std::setw(6) << r.batch << std::setw(5) << r.seq_len
            << std::setw(7) << r.heads << std::setw(11) << fmt(r.median_ms, 2) << std::setw(19)
            << (fmt(r.p10_ms, 2) + "-" + fmt(r.p90_ms, 2)) << std::setw(10) << fmt(r.examples_per_s, 1)
            << std::setw(11) << fmt(r.tokens_per_s, 0) << std::setw(9) << fmt(r.gflops, 2) << std::setw(8)
            << ("x" + fmt(r.ideal_speedup, 2)) << std::setw(10) << ("x" + fmt(r.measured_speedup, 2))
            << std::setw(8) << ("x" + fmt(r.paired_speedup, 2)) << "\n";
    jr.push_back(r.to_json());
  }
  ctx.out << "peak resident memory " << env["peak_rss_kb"].get<int64_t>() / 1024 << " MiB (whole process)\n";
  if (!o.json_path.empty()) {
    nlohmann::json out = {{"environment", env}, {"warmup", o.bench.warmup}, {"reps", o.bench.reps},
                          {"records", jr}};
    write_file_atomic(o.json_path, out.dump(2) + "\n");
  }
}

}  // namespace

void register_bench(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<BenchCliOptions>();
  auto* sub = app.add_subcommand("bench", "Inference latency and throughput of checkpoints, side by side");
  sub->add_option("checkpoints", o->checkpoints, "checkpoint directories (speedups are against the first)")
      ->required();
  sub->add_option("--batch", o->bench.batch_sizes, "batch sizes")->capture_default_str();
  sub->add_option("--seq", o->bench.seq_lens, "sequence lengths")->capture_default_str();
  sub->add_option("--reps", o->bench.reps, "timed repetitions per model and shape")->capture_default_str();
  sub->add_option("--warmup", o->bench.warmup, "untimed repetitions first")->capture_default_str();
  sub->add_option("--precision", o->precisions,
                  "fp32, bf16 and/or int8 (dynamic int8 linear layers): each checkpoint runs in each")
      ->capture_default_str();
  sub->add_flag("--textbook", o->textbook,
                "also time the first checkpoint through a plain-LibTorch forward (torch::nn::Linear modules; "
                "unpruned BERT-style classifiers)");
  sub->add_option("--json", o->json_path, "also write the records and the environment as JSON");
  sub->callback([&ctx, o] {
    apply_globals(ctx);
    run_bench(*o, ctx);
  });
}

}  // namespace hp::cli
