// A model's forward pass replayed per shape (see header).
#include "headprune/eval/graph_forward.h"

#include <limits>
#include <stdexcept>
#include <vector>

namespace hp {

int64_t graph_bucket(int64_t n, int64_t limit) {
  if (n < 1) throw std::invalid_argument("graph_bucket: size " + std::to_string(n) + " is not positive");
  int64_t b = 1;
  while (b < n) b *= 2;
  return std::max(n, std::min(b, limit));
}

namespace {
// t [rows, len] grown to [rows_to, len_to] with `fill` in the new entries (t itself when it fits).
torch::Tensor pad_2d(const torch::Tensor& t, int64_t rows_to, int64_t len_to, int64_t fill) {
  if (!t.defined() || (t.size(0) == rows_to && t.size(1) == len_to)) return t;
  auto out = torch::full({rows_to, len_to}, fill, t.options());
  out.narrow(0, 0, t.size(0)).narrow(1, 0, t.size(1)).copy_(t);
  return out;
}
// A batch's keep mask, or ones for ids without one (every token real); undefined without ids.
torch::Tensor keep_or_all(const torch::Tensor& mask, const torch::Tensor& ids) {
  return mask.defined() || !ids.defined() ? mask : torch::ones_like(ids);
}
}  // namespace

GraphForward::GraphForward(TransformerImpl& model, GraphReplay mode, bool buckets) : model_(model), buckets_(buckets) {
  graphs_ = std::make_unique<ShapeGraphs>(
      [this](const std::vector<torch::Tensor>& in) {
        Batch b;
        b.input_ids = in[0];
        b.attention_mask = in[1];
        b.segment_ids = in[2];
        b.decoder_input_ids = in[3];
        b.decoder_attention_mask = in[4];
        return std::vector<torch::Tensor>{model_.forward(b).logits};
      },
      mode);
}

torch::Tensor GraphForward::logits(const Batch& b) {
  if (!b.input_ids.defined() || b.input_ids.dim() != 2)
    throw std::invalid_argument("graph forward: input_ids must be [batch, length]");
  const auto& cfg = model_.config();
  const int64_t B = b.input_ids.size(0), T = b.input_ids.size(1);
  const int64_t U = b.decoder_input_ids.defined() ? b.decoder_input_ids.size(1) : 0;
  const int64_t rows = buckets_ ? graph_bucket(B, std::numeric_limits<int64_t>::max()) : B;
  const int64_t t_to = buckets_ ? graph_bucket(T, cfg.max_positions) : T;
  const int64_t u_to = buckets_ && U > 0 ? graph_bucket(U, cfg.max_positions) : U;
  // Padding rows and positions: the padding id, blocked by the attention masks. A mask that is not given
  // means every token is real (Batch::attention_mask): ones, so that the added positions can be blocked.
  const auto& out = (*graphs_)({pad_2d(b.input_ids, rows, t_to, cfg.pad_id),
                                pad_2d(keep_or_all(b.attention_mask, b.input_ids), rows, t_to, 0),
                                pad_2d(b.segment_ids, rows, t_to, 0), pad_2d(b.decoder_input_ids, rows, u_to, cfg.pad_id),
                                pad_2d(keep_or_all(b.decoder_attention_mask, b.decoder_input_ids), rows, u_to, 0)});
  auto logits = out.front().narrow(0, 0, B);
  if (logits.dim() == 3) logits = logits.narrow(1, 0, cfg.arch == Arch::EncoderDecoder ? U : T);
  return logits;
}

}  // namespace hp
