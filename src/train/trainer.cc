// The training loop (see header).
#include "headprune/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/outputs.h"
#include "headprune/io/safetensors.h"
#include "headprune/model/memory.h"
#include "headprune/util/dist.h"
#include "headprune/util/log.h"
#include "headprune/util/runtime.h"
#include "headprune/util/json_fields.h"

namespace hp {
namespace fs = std::filesystem;

nlohmann::json TrainOptions::to_json() const {
  return {{"max_steps", max_steps},       {"batch_tokens", batch_tokens}, {"max_batch", max_batch},
          {"lr", lr},                     {"warmup_steps", warmup_steps}, {"schedule", to_string(schedule)},
          {"beta1", adam.beta1},          {"beta2", adam.beta2},          {"adam_eps", adam.eps},
          {"weight_decay", adam.weight_decay}, {"clip_norm", clip_norm}, {"label_smoothing", label_smoothing},
          {"eval_every", eval_every},     {"log_every", log_every},       {"save_every", save_every},
          {"keep_every", keep_every},
          {"best_metric", best_metric},   {"bf16", bf16},                 {"seed", seed}};
}

TrainOptions TrainOptions::from_json(const nlohmann::json& j) {
  const JsonFields f(j, "train options",
                     JsonStyle{"field", "is missing", JsonStyle::Nulls::Invalid, JsonStyle::Error::InvalidArgument});
  f.only({"max_steps", "batch_tokens", "max_batch", "lr", "warmup_steps", "schedule", "beta1", "beta2", "adam_eps",
          "weight_decay", "clip_norm", "label_smoothing", "eval_every", "log_every", "save_every", "keep_every",
          "best_metric", "bf16", "seed"});
  TrainOptions o;
  o.max_steps = f.opt_int("max_steps", o.max_steps);
  o.batch_tokens = f.opt_int("batch_tokens", o.batch_tokens);
  o.max_batch = f.opt_int("max_batch", o.max_batch);
  o.lr = f.opt_num("lr", o.lr);
  o.warmup_steps = f.opt_int("warmup_steps", o.warmup_steps);
  if (f.has("schedule")) o.schedule = parse_lr_schedule(f.req_str("schedule"));
  o.adam.beta1 = f.opt_num("beta1", o.adam.beta1);
  o.adam.beta2 = f.opt_num("beta2", o.adam.beta2);
  o.adam.eps = f.opt_num("adam_eps", o.adam.eps);
  o.adam.weight_decay = f.opt_num("weight_decay", o.adam.weight_decay);
  o.clip_norm = f.opt_num("clip_norm", o.clip_norm);
  o.label_smoothing = f.opt_num("label_smoothing", o.label_smoothing);
  o.eval_every = f.opt_int("eval_every", o.eval_every);
  o.log_every = f.opt_int("log_every", o.log_every);
  o.save_every = f.opt_int("save_every", o.save_every);
  o.keep_every = f.opt_int("keep_every", o.keep_every);
  o.best_metric = f.opt_str("best_metric", o.best_metric);
  o.bf16 = f.opt_bool("bf16", o.bf16);
  const int64_t seed = f.opt_int("seed", static_cast<int64_t>(o.seed));
  if (seed < 0) f.fail("seed", "must be >= 0, got " + std::to_string(seed));
  o.seed = static_cast<uint64_t>(seed);
  return o;
}

namespace {

struct LoopState {
  int64_t step = 0, epoch = 0, batch_in_epoch = 0;
  bool has_best = false;
  double best = 0;
  double log_loss_sum = 0;  // token-weighted loss since the last log line
  int64_t log_tokens = 0;
  nlohmann::json history = nlohmann::json::array();
};

void validate(const TrainOptions& o, const TrainData& d) {
  auto bad = [](const std::string& m) { throw std::invalid_argument("train: " + m); };
  if (o.max_steps <= 0) bad("max_steps must be > 0");
  if (o.batch_tokens <= 0 || o.max_batch <= 0) bad("batch_tokens and max_batch must be > 0");
  if (o.lr <= 0) bad("lr must be > 0");
  if (o.warmup_steps < 0) bad("warmup_steps must be >= 0");
  if (o.label_smoothing < 0 || o.label_smoothing >= 1) bad("label_smoothing must be in [0, 1)");
  if (o.eval_every <= 0 || o.log_every <= 0 || o.save_every < 0) bad("eval_every and log_every must be > 0");
  if (o.keep_every < 0) bad("keep_every must be >= 0");
  if (o.best_metric != "auto" && o.best_metric != "loss" && o.best_metric != "accuracy")
    bad("best_metric must be auto, loss or accuracy");
  if (d.train.empty()) bad("no training examples");
  if (d.valid.empty()) bad("no validation examples");
}

std::string resume_dir(const std::string& out_dir) {
  for (const char* d : {"/last", "/last.old"})
    if (is_file(out_dir + d + "/trainer_state.json")) return out_dir + d;
  return "";
}

double metric_of(const EvalResult& r, bool accuracy) {
  return accuracy ? r.classification->accuracy : r.loss;
}

}  // namespace

// The run directory's state decides what a start may do: nothing is replaced or mixed silently.
RunDir::RunDir(const std::string& out_dir, const TrainOptions& opts, const std::vector<NamedPath>& inputs)
    : path_(out_dir) {
  check_outputs_apart({{out_dir, "--out"}}, inputs);
  if (const std::string type = path_type(out_dir); !type.empty() && type != "a directory")  // before the lock beside it
    throw std::runtime_error(out_dir + ": exists and is " + type + "; a training run needs a directory of its own");
  lock_.emplace(out_dir);
  // Rank 0 alone decides and prepares (the others' file operations are no-ops); they go on once it
  // has, and fail at that point if it could not.
  if (!dist::is_main()) {
    dist::barrier();
    if (opts.resume && resume_dir(out_dir).empty())
      throw std::runtime_error(out_dir + ": rank " + std::to_string(dist::rank()) +
                               " cannot see the run's last/ resume point (the output must be on a file system "
                               "every process reads)");
    return;
  }
  const std::string type = path_type(out_dir);
  if (!type.empty() && type != "a directory")
    throw std::runtime_error(out_dir + ": exists and is " + type + "; a training run needs a directory of its own");
  const bool fresh = is_empty_or_missing_directory(out_dir);
  const std::string from = fresh ? "" : resume_dir(out_dir);
  // A directory that holds something is a training run when it carries the marker, or (written before
  // markers) when it has a resume point; anything else is the user's and never replaced.
  if (!fresh) {
    const auto kind = output_kind(out_dir);
    if (kind && *kind != kRunKind)
      throw std::runtime_error(out_dir + ": holds a headprune '" + *kind + "' output, not a training run; choose "
                                         "another output");
    if (!kind && from.empty())
      throw std::runtime_error(out_dir + ": not empty and not a headprune training run (no " + kOutputMarker +
                               "); headprune never replaces it, even with --overwrite: choose another output");
  }
  if (opts.resume) {
    if (opts.overwrite) throw std::invalid_argument("train: --resume and --overwrite exclude each other");
    if (from.empty())
      throw std::runtime_error(out_dir + (fresh ? ": nothing to resume (no such run directory, or it is empty)"
                                                : ": cannot resume: no last/trainer_state.json (the run saved no resume "
                                                  "point); --overwrite starts it again"));
  } else if (!fresh) {
    if (!opts.overwrite) {
      std::string at;
      try {
        if (!from.empty()) at = " (at step " + std::to_string(read_json_file(from + "/trainer_state.json").at("step").get<int64_t>()) + ")";
      } catch (const std::exception&) {
      }
      throw std::runtime_error(out_dir + ": already holds a training run" + at +
                               "; --resume continues it, --overwrite starts it again");
    }
    if (auto err = remove_tree(out_dir); !err.empty())
      throw std::runtime_error(out_dir + ": cannot remove the earlier run (" + err + ")");
  }
  make_directories(out_dir);
  if (!output_kind(out_dir)) write_output_marker(out_dir, kRunKind);
  dist::barrier();
}

TrainResult train_model(Transformer& model, const TrainData& data, const TrainOptions& opts, const std::string& out_dir,
                        const std::map<std::string, std::string>& extra_files, const TrainProgressFn& progress,
                        const TrainHooks* hooks) {
  validate(opts, data);
  const RunDir dir(out_dir, opts);
  return train_model(model, data, opts, dir, extra_files, progress, hooks);
}

TrainResult train_model(Transformer& model, const TrainData& data, const TrainOptions& opts, const RunDir& run_dir,
                        const std::map<std::string, std::string>& extra_files, const TrainProgressFn& progress,
                        const TrainHooks* hooks) {
  validate(opts, data);
  if (hooks && opts.resume) throw std::invalid_argument("train: a run with extra trained parameters cannot be resumed");
  const bool save = !hooks || hooks->save_checkpoints;
  const std::string& out_dir = run_dir.path();
  const bool cls = model->config().arch == Arch::EncoderClassifier;
  const bool use_accuracy = opts.best_metric == "accuracy" || (opts.best_metric == "auto" && cls);
  if (use_accuracy && !cls) throw std::invalid_argument("train: best_metric accuracy needs an encoder_classifier");
  auto better = [&](double a, double b) { return use_accuracy ? a > b : a < b; };
  // Training keeps fp32 weights (AdamW's small updates vanish in bf16; bf16 compute is the bf16 option's
  // autocast): a model loaded as bf16 or f16 is converted first, if memory allows.
  if (const auto dt = model->parameters().front().scalar_type(); dt != torch::kFloat && at::isFloatingType(dt)) {
    const auto device = model->parameters().front().device();
    check_fits(estimate_memory(model->config(), torch::kFloat, 1, 1, MemoryUse::Training), device,
               "training (fp32 weights, their gradients and AdamW's moments)",
               "fine-tune a smaller model, or score and prune without fine-tuning");
    log_info("train", "weights converted from " + dtype_name(dt) + " to fp32 for training");
    model->to(torch::kFloat);
  }

  LoopState st;
  const torch::Device device = model->parameters().front().device();  // the run follows the model
  torch::manual_seed(opts.seed);
  const std::string from = opts.resume ? resume_dir(out_dir) : "";
  std::unique_ptr<AdamW> opt;
  auto make_opt = [&] { opt = std::make_unique<AdamW>(*model, opts.adam); };
  if (!from.empty()) {
    model = load_checkpoint(from);
    model->to(device);
    make_opt();
    const std::string state_file = from + "/trainer_state.json";
    const auto js = read_json_file(state_file);
    try {
      st.step = js.at("step");
      st.epoch = js.at("epoch");
      st.batch_in_epoch = js.at("batch_in_epoch");
      st.has_best = js.at("has_best");
      st.best = js.at("best");
      st.log_loss_sum = js.at("log_loss_sum");
      st.log_tokens = js.at("log_tokens");
      st.history = js.at("history");
      if (st.step < 0 || st.epoch < 0 || st.batch_in_epoch < 0 || !st.history.is_array() || !js.at("options").is_object())
        throw std::invalid_argument("negative step/epoch/batch, or history/options of the wrong type");
    } catch (const std::exception& e) {
      throw std::runtime_error(state_file + ": not a valid trainer state (" + e.what() +
                               "); --overwrite starts the run again");
    }
    // Options that only decide what is written or logged do not change the result.
    auto affecting = [](nlohmann::json o) {
      for (const char* k : {"keep_every", "save_every", "log_every"}) o.erase(k);
      return o;
    };
    const int64_t saved_world = js.value("world_size", int64_t{1});
    if (saved_world != dist::world_size())
      throw std::runtime_error(state_file + ": the run was trained with " + std::to_string(saved_world) +
                               " process(es); resume it with the same number (this is " +
                               std::to_string(dist::world_size()) + ")");
    if (affecting(js.at("options")) != affecting(opts.to_json()))
      log_warn("train", "resuming with options that differ from the interrupted run's; results will differ");
    auto f = read_safetensors(from + "/optimizer.safetensors");
    TensorMap optim;
    for (auto& kv : f.tensors)
      if (kv.first.rfind("optim.", 0) == 0) optim[kv.first.substr(6)] = kv.second;
    opt->load_state(optim, from + "/optimizer.safetensors");
    set_rng_state({f.tensors.begin(), f.tensors.end()}, device, from + "/optimizer.safetensors");
    log_info("train", "resumed from " + from + " at step " + std::to_string(st.step));
  } else {
    make_opt();
    std::vector<torch::Tensor> params;
    for (auto& p : model->parameters()) params.push_back(p);
    dist::broadcast(params);  // every rank starts from rank 0's weights
  }
  model->train();
  // The parameters whose gradients are summed across ranks (the model's and any extra ones).
  std::vector<torch::Tensor> synced = opt->parameters();
  if (hooks && hooks->extra_parameters)
    for (auto& p : hooks->extra_parameters()) synced.push_back(p);

  auto save_last = [&] {
    replace_directory(out_dir + "/last", [&](const std::string& dir) {
      save_checkpoint(dir, *model, extra_files);
      TensorMap t;
      for (auto& kv : opt->state()) t["optim." + kv.first] = kv.second;
      for (auto& [k, v] : rng_state(device)) t[k] = v;
      write_safetensors(dir + "/optimizer.safetensors", t);
      nlohmann::json js = {{"step", st.step},         {"epoch", st.epoch},       {"batch_in_epoch", st.batch_in_epoch},
                           {"has_best", st.has_best}, {"best", st.best},         {"log_loss_sum", st.log_loss_sum},
                           {"log_tokens", st.log_tokens}, {"history", st.history}, {"options", opts.to_json()},
                           {"world_size", dist::world_size()}};
      write_json_file(dir + "/trainer_state.json", js, 1);
    });
  };

  TrainResult res;
  auto t_start = std::chrono::steady_clock::now();
  auto t_log = t_start;
  int64_t tokens_since_log = 0, steps_since_log = 0;
  double last_loss = 0;
  bool stopped = false;
  while (st.step < opts.max_steps) {
    auto batches = make_token_batches(data.train, opts.batch_tokens, opts.max_batch, true,
                                      opts.seed * 1000003ull + static_cast<uint64_t>(st.epoch));
    while (st.batch_in_epoch < static_cast<int64_t>(batches.size()) && st.step < opts.max_steps && !stopped) {
      const auto t_step = std::chrono::steady_clock::now();
      const auto& global_idx = batches[st.batch_in_epoch];
      const auto [from_row, to_row] = dist::slice(static_cast<int64_t>(global_idx.size()));
      std::vector<const Example*> ex;
      for (int64_t k = from_row; k < to_row; ++k) ex.push_back(&data.train[global_idx[static_cast<size_t>(k)]]);
      // Several processes: a stream of dropout (and gate) samples per rank and step, so that resuming
      // needs no per-rank generator state.
      if (dist::active()) torch::manual_seed(opts.seed * 1000003ull + static_cast<uint64_t>(st.step) * 7919ull +
                                             static_cast<uint64_t>(dist::rank()));
      const double lr = lr_at(st.step + 1, opts.lr, opts.warmup_steps, opts.max_steps, opts.schedule);
      if (hooks && hooks->before_forward) hooks->before_forward(st.step + 1);
      torch::Tensor loss;
      int64_t n_tgt = 0, n_tokens = 0;
      if (!ex.empty()) {
        Batch b = collate(ex, model->config().arch, model->config().pad_id);  // on the CPU
        // Counted on the host copy, so the device is not asked for them.
        n_tgt = count_target_tokens(b);
        n_tokens = b.attention_mask.sum().item<int64_t>() +
                   (b.decoder_attention_mask.defined() ? b.decoder_attention_mask.sum().item<int64_t>() : 0);
        b = b.to(device);
        Autocast autocast(device, opts.bf16);
        auto out = model->forward(b);
        loss = model->loss(out, b, cls ? 0.0 : opts.label_smoothing);
      }
      torch::Tensor extra;
      if (hooks && hooks->extra_loss) extra = hooks->extra_loss(st.step + 1);
      // One read from the device per step: the task loss (logged) and the extra loss.
      double task_loss = 0, extra_loss = 0;
      {
        const auto as_double = torch::TensorOptions().dtype(torch::kDouble).device(device);
        auto value = [&](const torch::Tensor& t) {  // absent (an empty slice, no extra loss): 0
          return t.defined() ? t.detach().to(as_double).reshape({1}) : torch::zeros({1}, as_double);
        };
        const auto both = torch::cat({value(loss), value(extra)}).to(torch::kCPU);
        task_loss = both[0].item<double>();
        extra_loss = both[1].item<double>();
      }
      // Several processes: the loss of the whole batch is the target-weighted mean of the slices'.
      double n_all = static_cast<double>(n_tgt);
      if (dist::active()) {
        auto sums = torch::tensor({static_cast<double>(n_tgt), static_cast<double>(n_tokens), task_loss * n_tgt},
                                  torch::kDouble);
        dist::all_reduce_sum({sums});
        n_all = sums[0].item<double>();
        n_tokens = static_cast<int64_t>(sums[1].item<double>());
        task_loss = sums[2].item<double>() / std::max(1.0, n_all);
      }
      const double total_loss = task_loss + extra_loss;
      if (!std::isfinite(total_loss))
        throw std::runtime_error("train: loss became " + std::to_string(total_loss) + " at step " +
                                 std::to_string(st.step + 1) + " (try a lower lr or more warm-up)");
      // Each rank's share of the objective, so that the summed gradients are those of the whole batch.
      torch::Tensor objective;
      if (!dist::active()) {
        objective = extra.defined() ? loss + extra : loss;
      } else {
        if (loss.defined()) objective = loss * (static_cast<double>(n_tgt) / std::max(1.0, n_all));
        if (extra.defined()) {
          auto e = extra / static_cast<double>(dist::world_size());
          objective = objective.defined() ? objective + e : e;
        }
      }
      if (objective.defined()) objective.backward();
      if (dist::active()) {
        // A parameter has a gradient where any rank's slice reached it; where none did, it stays
        // without one and the optimizer skips it, as with one process (no weight decay on it).
        auto reached = torch::zeros({static_cast<int64_t>(synced.size())}, torch::kDouble);
        for (size_t i = 0; i < synced.size(); ++i)
          if (synced[i].grad().defined()) reached[static_cast<int64_t>(i)] = 1.0;
        dist::all_reduce_sum({reached});
        const auto any = reached.accessor<double, 1>();
        std::vector<torch::Tensor> grads;
        for (size_t i = 0; i < synced.size(); ++i) {
          if (any[static_cast<int64_t>(i)] == 0) continue;
          auto& p = synced[i];
          if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
          grads.push_back(p.grad());
        }
        dist::all_reduce_sum(grads);
      }
      if (hooks && hooks->after_backward) hooks->after_backward(st.step + 1);
      if (opts.clip_norm > 0) torch::nn::utils::clip_grad_norm_(opt->parameters(), opts.clip_norm);
      opt->step(lr);
      opt->zero_grad();
      ++st.step;
      ++st.batch_in_epoch;
      last_loss = task_loss;
      st.log_loss_sum += last_loss * n_all;
      st.log_tokens += static_cast<int64_t>(n_all);
      tokens_since_log += n_tokens;
      ++steps_since_log;
      const auto now = std::chrono::steady_clock::now();
      res.step_seconds += std::chrono::duration<double>(now - t_step).count();
      res.step_tokens += n_tokens;
      ++res.steps_timed;
      const double since = std::chrono::duration<double>(now - t_log).count();
      if (progress)
        progress({st.step, opts.max_steps, last_loss, lr, tokens_since_log / std::max(since, 1e-9),
                  std::chrono::duration<double>(now - t_start).count()});
      if (st.step % opts.log_every == 0) {
        char line[256];
        std::snprintf(line, sizeof line, "step %lld | loss %.4f | lr %.1e | %.0f tok/s | %.0f ms/step",
                      static_cast<long long>(st.step), st.log_loss_sum / std::max<int64_t>(1, st.log_tokens), lr,
                      tokens_since_log / std::max(since, 1e-9), 1000.0 * since / std::max<int64_t>(1, steps_since_log));
        log_info("train", line);
        st.log_loss_sum = 0;
        st.log_tokens = 0;
        tokens_since_log = 0;
        steps_since_log = 0;
        t_log = now;
      }
      if (st.step == opts.stop_after) {
        res.interrupted = true;
        res.steps = st.step;
        res.last_loss = last_loss;
        return res;
      }
      const bool stop = hooks && hooks->stop && hooks->stop(st.step);
      const bool eval_now = st.step % opts.eval_every == 0 || st.step == opts.max_steps || stop;
      if (eval_now) {
        if (hooks && hooks->before_eval) hooks->before_eval();
        auto r = evaluate(*model, data.valid);
        const double m = metric_of(r, use_accuracy);
        const bool improved = !st.has_best || better(m, st.best);
        if (improved) {
          st.has_best = true;
          st.best = m;
          if (save)
            replace_directory(out_dir + "/best", [&](const std::string& dir) { save_checkpoint(dir, *model, extra_files); });
        }
        nlohmann::json rec = r.to_json();
        rec["step"] = st.step;
        rec["train_loss"] = last_loss;
        rec["lr"] = lr;
        rec["elapsed_s"] = std::chrono::duration<double>(now - t_start).count();
        st.history.push_back(rec);
        write_json_file(out_dir + "/history.json", st.history, 1);
        char line[256];
        std::snprintf(line, sizeof line, "step %lld | valid loss %.4f | %s %.4f | best %.4f%s",
                      static_cast<long long>(st.step), r.loss, use_accuracy ? "accuracy" : "loss", m, st.best,
                      improved ? " (saved best)" : "");
        log_info("eval", line);
        model->train();
      }
      if (save && (eval_now || (opts.save_every > 0 && st.step % opts.save_every == 0))) save_last();
      if (save && opts.keep_every > 0 && st.step % opts.keep_every == 0) {
        char name[32];
        std::snprintf(name, sizeof name, "/step-%06lld", static_cast<long long>(st.step));
        replace_directory(out_dir + name, [&](const std::string& dir) { save_checkpoint(dir, *model, extra_files); });
      }
      if (stop) stopped = true;
    }
    if (stopped) break;
    if (st.step < opts.max_steps) {
      ++st.epoch;
      st.batch_in_epoch = 0;
    }
  }
  res.steps = st.step;
  res.last_loss = last_loss;
  res.best_metric = st.best;
  res.history = st.history;
  return res;
}

}  // namespace hp
