// fp32 linear layers at BERT-base widths (d_model 768, d_ff 3072; the fused Q/K/V is 2304 wide) for
// M = batch x length rows, four ways: ATen's torch::linear (one multi-threaded OpenBLAS GEMM); the
// same product with its output columns split between the threads, each running a single-threaded
// GEMM (OpenBLAS runs single-threaded inside an OpenMP parallel region); oneDNN's sgemm
// (gemm::onednn_product, which packs W on every call as OpenBLAS does); and oneDNN's matmul on W
// packed once (gemm::packed_product, what inference runs). Run:
//   build/bench/headprune_bench_linear [--benchmark_filter=Packed]   (HP_THREADS: threads, default all cores)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cstdlib>
#include <thread>

#include "headprune/util/gemm.h"

namespace {

struct Shape {
  torch::Tensor x, w, b;
};

Shape make(benchmark::State& state) {
  // All cores (ATen's default is half of them), or HP_THREADS.
  static const int threads = [] {
    const char* v = std::getenv("HP_THREADS");
    const int n = v ? std::atoi(v) : static_cast<int>(std::thread::hardware_concurrency());
    at::set_num_threads(n > 0 ? n : 1);
    return n;
  }();
  state.counters["threads"] = threads;
  torch::manual_seed(0);
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  return {torch::randn({M, K}), torch::randn({N, K}) * 0.02, torch::randn({N})};
}

void report(benchmark::State& state) {
  const double flops = 2.0 * static_cast<double>(state.range(0) * state.range(1) * state.range(2));
  state.counters["GFLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}

void BM_Linear(benchmark::State& state) {
  auto s = make(state);
  c10::InferenceMode guard;
  for (auto _ : state) benchmark::DoNotOptimize(torch::linear(s.x, s.w, s.b));
  report(state);
}

void BM_LinearSplitColumns(benchmark::State& state) {
  auto s = make(state);
  c10::InferenceMode guard;
  const int64_t N = s.w.size(0), T = at::get_num_threads();
  for (auto _ : state) {
    auto out = torch::empty({s.x.size(0), N});
    at::parallel_for(0, T, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t lo = N * t / T, hi = N * (t + 1) / T;
        auto o = out.narrow(1, lo, hi - lo);
        torch::addmm_out(o, s.b.narrow(0, lo, hi - lo), s.x, s.w.narrow(0, lo, hi - lo).t());
      }
    });
    benchmark::DoNotOptimize(out);
  }
  report(state);
}

void BM_OneDnnSgemm(benchmark::State& state) {
  if (!hp::gemm::onednn_built()) return state.SkipWithError("built without oneDNN");
  auto s = make(state);
  torch::NoGradGuard guard;
  for (auto _ : state) benchmark::DoNotOptimize(hp::gemm::onednn_product(s.x, s.w, s.b));
  report(state);
}

void BM_PackedMatmul(benchmark::State& state) {
  if (!hp::gemm::onednn_built()) return state.SkipWithError("built without oneDNN");
  auto s = make(state);
  torch::NoGradGuard guard;  // not InferenceMode: packed weights are cached for normal tensors only
  for (auto _ : state) benchmark::DoNotOptimize(hp::gemm::packed_product(s.x, s.w, s.b));
  report(state);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int64_t m : {1, 8, 32, 128, 512, 2048})
    for (auto nk : {std::pair<int64_t, int64_t>{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}})
      b->Args({m, nk.first, nk.second});
  b->Unit(benchmark::kMillisecond)->MinTime(0.3);
}
BENCHMARK(BM_Linear)->Apply(shapes);
BENCHMARK(BM_LinearSplitColumns)->Apply(shapes);
BENCHMARK(BM_OneDnnSgemm)->Apply(shapes);
BENCHMARK(BM_PackedMatmul)->Apply(shapes);

}  // namespace
