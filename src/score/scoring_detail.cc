// The scorers' shared helpers (scoring_detail.h).
#include "scoring_detail.h"

#include "headprune/data/dataset.h"
#include "headprune/eval/evaluate.h"
#include "headprune/util/dist.h"

namespace hp {

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

void capture_per_layer(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts, const std::string& what,
                       const std::vector<AttnLayer>& layers, const std::function<void(size_t, torch::Tensor&)>& install,
                       const std::function<void(size_t, const torch::Tensor&, const Batch&)>& use) {
  std::vector<torch::Tensor> slots(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) install(i, slots[i]);
  for_each_batch(model, data, opts, what, [&](const Batch& b) {
    model.forward(b);
    for (size_t i = 0; i < layers.size(); ++i) {
      if (layers[i].heads.empty() || !slots[i].defined()) continue;
      use(i, slots[i], b);
      slots[i] = torch::Tensor();
    }
  });
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

ScoringGuard::ScoringGuard(TransformerImpl& model) : model_(model), was_training_(model.is_training()) {
  for (auto& p : model.parameters()) requires_grad_.push_back(p.requires_grad());
  model.eval();
}

void ScoringGuard::freeze_parameters() {
  for (auto& p : model_.parameters()) p.set_requires_grad(false);
}

ScoringGuard::~ScoringGuard() {
  size_t i = 0;
  for (auto& p : model_.parameters()) p.set_requires_grad(requires_grad_[i++]);
  for (auto& a : attention_layers(model_)) {
    a.module->head_probe = torch::Tensor();
    a.module->on_context = nullptr;
    a.module->on_output = nullptr;
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


Accumulator::Accumulator(const std::vector<AttnLayer>& layers, const torch::Device& device) {
  const auto opts = torch::TensorOptions().dtype(torch::kDouble).device(device);
  for (const auto& a : layers) {
    sums.push_back(torch::zeros({static_cast<int64_t>(a.heads.size())}, opts));
    counts.push_back(torch::zeros({}, opts));
  }
}

void Accumulator::add_masked(size_t layer, const torch::Tensor& v, const torch::Tensor& qmask) {
  auto m = qmask.unsqueeze(1).to(v.scalar_type());
  sums[layer] += (v * m).sum(std::vector<int64_t>{0, 2}).to(torch::kDouble);
  counts[layer] += qmask.sum().to(torch::kDouble);
}

HeadScores Accumulator::mean(const std::vector<AttnLayer>& layers) {
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

torch::Device device_of(TransformerImpl& model) { return model.parameters().front().device(); }

int64_t query_len(const Batch& b, AttnType t, Arch arch) { return query_mask(b, t, arch).size(1); }

}  // namespace detail
}  // namespace hp
