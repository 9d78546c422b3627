// Shared job plumbing (see header).
#include "headprune/jobs/job.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "headprune/data/tasks.h"
#include "headprune/io/files.h"
#include "headprune/io/hf.h"
#include "headprune/model/memory.h"
#include "headprune/util/dist.h"
#include "headprune/util/log.h"
#include "headprune/util/runtime.h"

namespace hp {

const OptionTable<DataSource>& data_source_table() {
  using D = DataSource;
  using R = ValueRange;
  static const OptionTable<D> t =
      OptionTable<D>()
          .text("config", "--config,--data", "run config whose data section to use (default: the built-in synthetic task, for the built-in "
                "families' own models; a model imported from HF or with a tokenizer needs its data named)",
                &D::config, false)
          .parsed("split", "--split", "train, valid or test", [](D& d, const std::string& s) { d.split = split_name(s); },
                  "valid")
          .parsed("score_split", "--score-split",
                  "the split head importance is computed on (default: --split); e.g. select heads on valid, report "
                  "on test",
                  [](D& d, const std::string& s) { d.score_split = split_name(s); }, "")
          .text("data_root", "--data-root", "directory that relative data paths start from", &D::data_root)
          .integer("max_examples", "--max-examples,--max-sentences", "use only the first N examples (0 = all)",
                   &D::max_examples, R::at_least(0), false)
          .integer("synthetic_examples", "--synthetic",
                   "score and evaluate on N examples of the built-in synthetic task (default 500, for the built-in "
                   "families' own models only; a model imported from HF or with a tokenizer needs --config, "
                   "--calibration or this flag)",
                   &D::synthetic_examples, R::at_least(1), false)
          .integer("synthetic_train", "--synthetic-train", "training examples of the synthetic task for fine-tuning",
                   &D::synthetic_train, R::at_least(1))
          .text("calibration", "--calibration",
                "calibration text file (read with the model's tokenizer) instead of a data config's split; 'random' "
                "for random token ids (speed and memory checks only)",
                &D::calibration, false)
          .integer("calibration_length", "--calibration-length", "tokens per calibration sample", &D::calibration_length,
                   R::between(2, 1 << 20))
          .integer("calibration_samples", "--calibration-samples", "calibration samples", &D::calibration_samples,
                   R::between(1, 1 << 20));
  return t;
}

const OptionTable<FinetuneOptions>& finetune_option_table() {
  using F = FinetuneOptions;
  using R = ValueRange;
  static const OptionTable<F> t =
      OptionTable<F>()
          .integer("steps", "--finetune-steps", "recovery fine-tuning steps after pruning (0 = none)", &F::steps,
                   R::at_least(0))
          .real("lr", "--finetune-lr", "fine-tuning learning rate (default: the run config's)", &F::lr, R::positive(),
                false)
          .integer("batch_tokens", "--finetune-batch-tokens", "tokens per fine-tuning batch (default: the run config's)",
                   &F::batch_tokens, R::at_least(1), false)
          .real("distill_weight", "--distill-weight",
                "fine-tune with distillation from the unpruned model: (1 - w) * task loss + w * T^2 * KL (0 = none)",
                &F::distill_weight, R::between(0, 1))
          .real("distill_temperature", "--distill-temperature", "distillation temperature T", &F::distill_temperature,
                R::positive())
          .real("distill_hidden_weight", "--distill-hidden",
                "add this weight times the MSE of the hidden states entering every attention layer, student vs "
                "unpruned model (CoFi's layer-wise distillation; 0 = none)",
                &F::distill_hidden_weight, R::at_least(0));
  return t;
}

std::function<void(const std::string&, int64_t, int64_t)> JobEvents::phase_callback() const {
  if (!progress) return nullptr;
  auto fn = progress;
  return [fn](const std::string& what, int64_t done, int64_t total) { fn({what, done, total}); };
}

LoadOptions load_options(const Runtime& rt) {
  LoadOptions lo;
  lo.dtype = rt.dtype;
  return lo;
}

void refuse_dtype(const Runtime& rt, const std::string& job, const std::string& why) {
  if (!rt.dtype || *rt.dtype == torch::kFloat) return;
  throw std::invalid_argument(job + ": --dtype " + dtype_name(*rt.dtype) + " does not apply (" + why +
                              "); leave --dtype auto or fp32");
}

JobInputs::JobInputs(const std::string& checkpoint, const DataSource& data, const Runtime& runtime)
    : data_(data), runtime_(runtime) {
  // Checked before the checkpoint is opened: every job's data counts.
  if (data.max_examples < 0)
    throw std::invalid_argument("data: max_examples " + std::to_string(data.max_examples) + " must be >= 0 (0 = all)");
  if (data.synthetic_examples < 0 || data.synthetic_train < 1)
    throw std::invalid_argument("data: the synthetic task needs at least 1 example per split (synthetic_examples " +
                                std::to_string(data.synthetic_examples) + ", synthetic_train " +
                                std::to_string(data.synthetic_train) + ")");
  loaded = open_model(checkpoint, runtime.device, load_options(runtime));
  config_ = loaded.model->config();
  real_model_ = is_hf_dir(checkpoint) ? "a model imported from HF" : loaded.tokenizer ? "a model with a tokenizer" : "";
  if (data.config.empty()) {
    run_ = synthetic_run_config(loaded.model->config().arch);
    spec_ = synthetic_data_spec(data.synthetic_train, data.synthetic_split(), data.synthetic_split());
    spec_source_ = "the synthetic task";
  } else {
    run_ = read_run_config(data.config, /*require_model=*/false);  // the only read of the run config
    spec_ = run_.data;
    spec_source_ = data.config;
  }
}

namespace {
// Every string of a data section that names an existing file or directory (relative to data_root, or
// absolute): what the job will read.
void data_paths(const nlohmann::json& j, const std::string& root, const std::string& source,
                std::vector<NamedPath>& out) {
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s.empty() || s.size() > 4096) return;
    const std::string p = s.front() == '/' ? s : join_path(root, s);
    if (!path_type(p).empty()) out.push_back({p, "the data file of " + source});
  } else if (j.is_structured()) {
    for (const auto& v : j) data_paths(v, root, source, out);
  }
}
}  // namespace

std::vector<NamedPath> job_inputs(const std::string& checkpoint, const DataSource& data,
                                  const std::vector<NamedPath>& extra) {
  std::vector<NamedPath> v = extra;
  if (!checkpoint.empty()) v.push_back({checkpoint, "the checkpoint"});
  if (!data.calibration.empty() && data.calibration != "random") v.push_back({data.calibration, "--calibration"});
  if (!data.config.empty()) {
    v.push_back({data.config, "the run config"});
    try {  // a config that cannot be read fails later with its own message
      const auto j = read_json_file(data.config, /*allow_comments=*/true);
      if (j.is_object() && j.contains("data")) data_paths(j["data"], data.data_root, data.config, v);
    } catch (const std::exception&) {
    }
  }
  return v;
}

namespace {

// Bytes of the attention projections' parameters: what the taylor scorer sums gradients into.
double attention_projection_bytes(TransformerImpl& model) {
  double bytes = 0;
  for (const auto& p : model.named_parameters()) {
    const std::string& name = p.key();
    for (const char* proj : {"q_proj.", "k_proj.", "v_proj.", "o_proj."})
      if (name.find(proj) != std::string::npos) {
        bytes += static_cast<double>(p.value().numel() * p.value().element_size());
        break;
      }
  }
  return bytes;
}

}  // namespace

void plan_scoring_memory(TransformerImpl& model, const EvalSet& set, ScoreOptions& so, ScorerCost cost,
                         const JobEvents& events) {
  int64_t T = 1;
  for (const auto& e : set.examples) T = std::max(T, example_length(e));
  const int64_t B = std::max<int64_t>(1, std::min<int64_t>({so.max_batch, so.batch_tokens / T,
                                                           static_cast<int64_t>(set.examples.size())}));
  const auto& cfg = model.config();
  const auto dtype = model.parameters().front().scalar_type();
  const auto device = model.parameters().front().device();
  const bool single_stack = cfg.arch != Arch::EncoderDecoder;
  const double share = so.pipeline ? 1.0 / std::max(1, dist::world_size()) : 1.0;  // a pipeline rank's layers
  const double sums = cost == ScorerCost::BackwardWeightSums ? attention_projection_bytes(model) : 0.0;
  auto need = [&](MemoryUse use, bool layerwise) {
    MemoryEstimate m = estimate_memory(cfg, dtype, B, T, use, layerwise);
    m.weights *= share;
    if (use == MemoryUse::GateGradients) m.copies += sums;
    return m;
  };
  const std::string hint = "try --dtype bf16, fewer or shorter calibration samples" +
                           std::string(single_stack ? ", or --pipeline over more processes" : "");
  const bool gradient = cost != ScorerCost::Forward;  // a backward pass (taylor's reaches the attention weights)
  if (gradient && !so.layerwise && !so.pipeline && single_stack) {
    // Layer by layer when the whole graph would not fit, or (a model of more than a GiB) when its
    // activations would add more than a fifth to the weights: memory stays about the weights.
    const double avail = static_cast<double>(available_memory_bytes(device));
    const MemoryEstimate whole = need(MemoryUse::GateGradients, false), layerwise = need(MemoryUse::GateGradients, true);
    const bool tight = avail > 0 && whole.total() > avail && layerwise.total() <= avail;
    const bool heavy = whole.weights > (1ull << 30) && whole.activations > 0.2 * whole.weights;
    if (tight || heavy) {
      so.layerwise = true;
      if (device.is_cpu()) allocator_for_tight_memory();
      events.say("importance", "the whole graph needs about " + format_gib(whole.total()) + " (" + format_gib(avail) +
                                   " available): gradients layer by layer instead, about " + format_gib(layerwise.total()));
    }
  }
  const MemoryEstimate m = gradient ? need(MemoryUse::GateGradients, so.layerwise || so.pipeline) : need(MemoryUse::Inference, false);
  check_fits(m, device, "scoring (" + std::to_string(B) + " x " + std::to_string(T) + " tokens per batch)", hint);
}

void JobInputs::check_synthetic_allowed() const {
  if (real_model_.empty()) return;
  if (data_.synthetic_examples == 0)
    throw std::invalid_argument(
        loaded.dir + " is " + real_model_ + ": it needs data to score and evaluate on. Give --calibration FILE (text read "
        "with its tokenizer), --config RUN.json (a run config's data section) or, to use the built-in synthetic task "
        "knowingly, --synthetic N (in Python: data={\"calibration\": ...}, {\"config\": ...} or "
        "{\"synthetic_examples\": N}); the synthetic task's numbers say nothing about real text");
  if (!synthetic_warned_)
    log_warn("data", "the data is synthetic: " + std::to_string(data_.synthetic_examples) +
                         " examples of the built-in synthetic task (--synthetic), not text; the numbers on " +
                         loaded.dir + " say nothing about real text");
  synthetic_warned_ = true;
}

EvalSet JobInputs::load_split(const std::string& split, int64_t max_examples) const {
  if (!data_.calibration.empty()) {
    // Calibration text is a language-modelling stream: nothing there says a class or a translation.
    if (config().arch != Arch::DecoderLM)
      throw std::invalid_argument("--calibration gives unlabelled token blocks for decoder LMs; this model is an " +
                                  to_string(config().arch) + ": give a data config (--config) or the synthetic task");
    EvalSet s;
    s.name = data_.calibration == "random" ? "random calibration ids" : "calibration text " + data_.calibration;
    s.examples = calibration_blocks(loaded.tokenizer, data_.calibration, config().vocab_size, data_.calibration_length,
                                    data_.calibration_samples, runtime_.seed);
    if (max_examples > 0 && static_cast<int64_t>(s.examples.size()) > max_examples) s.examples.resize(static_cast<size_t>(max_examples));
    return s;
  }
  if (data_.config.empty()) check_synthetic_allowed();
  return load_eval_set(config(), loaded.tokenizer, spec_, spec_source_, split, data_.data_root, max_examples,
                       runtime_.seed);
}

const EvalSet& JobInputs::eval() {
  if (!eval_) eval_ = load_split(data_.split, data_.max_examples);
  return *eval_;
}

const EvalSet& JobInputs::score_set() {
  if (data_.score_split.empty() || data_.score_split == data_.split) return eval();
  if (!score_) score_ = load_split(data_.score_split, data_.max_examples);
  return *score_;
}

const TrainData& JobInputs::train_data() {
  if (!train_) train_ = TrainData{load_split("train", 0).examples, load_split("valid", data_.max_examples).examples};
  return *train_;
}

TrainOptions JobInputs::train_options() const {
  TrainOptions to = run_.train;
  to.seed = runtime_.seed;
  return to;
}

TrainOptions JobInputs::finetune_options(const FinetuneOptions& f) const {
  if (f.steps < 0)
    throw std::invalid_argument("fine-tuning: steps " + std::to_string(f.steps) + " must be >= 0 (0 = none)");
  if (f.batch_tokens < 0)
    throw std::invalid_argument("fine-tuning: batch_tokens " + std::to_string(f.batch_tokens) +
                                " must be >= 0 (0 = the run config's)");
  if (!(f.lr >= 0 && std::isfinite(f.lr)))
    throw std::invalid_argument("fine-tuning: lr must be a finite number >= 0 (0 = the run config's)");
  TrainOptions to = train_options();
  if (f.lr > 0) to.lr = f.lr;
  if (f.batch_tokens > 0) to.batch_tokens = f.batch_tokens;
  to.warmup_steps = std::min<int64_t>(to.warmup_steps, std::max<int64_t>(1, f.steps / 10));
  to.log_every = std::max<int64_t>(1, f.steps / 5);
  to.max_steps = f.steps;
  to.eval_every = f.steps;
  to.save_every = f.steps;
  to.distill_weight = f.distill_weight;
  to.distill_temperature = f.distill_temperature;
  to.distill_hidden_weight = f.distill_hidden_weight;
  return to;
}

void StageTable::record(const std::string& stage, TransformerImpl& m, const EvalSet& set, const MetricOptions& options) {
  std::vector<Metric> ms = {metric};
  if (metric != Metric::Loss) ms.push_back(Metric::Loss);
  const auto r = measure(m, set, ms, options);
  rows.push_back({stage, m.n_active_heads(), m.n_parameters(), r.at(metric).value(), r.at(Metric::Loss).value()});
}

void StageTable::print(std::ostream& out) const {
  out << std::left << std::setw(12) << "stage" << std::right << std::setw(8) << "heads" << std::setw(12) << "params"
      << std::setw(12) << to_string(metric) << std::setw(10) << "loss" << "\n";
  for (const auto& r : rows)
    out << std::left << std::setw(12) << r.stage << std::right << std::setw(8) << r.heads << std::setw(12) << r.params
        << std::setw(12) << fmt(r.metric) << std::setw(10) << fmt(r.loss) << "\n";
}

nlohmann::json StageTable::to_json() const {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : rows)
    j.push_back({{"stage", r.stage}, {"heads", r.heads}, {"params", r.params}, {"metric", r.metric}, {"loss", r.loss}});
  return j;
}

Metric metric_or_default(const std::optional<Metric>& m, const ModelConfig& cfg) {
  return m ? *m : default_metric(cfg.arch);
}

std::string fmt(double v, int prec) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << v;
  return o.str();
}

uint64_t dir_bytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : list_directory(dir))
    n += e.size;  // 0 for anything but a regular file
  return n;
}

}  // namespace hp
