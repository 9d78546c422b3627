// Inference benchmarks of whole models, side by side: latency (median and spread over
// repetitions), throughput, the FLOP count of the forward pass and, against the first model, the
// FLOP-proportional ideal speedup next to the measured one.
//
// Models are timed in rounds: every repetition runs each model once, in turn, so slow drifts of a
// shared machine affect them alike and the ratios stay comparable. Inputs are random token ids
// (no padding) of a fixed length; encoder-decoder models get the same length on both sides.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/io/outputs.h"
#include "headprune/config.h"
#include "headprune/model/geometry.h"  // forward_flops
#include "headprune/model/transformer.h"
#include "headprune/util/options.h"
#include "headprune/util/shape_graphs.h"

namespace hp {

// The largest BenchOptions::min_seconds (and BudgetShape::min_seconds) accepted: an hour per model.
constexpr double kMaxMinSeconds = 3600;

struct BenchOptions {
  std::vector<int64_t> batch_sizes = {1, 4, 16, 64};
  std::vector<int64_t> seq_lens = {128};
  int64_t warmup = 2;
  int64_t reps = 10;
  // When > 0: more rounds than `reps` where needed for every model to be timed for at least this many
  // seconds at each shape (rounds are added until every model's timed rounds sum to it). A few repetitions
  // of a model of milliseconds sample the machine's speed over a fraction of a second, which on a
  // shared machine moves by tens of percent from one second to the next.
  double min_seconds = 0;  // at most kMaxMinSeconds
  uint64_t seed = 1;
  bool gemm_probe = true;  // time an fp32 GEMM first: the rate each row's GFLOP/s is compared with
  // Training steps instead of inference: models stay in train mode, every BenchModel must have `run`
  // (one step: forward, loss, backward, optimizer), and FLOPs count 3 x the forward pass.
  bool train = false;
  // When set: the first model's inputs and logits at the first shape are written here (safetensors:
  // input_ids, attention_mask, logits), so that an outside baseline can check it computes the same.
  std::string io_path;
  // When set: the timed repetitions (not the warm-up) of every model and shape are recorded op by op
  // by LibTorch's profiler and written here as a Chrome trace (chrome://tracing, Perfetto;
  // bench/eager/profile_ops.py sums it per op). Profiling slows the runs down: their times are not
  // comparable with an unprofiled run.
  std::string profile_path;
  // Generation instead of whole forward passes (decoder LMs; decode/search.h's LmSession, the path of
  // `generate`): a "prompt" row per batch and length times filling an empty key/value cache with the
  // prompt (the logits of its last position only, as serving engines compute them), and a "decode" row
  // per batch times new_tokens greedy steps (arg-max, one token per sequence) after an untimed prompt of
  // decode_after tokens.
  bool generation = false;
  int64_t new_tokens = 128, decode_after = 128;
  // Inference replayed per shape: Cuda records each model's forward pass at each shape once as a CUDA
  // graph (untimed; eval/graph_forward.h, at the exact shapes) and times its replays; with generation,
  // the decoding steps on caches of fixed size (LmSession's graphs; prompts run as without). The
  // models' own path only (not --train or a baseline).
  GraphReplay graphs = GraphReplay::Off;
};

// BenchOptions' options for `bench` and Python's bench(): keyword, flag, help and range per field
// (util/options.h). The seed is the runtime's.
const OptionTable<BenchOptions>& bench_option_table();

// The file outputs of a benchmark (io/outputs.h): each replaces only an earlier one of its kind.
OutputFile bench_io_output(const std::string& path);       // --save-io (safetensors with kBenchIoFormat)
OutputFile bench_profile_output(const std::string& path);  // --profile (a Chrome trace with kTraceFormat)

struct BenchRecord {
  std::string model, precision = "fp32", mode = "inference";  // mode: inference | train | prompt | decode
  int64_t batch = 0, seq_len = 0;  // decode: seq_len is the prompt before the new tokens
  int64_t new_tokens = 0;          // decode: tokens generated per sequence (tokens_per_s counts these)
  int64_t reps = 0;                // timed repetitions (BenchOptions::reps, or more for min_seconds)
  int64_t kv_cache_bytes = 0;      // prompt, decode: cached keys and values at the end (all sequences)
  double median_ms = 0, p10_ms = 0, p90_ms = 0;
  double examples_per_s = 0, tokens_per_s = 0;
  int64_t params = 0;
  int64_t heads = 0;
  double gflops = 0;        // FLOPs of one forward pass (generation_flops when generating), in billions
  double gflop_per_s = 0;   // achieved: gflops / median seconds
  double peak_share = 0;    // gflop_per_s / the run's GEMM probe (0 without a probe)
  double ideal_speedup = 1, measured_speedup = 1;  // against the first model at the same shape
  // Median over repetitions of (first model's time / this model's time) in the same round: less
  // sensitive than the ratio of medians to a shared machine's drifts.
  double paired_speedup = 1;
  // On a CUDA device: the most memory its tensors held while this model ran at this shape (weights
  // included), in bytes; 0 on the CPU, whose process-wide peak is the report's peak_rss_kb.
  int64_t device_peak_bytes = 0;
  std::string graphs = "off";  // BenchOptions::graphs
  nlohmann::json to_json() const;
};

struct BenchModel {
  BenchModel(std::string name_, Transformer model_) : name(std::move(name_)), model(std::move(model_)) {}
  std::string name;
  Transformer model{nullptr};  // timed, and the source of the config, FLOPs, parameters and heads
  // When set, timed instead of model->forward: a baseline of model's architecture (textbook.h).
  std::function<torch::Tensor(const Batch&)> run;
  std::string precision = "fp32";  // recorded (precision.h converts the model)
};

// The fp32 matrix-product rate (GFLOP/s) this process reaches now, on `device` at the current
// threads: the best of `reps` products of two n x n matrices after a warm-up. Takes about
// (reps + 2) * 2n^3 / rate seconds (0.2 s at n = 1536 and 300 GFLOP/s).
double gemm_peak_gflops(const torch::Device& device, int64_t n = 1536, int reps = 8);

// Runs the grid for every model (in inference mode, eval mode). progress(done, total) after each
// shape.
// With opts.gemm_probe, gemm_peak_gflops runs first and, when gemm_peak is given, is stored there.
std::vector<BenchRecord> bench_models(std::vector<BenchModel>& models, const BenchOptions& opts,
                                      const std::function<void(int64_t, int64_t)>& progress = nullptr,
                                      double* gemm_peak = nullptr);

// CPU model, threads, BLAS and its kernel set, the int8 engine, LibTorch version, peak resident memory
// so far.
nlohmann::json bench_environment();
int64_t peak_rss_kb();

}  // namespace hp
