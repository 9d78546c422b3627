// Forward time of one attention block at several kept-head counts (BERT-base width:
// d_model 768, head dim 64, sequence 128). Run: build/bench/headprune_bench_attention
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "headprune/model/attention.h"
#include "headprune/util/runtime.h"

namespace {

void BM_AttentionForward(benchmark::State& state) {
  const int64_t H = state.range(0), B = state.range(1), T = 128, C = 768, D = 64;
  std::vector<int64_t> heads;
  for (int64_t h = 0; h < H; ++h) heads.push_back(h);
  torch::manual_seed(0);
  hp::MultiHeadAttention attn(C, D, heads, 0.0);
  attn->eval();
  auto x = torch::randn({B, T, C});
  c10::InferenceMode guard;
  for (auto _ : state) benchmark::DoNotOptimize(attn->forward(x, x, {}));
  state.SetItemsProcessed(state.iterations() * B);
  state.SetLabel("threads=" + std::to_string(at::get_num_threads()));
}
BENCHMARK(BM_AttentionForward)
    ->ArgsProduct({{12, 6, 3, 0}, {1, 16}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);

}  // namespace

int main(int argc, char** argv) {
  hp::configure_threads(0);
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("blas", hp::blas_info());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
