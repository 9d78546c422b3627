// The evaluation and speed jobs.
//   run_eval   loss and task metrics (accuracy/F1/MCC, perplexity, BLEU with greedy and beam
//              search) of a checkpoint on a split of its data, at the runtime's precision.
//   run_bench  inference latency and throughput of checkpoints side by side (eval/benchmark.h), at
//              one or more precisions, optionally with the plain-LibTorch textbook baseline.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/eval/benchmark.h"
#include "headprune/jobs/job.h"

namespace hp {

struct EvalRequest {
  std::string checkpoint;
  DataSource data;
  std::vector<int64_t> beams = {1, 4};  // translation: BLEU at each beam size (1 = greedy)
  double length_penalty = 1.0;
  std::string hyps_path;  // write the translations of the last beam size here ("" = no)
  bool overwrite = false;  // replace an existing file at hyps_path (plain text carries no marker)
  bool unigram_baseline = false;  // language models: also a unigram model's perplexity
  GraphReplay graphs = GraphReplay::Off;  // the loss's forward passes replayed per bucket (EvalOptions)
};

struct EvalReport {
  nlohmann::json json;  // printed on stdout
  std::string line;     // one human-readable summary line
};

EvalReport run_eval(const EvalRequest& req, const Runtime& rt, const JobEvents& events = {});

struct BenchRequest {
  std::vector<std::string> checkpoints;  // speedups are against the first
  std::vector<Precision> precisions = {Precision::Float32};  // every checkpoint runs at each
  bool textbook = false;  // also the first checkpoint through a plain-LibTorch forward (textbook.h)
  std::string json_path;  // also write the records and the environment here ("" = no)
  BenchOptions bench;
};

// bench --json: replaces only an earlier benchmark result (io/outputs.h).
OutputFile bench_json_output(const std::string& path);

struct BenchReport {
  std::vector<BenchRecord> records;
  nlohmann::json environment;  // threads, BLAS, int8 engine, LibTorch, device, peak memory, GEMM peak
  int64_t warmup = 0, reps = 0;
  nlohmann::json to_json() const;
  void print(std::ostream& out) const;
};

BenchReport run_bench(const BenchRequest& req, const Runtime& rt, const JobEvents& events = {});

}  // namespace hp
