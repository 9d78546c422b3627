// The training jobs (see header).
#include "headprune/jobs/train_job.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "headprune/data/tasks.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/outputs.h"

namespace hp {

const OptionTable<TrainRequest>& train_request_table() {
  using T = TrainRequest;
  using R = ValueRange;
  static const OptionTable<T> t =
      OptionTable<T>()
          .text("config", "--config", "run config JSON with model, data and train sections (see configs/)", &T::config,
                false)
          .parsed("family", "--family",
                  "built-in synthetic task when no --config: encoder_classifier, decoder_lm, encoder_decoder",
                  [](T& r, const std::string& s) { r.family = parse_arch(s); }, "encoder_classifier")
          .text("data_root", "--data-root", "directory that relative data paths start from", &T::data_root)
          .yes_no("resume", "--resume", "continue OUT's run from OUT/last (an error if there is none)", &T::resume,
                  FlagStyle::Sets)
          .integer("max_steps", "--max-steps", "override the config's max_steps", &T::max_steps, R::at_least(1), false)
          .integer("keep_every", "--keep-every", "keep a model snapshot OUT/step-NNNNNN every N steps (0 = none)",
                   &T::keep_every, R::at_least(0), false)
          .integer("eval_every", "--eval-every", "override the config's eval_every", &T::eval_every, R::at_least(1),
                   false);
  return t;
}

nlohmann::json TrainReport::to_json() const {
  return {{"steps", result.steps},
          {"last_train_loss", result.last_loss},
          {"best_metric", result.best_metric},
          {"wall_s", wall_s},
          {"train_tokens_per_s", result.step_seconds > 0 ? result.step_tokens / result.step_seconds : 0.0},
          {"train_step_ms", result.steps_timed > 0 ? 1000.0 * result.step_seconds / static_cast<double>(result.steps_timed) : 0.0},
          {"best", join_path(out_dir, "best")},
          {"last", join_path(out_dir, "last")},
          {"history", result.history}};
}

TrainReport run_train(const TrainRequest& req, const Runtime& rt, const JobEvents& events) {
  if (req.out_dir.empty()) throw std::invalid_argument("train: an output directory is required (--out)");
  refuse_dtype(rt, "train", "training keeps fp32 weights; bf16 compute is the run config's train.bf16");
  // Checked before anything is read or started: a bad value is never replaced by the config's silently.
  auto refuse = [](const std::string& field, int64_t v, const std::string& range) {
    throw std::invalid_argument("train: " + field + " " + std::to_string(v) + " must be " + range);
  };
  if (req.max_steps < 0) refuse("max_steps", req.max_steps, ">= 1 (0 = the run config's)");
  if (req.eval_every < 0) refuse("eval_every", req.eval_every, ">= 1 (0 = the run config's)");
  if (req.keep_every < -1) refuse("keep_every", req.keep_every, ">= 0 (-1 = the run config's)");
  RunConfig rc = req.config.empty() ? synthetic_run_config(req.family) : read_run_config(req.config);
  TrainOptions topts = rc.train;
  topts.seed = rt.seed;
  topts.resume = req.resume;
  topts.overwrite = req.overwrite;
  std::vector<NamedPath> inputs;
  if (!req.config.empty()) {
    DataSource ds;
    ds.config = req.config;
    ds.data_root = req.data_root;
    inputs = job_inputs("", ds);
  }
  const RunDir run_dir(req.out_dir, topts, inputs);  // checked before any data is read: fails fast
  if (req.max_steps > 0) topts.max_steps = req.max_steps;
  if (req.keep_every >= 0) topts.keep_every = req.keep_every;
  if (req.eval_every > 0) topts.eval_every = req.eval_every;

  // On resume the saved vocabulary is reused, so the data is tokenized exactly as before.
  std::optional<Tokenizer> tok;
  const std::string saved_tok = join_path(req.out_dir, "last/" + std::string(kTokenizerFile));
  if (req.resume && is_file(saved_tok)) tok = Tokenizer::load(saved_tok);
  TaskData data = load_task(rc.data, rc.model, req.data_root, tok, {"train", "valid"}, rt.seed);
  ModelConfig cfg = rc.model;
  std::map<std::string, std::string> extras;
  if (data.tokenizer) {
    cfg.vocab_size = data.tokenizer->vocab_size();
    cfg.finalize();
    extras[kTokenizerFile] = data.tokenizer->serialized();
  }
  write_json_file(join_path(req.out_dir, "train_config.json"), rc.to_json(topts));
  events.say("train", std::to_string(data.train.size()) + " training and " + std::to_string(data.valid.size()) +
                          " validation examples; " + std::to_string(topts.max_steps) + " steps");
  torch::manual_seed(rt.seed);  // the initialization depends on the seed only, not on earlier jobs
  Transformer model(cfg);
  model->to(rt.device);
  TrainReport rep;
  rep.out_dir = req.out_dir;
  const auto t0 = std::chrono::steady_clock::now();
  rep.result = train_model(model, {data.train, data.valid}, topts, run_dir, extras, [&](const TrainProgress& p) {
    char extra[96];
    std::snprintf(extra, sizeof extra, "loss %.4f lr %.1e %.0f tok/s", p.loss, p.lr, p.tokens_per_s);
    events.report({"train", p.step, topts.max_steps, "step", extra});
  });
  rep.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

std::string run_init(const InitRequest& req, const Runtime& rt) {
  if (req.out_dir.empty()) throw std::invalid_argument("init: an output directory is required (--out)");
  refuse_dtype(rt, "init", "a new checkpoint is written in fp32; load it with --dtype in the job that reads it");
  OutputDir out(req.out_dir, {"checkpoint", req.overwrite, false, {{req.config, "the model config"}}});
  torch::manual_seed(rt.seed);
  Transformer model(read_model_config(req.config));
  save_checkpoint(out.path(), *model);
  out.commit();
  return "wrote " + req.out_dir + ": " + std::to_string(model->n_parameters()) + " parameters, " +
         std::to_string(model->n_active_heads()) + " heads";
}

}  // namespace hp
