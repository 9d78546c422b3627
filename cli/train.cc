// `headprune train`: train a model from a JSON config (model, data, train sections), or on
// the built-in synthetic task of --family when no config is given.
#include <chrono>
#include <filesystem>
#include <memory>
#include <ostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app.h"
#include "headprune/data/tasks.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/train/trainer.h"
#include "headprune/train/run_config.h"
#include "headprune/util/progress.h"

namespace hp::cli {
namespace {

struct TrainCliOptions {
  std::string config_path, family = "encoder_classifier", out_dir, data_root = "../shared/data";
  bool resume = false;
  int64_t max_steps = 0, eval_every = 0, keep_every = -1;
};

void run_train(const TrainCliOptions& o, Context& ctx) {
  RunConfig rc = o.config_path.empty() ? synthetic_run_config(parse_arch(o.family)) : read_run_config(o.config_path);
  TrainOptions topts = rc.train;
  topts.seed = ctx.seed;
  topts.resume = o.resume;
  if (o.max_steps > 0) topts.max_steps = o.max_steps;
  if (o.keep_every >= 0) topts.keep_every = o.keep_every;
  if (o.eval_every > 0) topts.eval_every = o.eval_every;

  // On resume the saved vocabulary is reused, so the data is tokenized exactly as before.
  std::optional<Tokenizer> tok;
  const std::string saved_tok = join_path(o.out_dir, "last/" + std::string(kTokenizerFile));
  if (o.resume && is_file(saved_tok)) tok = Tokenizer::load(saved_tok);
  TaskData data = load_task(rc.data, rc.model, o.data_root, tok, {"train", "valid"}, ctx.seed);
  ModelConfig cfg = rc.model;
  std::map<std::string, std::string> extras;
  if (data.tokenizer) {
    cfg.vocab_size = data.tokenizer->vocab_size();
    cfg.finalize();
    extras[kTokenizerFile] = data.tokenizer->serialized();
  }
  make_directories(o.out_dir);
  write_file_atomic(join_path(o.out_dir, "train_config.json"), rc.to_json(topts).dump(2) + "\n");
  ctx.err << "[train] " << data.train.size() << " training and " << data.valid.size() << " validation examples; "
          << topts.max_steps << " steps\n";
  Transformer model(cfg);
  ProgressBar bar("train", topts.max_steps, "step");
  const auto t0 = std::chrono::steady_clock::now();
  auto res = train_model(model, {data.train, data.valid}, topts, o.out_dir, extras, [&](const TrainProgress& p) {
    char extra[96];
    std::snprintf(extra, sizeof extra, "loss %.4f lr %.1e %.0f tok/s", p.loss, p.lr, p.tokens_per_s);
    bar.update(p.step, extra);
  });
  bar.finish();
  nlohmann::json out = {{"steps", res.steps},
                        {"last_train_loss", res.last_loss},
                        {"best_metric", res.best_metric},
                        {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
                        {"best", join_path(o.out_dir, "best")},
                        {"last", join_path(o.out_dir, "last")},
                        {"history", res.history}};
  ctx.out << out.dump(2) << "\n";
}

struct InitCliOptions {
  std::string config_path, out_dir;
};

// A freshly initialized checkpoint (the constructors' initialization, seeded by --seed): for speed
// studies, which need no trained weights, and as a starting point for training elsewhere.
void run_init(const InitCliOptions& o, Context& ctx) {
  Transformer model(read_model_config(o.config_path));
  save_checkpoint(o.out_dir, *model);
  ctx.out << "wrote " << o.out_dir << ": " << model->n_parameters() << " parameters, "
          << model->n_active_heads() << " heads\n";
}

}  // namespace

void register_train(CLI::App& app, Context& ctx) {
  auto io = std::make_shared<InitCliOptions>();
  auto* init = app.add_subcommand("init", "Write a randomly initialized checkpoint of a model config (speed studies)");
  init->add_option("--config", io->config_path, "model config JSON (a bare model object or a run config)")
      ->required();
  init->add_option("--out", io->out_dir, "checkpoint directory to write")->required();
  init->callback([&ctx, io] {
    apply_globals(ctx);
    run_init(*io, ctx);
  });

  auto o = std::make_shared<TrainCliOptions>();
  auto* sub = app.add_subcommand("train", "Train a model (from a JSON config, or on the built-in synthetic task)");
  sub->add_option("--config", o->config_path, "run config JSON with model, data and train sections (see configs/)");
  sub->add_option("--family", o->family, "built-in synthetic task when no --config: encoder_classifier, decoder_lm, "
                                         "encoder_decoder")->capture_default_str();
  sub->add_option("--out", o->out_dir, "output directory (best/, last/, history.json)")->required();
  sub->add_option("--data-root", o->data_root, "directory that relative data paths start from")->capture_default_str();
  sub->add_flag("--resume", o->resume, "continue from OUT/last if it exists");
  sub->add_option("--max-steps", o->max_steps, "override the config's max_steps");
  sub->add_option("--keep-every", o->keep_every, "keep a model snapshot OUT/step-NNNNNN every N steps (0 = none)");
  sub->add_option("--eval-every", o->eval_every, "override the config's eval_every");
  sub->callback([&ctx, o] {
    apply_globals(ctx);
    run_train(*o, ctx);
  });
}

}  // namespace hp::cli
