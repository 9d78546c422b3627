// The gate set (one gate per head of the model's gated attention layers, and per layer for cofi) and
// the result of a gate training run: its JSON, its per-period log and the emptied layers.
#include "headprune/prune/gates.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace hp {

HeadGateSet::HeadGateSet(TransformerImpl& model, const HardConcrete& dist, double init_log_alpha, bool layer_gates)
    : dist_(dist) {
  for (const auto& g : model.head_masks()) {
    if (g.heads.empty()) continue;
    modules_.push_back(&model.attention(g.type, g.layer));
    layer_sizes_.push_back(static_cast<int64_t>(g.heads.size()));
    for (auto h : g.heads) heads_.push_back({g.type, g.layer, h});
  }
  if (heads_.empty()) throw std::invalid_argument("gates: the model keeps no heads");
  const auto device = model.parameters().front().device();
  log_alpha_ = torch::full({static_cast<int64_t>(heads_.size())}, init_log_alpha,
                           torch::TensorOptions().dtype(torch::kFloat).device(device))
                   .requires_grad_(true);
  if (layer_gates)
    layer_log_alpha_ = torch::full({static_cast<int64_t>(layer_sizes_.size())}, init_log_alpha, log_alpha_.options())
                           .requires_grad_(true);
}

std::vector<torch::Tensor> HeadGateSet::parameters() const {
  if (!has_layer_gates()) return {log_alpha_};
  return {log_alpha_, layer_log_alpha_};
}

torch::Tensor HeadGateSet::per_head(const torch::Tensor& per_layer) const {
  return per_layer.repeat_interleave(torch::tensor(layer_sizes_, torch::kLong).to(per_layer.device()));
}

void HeadGateSet::attach(const torch::Tensor& g) {
  int64_t off = 0;
  for (size_t i = 0; i < modules_.size(); ++i) {
    const int64_t n = layer_sizes_[i];
    modules_[i]->head_probe = g.slice(0, off, off + n).view({1, n, 1, 1});
    off += n;
  }
}

void HeadGateSet::attach_sample() {
  auto g = dist_.sample(log_alpha_);
  attach(has_layer_gates() ? g * per_head(dist_.sample(layer_log_alpha_)) : g);
}

void HeadGateSet::attach_deterministic() {
  torch::NoGradGuard no_grad;
  auto g = dist_.deterministic(log_alpha_);
  attach(has_layer_gates() ? g * per_head(dist_.deterministic(layer_log_alpha_)) : g);
}

torch::Tensor HeadGateSet::p_open() const {
  auto p = dist_.p_open(log_alpha_);
  return has_layer_gates() ? p * per_head(dist_.p_open(layer_log_alpha_)) : p;
}

void HeadGateSet::detach() {
  for (auto* m : modules_) m->head_probe = torch::Tensor();
}

std::vector<bool> HeadGateSet::closed() const {
  torch::NoGradGuard no_grad;
  auto c = dist_.p_zero(log_alpha_) > dist_.p_one(log_alpha_);
  if (has_layer_gates()) c = c | per_head(dist_.p_zero(layer_log_alpha_) > dist_.p_one(layer_log_alpha_));
  c = c.to(torch::kCPU).contiguous();
  std::vector<bool> out(heads_.size());
  auto a = c.accessor<bool, 1>();
  for (size_t i = 0; i < out.size(); ++i) out[i] = a[static_cast<int64_t>(i)];
  return out;
}

int64_t HeadGateSet::n_closed() const {
  auto c = closed();
  return std::count(c.begin(), c.end(), true);
}

nlohmann::json GateTrainResult::to_json() const {
  nlohmann::json c = nlohmann::json::array(), k = nlohmann::json::array();
  for (const auto& h : closed) c.push_back(hp::to_string(h));
  for (const auto& h : kept) k.push_back(hp::to_string(h));
  return {{"closed", c},
          {"kept", k},
          {"n_kept", kept.size()},
          {"n_closed", closed.size()},
          {"target_kept", target_kept < 0 ? nlohmann::json(nullptr) : nlohmann::json(target_kept)},
          {"reached_target", reached_target},
          {"steps", steps},
          {"final_coef", final_coef},
          {"rollbacks", rollbacks},
          {"empty_layers", emptied.size()},
          {"closed_by_gates", closed_by_gates < 0 ? nlohmann::json(nullptr) : nlohmann::json(closed_by_gates)}};
}

nlohmann::json GateTrainResult::log_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : log) {
    nlohmann::json j = {{"step", r.step},   {"coef", r.coef},     {"conc_coef", r.conc_coef}, {"expected_open", r.expected_open},
                        {"closed", r.closed}, {"p_open", r.p_open}, {"log_alpha", r.log_alpha}};
    if (r.rolled_back) j["rolled_back"] = true;
    out.push_back(j);
  }
  return out;
}

std::string GateTrainResult::log_csv() const {
  std::ostringstream csv;
  csv << "step,head,p_open,log_alpha\n";
  for (const auto& r : log)
    for (size_t i = 0; i < heads.size(); ++i)
      csv << r.step << "," << hp::to_string(heads[i]) << "," << r.p_open[i] << "," << r.log_alpha[i] << "\n";
  return csv.str();
}

std::vector<std::pair<AttnType, int64_t>> emptied_layers(const ModelConfig& cfg, const std::vector<HeadId>& closed) {
  std::vector<std::pair<AttnType, int64_t>> out;
  for (auto t : cfg.attn_types()) {
    const auto& layers = cfg.heads(t);
    for (int64_t l = 0; l < static_cast<int64_t>(layers.size()); ++l) {
      if (layers[l].empty()) continue;
      bool all = true;
      for (auto h : layers[l])
        if (std::find(closed.begin(), closed.end(), HeadId{t, l, h}) == closed.end()) all = false;
      if (all) out.emplace_back(t, l);
    }
  }
  return out;
}

}  // namespace hp
