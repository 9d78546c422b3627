// Physical head removal (see header).
#include "headprune/prune/remove_heads.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace hp {

namespace {

torch::Tensor get(const TensorMap& state, const std::string& name) {
  auto it = state.find(name);
  if (it == state.end()) throw std::runtime_error("remove_heads: weights lack tensor '" + name + "'");
  return it->second;
}

}  // namespace

std::pair<ModelConfig, TensorMap> remove_heads(const ModelConfig& cfg, const TensorMap& state,
                                               const std::vector<HeadId>& heads) {
  validate_heads(cfg, heads);
  ModelConfig out_cfg = cfg;
  TensorMap out = state;
  const int64_t D = cfg.head_dim;
  for (AttnType t : cfg.attn_types()) {
    for (int64_t l = 0; l < cfg.n_layers(t); ++l) {
      std::set<int64_t> drop;
      for (const auto& h : heads)
        if (h.type == t && h.layer == l) drop.insert(h.head);
      if (drop.empty()) continue;
      const auto& kept = cfg.heads(t)[l];
      std::vector<int64_t> new_kept, head_pos, row_idx;
      for (size_t p = 0; p < kept.size(); ++p) {
        if (drop.count(kept[p])) continue;
        new_kept.push_back(kept[p]);
        head_pos.push_back(static_cast<int64_t>(p));
        for (int64_t d = 0; d < D; ++d) row_idx.push_back(static_cast<int64_t>(p) * D + d);
      }
      const std::string pre = attention_prefix(t, l);
      auto rows = torch::tensor(row_idx, torch::kLong);
      auto pos = torch::tensor(head_pos, torch::kLong);
      for (const char* proj : {".q_proj", ".k_proj", ".v_proj"}) {
        for (const char* what : {".weight", ".bias"}) {
          const std::string name = pre + proj + what;
          auto w = get(state, name);
          out[name] = w.index_select(0, rows.to(w.device())).contiguous();
        }
      }
      auto wo = get(state, pre + ".o_proj.weight");
      out[pre + ".o_proj.weight"] = wo.index_select(1, rows.to(wo.device())).contiguous();
      auto gate = get(state, pre + ".head_gate");
      out[pre + ".head_gate"] = gate.index_select(0, pos.to(gate.device())).contiguous();
      out_cfg.heads(t)[l] = new_kept;
    }
  }
  out_cfg.finalize();
  return {out_cfg, out};
}

Transformer remove_heads(TransformerImpl& model, const std::vector<HeadId>& heads) {
  auto pruned = remove_heads(model.config(), state_dict(model), heads);
  Transformer fresh(pruned.first);
  auto any = model.parameters().front();
  fresh->to(any.device(), any.scalar_type());
  load_state_strict(*fresh, pruned.second, "remove_heads");
  fresh->train(model.is_training());
  return fresh;
}

}  // namespace hp
