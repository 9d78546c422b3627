// Head-importance scorers that need one pass over the data (or none): gradient, confidence,
// entropy, magnitude, output norm, LRP, random; and the dispatch. Ablations: ablation.cc.
//
// Dimension legend: B batch, T query length, S key length, C d_model, H heads kept in a layer,
// D head dim.
#include "headprune/score/importance.h"

#include <chrono>
#include <random>
#include <stdexcept>

#include "headprune/data/dataset.h"
#include "headprune/eval/evaluate.h"
#include "headprune/util/dist.h"
#include "scoring_detail.h"

namespace hp {

const NameTable<ScoreMethod>& score_method_names() {
  static const NameTable<ScoreMethod> t{"scoring method",
                                        {{ScoreMethod::Gradient, {"gradient"}},
                                         {ScoreMethod::Ablation, {"ablation"}},
                                         {ScoreMethod::AllButOne, {"all_but_one"}},
                                         {ScoreMethod::Confidence, {"confidence"}},
                                         {ScoreMethod::Entropy, {"entropy"}},
                                         {ScoreMethod::Magnitude, {"magnitude"}},
                                         {ScoreMethod::OutputNorm, {"output_norm"}},
                                         {ScoreMethod::Lrp, {"lrp"}},
                                         {ScoreMethod::Random, {"random"}}}};
  return t;
}
std::string to_string(ScoreMethod m) { return score_method_names().name(m); }
std::vector<ScoreMethod> all_score_methods() { return score_method_names().values(); }
ScoreMethod parse_score_method(const std::string& s) { return score_method_names().parse(s); }

const NameTable<Granularity>& granularity_names() {
  static const NameTable<Granularity> t{"granularity", {{Granularity::Example, {"example"}}, {Granularity::Token, {"token"}}}};
  return t;
}

bool uses_data(ScoreMethod m) { return m != ScoreMethod::Magnitude && m != ScoreMethod::Random; }

Normalization default_normalization(ScoreMethod m) {
  return m == ScoreMethod::Gradient || m == ScoreMethod::Lrp ? Normalization::Layer : Normalization::None;
}

namespace detail {

std::vector<AttnLayer> attention_layers(TransformerImpl& model) {
  std::vector<AttnLayer> out;
  for (const auto& g : model.head_masks()) out.push_back({g.type, g.layer, &model.attention(g.type, g.layer), g.heads});
  return out;
}

torch::Tensor no_op_heads(const AttnLayer& a) {
  torch::NoGradGuard no_grad;
  const int64_t H = static_cast<int64_t>(a.heads.size());
  const auto& W = a.module->o_proj->weight;  // [C, H*D]: head p owns columns [p*D, (p+1)*D)
  auto silent = W.view({W.size(0), H, -1}).ne(0).any(2).any(0).logical_not();
  return silent | a.module->head_mask.eq(0);
}

torch::Tensor query_mask(const Batch& b, AttnType t, Arch arch) {
  const bool on_decoder = t != AttnType::EncoderSelf && arch == Arch::EncoderDecoder;
  return (on_decoder ? b.decoder_attention_mask : b.attention_mask).ne(0);
}

torch::Tensor key_ids(const Batch& b, AttnType t, Arch arch) {
  return t == AttnType::DecoderSelf && arch == Arch::EncoderDecoder ? b.decoder_input_ids : b.input_ids;
}

torch::Tensor key_mask(const Batch& b, AttnType t, Arch arch) {
  return t == AttnType::DecoderSelf && arch == Arch::EncoderDecoder ? b.decoder_attention_mask.ne(0)
                                                                     : b.attention_mask.ne(0);
}

void for_each_batch(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts, const std::string& what,
                    const std::function<void(const Batch&)>& fn, bool every_rank) {
  const auto& cfg = model.config();
  const auto device = model.parameters().front().device();
  const auto batches = make_token_batches(data.examples, opts.batch_tokens, opts.max_batch, false, 0);
  int64_t done = 0;
  for (size_t k = 0; k < batches.size(); ++k) {
    ++done;
    if (!every_rank && !dist::owns(static_cast<int64_t>(k))) continue;  // several processes: whole batches per rank
    std::vector<const Example*> ex;
    for (size_t i : batches[k]) ex.push_back(&data.examples[i]);
    fn(collate(ex, cfg.arch, cfg.pad_id).to(device));
    if (opts.progress) opts.progress(what, done, static_cast<int64_t>(batches.size()));
  }
}

ModelState::ModelState(TransformerImpl& model) : model_(model), was_training_(model.is_training()) {
  for (auto& p : model.parameters()) requires_grad_.push_back(p.requires_grad());
  model.eval();
}

void ModelState::freeze_parameters() {
  for (auto& p : model_.parameters()) p.set_requires_grad(false);
}

ModelState::~ModelState() {
  size_t i = 0;
  for (auto& p : model_.parameters()) p.set_requires_grad(requires_grad_[i++]);
  for (auto& a : attention_layers(model_)) {
    a.module->head_probe = torch::Tensor();
    a.module->on_context = nullptr;
  }
  model_.train(was_training_);
}

HeadScores finish(HeadScores s, TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts,
                  ScoreMethod method, std::chrono::steady_clock::time_point t0) {
  s.method = to_string(method);
  s.info["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.info["examples"] = uses_data(method) ? static_cast<int64_t>(data.examples.size()) : 0;
  s.info["data"] = uses_data(method) ? data.name : "none";
  s.info["arch"] = to_string(model.config().arch);
  normalize(s, opts.normalize.value_or(default_normalization(method)));
  return s;
}

}  // namespace detail

namespace {

using detail::AttnLayer;

// Sums of a per-(head, query) quantity over valid queries, per layer, and the query counts, kept in
// double precision on the model's device and read back once.
struct Accumulator {
  std::vector<torch::Tensor> sums;    // per layer: [H] double
  std::vector<torch::Tensor> counts;  // per layer: [] double

  Accumulator(const std::vector<AttnLayer>& layers, const torch::Device& device) {
    const auto opts = torch::TensorOptions().dtype(torch::kDouble).device(device);
    for (const auto& a : layers) {
      sums.push_back(torch::zeros({static_cast<int64_t>(a.heads.size())}, opts));
      counts.push_back(torch::zeros({}, opts));
    }
  }
  // v [B, H, T] summed over the valid queries of qmask [B, T].
  void add_masked(size_t layer, const torch::Tensor& v, const torch::Tensor& qmask) {
    auto m = qmask.unsqueeze(1).to(v.scalar_type());
    sums[layer] += (v * m).sum(std::vector<int64_t>{0, 2}).to(torch::kDouble);
    counts[layer] += qmask.sum().to(torch::kDouble);
  }
  // The means over every process's batches (util/dist.h): the sums are added across ranks first, so
  // this is a collective, called once per accumulator on every rank.
  HeadScores mean(const std::vector<AttnLayer>& layers) {
    std::vector<torch::Tensor> all = sums;
    all.insert(all.end(), counts.begin(), counts.end());
    dist::all_reduce_sum(all);
    HeadScores s;
    for (size_t i = 0; i < layers.size(); ++i) {
      const auto v = sums[i].to(torch::kCPU).contiguous();
      const double n = counts[i].item<double>();
      for (size_t k = 0; k < layers[i].heads.size(); ++k)
        s.scores[{layers[i].type, layers[i].layer, layers[i].heads[k]}] = n > 0 ? v.data_ptr<double>()[k] / n : 0.0;
    }
    return s;
  }
};

torch::Device device_of(TransformerImpl& model) { return model.parameters().front().device(); }

int64_t query_len(const Batch& b, AttnType t, Arch arch) { return detail::query_mask(b, t, arch).size(1); }

// d loss / d probe of every attention layer of a single-stack model for one batch, one layer's graph at
// a time: a forward pass without autograd keeps each layer's input, then from the top down each layer
// is run again with its probe and the gradient of its output, which gives the probe's gradient and the
// gradient of its input for the layer below. In a pipeline (opts.pipeline, several processes) this
// rank runs its slice of the layers: the hidden state comes from the rank before and goes to the next,
// its gradient comes back from the next and goes to the one before; the last rank computes the loss.
// Returns one tensor per entry of `layers` (undefined where this rank has no gradient).
std::vector<torch::Tensor> layerwise_probe_grads(TransformerImpl& model, const Batch& b, const std::vector<AttnLayer>& layers,
                                                 const std::vector<torch::Tensor>& probes, const ScoreOptions& opts) {
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
  std::vector<torch::Tensor> grads(layers.size());
  for (int64_t l = last - 1; l >= first; --l) {
    const size_t i = index_of[static_cast<size_t>(l)];
    const bool probed = i < layers.size() && probes[i].defined();
    const bool need_x = l > first || !first_rank;  // the layer below (here or on the rank before) needs it
    auto x = xs[static_cast<size_t>(l)].detach().requires_grad_(need_x);
    std::vector<torch::Tensor> wrt;
    if (need_x) wrt.push_back(x);
    if (probed) {
      layers[i].module->head_probe = probes[i];
      wrt.push_back(probes[i]);
    }
    if (wrt.empty()) continue;
    auto y = model.stack_layer(l, x, st);
    auto g = torch::autograd::grad({y}, wrt, {grad}, false, false, true);
    if (probed) {
      grads[i] = g.back();
      layers[i].module->head_probe = torch::Tensor();
    }
    if (need_x) grad = g.front();
  }
  if (!first_rank) dist::send(grad, rank - 1);
  return grads;
}

// One pass over the data gives the maps of every unit asked for (query heads and key/value groups).
std::vector<HeadScores> gradient_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts,
                                        const std::vector<ScoreUnit>& units) {
  detail::ModelState state(model);
  state.freeze_parameters();
  const auto& cfg = model.config();
  auto layers = detail::attention_layers(model);
  const bool layerwise = opts.layerwise || opts.pipeline;
  if (layerwise) model.single_stack();  // refuses an encoder-decoder, naming why
  // Groups: each layer's signed per-head gradients are summed into their key/value group (the
  // gradient of one gate on the whole group) before the absolute value.
  std::vector<torch::Tensor> group_of;  // per layer [H]: the key/value position of each query head
  for (auto& k : layers)
    group_of.push_back(torch::tensor(k.module->geometry().kv_positions(), torch::kLong).to(device_of(model)));
  std::vector<std::vector<AttnLayer>> keys(units.size(), layers);  // what each unit's rows are keyed by
  std::vector<Accumulator> accs;
  for (size_t u = 0; u < units.size(); ++u) {
    if (units[u] == ScoreUnit::KvGroup)
      for (auto& k : keys[u]) k.heads = k.module->geometry().kv_heads();
    accs.emplace_back(keys[u], device_of(model));
  }
  const bool per_token = opts.granularity == Granularity::Token;
  int64_t passes = 0;
  detail::for_each_batch(model, data, opts, "gradient", [&](const Batch& b) {
    std::vector<torch::Tensor> probes(layers.size());
    const int64_t B = b.size();
    bool any = false;
    for (size_t i = 0; i < layers.size(); ++i) {
      const int64_t H = static_cast<int64_t>(layers[i].heads.size());
      if (H == 0) continue;
      const int64_t T = per_token ? query_len(b, layers[i].type, cfg.arch) : 1;
      probes[i] = torch::ones({B, H, T, 1}, torch::TensorOptions().dtype(torch::kFloat).device(b.input_ids.device()))
                      .requires_grad_(true);
      any = true;
    }
    if (!any) return;
    std::vector<torch::Tensor> grads(layers.size());
    if (layerwise) {
      grads = layerwise_probe_grads(model, b, layers, probes, opts);
    } else {
      std::vector<torch::Tensor> wrt;
      for (size_t i = 0; i < layers.size(); ++i)
        if (probes[i].defined()) {
          layers[i].module->head_probe = probes[i];
          wrt.push_back(probes[i]);
        }
      auto out = model.forward(b);
      auto loss = per_example_nll(model, out, b).first.sum();  // sum of per-example losses L(x)
      auto g = torch::autograd::grad({loss}, wrt, {}, false, false, true);
      size_t k = 0;
      for (size_t i = 0; i < layers.size(); ++i) {
        if (!probes[i].defined()) continue;
        grads[i] = g[k].defined() ? g[k] : torch::zeros_like(probes[i]);
        ++k;
      }
    }
    ++passes;
    for (size_t i = 0; i < layers.size(); ++i) {
      if (!grads[i].defined()) continue;  // no heads, or (pipeline) another rank's layer
      const auto g = grads[i].to(torch::kFloat).squeeze(-1).detach();  // [B,H,T]
      auto qmask = per_token ? detail::query_mask(b, layers[i].type, cfg.arch)
                             : torch::ones({B, 1}, torch::TensorOptions().dtype(torch::kBool).device(g.device()));
      for (size_t u = 0; u < units.size(); ++u) {
        if (units[u] == ScoreUnit::KvGroup) {
          const int64_t G = static_cast<int64_t>(keys[u][i].heads.size());
          accs[u].add_masked(i, torch::zeros({g.size(0), G, g.size(2)}, g.options()).index_add_(1, group_of[i], g).abs(),
                             qmask.to(g.device()));  // [B,G,T]
        } else {
          accs[u].add_masked(i, g.abs(), qmask.to(g.device()));
        }
      }
    }
  }, /*every_rank=*/opts.pipeline);
  const int64_t batches = opts.pipeline ? passes : static_cast<int64_t>(dist::all_reduce_sum(static_cast<double>(passes)));
  std::vector<HeadScores> out;
  for (size_t u = 0; u < units.size(); ++u) {
    HeadScores s = accs[u].mean(keys[u]);
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

HeadScores attention_stat_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts,
                                 bool confidence) {
  detail::ModelState state(model);
  torch::NoGradGuard no_grad;
  const auto& cfg = model.config();
  auto layers = detail::attention_layers(model);
  Accumulator acc(layers, device_of(model)), nats(layers, device_of(model));
  detail::for_each_batch(model, data, opts, confidence ? "confidence" : "entropy", [&](const Batch& b) {
    auto out = model.forward(b, {true});
    for (size_t i = 0; i < layers.size(); ++i) {
      const auto& probs = out.attention.at(layers[i].type).at(static_cast<size_t>(layers[i].layer));  // [B,H,T,S]
      if (probs.size(1) == 0) continue;
      const auto p = probs.to(torch::kFloat);
      const auto qmask = detail::query_mask(b, layers[i].type, cfg.arch);
      // A head that contributes nothing (see no_op_heads) scores as least important:
      // confidence 0, normalized entropy 1 (uniform attention).
      const auto no_op = detail::no_op_heads(layers[i]).view({1, -1, 1});
      if (confidence) {
        auto allowed = detail::key_mask(b, layers[i].type, cfg.arch);
        const auto ids = detail::key_ids(b, layers[i].type, cfg.arch);
        for (int64_t sid : opts.special_ids) allowed = allowed & ids.ne(sid);
        auto v = p.masked_fill(allowed.logical_not().unsqueeze(1).unsqueeze(2), 0.0).amax(-1);  // [B,H,T]
        acc.add_masked(i, torch::where(no_op, torch::zeros_like(v), v), qmask);
        continue;
      }
      // Entropy in nats, and divided by its maximum ln(n) for the query's n valid keys, so that
      // layers with different key counts (causal vs. bidirectional) are comparable. Queries
      // with a single key (no choice to make) are left out.
      auto allowed = detail::key_mask(b, layers[i].type, cfg.arch).unsqueeze(1);  // [B,1,S]
      const int64_t T = p.size(2), S = p.size(3);
      if (layers[i].type == AttnType::DecoderSelf)
        allowed = allowed & torch::ones({T, S}, torch::kBool).tril().to(allowed.device()).unsqueeze(0);
      const auto n = allowed.sum(-1).to(torch::kFloat);  // [B,T]
      const auto h = -(p * p.clamp_min(1e-12).log()).sum(-1);  // [B,H,T]
      const auto h_max = n.clamp_min(2).log().unsqueeze(1);
      const auto q = qmask & n.gt(1);
      acc.add_masked(i, torch::where(no_op, torch::ones_like(h), h / h_max), q);
      nats.add_masked(i, torch::where(no_op, h_max.expand_as(h), h), q);
    }
  });
  HeadScores s = acc.mean(layers);
  s.higher_is_important = confidence;
  if (confidence) {
    nlohmann::json ex = nlohmann::json::array();
    for (int64_t id : opts.special_ids) ex.push_back(id);
    s.info["excluded_key_ids"] = ex;
  } else {
    s.columns["entropy_nats"] = nats.mean(layers).scores;
    s.info["score"] = "entropy / ln(valid keys), mean over queries with at least two keys";
  }
  s.info["forward_passes"] = 1;
  s.info["backward_passes"] = 0;
  return s;
}

HeadScores output_norm_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  detail::ModelState state(model);
  torch::NoGradGuard no_grad;
  const auto& cfg = model.config();
  auto layers = detail::attention_layers(model);
  Accumulator acc(layers, device_of(model));
  std::vector<torch::Tensor> ctx(layers.size());
  for (size_t i = 0; i < layers.size(); ++i)
    layers[i].module->on_context = [&ctx, i](const torch::Tensor& c) { ctx[i] = c; };
  detail::for_each_batch(model, data, opts, "output_norm", [&](const Batch& b) {
    model.forward(b);
    for (size_t i = 0; i < layers.size(); ++i) {
      const int64_t H = static_cast<int64_t>(layers[i].heads.size());
      if (H == 0 || !ctx[i].defined()) continue;
      const auto& W = layers[i].module->o_proj->weight;  // [C, H*D]
      auto w = W.view({W.size(0), H, -1});               // [C, H, D]
      auto contrib = torch::einsum("bhtd,chd->bhtc", {ctx[i].to(W.scalar_type()), w});
      acc.add_masked(i, contrib.norm(2, {-1}), detail::query_mask(b, layers[i].type, cfg.arch));
      ctx[i] = torch::Tensor();
    }
  });
  HeadScores s = acc.mean(layers);
  s.info["forward_passes"] = 1;
  s.info["backward_passes"] = 0;
  return s;
}

HeadScores lrp_scores(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  detail::ModelState state(model);
  state.freeze_parameters();
  const auto& cfg = model.config();
  auto layers = detail::attention_layers(model);
  const auto dopts = torch::TensorOptions().dtype(torch::kDouble).device(device_of(model));
  std::vector<torch::Tensor> sums;
  for (const auto& a : layers) sums.push_back(torch::zeros({static_cast<int64_t>(a.heads.size())}, dopts));
  auto n_predictions = torch::zeros({}, dopts);
  detail::for_each_batch(model, data, opts, "lrp", [&](const Batch& b) {
    std::vector<torch::Tensor> probes;
    std::vector<size_t> which;
    for (size_t i = 0; i < layers.size(); ++i) {
      const int64_t H = static_cast<int64_t>(layers[i].heads.size());
      if (H == 0) continue;
      auto p = torch::ones({b.size(), H, 1, 1}, torch::TensorOptions().dtype(torch::kFloat).device(b.input_ids.device()))
                   .requires_grad_(true);
      layers[i].module->head_probe = p;
      probes.push_back(p);
      which.push_back(i);
    }
    if (probes.empty()) return;
    lrp::Scope scope(opts.lrp);
    auto logits = model.forward(b).logits;
    // Relevance 1 on the top-1 logit of every prediction that counts.
    auto seed = torch::zeros_like(logits).scatter_(-1, logits.argmax(-1, true), 1.0);
    if (cfg.arch != Arch::EncoderClassifier) seed = seed * b.labels.ne(kIgnoreIndex).unsqueeze(-1).to(seed.scalar_type());
    if (cfg.arch == Arch::EncoderClassifier) n_predictions += static_cast<double>(b.size());
    else n_predictions += b.labels.ne(kIgnoreIndex).sum().to(torch::kDouble);
    auto rel = torch::autograd::grad({logits}, probes, {seed}, false, false, true);
    for (size_t k = 0; k < probes.size(); ++k)
      if (rel[k].defined()) sums[which[k]] += rel[k].detach().sum({0, 2, 3}).to(torch::kDouble);
  });
  std::vector<torch::Tensor> all = sums;
  all.push_back(n_predictions);
  dist::all_reduce_sum(all);  // several processes: every rank's batches
  const double predictions = n_predictions.item<double>();
  HeadScores s;
  for (size_t i = 0; i < layers.size(); ++i) {
    auto v = sums[i].to(torch::kCPU).contiguous();
    for (size_t k = 0; k < layers[i].heads.size(); ++k)
      s.scores[{layers[i].type, layers[i].layer, layers[i].heads[k]}] =
          predictions > 0 ? v.data_ptr<double>()[k] / predictions : 0.0;
  }
  s.info["predictions"] = predictions;
  s.info["rule"] = {{"alpha", opts.lrp.alpha}, {"beta", opts.lrp.beta}, {"eps", opts.lrp.eps}};
  s.info["forward_passes"] = 1;
  s.info["backward_passes"] = 1;
  return s;
}

HeadScores magnitude_scores(TransformerImpl& model) {
  torch::NoGradGuard no_grad;
  HeadScores s;
  for (const auto& a : detail::attention_layers(model)) {
    const int64_t H = static_cast<int64_t>(a.heads.size());
    if (H == 0) continue;
    // Norms of the rows each head owns (model/geometry.h): its q rows and o columns, and the k/v rows
    // of its key/value head (shared by the query heads of a group).
    const HeadGeometry& geo = a.module->geometry();
    const int64_t G = geo.n_kv_heads_kept();
    auto rows = [&](const torch::Tensor& w, int64_t n) {
      return w.view({n, -1}).to(torch::kDouble).norm(2, std::vector<int64_t>{1}).to(torch::kCPU).contiguous();
    };
    auto per_head = [&](const torch::Tensor& per_group) {
      if (!geo.grouped()) return per_group;
      return per_group.index_select(0, torch::tensor(geo.kv_positions(), torch::kLong)).contiguous();
    };
    auto q = rows(a.module->q_proj->weight, H), k = per_head(rows(a.module->k_proj->weight, G)),
         v = per_head(rows(a.module->v_proj->weight, G));
    const auto& W = a.module->o_proj->weight;  // [C, H*D]
    auto o = W.view({W.size(0), H, -1}).to(torch::kDouble).norm(2, std::vector<int64_t>{0, 2}).to(torch::kCPU).contiguous();
    for (int64_t h = 0; h < H; ++h) {
      const HeadId id{a.type, a.layer, a.heads[static_cast<size_t>(h)]};
      const double qn = q.data_ptr<double>()[h], kn = k.data_ptr<double>()[h], vn = v.data_ptr<double>()[h],
                   on = o.data_ptr<double>()[h];
      s.scores[id] = std::sqrt(qn * qn + kn * kn + vn * vn + on * on);
      s.columns["q_norm"][id] = qn;
      s.columns["k_norm"][id] = kn;
      s.columns["v_norm"][id] = vn;
      s.columns["o_norm"][id] = on;
    }
  }
  s.info["forward_passes"] = 0;
  s.info["backward_passes"] = 0;
  return s;
}

HeadScores random_scores(TransformerImpl& model, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  HeadScores s;
  for (const auto& a : detail::attention_layers(model))
    for (int64_t h : a.heads) s.scores[{a.type, a.layer, h}] = u(rng);
  s.info["seed"] = seed;
  s.info["forward_passes"] = 0;
  s.info["backward_passes"] = 0;
  return s;
}

}  // namespace

HeadScores score_heads(TransformerImpl& model, const EvalSet& data, ScoreMethod method, const ScoreOptions& opts) {
  if (uses_data(method) && data.examples.empty())
    throw std::invalid_argument("scoring method " + to_string(method) + " needs data, but the set is empty");
  const auto t0 = std::chrono::steady_clock::now();
  HeadScores s;
  if (opts.unit == ScoreUnit::KvGroup && method != ScoreMethod::Gradient && method != ScoreMethod::Ablation) {
    // Groups from the query heads' raw scores: summed where scores add up, averaged where they are
    // per-head statistics.
    if (method == ScoreMethod::AllButOne) throw std::invalid_argument("all_but_one scores query heads only, not groups");
    ScoreOptions per_head = opts;
    per_head.unit = ScoreUnit::Head;
    per_head.normalize = Normalization::None;
    const bool mean = method == ScoreMethod::Confidence || method == ScoreMethod::Entropy || method == ScoreMethod::Random;
    s = aggregate_groups(score_heads(model, data, method, per_head), model.config(), mean);
    return detail::finish(std::move(s), model, data, opts, method, t0);
  }
  switch (method) {
    case ScoreMethod::Gradient: s = gradient_scores(model, data, opts, {opts.unit}).front(); break;
    case ScoreMethod::Ablation: s = detail::ablation_scores(model, data, opts); break;
    case ScoreMethod::AllButOne: s = detail::all_but_one_scores(model, data, opts); break;
    case ScoreMethod::Confidence: s = attention_stat_scores(model, data, opts, true); break;
    case ScoreMethod::Entropy: s = attention_stat_scores(model, data, opts, false); break;
    case ScoreMethod::Magnitude: s = magnitude_scores(model); break;
    case ScoreMethod::OutputNorm: s = output_norm_scores(model, data, opts); break;
    case ScoreMethod::Lrp: s = lrp_scores(model, data, opts); break;
    case ScoreMethod::Random: s = random_scores(model, opts.seed); break;
  }
  return detail::finish(std::move(s), model, data, opts, method, t0);
}

PassCost measure_pass_cost(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts) {
  PassCost c;
  {
    detail::ModelState state(model);
    torch::NoGradGuard no_grad;
    ScoreOptions o = opts;
    o.progress = nullptr;
    detail::for_each_batch(model, data, o, "", [&](const Batch& b) { model.forward(b); });  // warm-up
    auto t0 = std::chrono::steady_clock::now();
    detail::for_each_batch(model, data, o, "", [&](const Batch& b) { model.forward(b); });
    c.forward_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  {
    detail::ModelState state(model);
    for (auto& p : model.parameters()) p.set_requires_grad(true);
    auto t0 = std::chrono::steady_clock::now();
    ScoreOptions o = opts;
    o.progress = nullptr;
    detail::for_each_batch(model, data, o, "", [&](const Batch& b) {
      auto loss = per_example_nll(model, model.forward(b), b).first.sum();
      loss.backward();
    });
    c.forward_backward_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    model.zero_grad();
  }
  return c;
}

std::vector<HeadScores> score_gradient_units(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts,
                                             const std::vector<ScoreUnit>& units) {
  if (data.examples.empty()) throw std::invalid_argument("gradient needs data: the evaluation set is empty");
  const auto t0 = std::chrono::steady_clock::now();
  auto maps = gradient_scores(model, data, opts, units);
  for (auto& m : maps) {
    ScoreOptions o = opts;
    o.unit = m.unit;
    m = detail::finish(std::move(m), model, data, o, ScoreMethod::Gradient, t0);
  }
  return maps;
}

}  // namespace hp
