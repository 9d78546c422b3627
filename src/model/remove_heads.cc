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
                                               const std::vector<HeadId>& heads, const ReplacedFn& replaced) {
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
      if (replaced) {
        std::vector<torch::Tensor> old;
        for (const char* n : {".q_proj.weight", ".k_proj.weight", ".v_proj.weight", ".o_proj.weight", ".q_proj.bias",
                              ".k_proj.bias", ".v_proj.bias"})
          if (state.count(pre + n)) old.push_back(state.at(pre + n));
        replaced(old);
      }
    }
  }
  out_cfg.finalize();
  return {out_cfg, out};
}

TensorMap restore_layer_shapes(const ModelConfig& cfg, const TensorMap& state, AttnType t, int64_t l) {
  const int64_t D = cfg.head_dim, H = cfg.n_heads, G = cfg.effective_kv_heads();
  TensorMap out;
  const HeadGeometry g = head_geometry(cfg, t, l);
  const std::string pre = attention_prefix(t, l);
  const auto mask = get(state, pre + ".head_mask");
  // Rows of the kept heads (by position) moved to their original ids among n of them.
  auto spread_rows = [&](const std::string& proj, const std::vector<int64_t>& ids, int64_t n) {
    for (const char* part : {".weight", ".bias"}) {
      if (std::string(part) == ".bias" && !g.qkv_bias) continue;
      const auto src = get(state, pre + proj + part);
      auto shape = src.sizes().vec();
      shape[0] = n * D;
      auto full = torch::zeros(shape, src.options());
      for (size_t p = 0; p < ids.size(); ++p)
        full.narrow(0, ids[p] * D, D).copy_(src.narrow(0, static_cast<int64_t>(p) * D, D));
      out[pre + proj + part] = full;
    }
  };
  spread_rows(".q_proj", g.heads, H);
  spread_rows(".k_proj", g.kv_heads(), G);
  spread_rows(".v_proj", g.kv_heads(), G);
  const auto o = get(state, pre + ".o_proj.weight");
  auto o_full = torch::zeros({o.size(0), H * D}, o.options());
  for (size_t p = 0; p < g.heads.size(); ++p) {
    const auto pos = static_cast<int64_t>(p);
    o_full.narrow(1, g.heads[p] * D, D).copy_(o.narrow(1, pos * D, D) * mask[pos].to(o.scalar_type()));
  }
  out[pre + ".o_proj.weight"] = o_full;
  out[pre + ".head_mask"] = torch::ones({H}, mask.options());
  return out;
}

ModelConfig restored_config(const ModelConfig& cfg) {
  ModelConfig out = cfg;
  std::vector<int64_t> all(static_cast<size_t>(cfg.n_heads));
  for (int64_t h = 0; h < cfg.n_heads; ++h) all[static_cast<size_t>(h)] = h;
  for (AttnType t : cfg.attn_types())
    for (int64_t l = 0; l < cfg.n_layers(t); ++l) out.heads(t)[l] = all;
  out.finalize();
  return out;
}

std::pair<ModelConfig, TensorMap> restore_head_shapes(const ModelConfig& cfg, const TensorMap& state) {
  TensorMap out = state;
  for (AttnType t : cfg.attn_types())
    for (int64_t l = 0; l < cfg.n_layers(t); ++l)
      for (auto& [name, tensor] : restore_layer_shapes(cfg, state, t, l)) out[name] = tensor;
  return {restored_config(cfg), out};
}

Transformer remove_heads(TransformerImpl& model, const std::vector<HeadId>& heads, bool share_untouched,
                         const ReplacedFn& replaced) {
  auto pruned = remove_heads(model.config(), state_dict(model), heads, replaced);
  Transformer fresh{nullptr};
  {
    DeferredInit deferred;  // the state fills it: nothing to allocate or initialize first
    fresh = Transformer(pruned.first);
  }
  LoadStateOptions o;
  o.share = share_untouched;
  o.check_finite = false;  // the model's own weights
  load_state_strict(*fresh, pruned.second, "remove_heads", o);
  fresh->train(model.is_training());
  return fresh;
}

}  // namespace hp
