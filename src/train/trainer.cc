// The training loop (see header).
#include "headprune/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

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

const OptionTable<TrainOptions>& train_option_table() {
  using T = TrainOptions;
  using R = ValueRange;
  static const OptionTable<T> t =
      OptionTable<T>()
          .integer("max_steps", "", "optimizer steps", &T::max_steps, R::at_least(1))
          .integer("batch_tokens", "", "padded tokens per batch", &T::batch_tokens, R::at_least(1))
          .integer("max_batch", "", "rows per batch", &T::max_batch, R::at_least(1))
          .real("lr", "", "peak learning rate", &T::lr, R::positive())
          .integer("warmup_steps", "", "linear warm-up steps", &T::warmup_steps, R::at_least(0))
          .parsed("schedule", "", "learning rate schedule after the warm-up",
                  [](T& o, const std::string& s) { o.schedule = parse_lr_schedule(s); }, "linear",
                  [](const T& o) -> nlohmann::json { return to_string(o.schedule); })
          .real("beta1", "", "AdamW beta1", [](T& o) -> double& { return o.adam.beta1; })
          .real("beta2", "", "AdamW beta2", [](T& o) -> double& { return o.adam.beta2; })
          .real("adam_eps", "", "AdamW epsilon", [](T& o) -> double& { return o.adam.eps; })
          .real("weight_decay", "", "AdamW decoupled weight decay", [](T& o) -> double& { return o.adam.weight_decay; })
          .real("clip_norm", "", "gradient norm clipping (0 = none)", &T::clip_norm)
          .real("label_smoothing", "", "label smoothing", &T::label_smoothing, R::between(0, 1, false, true))
          .integer("eval_every", "", "steps between evaluations", &T::eval_every, R::at_least(1))
          .integer("log_every", "", "steps between log lines", &T::log_every, R::at_least(1))
          .integer("save_every", "", "steps between resume checkpoints (0 = at evaluations)", &T::save_every,
                   R::at_least(0))
          .integer("keep_every", "", "steps between kept OUT/step-N snapshots (0 = none)", &T::keep_every, R::at_least(0))
          .real("distill_weight", "", "weight of the distillation KL", &T::distill_weight, R::between(0, 1))
          .real("distill_temperature", "", "distillation temperature", &T::distill_temperature, R::positive())
          .real("distill_hidden_weight", "", "weight of the hidden-state MSE", &T::distill_hidden_weight, R::at_least(0))
          .text("best_metric", "", "auto, loss or accuracy", &T::best_metric)
          .yes_no("bf16", "", "bf16 autocast", &T::bf16, FlagStyle::Value)
          .custom("seed", "", [](const T& o) { return nlohmann::json(o.seed); },
                  [](T& o, const nlohmann::json& v) {
                    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
                      throw std::invalid_argument("must be an integer >= 0, got " + v.dump());
                    o.seed = v.get<uint64_t>();
                  });
  return t;
}

nlohmann::json TrainOptions::to_json() const { return train_option_table().write(*this); }

TrainOptions TrainOptions::from_json(const nlohmann::json& j) {
  const JsonFields f(j, "train options",
                     JsonStyle{"field", "is missing", JsonStyle::Nulls::Invalid, JsonStyle::Error::InvalidArgument});
  f.only(train_option_table().record_keys());
  TrainOptions o;
  train_option_table().read(f, o);
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
  train_option_table().check(o, "train");
  if (o.distills() && !o.teacher) bad("distill_weight or distill_hidden_weight > 0 needs a teacher model");
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

namespace {

// Training keeps fp32 weights (AdamW's small updates vanish in bf16; bf16 compute is the bf16 option's
// autocast): a model loaded as bf16 or f16 is converted first, if memory allows.
void convert_to_fp32(Transformer& model) {
  const auto dt = model->parameters().front().scalar_type();
  if (dt == torch::kFloat || !at::isFloatingType(dt)) return;
  const auto device = model->parameters().front().device();
  check_fits(estimate_memory(model->config(), torch::kFloat, 1, 1, MemoryUse::Training), device,
             "training (fp32 weights, their gradients and AdamW's moments)",
             "fine-tune a smaller model, or score and prune without fine-tuning");
  log_info("train", "weights converted from " + dtype_name(dt) + " to fp32 for training");
  model->to(torch::kFloat);
}

// The loop's position and history as saved in trainer_state.json; throws naming the file.
void read_loop_state(const nlohmann::json& js, const std::string& state_file, LoopState& st) {
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
}

// One step's losses and counts, over every process.
struct StepLoss {
  double task = 0, extra = 0;
  double n_targets = 0;  // target tokens of the whole batch
  int64_t n_tokens = 0;  // padded tokens of the whole batch
};

// The loop of train_model: the state it carries from step to step, and its steps.
class TrainLoop {
 public:
  TrainLoop(Transformer& model, const TrainData& data, const TrainOptions& opts, const std::string& out_dir,
            const std::map<std::string, std::string>& extra_files, const TrainProgressFn& progress,
            const TrainHooks* hooks)
      : model_(model), data_(data), opts_(opts), out_dir_(out_dir), extra_files_(extra_files), progress_(progress),
        hooks_(hooks), save_(!hooks || hooks->save_checkpoints), cls_(model->config().arch == Arch::EncoderClassifier),
        use_accuracy_(opts.best_metric == "accuracy" || (opts.best_metric == "auto" && cls_)),
        device_(model->parameters().front().device()) {}

  // Resumes from last/ or starts afresh: the weights, the optimizer, the parameters summed across ranks.
  void start();
  TrainResult run();

 private:
  void resume(const std::string& from);
  StepLoss train_step(const std::vector<size_t>& global_idx, double lr);
  torch::Tensor forward(const std::vector<const Example*>& ex, int64_t& n_tgt, int64_t& n_tokens);
  void backward(const torch::Tensor& loss, const torch::Tensor& extra, int64_t n_tgt, double n_all);
  void sum_gradients();
  void account(const StepLoss& loss, double lr, std::chrono::steady_clock::time_point t_step,
               std::chrono::steady_clock::time_point now);
  void evaluate_and_save(double lr, std::chrono::steady_clock::time_point now);
  void save_model(const std::string& name) const;
  void save_last() const;

  Transformer& model_;  // replaced by the saved one on resume
  const TrainData& data_;
  const TrainOptions& opts_;
  const std::string& out_dir_;
  const std::map<std::string, std::string>& extra_files_;
  const TrainProgressFn& progress_;
  const TrainHooks* hooks_;
  const bool save_, cls_, use_accuracy_;
  const torch::Device device_;  // the run follows the model
  std::unique_ptr<AdamW> opt_;
  std::vector<torch::Tensor> synced_;  // the parameters whose gradients are summed across ranks
  LoopState st_;
  TrainResult res_;
  std::chrono::steady_clock::time_point t_start_, t_log_;
  int64_t tokens_since_log_ = 0, steps_since_log_ = 0;
  double last_loss_ = 0;
};

void TrainLoop::start() {
  torch::manual_seed(opts_.seed);
  const std::string from = opts_.resume ? resume_dir(out_dir_) : "";
  if (!from.empty()) {
    resume(from);
  } else {
    opt_ = std::make_unique<AdamW>(*model_, opts_.adam);
    std::vector<torch::Tensor> params;
    for (auto& p : model_->parameters()) params.push_back(p);
    dist::broadcast(params);  // every rank starts from rank 0's weights
  }
  model_->train();
  // The model's parameters and any extra ones.
  synced_ = opt_->parameters();
  if (hooks_ && hooks_->extra_parameters)
    for (auto& p : hooks_->extra_parameters()) synced_.push_back(p);
}

void TrainLoop::resume(const std::string& from) {
  model_ = load_checkpoint(from);
  model_->to(device_);
  opt_ = std::make_unique<AdamW>(*model_, opts_.adam);
  const std::string state_file = from + "/trainer_state.json";
  const auto js = read_json_file(state_file);
  read_loop_state(js, state_file, st_);
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
  if (affecting(js.at("options")) != affecting(opts_.to_json()))
    log_warn("train", "resuming with options that differ from the interrupted run's; results will differ");
  auto f = read_safetensors(from + "/optimizer.safetensors");
  TensorMap optim;
  for (auto& kv : f.tensors)
    if (kv.first.rfind("optim.", 0) == 0) optim[kv.first.substr(6)] = kv.second;
  opt_->load_state(optim, from + "/optimizer.safetensors");
  set_rng_state({f.tensors.begin(), f.tensors.end()}, device_, from + "/optimizer.safetensors");
  log_info("train", "resumed from " + from + " at step " + std::to_string(st_.step));
}

void TrainLoop::save_model(const std::string& name) const {
  replace_directory(out_dir_ + name, [&](const std::string& dir) { save_checkpoint(dir, *model_, extra_files_); });
}

void TrainLoop::save_last() const {
  replace_directory(out_dir_ + "/last", [&](const std::string& dir) {
    save_checkpoint(dir, *model_, extra_files_);
    TensorMap t;
    for (auto& kv : opt_->state()) t["optim." + kv.first] = kv.second;
    for (auto& [k, v] : rng_state(device_)) t[k] = v;
    write_safetensors(dir + "/optimizer.safetensors", t);
    nlohmann::json js = {{"step", st_.step},         {"epoch", st_.epoch},       {"batch_in_epoch", st_.batch_in_epoch},
                         {"has_best", st_.has_best}, {"best", st_.best},         {"log_loss_sum", st_.log_loss_sum},
                         {"log_tokens", st_.log_tokens}, {"history", st_.history}, {"options", opts_.to_json()},
                         {"world_size", dist::world_size()}};
    write_json_file(dir + "/trainer_state.json", js, 1);
  });
}

// This rank's slice of the batch through the model: its task loss (undefined for an empty slice).
torch::Tensor TrainLoop::forward(const std::vector<const Example*>& ex, int64_t& n_tgt, int64_t& n_tokens) {
  if (ex.empty()) return {};
  Batch b = collate(ex, model_->config().arch, model_->config().pad_id);  // on the CPU
  // Counted on the host copy, so the device is not asked for them.
  n_tgt = count_target_tokens(b);
  n_tokens = b.attention_mask.sum().item<int64_t>() +
             (b.decoder_attention_mask.defined() ? b.decoder_attention_mask.sum().item<int64_t>() : 0);
  b = b.to(device_);
  Autocast autocast(device_, opts_.bf16);
  if (!opts_.distills()) {
    auto out = model_->forward(b);
    return model_->loss(out, b, cls_ ? 0.0 : opts_.label_smoothing);
  }
  const double w = opts_.distill_weight, h = opts_.distill_hidden_weight;
  HiddenStates student_states(*model_, h > 0), teacher_states(*opts_.teacher, h > 0);
  auto out = model_->forward(b);
  auto loss = model_->loss(out, b, cls_ ? 0.0 : opts_.label_smoothing);
  ModelOutput taught;
  {
    torch::NoGradGuard no_grad;
    opts_.teacher->eval();
    taught = opts_.teacher->forward(b);
  }
  torch::Tensor objective = loss;
  if (w > 0) {
    const auto kd = distillation_kl(*model_, out, taught, b, opts_.distill_temperature);
    objective = w >= 1 ? kd : loss * (1.0 - w) + kd * w;
  }
  if (h > 0) objective = objective + hidden_state_mse(student_states.states, teacher_states.states) * h;
  return objective;
}

// One read from the device per step: the task loss (logged) and the extra loss.
std::pair<double, double> read_losses(const torch::Tensor& loss, const torch::Tensor& extra, const torch::Device& device) {
  const auto as_double = torch::TensorOptions().dtype(torch::kDouble).device(device);
  auto value = [&](const torch::Tensor& t) {  // absent (an empty slice, no extra loss): 0
    return t.defined() ? t.detach().to(as_double).reshape({1}) : torch::zeros({1}, as_double);
  };
  const auto both = torch::cat({value(loss), value(extra)}).to(torch::kCPU);
  return {both[0].item<double>(), both[1].item<double>()};
}

// Several processes: the loss of the whole batch is the target-weighted mean of the slices'.
void sum_over_ranks(StepLoss& l) {
  if (!dist::active()) return;
  auto sums = torch::tensor({l.n_targets, static_cast<double>(l.n_tokens), l.task * l.n_targets}, torch::kDouble);
  dist::all_reduce_sum({sums});
  l.n_targets = sums[0].item<double>();
  l.n_tokens = static_cast<int64_t>(sums[1].item<double>());
  l.task = sums[2].item<double>() / std::max(1.0, l.n_targets);
}

// Each rank's share of the objective, so that the summed gradients are those of the whole batch.
void TrainLoop::backward(const torch::Tensor& loss, const torch::Tensor& extra, int64_t n_tgt, double n_all) {
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
}

// A parameter has a gradient where any rank's slice reached it; where none did, it stays without one
// and the optimizer skips it, as with one process (no weight decay on it).
void TrainLoop::sum_gradients() {
  if (!dist::active()) return;
  auto reached = torch::zeros({static_cast<int64_t>(synced_.size())}, torch::kDouble);
  for (size_t i = 0; i < synced_.size(); ++i)
    if (synced_[i].grad().defined()) reached[static_cast<int64_t>(i)] = 1.0;
  dist::all_reduce_sum({reached});
  const auto any = reached.accessor<double, 1>();
  std::vector<torch::Tensor> grads;
  for (size_t i = 0; i < synced_.size(); ++i) {
    if (any[static_cast<int64_t>(i)] == 0) continue;
    auto& p = synced_[i];
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  dist::all_reduce_sum(grads);
}

// Forward, backward, the exchange between processes and the update, on one global batch.
StepLoss TrainLoop::train_step(const std::vector<size_t>& global_idx, double lr) {
  const auto [from_row, to_row] = dist::slice(static_cast<int64_t>(global_idx.size()));
  std::vector<const Example*> ex;
  for (int64_t k = from_row; k < to_row; ++k) ex.push_back(&data_.train[global_idx[static_cast<size_t>(k)]]);
  // Several processes: a stream of dropout (and gate) samples per rank and step, so that resuming
  // needs no per-rank generator state.
  if (dist::active()) torch::manual_seed(opts_.seed * 1000003ull + static_cast<uint64_t>(st_.step) * 7919ull +
                                         static_cast<uint64_t>(dist::rank()));
  const int64_t step = st_.step + 1;
  if (hooks_ && hooks_->before_forward) hooks_->before_forward(step);
  int64_t n_tgt = 0;
  StepLoss l;
  const torch::Tensor loss = forward(ex, n_tgt, l.n_tokens);
  torch::Tensor extra;
  if (hooks_ && hooks_->extra_loss) extra = hooks_->extra_loss(step);
  std::tie(l.task, l.extra) = read_losses(loss, extra, device_);
  l.n_targets = static_cast<double>(n_tgt);
  sum_over_ranks(l);
  const double total_loss = l.task + l.extra;
  if (!std::isfinite(total_loss))
    throw std::runtime_error("train: loss became " + std::to_string(total_loss) + " at step " + std::to_string(step) +
                             " (try a lower lr or more warm-up)");
  backward(loss, extra, n_tgt, l.n_targets);
  sum_gradients();
  if (hooks_ && hooks_->after_backward) hooks_->after_backward(step);
  if (opts_.clip_norm > 0) torch::nn::utils::clip_grad_norm_(opt_->parameters(), opts_.clip_norm);
  opt_->step(lr);
  opt_->zero_grad();
  return l;
}

// The step's counts and times, the progress callback and, every log_every steps, the log line.
void TrainLoop::account(const StepLoss& l, double lr, std::chrono::steady_clock::time_point t_step,
                        std::chrono::steady_clock::time_point now) {
  last_loss_ = l.task;
  st_.log_loss_sum += last_loss_ * l.n_targets;
  st_.log_tokens += static_cast<int64_t>(l.n_targets);
  tokens_since_log_ += l.n_tokens;
  ++steps_since_log_;
  res_.step_seconds += std::chrono::duration<double>(now - t_step).count();
  res_.step_tokens += l.n_tokens;
  ++res_.steps_timed;
  const double since = std::chrono::duration<double>(now - t_log_).count();
  if (progress_)
    progress_({st_.step, opts_.max_steps, last_loss_, lr, tokens_since_log_ / std::max(since, 1e-9),
               std::chrono::duration<double>(now - t_start_).count()});
  if (st_.step % opts_.log_every != 0) return;
  char line[256];
  std::snprintf(line, sizeof line, "step %lld | loss %.4f | lr %.1e | %.0f tok/s | %.0f ms/step",
                static_cast<long long>(st_.step), st_.log_loss_sum / std::max<int64_t>(1, st_.log_tokens), lr,
                tokens_since_log_ / std::max(since, 1e-9), 1000.0 * since / std::max<int64_t>(1, steps_since_log_));
  log_info("train", line);
  st_.log_loss_sum = 0;
  st_.log_tokens = 0;
  tokens_since_log_ = 0;
  steps_since_log_ = 0;
  t_log_ = now;
}

// Evaluates on the validation set, keeps best/ when the metric improved, and appends to history.json.
void TrainLoop::evaluate_and_save(double lr, std::chrono::steady_clock::time_point now) {
  if (hooks_ && hooks_->before_eval) hooks_->before_eval();
  auto r = evaluate(*model_, data_.valid);
  const double m = metric_of(r, use_accuracy_);
  const bool improved = !st_.has_best || (use_accuracy_ ? m > st_.best : m < st_.best);
  if (improved) {
    st_.has_best = true;
    st_.best = m;
    if (save_) save_model("/best");
  }
  nlohmann::json rec = r.to_json();
  rec["step"] = st_.step;
  rec["train_loss"] = last_loss_;
  rec["lr"] = lr;
  rec["elapsed_s"] = std::chrono::duration<double>(now - t_start_).count();
  st_.history.push_back(rec);
  write_json_file(out_dir_ + "/history.json", st_.history, 1);
  char line[256];
  std::snprintf(line, sizeof line, "step %lld | valid loss %.4f | %s %.4f | best %.4f%s",
                static_cast<long long>(st_.step), r.loss, use_accuracy_ ? "accuracy" : "loss", m, st_.best,
                improved ? " (saved best)" : "");
  log_info("eval", line);
  model_->train();
}

TrainResult TrainLoop::run() {
  t_start_ = t_log_ = std::chrono::steady_clock::now();
  bool stopped = false;
  while (st_.step < opts_.max_steps) {
    auto batches = make_token_batches(data_.train, opts_.batch_tokens, opts_.max_batch, true,
                                      opts_.seed * 1000003ull + static_cast<uint64_t>(st_.epoch));
    while (st_.batch_in_epoch < static_cast<int64_t>(batches.size()) && st_.step < opts_.max_steps && !stopped) {
      const auto t_step = std::chrono::steady_clock::now();
      const double lr = lr_at(st_.step + 1, opts_.lr, opts_.warmup_steps, opts_.max_steps, opts_.schedule);
      const StepLoss l = train_step(batches[st_.batch_in_epoch], lr);
      ++st_.step;
      ++st_.batch_in_epoch;
      const auto now = std::chrono::steady_clock::now();
      account(l, lr, t_step, now);
      if (st_.step == opts_.stop_after) {
        res_.interrupted = true;
        res_.steps = st_.step;
        res_.last_loss = last_loss_;
        return res_;
      }
      const bool stop = hooks_ && hooks_->stop && hooks_->stop(st_.step);
      const bool eval_now = st_.step % opts_.eval_every == 0 || st_.step == opts_.max_steps || stop;
      if (eval_now) evaluate_and_save(lr, now);
      if (save_ && (eval_now || (opts_.save_every > 0 && st_.step % opts_.save_every == 0))) save_last();
      if (save_ && opts_.keep_every > 0 && st_.step % opts_.keep_every == 0) {
        char name[32];
        std::snprintf(name, sizeof name, "/step-%06lld", static_cast<long long>(st_.step));
        save_model(name);
      }
      if (stop) stopped = true;
    }
    if (stopped) break;
    if (st_.step < opts_.max_steps) {
      ++st_.epoch;
      st_.batch_in_epoch = 0;
    }
  }
  res_.steps = st_.step;
  res_.last_loss = last_loss_;
  res_.best_metric = st_.best;
  res_.history = st_.history;
  return res_;
}

}  // namespace

TrainResult train_model(Transformer& model, const TrainData& data, const TrainOptions& opts, const RunDir& run_dir,
                        const std::map<std::string, std::string>& extra_files, const TrainProgressFn& progress,
                        const TrainHooks* hooks) {
  validate(opts, data);
  if (hooks && opts.resume) throw std::invalid_argument("train: a run with extra trained parameters cannot be resumed");
  const bool cls = model->config().arch == Arch::EncoderClassifier;
  const bool use_accuracy = opts.best_metric == "accuracy" || (opts.best_metric == "auto" && cls);
  if (use_accuracy && !cls) throw std::invalid_argument("train: best_metric accuracy needs an encoder_classifier");
  convert_to_fp32(model);
  TrainLoop loop(model, data, opts, run_dir.path(), extra_files, progress, hooks);
  loop.start();
  return loop.run();
}

}  // namespace hp
