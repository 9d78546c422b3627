// Weight magnitude: the L2 norm of the rows and columns each head owns (model/geometry.h). No data.
#include "../scoring_detail.h"

namespace hp::detail {

HeadScores magnitude_scores(TransformerImpl& model, const EvalSet&, const ScoreOptions&) {
  torch::NoGradGuard no_grad;
  HeadScores s;
  for (const auto& a : attention_layers(model)) {
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

}  // namespace hp::detail
