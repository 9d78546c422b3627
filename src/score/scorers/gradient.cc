// Gradient importance (Michel et al.): E|dL/dxi_h| through a probe of ones on every head, weights frozen;
// the whole graph, one layer's graph at a time (layerwise), or a pipeline of layers over processes.
#include "../scoring_detail.h"

#include "headprune/eval/evaluate.h"
#include "headprune/util/dist.h"

namespace hp::detail {

// A forward pass without autograd keeps each layer's input, then from the top down each layer is run
// again (with its probe attached) and the gradient of its output, which gives the gradients asked for
// and the gradient of its input for the layer below. In a pipeline (opts.pipeline, several processes)
// this rank runs its slice of the layers: the hidden state comes from the rank before and goes to the
// next, its gradient comes back from the next and goes to the one before; the last rank computes the loss.
std::vector<std::vector<torch::Tensor>> layerwise_grads(TransformerImpl& model, const Batch& b,
                                                        const std::vector<AttnLayer>& layers,
                                                        const std::vector<std::vector<torch::Tensor>>& wrt_of,
                                                        const std::function<void(size_t, bool)>& attach,
                                                        const ScoreOptions& opts) {
  const int64_t L = model.single_stack()->n_layers();
  const auto [first, last] = opts.pipeline ? dist::slice(L) : std::pair<int64_t, int64_t>{0, L};
  const int rank = dist::rank(), world = opts.pipeline ? dist::world_size() : 1;
  const bool first_rank = !opts.pipeline || rank == 0, last_rank = !opts.pipeline || rank == world - 1;
  std::vector<size_t> index_of(static_cast<size_t>(L), layers.size());  // layer -> entry of `layers`
  for (size_t i = 0; i < layers.size(); ++i) index_of[static_cast<size_t>(layers[i].layer)] = i;
  TransformerImpl::StackState st;
  std::vector<torch::Tensor> xs(static_cast<size_t>(L + 1));
  {
    torch::NoGradGuard no_grad;
    st = model.stack_begin(b);
    torch::Tensor x = first_rank ? st.x : dist::recv_like(st.x, rank - 1);
    xs[static_cast<size_t>(first)] = x;
    for (int64_t l = first; l < last; ++l) xs[static_cast<size_t>(l + 1)] = x = model.stack_layer(l, x, st);
    if (!last_rank) dist::send(x, rank + 1);
  }
  torch::Tensor grad;  // d loss / d (output of layer l), going down
  if (last_rank) {
    // The output layer and the loss a few examples at a time: an LLM's logits (examples x length x
    // vocabulary, in fp32 for the loss, and their gradient) are the largest tensors of the pass.
    const auto top = xs[static_cast<size_t>(L)].detach();
    const auto& cfg = model.config();
    const double per_row = static_cast<double>(top.size(1)) *
                           static_cast<double>(cfg.arch == Arch::DecoderLM ? cfg.vocab_size : cfg.n_classes) * 4.0 * 4.0;
    const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>((256.0 * (1 << 20)) / per_row));
    std::vector<torch::Tensor> parts;
    for (int64_t r = 0; r < top.size(0); r += rows) {
      const int64_t n = std::min(rows, top.size(0) - r);
      auto t = top.narrow(0, r, n).detach().requires_grad_(true);
      ModelOutput out;
      out.logits = model.stack_end(t);
      auto loss = per_example_nll(model, out, b.rows(r, n)).first.sum();  // sum of per-example losses L(x)
      parts.push_back(torch::autograd::grad({loss}, {t})[0]);
    }
    grad = torch::cat(parts, 0);
  } else {
    grad = dist::recv_like(xs[static_cast<size_t>(last)], rank + 1);
  }
  std::vector<std::vector<torch::Tensor>> grads(layers.size());
  for (int64_t l = last - 1; l >= first; --l) {
    const size_t i = index_of[static_cast<size_t>(l)];
    const bool asked = i < layers.size() && !wrt_of[i].empty();
    const bool need_x = l > first || !first_rank;  // the layer below (here or on the rank before) needs it
    auto x = xs[static_cast<size_t>(l)].detach().requires_grad_(need_x);
    std::vector<torch::Tensor> wrt;
    if (need_x) wrt.push_back(x);
    if (asked) {
      if (attach) attach(i, true);
      wrt.insert(wrt.end(), wrt_of[i].begin(), wrt_of[i].end());
    }
    if (wrt.empty()) continue;
    auto y = model.stack_layer(l, x, st);
    auto g = torch::autograd::grad({y}, wrt, {grad}, false, false, true);
    if (asked) {
      grads[i].assign(g.begin() + (need_x ? 1 : 0), g.end());
      if (attach) attach(i, false);
    }
    if (need_x) grad = g.front();
  }
  if (!first_rank) dist::send(grad, rank - 1);
  return grads;
}

namespace {

// The probes' gradients, one layer's graph at a time (undefined where this rank has none).
std::vector<torch::Tensor> layerwise_probe_grads(TransformerImpl& model, const Batch& b, const std::vector<AttnLayer>& layers,
                                                 const std::vector<torch::Tensor>& probes, const ScoreOptions& opts) {
  std::vector<std::vector<torch::Tensor>> wrt(layers.size());
  for (size_t i = 0; i < layers.size(); ++i)
    if (probes[i].defined()) wrt[i] = {probes[i]};
  const auto g = layerwise_grads(model, b, layers, wrt, [&](size_t i, bool on) {
    layers[i].module->head_probe = on ? probes[i] : torch::Tensor();
  }, opts);
  std::vector<torch::Tensor> out(layers.size());
  for (size_t i = 0; i < layers.size(); ++i)
    if (!g[i].empty()) out[i] = g[i].front();
  return out;
}

}  // namespace

namespace {

// A probe of ones [B, H, T or 1, 1] on every layer with heads (undefined for a layer without);
// none at all when no layer has heads.
std::vector<torch::Tensor> make_probes(const std::vector<AttnLayer>& layers, const Batch& b, Arch arch, bool per_token) {
  std::vector<torch::Tensor> probes(layers.size());
  bool any = false;
  for (size_t i = 0; i < layers.size(); ++i) {
    const int64_t H = static_cast<int64_t>(layers[i].heads.size());
    if (H == 0) continue;
    const int64_t T = per_token ? query_len(b, layers[i].type, arch) : 1;
    probes[i] = torch::ones({b.size(), H, T, 1}, torch::TensorOptions().dtype(torch::kFloat).device(b.input_ids.device()))
                    .requires_grad_(true);
    any = true;
  }
  if (!any) probes.clear();
  return probes;
}

// d loss / d probe of every probed layer through the whole graph (zeros where the loss does not reach).
std::vector<torch::Tensor> whole_graph_probe_grads(TransformerImpl& model, const Batch& b,
                                                   const std::vector<AttnLayer>& layers,
                                                   const std::vector<torch::Tensor>& probes) {
  std::vector<torch::Tensor> wrt;
  for (size_t i = 0; i < layers.size(); ++i)
    if (probes[i].defined()) {
      layers[i].module->head_probe = probes[i];
      wrt.push_back(probes[i]);
    }
  auto out = model.forward(b);
  auto loss = per_example_nll(model, out, b).first.sum();  // sum of per-example losses L(x)
  auto g = torch::autograd::grad({loss}, wrt, {}, false, false, true);
  std::vector<torch::Tensor> grads(layers.size());
  size_t k = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (!probes[i].defined()) continue;
    grads[i] = g[k].defined() ? g[k] : torch::zeros_like(probes[i]);
    ++k;
  }
  return grads;
}

// The sums of |gradient| of every unit asked for, over the valid queries. Groups: each layer's signed
// per-head gradients are summed into their key/value group (the gradient of one gate on the whole
// group) before the absolute value.
class UnitSums {
 public:
  UnitSums(TransformerImpl& model, const std::vector<AttnLayer>& layers, const std::vector<ScoreUnit>& units)
      : units_(units), keys_(units.size(), layers) {
    for (auto& k : layers)
      group_of_.push_back(torch::tensor(k.module->geometry().kv_positions(), torch::kLong).to(device_of(model)));
    for (size_t u = 0; u < units.size(); ++u) {
      if (units[u] == ScoreUnit::KvGroup)
        for (auto& k : keys_[u]) k.heads = k.module->geometry().kv_heads();
      accs_.emplace_back(keys_[u], device_of(model));
    }
  }

  // Layer i's probe gradient g [B, H, T] and its valid queries.
  void add(size_t i, const torch::Tensor& g, const torch::Tensor& qmask) {
    for (size_t u = 0; u < units_.size(); ++u) {
      if (units_[u] == ScoreUnit::KvGroup) {
        const int64_t G = static_cast<int64_t>(keys_[u][i].heads.size());
        accs_[u].add_masked(i, torch::zeros({g.size(0), G, g.size(2)}, g.options()).index_add_(1, group_of_[i], g).abs(),
                            qmask.to(g.device()));  // [B,G,T]
      } else {
        accs_[u].add_masked(i, g.abs(), qmask.to(g.device()));
      }
    }
  }

  HeadScores mean(size_t u) { return accs_[u].mean(keys_[u]); }

 private:
  const std::vector<ScoreUnit>& units_;
  std::vector<torch::Tensor> group_of_;           // per layer [H]: the key/value position of each query head
  std::vector<std::vector<AttnLayer>> keys_;      // what each unit's rows are keyed by
  std::vector<Accumulator> accs_;
};

}  // namespace

// One pass over the data gives the maps of every unit asked for (query heads and key/value groups).
std::vector<HeadScores> gradient_units(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts,
                                       const std::vector<ScoreUnit>& units) {
  ScoringGuard state(model);
  state.freeze_parameters();
  const auto& cfg = model.config();
  auto layers = attention_layers(model);
  const bool layerwise = opts.layerwise || opts.pipeline;
  if (layerwise) model.single_stack();  // refuses an encoder-decoder, naming why
  UnitSums sums(model, layers, units);
  const bool per_token = opts.granularity == Granularity::Token;
  int64_t passes = 0;
  for_each_batch(model, data, opts, "gradient", [&](const Batch& b) {
    const auto probes = make_probes(layers, b, cfg.arch, per_token);
    if (probes.empty()) return;
    const auto grads = layerwise ? layerwise_probe_grads(model, b, layers, probes, opts)
                                 : whole_graph_probe_grads(model, b, layers, probes);
    ++passes;
    for (size_t i = 0; i < layers.size(); ++i) {
      if (!grads[i].defined()) continue;  // no heads, or (pipeline) another rank's layer
      const auto g = grads[i].to(torch::kFloat).squeeze(-1).detach();  // [B,H,T]
      sums.add(i, g, per_token ? query_mask(b, layers[i].type, cfg.arch)
                               : torch::ones({b.size(), 1}, torch::TensorOptions().dtype(torch::kBool).device(g.device())));
    }
  }, /*every_rank=*/opts.pipeline);
  const int64_t batches = opts.pipeline ? passes : static_cast<int64_t>(dist::all_reduce_sum(static_cast<double>(passes)));
  std::vector<HeadScores> out;
  for (size_t u = 0; u < units.size(); ++u) {
    HeadScores s = sums.mean(u);
    s.unit = units[u];
    s.info["granularity"] = per_token ? "token" : "example";
    s.info["forward_passes"] = layerwise ? 2 : 1;
    s.info["backward_passes"] = 1;
    if (units.size() > 1) s.info["shared_pass"] = "one pass gave the maps of query heads and key/value groups";
    if (layerwise) s.info["layerwise"] = opts.pipeline ? "pipeline over " + std::to_string(dist::world_size()) + " processes"
                                                       : "one layer's graph at a time";
    s.info["batches"] = batches;
    out.push_back(std::move(s));
  }
  return out;
}

HeadScores gradient_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  return gradient_units(model, data, opts, {opts.unit}).front();
}

}  // namespace hp::detail
