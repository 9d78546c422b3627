// Physical head removal (see header).
#include "headprune/model/remove_heads.h"

#include <stdexcept>

#include "headprune/model/geometry.h"

namespace hp {

namespace {

torch::Tensor get(const TensorMap& state, const std::string& name) {
  auto it = state.find(name);
  if (it == state.end()) throw std::runtime_error("remove_heads: weights lack tensor '" + name + "'");
  return it->second;
}

torch::Tensor take(const torch::Tensor& t, int64_t dim, const std::vector<int64_t>& idx) {
  return t.index_select(dim, torch::tensor(idx, torch::kLong).to(t.device())).contiguous();
}

}  // namespace

std::pair<ModelConfig, TensorMap> remove_heads(const ModelConfig& cfg, const TensorMap& state,
                                               const std::vector<HeadId>& heads) {
  validate_heads(cfg, heads);
  ModelConfig out_cfg = cfg;
  TensorMap out = state;
  for (AttnType t : cfg.attn_types()) {
    for (int64_t l = 0; l < cfg.n_layers(t); ++l) {
      std::vector<int64_t> drop;
      for (const auto& h : heads)
        if (h.type == t && h.layer == l) drop.push_back(h.head);
      if (drop.empty()) continue;
      const HeadGeometry g = head_geometry(cfg, t, l);
      const HeadGeometry::Cut cut = g.cut(drop);
      const std::string pre = attention_prefix(t, l);
      auto slice_rows = [&](const std::string& proj, const std::vector<int64_t>& rows) {
        out[pre + proj + ".weight"] = take(get(state, pre + proj + ".weight"), 0, rows);
        if (g.qkv_bias) out[pre + proj + ".bias"] = take(get(state, pre + proj + ".bias"), 0, rows);
      };
      slice_rows(".q_proj", cut.q_rows);
      slice_rows(".k_proj", cut.kv_rows);
      slice_rows(".v_proj", cut.kv_rows);
      out[pre + ".o_proj.weight"] = take(get(state, pre + ".o_proj.weight"), 1, cut.q_rows);
      out[pre + ".head_mask"] = take(get(state, pre + ".head_mask"), 0, cut.head_positions);
      out_cfg.heads(t)[l] = cut.heads;
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
