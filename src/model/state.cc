// State dicts and strict loading.
#include "headprune/model/state.h"

#include <cstdio>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace hp {

std::string attention_prefix(AttnType type, int64_t layer) {
  switch (type) {
    case AttnType::EncoderSelf: return "encoder.layers." + std::to_string(layer) + ".self_attn";
    case AttnType::DecoderSelf: return "decoder.layers." + std::to_string(layer) + ".self_attn";
    case AttnType::Cross: return "decoder.layers." + std::to_string(layer) + ".cross_attn";
  }
  return "";
}

std::string shape_str(at::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

TensorMap state_dict(TransformerImpl& model) {
  TensorMap out;
  for (const auto& p : model.named_parameters(true)) out[p.key()] = p.value().detach();
  for (const auto& b : model.named_buffers(true)) out[b.key()] = b.value().detach();
  return out;
}

void load_state_strict(TransformerImpl& model, const TensorMap& state, const std::string& source,
                       const LoadStateOptions& options) {
  auto expected = state_dict(model);
  for (const auto& kv : expected) {
    const auto& name = kv.first;
    const auto& dst = kv.second;
    auto it = state.find(name);
    if (it == state.end())
      throw std::runtime_error(source + ": missing tensor '" + name + "' (expected shape " +
                               shape_str(dst.sizes()) + ")");
    const auto& src = it->second;
    if (src.sizes() != dst.sizes())
      throw std::runtime_error(source + ": tensor '" + name + "' has the wrong shape: expected " +
                               shape_str(dst.sizes()) + ", got " + shape_str(src.sizes()));
    if (src.scalar_type() != dst.scalar_type() &&
        !(at::isFloatingType(src.scalar_type()) && at::isFloatingType(dst.scalar_type())))
      throw std::runtime_error(source + ": tensor '" + name + "' has the wrong dtype: expected " +
                               std::string(c10::toString(dst.scalar_type())) + ", got " +
                               std::string(c10::toString(src.scalar_type())));
  }
  for (const auto& kv : state)
    if (!expected.count(kv.first))
      throw std::runtime_error(source + ": unexpected tensor '" + kv.first + "' (shape " +
                               shape_str(kv.second.sizes()) + ") that the model does not have");
  if (options.check_finite) {
    for (const auto& kv : state) {
      if (!at::isFloatingType(kv.second.scalar_type())) continue;
      if (torch::isfinite(kv.second).all().item<bool>()) continue;
      const int64_t bad = kv.second.numel() - torch::isfinite(kv.second).sum().item<int64_t>();
      throw std::runtime_error(source + ": tensor '" + kv.first + "' holds " + std::to_string(bad) +
                               " NaN or infinite values (a diverged or corrupted model?)");
    }
  }
  torch::NoGradGuard no_grad;
  // The model's own tensors (not detached aliases): set_data swaps what each one holds, keeping its
  // requires_grad. Shared: the state's tensor itself (a view into a mapped file stays one); copied: a
  // clone. Either way in the state's dtype and device.
  std::vector<torch::Tensor> held;
  for (const auto& p : model.named_parameters(true)) {
    torch::Tensor t = p.value();
    const auto& src = state.at(p.key());
    t.set_data(options.share ? src.detach() : src.detach().clone());
    held.push_back(t);
  }
  for (const auto& b : model.named_buffers(true)) {
    torch::Tensor t = b.value();
    const auto& src = state.at(b.key());
    t.set_data(options.share ? src.detach() : src.detach().clone());
    held.push_back(t);
  }
  // One floating dtype for the whole model: the one that holds most of its parameters (a few fp32
  // norms in a bf16 file, or a bf16 tensor in an fp32 one, are converted; small copies).
  std::map<torch::ScalarType, int64_t> by_dtype;
  for (const auto& t : model.parameters(true))
    if (at::isFloatingType(t.scalar_type())) by_dtype[t.scalar_type()] += t.numel();
  if (by_dtype.size() > 1 || (options.dtype && !by_dtype.empty())) {
    auto main = options.dtype ? *options.dtype
                              : std::max_element(by_dtype.begin(), by_dtype.end(), [](const auto& a, const auto& b) {
                                  return a.second < b.second;
                                })->first;
    for (auto& t : held)
      if (at::isFloatingType(t.scalar_type()) && t.scalar_type() != main) t.set_data(t.detach().to(main));
  }
}

void check_tensors_fit(const ModelConfig& cfg, const TensorMap& tensors, const std::string& source) {
  double held = 0;
  for (const auto& kv : tensors) held += static_cast<double>(kv.second.numel());
  const double wanted = cfg.approx_parameters();
  // Generous: the estimate leaves out norms and biases, and a tied output layer may be stored twice.
  if (wanted > 2 * held + 1e6) {
    char buf[200];
    std::snprintf(buf, sizeof buf, ": the config asks for about %.3g parameters but the file holds only %.3g values",
                  wanted, held);
    throw std::runtime_error(source + buf + " (config.json does not belong to these weights?)");
  }
}

void check_every_tensor_written(const TensorMap& state, const std::set<std::string>& written, const std::string& what) {
  std::set<const void*> storage;
  for (const auto& n : written)
    if (const auto it = state.find(n); it != state.end() && it->second.defined()) storage.insert(it->second.data_ptr());
  const std::string mask = ".head_mask";
  std::vector<std::string> missing;
  for (const auto& [n, t] : state) {
    const bool is_mask = n.size() >= mask.size() && n.compare(n.size() - mask.size(), mask.size(), mask) == 0;
    const bool empty = t.defined() && t.numel() == 0;  // an emptied layer's projections: nothing to lose
    if (!written.count(n) && !is_mask && !empty && !(t.defined() && storage.count(t.data_ptr()))) missing.push_back(n);
  }
  if (missing.empty()) return;
  std::string list;
  for (size_t i = 0; i < missing.size() && i < 4; ++i) list += (i ? ", " : "") + missing[i];
  if (missing.size() > 4) list += ", ... (" + std::to_string(missing.size()) + " in all)";
  throw std::invalid_argument(what + " has no place for the model's " + list + "; the file would compute other logits "
                              "than the model");
}

}  // namespace hp
