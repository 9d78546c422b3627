// Forward time of one attention block (BERT-base width: d_model 768, head dim 64, sequence 128)
// on the inference path: at several kept-head counts (0 = the layer is skipped), with the Q/K/V
// projections fused or in three GEMMs, and with half of 12 heads masked (gates at 0, still
// computed) instead of removed; and the attention core alone three ways (ATen's batched matmul, one
// GEMM per head, oneDNN). Run: build/bench/headprune_bench_attention [--benchmark_filter=Core]
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "headprune/model/attention.h"
#include "headprune/model/precision.h"
#include "headprune/util/gemm.h"
#include "headprune/util/runtime.h"

namespace {

constexpr int64_t kT = 128, kC = 768, kD = 64;

hp::MultiHeadAttention make_attention(int64_t H) {
  std::vector<int64_t> heads;
  for (int64_t h = 0; h < H; ++h) heads.push_back(h);
  torch::manual_seed(0);
  hp::MultiHeadAttention attn(hp::HeadGeometry::mha(kC, kD, heads), 0.0);
  attn->eval();
  return attn;
}

void run(benchmark::State& state, hp::MultiHeadAttention& attn, int64_t B) {
  auto x = torch::randn({B, kT, kC});
  c10::InferenceMode guard;
  for (int i = 0; i < 2; ++i) attn->forward(x, x, {});  // warm-up: fused weights, allocator
  for (auto _ : state) benchmark::DoNotOptimize(attn->forward(x, x, {}));
  state.SetItemsProcessed(state.iterations() * B);
  state.SetLabel("threads=" + std::to_string(at::get_num_threads()));
}

// Args: kept heads, batch.
void BM_AttentionForward(benchmark::State& state) {
  auto attn = make_attention(state.range(0));
  run(state, attn, state.range(1));
}
BENCHMARK(BM_AttentionForward)->ArgsProduct({{12, 9, 6, 3, 0}, {1, 16}})->Unit(benchmark::kMillisecond)->MinTime(0.5);

// Args: batch. All 12 heads, Q, K and V projected separately.
void BM_AttentionUnfusedProjections(benchmark::State& state) {
  auto attn = make_attention(12);
  attn->fuse_projections = false;
  run(state, attn, state.range(0));
}
BENCHMARK(BM_AttentionUnfusedProjections)->Arg(1)->Arg(16)->Unit(benchmark::kMillisecond)->MinTime(0.5);

// Args: batch. 12 heads of which 6 are masked: the arithmetic of 12.
void BM_AttentionHalfMasked(benchmark::State& state) {
  auto attn = make_attention(12);
  {
    torch::NoGradGuard no_grad;
    attn->head_mask.narrow(0, 6, 6).zero_();
  }
  run(state, attn, state.range(0));
}
BENCHMARK(BM_AttentionHalfMasked)->Arg(1)->Arg(16)->Unit(benchmark::kMillisecond)->MinTime(0.5);

}  // namespace

int main(int argc, char** argv) {
  hp::configure_threads(0);
  hp::tune_allocator();  // as the CLI: large blocks reused from the heap, not mapped afresh each time
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("blas", hp::blas_info());
  benchmark::AddCustomContext("int8_engine", hp::quantized_engine_name());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

namespace {
// The attention core alone (scores, softmax, weighted values) for B x 12 heads x 128 x 64: ATen's
// batched matmul against one single-threaded GEMM per (sequence, head) spread over the threads.
void BM_AttentionCoreBatched(benchmark::State& state) {
  const int64_t B = state.range(0), H = 12;
  auto q = torch::randn({B, H, kT, kD}), k = torch::randn({B, H, kT, kD}), v = torch::randn({B, H, kT, kD});
  c10::InferenceMode guard;
  for (auto _ : state) {
    auto p = torch::softmax(torch::matmul(q, k.transpose(-2, -1)), -1);
    benchmark::DoNotOptimize(torch::matmul(p, v));
  }
  state.SetLabel("threads=" + std::to_string(at::get_num_threads()));
}
BENCHMARK(BM_AttentionCoreBatched)->Arg(1)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)->MinTime(0.5);

void BM_AttentionCorePerHead(benchmark::State& state) {
  const int64_t B = state.range(0), H = 12;
  auto q = torch::randn({B * H, kT, kD}), k = torch::randn({B * H, kT, kD}), v = torch::randn({B * H, kT, kD});
  c10::InferenceMode guard;
  for (auto _ : state) {
    auto out = torch::empty({B * H, kT, kD});
    at::parallel_for(0, B * H, 1, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        auto p = torch::softmax(torch::mm(q[i], k[i].t()), -1);
        auto o = out[i];
        torch::mm_out(o, p, v[i]);
      }
    });
    benchmark::DoNotOptimize(out);
  }
  state.SetLabel("threads=" + std::to_string(at::get_num_threads()));
}
BENCHMARK(BM_AttentionCorePerHead)->Arg(1)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)->MinTime(0.5);

// The same core on oneDNN (gemm::attention, what the inference path runs): q, k, v read in place as
// strided views of one fused projection [B, T, 3, H, D], the context written as [B, T, H * D].
void BM_AttentionCoreOneDnn(benchmark::State& state) {
  if (!hp::gemm::onednn_built()) return state.SkipWithError("built without oneDNN");
  const int64_t B = state.range(0), H = 12;
  const auto qkv = torch::randn({B, kT, 3, H, kD}).permute({2, 0, 3, 1, 4});
  c10::InferenceMode guard;
  for (auto _ : state) benchmark::DoNotOptimize(hp::gemm::attention(qkv[0], qkv[1], qkv[2], {}, 0.125, nullptr));
  state.SetLabel("threads=" + std::to_string(at::get_num_threads()));
}
BENCHMARK(BM_AttentionCoreOneDnn)->Arg(1)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)->MinTime(0.5);
}  // namespace
