// Side-by-side inference benchmarks (see header).
#include "headprune/eval/benchmark.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "headprune/model/precision.h"
#include "headprune/util/runtime.h"

namespace hp {

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
  return batch;
}

}  // namespace

nlohmann::json BenchRecord::to_json() const {
  return {{"model", model},
          {"precision", precision},
          {"batch", batch},
          {"seq_len", seq_len},
          {"median_ms", median_ms},
          {"p10_ms", p10_ms},
          {"p90_ms", p90_ms},
          {"examples_per_s", examples_per_s},
          {"tokens_per_s", tokens_per_s},
          {"params", params},
          {"heads", heads},
          {"gflops", gflops},
          {"ideal_speedup", ideal_speedup},
          {"measured_speedup", measured_speedup},
          {"paired_speedup", paired_speedup}};
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
          {"int8_engine", quantized_engine_name()},
          {"torch", TORCH_VERSION},
          {"peak_rss_kb", peak_rss_kb()}};
}

std::vector<BenchRecord> bench_models(std::vector<BenchModel>& models, const BenchOptions& opts,
                                      const std::function<void(int64_t, int64_t)>& progress) {
  if (models.empty()) throw std::invalid_argument("bench: no models");
  if (opts.reps < 1 || opts.warmup < 0) throw std::invalid_argument("bench: reps must be >= 1 and warmup >= 0");
  for (auto b : opts.batch_sizes)
    if (b < 1) throw std::invalid_argument("bench: batch sizes must be >= 1");
  for (auto& m : models) {
    m.model->eval();
    for (auto t : opts.seq_lens)
      if (t < 1 || t > m.model->config().max_positions)
        throw std::invalid_argument("bench: sequence length " + std::to_string(t) + " is outside [1, " +
                                    std::to_string(m.model->config().max_positions) + "] (max_positions of " + m.name +
                                    ")");
  }
  c10::InferenceMode guard;
  std::vector<BenchRecord> out;
  const int64_t total = static_cast<int64_t>(opts.batch_sizes.size() * opts.seq_lens.size());
  int64_t done = 0;
  for (auto t : opts.seq_lens) {
    for (auto b : opts.batch_sizes) {
      std::vector<Batch> inputs;  // generated on the CPU (same ids on every device), moved to each model's device
      for (auto& m : models)
        inputs.push_back(random_batch(m.model->config(), b, t, opts.seed).to(m.model->parameters().front().device()));
      std::vector<std::vector<double>> ms(models.size());
      for (int64_t r = 0; r < opts.warmup + opts.reps; ++r) {
        for (size_t i = 0; i < models.size(); ++i) {
          const auto device = inputs[i].input_ids.device();
          synchronize(device);
          const auto t0 = std::chrono::steady_clock::now();
          auto logits = models[i].run ? models[i].run(inputs[i]) : models[i].model->forward(inputs[i]).logits;
          synchronize(device);  // the clock stops when the device has finished
          const double e = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          if (r >= opts.warmup) ms[i].push_back(e);
        }
      }
      const size_t first = out.size();
      for (size_t i = 0; i < models.size(); ++i) {
        BenchRecord rec;
        const auto& cfg = models[i].model->config();
        rec.model = models[i].name;
        rec.precision = models[i].precision;
        rec.batch = b;
        rec.seq_len = t;
        rec.median_ms = quantile(ms[i], 0.5);
        rec.p10_ms = quantile(ms[i], 0.1);
        rec.p90_ms = quantile(ms[i], 0.9);
        rec.examples_per_s = 1000.0 * static_cast<double>(b) / rec.median_ms;
        rec.tokens_per_s = rec.examples_per_s * static_cast<double>(t);
        rec.params = models[i].model->n_parameters();
        rec.heads = models[i].model->n_active_heads();
        rec.gflops = forward_flops(cfg, b, t) / 1e9;
        rec.ideal_speedup = out.size() > first ? out[first].gflops / rec.gflops : 1.0;
        rec.measured_speedup = out.size() > first ? out[first].median_ms / rec.median_ms : 1.0;
        std::vector<double> ratios;
        for (size_t r = 0; r < ms[i].size(); ++r) ratios.push_back(ms[0][r] / ms[i][r]);
        rec.paired_speedup = quantile(ratios, 0.5);
        out.push_back(rec);
      }
      if (progress) progress(++done, total);
    }
  }
  return out;
}

}  // namespace hp
