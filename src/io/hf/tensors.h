// Private to src/io/hf: what the family files and the engine share. The file's tensors by HF name,
// taken out one by one against expected shapes; HF's pruned_heads; HF's activation names.
#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/config.h"
#include "headprune/model/state.h"
#include "headprune/util/json_fields.h"

namespace hp::hf_detail {

[[noreturn]] inline void fail(const std::string& source, const std::string& what) {
  throw std::runtime_error(source + ": " + what);
}

Activation parse_hf_activation(const std::string& s, const std::string& source);
// Export's allow-lists (HfFamily::config_fields): what every family's config says (the shape, the kept
// heads, max_positions, the norm's epsilon, the activation, the padding id, the output tie), with `more`.
std::set<std::string> config_fields_with(std::initializer_list<const char*> more);
// Export: what HF's BERT and GPT-2 blocks need of the fields they list (head_dim x heads = d_model);
// `family` names it in errors.
void check_classic_block(const ModelConfig& cfg, const std::string& family);
std::string hf_activation(Activation a);

// pruned_heads {"layer": [ids]} -> kept heads per layer.
inline std::vector<std::vector<int64_t>> kept_from_pruned(const nlohmann::json& c, int64_t layers, int64_t heads,
                                                          const std::string& source) {
  std::vector<std::vector<int64_t>> kept(static_cast<size_t>(layers));
  std::vector<std::set<int64_t>> pruned(static_cast<size_t>(layers));
  if (c.contains("pruned_heads") && !c.at("pruned_heads").is_null()) {
    const auto& p = c.at("pruned_heads");
    if (!p.is_object()) fail(source, "pruned_heads must be an object {\"layer\": [head ids]}");
    for (auto it = p.begin(); it != p.end(); ++it) {
      int64_t l = -1;
      try {
        size_t used = 0;
        l = std::stoll(it.key(), &used);
        if (used != it.key().size()) l = -1;
      } catch (const std::exception&) {
      }
      if (l < 0 || l >= layers)
        fail(source, "pruned_heads: layer '" + it.key() + "' is not in [0, " + std::to_string(layers) + ")");
      if (!it.value().is_array()) fail(source, "pruned_heads['" + it.key() + "'] must be a list of head ids");
      for (const auto& h : it.value()) {
        if (!h.is_number_integer() || h.get<int64_t>() < 0 || h.get<int64_t>() >= heads)
          fail(source, "pruned_heads['" + it.key() + "']: head " + h.dump() + " is not in [0, " +
                           std::to_string(heads) + ")");
        pruned[static_cast<size_t>(l)].insert(h.get<int64_t>());
      }
    }
  }
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t h = 0; h < heads; ++h)
      if (!pruned[static_cast<size_t>(l)].count(h)) kept[static_cast<size_t>(l)].push_back(h);
  return kept;
}

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Tensors by HF name with a known prefix stripped; takes them out one by one.
class HfTensors {
 public:
  HfTensors(const TensorMap& t, const std::string& prefix, const std::string& source) : source_(source) {
    for (const auto& [k, v] : t) {
      std::string name = k.rfind(prefix, 0) == 0 ? k.substr(prefix.size()) : k;
      // Old BERT files name LayerNorm parameters gamma / beta.
      for (const auto& [from, to] : {std::pair<std::string, std::string>{"LayerNorm.gamma", "LayerNorm.weight"},
                                     {"LayerNorm.beta", "LayerNorm.bias"}})
        if (ends_with(name, from)) name = name.substr(0, name.size() - from.size()) + to;
      left_[name] = v;
      original_[name] = k;
    }
  }
  const std::string& source() const { return source_; }
  bool has(const std::string& name) const { return left_.count(name) > 0; }
  // The tensor as stored, left in place (undefined when absent).
  torch::Tensor peek(const std::string& name) const {
    const auto it = left_.find(name);
    return it == left_.end() ? torch::Tensor() : it->second;
  }
  // The leading size of a matrix (e.g. the classes of a classifier), checked to be one.
  int64_t rows(const std::string& name) const {
    const auto it = left_.find(name);
    if (it == left_.end()) fail(source_, "missing tensor '" + name + "'");
    if (it->second.dim() != 2)
      fail(source_, "tensor '" + original_.at(name) + "' has shape " + shape_str(it->second.sizes()) + ", expected a matrix");
    return it->second.size(0);
  }
  // The tensor, checked against the expected shape (empty = any).
  torch::Tensor take(const std::string& name, std::vector<int64_t> shape = {}) {
    auto it = left_.find(name);
    if (it == left_.end()) fail(source_, "missing tensor '" + name + "'");
    auto t = it->second;
    if (!shape.empty() && t.sizes().vec() != shape)
      fail(source_, "tensor '" + original_[name] + "' has shape " + shape_str(t.sizes()) + ", expected " +
                        shape_str(shape) + " (from config.json and its pruned_heads)");
    left_.erase(it);
    return t;  // as stored (a view into the mapped file); loading decides the dtype
  }
  void drop_if(const std::function<bool(const std::string&)>& ignorable) {
    for (auto it = left_.begin(); it != left_.end();) it = ignorable(it->first) ? left_.erase(it) : std::next(it);
  }
  void expect_empty() const {
    if (!left_.empty())
      fail(source_, "unexpected tensor '" + original_.at(left_.begin()->first) + "' (" +
                        std::to_string(left_.size()) + " left over)");
  }

 private:
  std::string source_;
  TensorMap left_;
  std::map<std::string, std::string> original_;
};

// One embedding table that HF ties under several names (Marian's and T5's `shared` with the encoder's
// and decoder's embed_tokens): the first of `names` the file holds; copies under the others are the
// same parameter and are taken out unread (shape-checked). None of them: an error naming the first.
inline torch::Tensor take_shared(HfTensors& t, const std::vector<std::string>& names, const std::vector<int64_t>& shape) {
  torch::Tensor out;
  for (const auto& n : names)
    if (t.has(n)) {
      auto x = t.take(n, shape);
      if (!out.defined()) out = x;
    }
  if (!out.defined()) fail(t.source(), "missing tensor '" + names.front() + "' (the embedding table both stacks share)");
  return out;
}

}  // namespace hp::hf_detail
