// First-order Taylor importance of the weights a unit owns (LLM-Pruner, Ma et al. 2023, element-wise
// form aggregated by sum): sum of |w * dL/dw| over the parameters removed with the unit, L the sum of
// the calibration examples' losses. A query head owns its q_proj rows (and bias) and o_proj columns,
// plus its k_proj/v_proj rows where it has a key/value head of its own (not grouped); a key/value group
// owns the q rows and o columns of its query heads and its k/v rows. o_proj's bias and q/k norms stay
// with the layer. One backward pass per batch reaching the attention weights only; their gradients
// (about a fifth of a LLaMA's weights) are summed over the batches and across processes. With
// opts.layerwise the backward pass runs one layer's graph at a time (layerwise_grads), so activation
// memory is one layer's, as for the gradient scorer; the same sums. (No pipeline: it is the gradient
// scorer's alone.)
#include "../scoring_detail.h"

#include "headprune/eval/evaluate.h"
#include "headprune/util/dist.h"

namespace hp::detail {

namespace {

// Per unit of `n` rows of w [n * D, C] (and bias [n * D]): sum |w * g|, as [n] double on the CPU.
torch::Tensor owned_rows(const DenseImpl& d, const torch::Tensor& gw, const torch::Tensor& gb, int64_t n) {
  auto s = (d.weight.to(torch::kDouble) * gw.to(torch::kDouble)).abs().view({n, -1}).sum(1);
  if (d.bias.defined() && gb.defined()) s += (d.bias.to(torch::kDouble) * gb.to(torch::kDouble)).abs().view({n, -1}).sum(1);
  return s.cpu().contiguous();
}

// Layer a's scores from the summed gradients of its q, k, v, o weights and q, k, v biases (grad(slot),
// slots 0-6 in that order; undefined where a layer has no such bias): per query head (and its q/k/v/o
// columns) or per key/value group.
void add_layer_scores(HeadScores& s, const AttnLayer& a, const std::function<torch::Tensor(int)>& grad, bool groups) {
  const int64_t H = static_cast<int64_t>(a.heads.size());
  auto& m = *a.module;
  const HeadGeometry& geo = m.geometry();
  const int64_t G = geo.n_kv_heads_kept();
  torch::NoGradGuard no_grad;
  const auto q = owned_rows(*m.q_proj, grad(0), grad(1), H);
  const auto k = owned_rows(*m.k_proj, grad(2), grad(3), G);
  const auto v = owned_rows(*m.v_proj, grad(4), grad(5), G);
  const auto& W = m.o_proj->weight;  // [C, H*D]: head h's columns
  const auto o = (W.to(torch::kDouble) * grad(6).to(torch::kDouble)).abs().view({W.size(0), H, -1}).sum(
                     std::vector<int64_t>{0, 2}).cpu().contiguous();
  const auto kv = geo.kv_positions();
  const auto at = [](const torch::Tensor& t, int64_t j) { return t.data_ptr<double>()[j]; };
  if (groups) {
    const auto kv_ids = geo.kv_heads();
    for (int64_t g = 0; g < G; ++g) {
      double total = at(k, g) + at(v, g);
      for (int64_t h = 0; h < H; ++h)
        if (kv[static_cast<size_t>(h)] == g) total += at(q, h) + at(o, h);
      s.scores[{a.type, a.layer, kv_ids[static_cast<size_t>(g)]}] = total;
    }
    return;
  }
  for (int64_t h = 0; h < H; ++h) {
    const HeadId id{a.type, a.layer, a.heads[static_cast<size_t>(h)]};
    const int64_t g = kv[static_cast<size_t>(h)];
    const double kh = geo.grouped() ? 0.0 : at(k, g), vh = geo.grouped() ? 0.0 : at(v, g);
    s.scores[id] = at(q, h) + at(o, h) + kh + vh;
    s.columns["q"][id] = at(q, h);
    s.columns["k"][id] = kh;
    s.columns["v"][id] = vh;
    s.columns["o"][id] = at(o, h);
  }
}

}  // namespace

HeadScores taylor_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  if (opts.pipeline)
    throw std::invalid_argument("taylor: --pipeline splits the layers for the gradient scorer only; use --layerwise "
                                "(one layer's graph at a time) or several processes splitting the batches");
  ScoringGuard state(model);
  state.freeze_parameters();
  const bool groups = opts.unit == ScoreUnit::KvGroup;
  auto layers = attention_layers(model);
  std::vector<torch::Tensor> params;  // per layer with heads: q, k, v weights, then their biases where defined
  std::vector<std::vector<size_t>> index(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].heads.empty()) continue;
    auto& m = *layers[i].module;
    for (Dense* d : {&m.q_proj, &m.k_proj, &m.v_proj, &m.o_proj}) {
      index[i].push_back(params.size());
      params.push_back((*d)->weight);
      const bool bias = d != &m.o_proj && (*d)->bias.defined();
      index[i].push_back(bias ? params.size() : SIZE_MAX);
      if (bias) params.push_back((*d)->bias);
    }
  }
  for (auto& p : params) p.set_requires_grad(true);
  std::vector<torch::Tensor> sums;
  for (auto& p : params) sums.push_back(torch::zeros_like(p, p.options().requires_grad(false)));
  const bool layerwise = opts.layerwise;
  if (layerwise) model.single_stack();  // refuses an encoder-decoder, naming why
  std::vector<std::vector<torch::Tensor>> wrt_of(layers.size());  // layerwise: each layer's own params
  std::vector<std::vector<size_t>> slots_of(layers.size());
  for (size_t i = 0; i < layers.size(); ++i)
    for (size_t k : index[i])
      if (k != SIZE_MAX) {
        wrt_of[i].push_back(params[k]);
        slots_of[i].push_back(k);
      }
  int64_t passes = 0;
  for_each_batch(model, data, opts, "taylor", [&](const Batch& b) {
    if (params.empty()) return;
    if (layerwise) {
      const auto g = layerwise_grads(model, b, layers, wrt_of, nullptr, opts);
      for (size_t i = 0; i < layers.size(); ++i)
        for (size_t j = 0; j < g[i].size(); ++j)
          if (g[i][j].defined()) sums[slots_of[i][j]].add_(g[i][j]);
    } else {
      auto loss = per_example_nll(model, model.forward(b), b).first.sum();
      auto g = torch::autograd::grad({loss}, params, {}, false, false, true);
      for (size_t k = 0; k < g.size(); ++k)
        if (g[k].defined()) sums[k].add_(g[k]);
    }
    ++passes;
  });
  dist::all_reduce_sum(sums);  // several processes split the batches: the gradient of the whole sum
  HeadScores s;
  s.unit = opts.unit;
  const auto grad_of = [&](size_t i, int slot) {
    const size_t k = index[i][static_cast<size_t>(slot)];
    return k == SIZE_MAX ? torch::Tensor() : sums[k];
  };
  for (size_t i = 0; i < layers.size(); ++i)
    if (!layers[i].heads.empty()) add_layer_scores(s, layers[i], [&](int slot) { return grad_of(i, slot); }, groups);
  s.info["forward_passes"] = layerwise ? 2 : 1;
  s.info["backward_passes"] = 1;
  if (layerwise) s.info["layerwise"] = "one layer's graph at a time";
  s.info["batches"] = static_cast<int64_t>(dist::all_reduce_sum(static_cast<double>(passes)));
  return s;
}

}  // namespace hp::detail
