// Side-by-side inference benchmarks (see header).
#include "headprune/eval/benchmark.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <filesystem>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "headprune/decode/search.h"
#include "headprune/eval/graph_forward.h"
#include "headprune/io/files.h"
#include "headprune/io/formats.h"
#include "headprune/io/safetensors.h"
#include "headprune/model/precision.h"
#include "headprune/util/blas.h"
#include "headprune/util/gemm.h"
#include "headprune/util/runtime.h"
#include "headprune/util/torch_compat.h"

namespace hp {

const OptionTable<BenchOptions>& bench_option_table() {
  using B = BenchOptions;
  using R = ValueRange;
  static const OptionTable<B> t =
      OptionTable<B>()
          .integers("batch_sizes", "--batch", "batch sizes", &B::batch_sizes, R::at_least(1))
          .integers("seq_lens", "--seq", "sequence lengths (at most the models' max_positions)", &B::seq_lens,
                    R::at_least(1))
          .integer("reps", "--reps", "timed repetitions per model and shape", &B::reps, R::at_least(1))
          .integer("warmup", "--warmup", "untimed repetitions first", &B::warmup, R::at_least(0))
          .real("min_seconds", "--min-time",
                "time every model for at least this many seconds per shape (more repetitions than --reps where "
                "needed; 0: exactly --reps)",
                &B::min_seconds, R::between(0, kMaxMinSeconds))
          .yes_no("train", "--train", "time training steps (forward, loss, backward, AdamW) instead of inference",
                  &B::train, FlagStyle::Sets)
          .yes_no("gemm_probe", "--no-gemm-probe", "skip the fp32 GEMM probe that each row's GFLOP/s is compared with",
                  &B::gemm_probe, FlagStyle::Clears)
          .text("io_path", "--save-io",
                "write the first checkpoint's inputs and logits at the first shape here (safetensors), for an "
                "outside baseline to check (bench/eager/eager.py --check)",
                &B::io_path, false)
          .text("profile_path", "--profile",
                "record the timed repetitions op by op (LibTorch's profiler) and write a Chrome trace here; "
                "bench/eager/profile_ops.py sums it per op. Profiled times are slower than unprofiled ones",
                &B::profile_path, false)
          .yes_no("generation", "--generate",
                  "decoder LMs: time generation instead of forward passes: prompt processing at each --batch x --seq "
                  "(an empty key/value cache filled, the last position's logits) and decoding --new-tokens greedy "
                  "tokens after --decode-after",
                  &B::generation, FlagStyle::Sets)
          .integer("new_tokens", "--new-tokens", "--generate: tokens decoded per sequence", &B::new_tokens,
                   R::at_least(1))
          .integer("decode_after", "--decode-after", "--generate: prompt length before decoding", &B::decode_after,
                   R::at_least(1))
          .parsed("graphs", "--graphs",
                  "off, cuda (each model's forward pass, or with --generate its decoding step, recorded once per "
                  "shape as a CUDA graph, untimed, and its replays timed; --device cuda) or emulate (the replay's "
                  "static buffers without a recording, any device: a check of the outputs, not a speed-up)",
                  [](B& b, const std::string& s) { b.graphs = parse_graph_replay(s); }, "off");
  return t;
}

OutputFile bench_io_output(const std::string& path) {
  OutputFile f{path, "--save-io", "a benchmark's inputs and logits (safetensors)", nullptr};
  f.ours = [](const std::string& p) {  // the header's __metadata__.format
    try {
      const std::string head = read_file_head(p, 1 << 20);
      if (head.size() < 8) return false;
      uint64_t n = 0;
      for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(head[static_cast<size_t>(i)]);
      if (n > head.size() - 8) return false;
      const auto j = parse_json(head.substr(8, n), p);
      return j.contains("__metadata__") && j["__metadata__"].value("format", std::string()) == kBenchIoFormat;
    } catch (const std::exception&) {
      return false;
    }
  };
  return f;
}

OutputFile bench_profile_output(const std::string& path) {
  return {path, "--profile", "a profiler trace (Chrome trace JSON)", json_format_is(kTraceFormat)};
}

namespace {

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

Batch random_batch(const ModelConfig& cfg, int64_t b, int64_t t, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto ids = [&](int64_t vocab) { return torch::randint(4, std::max<int64_t>(5, vocab), {b, t}, gen, torch::kLong); };
  Batch batch;
  batch.input_ids = ids(cfg.vocab_size);
  batch.attention_mask = torch::ones({b, t}, torch::kLong);
  if (cfg.n_segments > 0) batch.segment_ids = torch::zeros({b, t}, torch::kLong);
  if (cfg.arch == Arch::EncoderDecoder) {
    batch.decoder_input_ids = ids(cfg.effective_tgt_vocab());
    batch.decoder_attention_mask = torch::ones({b, t}, torch::kLong);
  }
  // Labels for training steps: classes, or the next tokens of the (target) sequence.
  if (cfg.arch == Arch::EncoderClassifier) {
    batch.labels = torch::randint(0, std::max<int64_t>(1, cfg.n_classes), {b}, gen, torch::kLong);
  } else {
    const auto& seq = cfg.arch == Arch::EncoderDecoder ? batch.decoder_input_ids : batch.input_ids;
    batch.labels = torch::cat({seq.narrow(1, 1, t - 1), torch::full({b, 1}, kIgnoreIndex, torch::kLong)}, 1);
  }
  return batch;
}

}  // namespace

nlohmann::json BenchRecord::to_json() const {
  return {{"model", model},
          {"precision", precision},
          {"mode", mode},
          {"batch", batch},
          {"seq_len", seq_len},
          {"new_tokens", new_tokens},
          {"reps", reps},
          {"kv_cache_bytes", kv_cache_bytes},
          {"median_ms", median_ms},
          {"p10_ms", p10_ms},
          {"p90_ms", p90_ms},
          {"examples_per_s", examples_per_s},
          {"tokens_per_s", tokens_per_s},
          {"params", params},
          {"heads", heads},
          {"gflops", gflops},
          {"gflop_per_s", gflop_per_s},
          {"peak_share", peak_share},
          {"ideal_speedup", ideal_speedup},
          {"measured_speedup", measured_speedup},
          {"paired_speedup", paired_speedup},
          {"device_peak_mib", static_cast<double>(device_peak_bytes) / (1024.0 * 1024.0)},
          {"graphs", graphs}};
}

int64_t peak_rss_kb() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss);
}

nlohmann::json bench_environment() {
  return {{"cpu", cpu_model()},
          {"threads", at::get_num_threads()},
          {"hardware_threads", hardware_threads()},
          {"blas", blas_info()},
          {"blas_kernels", inspect_blas_kernels().reason},
          {"fp32_gemm", gemm::describe()},
          {"allocator", allocator_info().empty() ? "glibc malloc defaults" : allocator_info()},
          {"int8_engine", quantized_engine_name()},
          {"torch", compat::torch_build()},
          {"peak_rss_kb", peak_rss_kb()}};
}

double gemm_peak_gflops(const torch::Device& device, int64_t n, int reps) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const auto a = torch::randn({n, n}, gen).to(device), b = torch::randn({n, n}, gen).to(device);
  c10::InferenceMode guard;  // after making b: packed_product caches normal tensors only
  auto c = torch::empty({n, n}, a.options());
  double best = 0;
  // The BLAS product, and on the CPU also the fp32 engines of the linear layers (oneDNN's sgemm and
  // its matmul on packed weights when built with it, util/gemm.h): the peak is the fastest.
  const bool onednn = device.is_cpu() && gemm::fp32_gemm() != gemm::Fp32Gemm::OpenBlas;
  for (int engine = 0; engine < (onednn ? 3 : 1); ++engine) {
    for (int r = -2; r < reps; ++r) {  // two warm-up products (thread pools, caches, GPU clocks)
      synchronize(device);
      const auto t0 = std::chrono::steady_clock::now();
      if (engine == 0) {
        torch::mm_out(c, a, b);
      } else if (engine == 1) {
        c = gemm::onednn_product(a, b, {});  // a b^T: the same FLOPs, on oneDNN whatever the rule says
      } else {
        c = gemm::packed_product(a, b, {});
      }
      synchronize(device);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r >= 0 && s > 0) best = std::max(best, 2.0 * static_cast<double>(n * n) * static_cast<double>(n) / s / 1e9);
    }
  }
  return best;
}

namespace {

// Generation rows: decoder LMs at inference, the prompt and its new tokens within max_positions.
void check_generation(const BenchModel& m, const BenchOptions& opts) {
  const auto& cfg = m.model->config();
  if (opts.train || m.run)
    throw std::invalid_argument("bench: generation times a decoder LM's own inference path (not --train or a baseline): " + m.name);
  if (cfg.arch != Arch::DecoderLM) throw std::invalid_argument("bench: generation needs decoder_lm models; " + m.name + " is not one");
  if (opts.new_tokens < 1 || opts.decode_after < 1 || opts.decode_after + opts.new_tokens > cfg.max_positions)
    throw std::invalid_argument("bench: decoding " + std::to_string(opts.new_tokens) + " tokens after " +
                                std::to_string(opts.decode_after) + " needs both >= 1 and at most " +
                                std::to_string(cfg.max_positions) + " positions in all (max_positions of " + m.name + ")");
}

// Checks the options against every model and puts each in train or eval mode.
void prepare_models(std::vector<BenchModel>& models, const BenchOptions& opts) {
  if (models.empty()) throw std::invalid_argument("bench: no models");
  if (opts.reps < 1 || opts.warmup < 0) throw std::invalid_argument("bench: reps must be >= 1 and warmup >= 0");
  if (!(opts.min_seconds >= 0) || opts.min_seconds > kMaxMinSeconds)
    throw std::invalid_argument("bench: the least time per model must be between 0 and " +
                                std::to_string(static_cast<int>(kMaxMinSeconds)) + " seconds");
  for (auto b : opts.batch_sizes)
    if (b < 1) throw std::invalid_argument("bench: batch sizes must be >= 1");
  for (auto& m : models) {
    if (opts.graphs != GraphReplay::Off && (opts.train || m.run))
      throw std::invalid_argument("bench: --graphs replays the inference of a model's own path; not with --train or "
                                  "a baseline (" + m.name + ")");
    if (opts.train && !m.run) throw std::invalid_argument("bench: training steps need a step function for " + m.name);
    if (opts.train) {
      m.model->train();
    } else {
      m.model->eval();
    }
    if (opts.generation) check_generation(m, opts);
    for (auto t : opts.seq_lens)
      if (t < 1 || t > m.model->config().max_positions)
        throw std::invalid_argument("bench: sequence length " + std::to_string(t) + " is outside [1, " +
                                    std::to_string(m.model->config().max_positions) + "] (max_positions of " + m.name +
                                    ")");
  }
}

// Every shape of every model against the memory there is, before the first batch is allocated.
void check_bench_memory(std::vector<BenchModel>& models, const BenchOptions& opts) {
  for (auto& m : models) {
    const auto p = m.model->parameters().front();
    const double elem = static_cast<double>(p.element_size() < 4 && p.is_floating_point() ? p.element_size() : 4);
    // Training also holds a gradient and two AdamW moments per parameter.
    const double state = opts.train ? 3.0 * 4.0 * static_cast<double>(m.model->n_parameters()) : 0.0;
    for (auto t : opts.seq_lens)
      for (auto b : opts.batch_sizes)
        check_memory(forward_memory_bytes(m.model->config(), b, t, opts.train, elem) + state, p.device(),
                     "bench: batch " + std::to_string(b) + " x length " + std::to_string(t) + " of " + m.name,
                     "try a smaller batch size or length (--batch, --seq)");
  }
}

// One shape's timings, per model: the timed repetitions (ms) and the device's peak memory (bytes).
struct ShapeTimes {
  std::vector<std::vector<double>> ms;
  std::vector<int64_t> device_peak;
  std::vector<int64_t> kv_bytes;  // generation: the cache at the end of a run
};

// What a shape times: whole forward passes, or generation's prompt or decoding steps.
enum class Workload { Forward, Prompt, Decode };

// With BenchOptions::graphs: a model's forward pass replayed per shape, and at a decoding shape a session
// whose prompt is fed (and first step recorded) before any round; each round rewinds it to the prompt.
struct ModelReplay {
  std::unique_ptr<GraphForward> forward;
  std::unique_ptr<LmSession> decode;
  torch::Tensor first;  // decode: the first new token (the prompt's arg-max)
};

// One run of model m on `in`: its logits (forward) and the milliseconds it took. Decoding fills the
// cache with the prompt before the clock starts; *kv_bytes receives the cache's size at the end.
double run_once(BenchModel& m, ModelReplay& replay, const Batch& in, Workload w, const BenchOptions& opts,
                torch::Tensor& logits, int64_t* kv_bytes) {
  const auto device = in.input_ids.device();
  std::optional<LmSession> fresh;
  torch::Tensor next;
  if (w == Workload::Prompt || (w == Workload::Decode && !replay.decode)) fresh.emplace(*m.model);
  LmSession* session = replay.decode && w == Workload::Decode ? replay.decode.get() : fresh ? &*fresh : nullptr;
  if (w == Workload::Decode && replay.decode) {
    replay.decode->rewind(opts.decode_after);
    next = replay.first;
  } else if (w == Workload::Decode) {
    next = session->feed(in.input_ids).argmax(-1, true);
  }
  synchronize(device);
  compat::reset_peak_memory(device);
  const auto t0 = std::chrono::steady_clock::now();
  if (w == Workload::Forward) {
    logits = m.run ? m.run(in) : replay.forward ? replay.forward->logits(in) : m.model->forward(in).logits;
  } else if (w == Workload::Prompt) {
    logits = session->feed(in.input_ids);
  } else {
    for (int64_t i = 0; i < opts.new_tokens; ++i) next = session->feed(next).argmax(-1, true);  // [B, 1]
  }
  synchronize(device);  // the clock stops when the device has finished
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (session) *kv_bytes = session->kv_cache_bytes();
  return ms;
}

// Whether another timed round is needed after `timed` rounds: fewer than opts.reps, or (with
// BenchOptions::min_seconds) some model's timed rounds sum (`timed_ms`) to less than the least time asked
// for; at most a million rounds. Decided on the measured sums, not on an estimate from a (cold) warm-up
// round.
bool needs_another_round(int64_t timed, const std::vector<double>& timed_ms, const BenchOptions& opts) {
  if (timed < opts.reps) return true;
  if (opts.min_seconds <= 0 || timed >= 1000000) return false;
  return *std::min_element(timed_ms.begin(), timed_ms.end()) < 1000.0 * opts.min_seconds;
}

// Runs every model on the same inputs at batch b x length t, round by round; starts the profiler
// (when asked) at the first timed round, and on the first shape writes the first model's inputs and
// logits (--save-io).
ShapeTimes time_shape(std::vector<BenchModel>& models, std::vector<ModelReplay>& replays, const BenchOptions& opts,
                      int64_t b, int64_t t, Workload w, bool first_shape,
                      std::optional<torch::autograd::profiler::RecordProfile>& profile, std::ostream& trace) {
  std::vector<Batch> inputs;  // generated on the CPU (same ids on every device), moved to each model's device
  for (auto& m : models)
    inputs.push_back(random_batch(m.model->config(), b, t, opts.seed).to(m.model->parameters().front().device()));
  for (size_t i = 0; i < models.size(); ++i) {  // each model's recording at this shape, before any round
    auto& r = replays[i];
    if (r.forward && w == Workload::Forward) r.forward->logits(inputs[i]);
    r.decode.reset();
    if (opts.graphs != GraphReplay::Off && w == Workload::Decode) {
      r.decode = std::make_unique<LmSession>(*models[i].model, opts.graphs, opts.decode_after + opts.new_tokens);
      r.first = r.decode->feed(inputs[i].input_ids).argmax(-1, true);
      r.decode->feed(r.first);  // records the step
    }
  }
  ShapeTimes times{std::vector<std::vector<double>>(models.size()), std::vector<int64_t>(models.size(), 0),
                   std::vector<int64_t>(models.size(), 0)};
  std::vector<double> timed_ms(models.size(), 0.0);  // each model's timed rounds, summed
  for (int64_t r = 0; r < opts.warmup || needs_another_round(r - opts.warmup, timed_ms, opts); ++r) {
    if (r == opts.warmup && !opts.profile_path.empty() && !profile) profile.emplace(trace);
    for (size_t i = 0; i < models.size(); ++i) {
      torch::Tensor logits;
      const double e = run_once(models[i], replays[i], inputs[i], w, opts, logits, &times.kv_bytes[i]);
      const auto device = inputs[i].input_ids.device();
      if (r >= opts.warmup) {
        times.ms[i].push_back(e);
        timed_ms[i] += e;
      }
      times.device_peak[i] = std::max(times.device_peak[i], compat::peak_memory_bytes(device));
      if (r == 0 && i == 0 && first_shape && !opts.io_path.empty() && !opts.train && w == Workload::Forward)
        write_output_file(bench_io_output(opts.io_path),
                          serialize_safetensors({{"input_ids", inputs[i].input_ids.cpu()},
                                                 {"attention_mask", inputs[i].attention_mask.cpu()},
                                                 {"logits", logits.to(torch::kCPU, torch::kFloat).contiguous()}},
                                                {{"format", kBenchIoFormat}}));
    }
  }
  return times;
}

// One record per model for a shape, appended to `out`; speed-ups are against the shape's first model.
void add_records(std::vector<BenchModel>& models, const BenchOptions& opts, int64_t b, int64_t t, Workload w,
                 const ShapeTimes& times, double peak, std::vector<BenchRecord>& out) {
  const auto& ms = times.ms;
  const size_t first = out.size();
  for (size_t i = 0; i < models.size(); ++i) {
    BenchRecord rec;
    const auto& cfg = models[i].model->config();
    rec.model = models[i].name;
    rec.precision = models[i].precision;
    rec.mode = w == Workload::Prompt ? "prompt" : w == Workload::Decode ? "decode" : opts.train ? "train" : "inference";
    rec.batch = b;
    rec.seq_len = t;
    rec.new_tokens = w == Workload::Decode ? opts.new_tokens : 0;
    rec.kv_cache_bytes = times.kv_bytes[i];
    rec.reps = static_cast<int64_t>(ms[i].size());
    rec.median_ms = quantile(ms[i], 0.5);
    rec.p10_ms = quantile(ms[i], 0.1);
    rec.p90_ms = quantile(ms[i], 0.9);
    rec.examples_per_s = 1000.0 * static_cast<double>(b) / rec.median_ms;
    rec.tokens_per_s = rec.examples_per_s * static_cast<double>(w == Workload::Decode ? opts.new_tokens : t);
    rec.params = models[i].model->n_parameters();
    rec.heads = models[i].model->n_active_heads();
    if (w == Workload::Forward) {
      rec.gflops = (opts.train ? 3.0 : 1.0) * forward_flops(cfg, b, t) / 1e9;  // backward ~ 2 x forward
    } else {
      rec.gflops = generation_flops(cfg, b, t, rec.new_tokens) / 1e9;
    }
    rec.gflop_per_s = rec.gflops / (rec.median_ms / 1000.0);
    rec.peak_share = peak > 0 ? rec.gflop_per_s / peak : 0.0;
    rec.ideal_speedup = out.size() > first ? out[first].gflops / rec.gflops : 1.0;
    rec.measured_speedup = out.size() > first ? out[first].median_ms / rec.median_ms : 1.0;
    std::vector<double> ratios;
    for (size_t r = 0; r < ms[i].size(); ++r) ratios.push_back(ms[0][r] / ms[i][r]);
    rec.paired_speedup = quantile(ratios, 0.5);
    rec.device_peak_bytes = times.device_peak[i];
    rec.graphs = graph_replay_name(w == Workload::Prompt ? GraphReplay::Off : opts.graphs);  // prompts run eagerly
    out.push_back(rec);
  }
}

}  // namespace

std::vector<BenchRecord> bench_models(std::vector<BenchModel>& models, const BenchOptions& opts,
                                      const std::function<void(int64_t, int64_t)>& progress, double* gemm_peak) {
  prepare_models(models, opts);
  check_bench_memory(models, opts);
  const double peak = opts.gemm_probe ? gemm_peak_gflops(models.front().model->parameters().front().device()) : 0.0;
  if (gemm_peak) *gemm_peak = peak;
  std::optional<c10::InferenceMode> inference;
  if (!opts.train) inference.emplace();
  // The profiler starts at the first timed repetition and records to the end (a later shape's warm-up
  // included); its trace is written when it is destroyed, into a temporary file renamed at the end.
  std::ostringstream trace;
  std::optional<torch::autograd::profiler::RecordProfile> profile;
  std::vector<BenchRecord> out;
  // Forward or prompt rows at every batch and length; decoding rows at every batch after them.
  std::vector<std::tuple<int64_t, int64_t, Workload>> shapes;
  for (auto t : opts.seq_lens)
    for (auto b : opts.batch_sizes) shapes.emplace_back(b, t, opts.generation ? Workload::Prompt : Workload::Forward);
  if (opts.generation)
    for (auto b : opts.batch_sizes) shapes.emplace_back(b, opts.decode_after, Workload::Decode);
  std::vector<ModelReplay> replays(models.size());  // one per model, its shapes recorded in turn
  if (opts.graphs != GraphReplay::Off && !opts.generation)
    for (size_t i = 0; i < models.size(); ++i)
      replays[i].forward = std::make_unique<GraphForward>(*models[i].model, opts.graphs, /*buckets=*/false);
  int64_t done = 0;
  for (const auto& [b, t, w] : shapes) {
    const ShapeTimes times = time_shape(models, replays, opts, b, t, w, out.empty(), profile, trace);
    add_records(models, opts, b, t, w, times, peak, out);
    if (progress) progress(++done, static_cast<int64_t>(shapes.size()));
  }
  if (profile) {
    profile.reset();  // writes the trace (a JSON array of events) into `trace`
    write_output_file(bench_profile_output(opts.profile_path),
                      std::string("{\"format\": \"") + kTraceFormat + "\", \"traceEvents\": " + trace.str() + "}\n");
  }
  return out;
}

}  // namespace hp
