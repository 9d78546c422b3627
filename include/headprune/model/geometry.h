// Head geometry: which rows and columns of which tensors each head of an attention layer owns.
// Removal, the magnitude scorer, FLOP counts, the textbook baseline and the HF name tables all read
// it instead of assuming their own layout.
//
// Dimension legend: C d_model, D head dim, H query heads kept, G key/value heads kept,
// R original query heads per key/value head (the group size; R = 1 is multi-head attention).
//   q_proj.weight [H*D, C]   bias [H*D] when qkv_bias
//   k_proj.weight [G*D, C]   bias [G*D] when qkv_bias      (v_proj the same)
//   o_proj.weight [C, H*D]   bias [C]   when o_bias (never sliced: it belongs to no head)
//   head_mask     [H]
// Heads are named by original id. Query head h belongs to key/value head h / R (grouped-query
// attention). The query head at position p owns rows [p*D, (p+1)*D) of q_proj and the same columns of
// o_proj; the key/value head at position g owns rows [g*D, (g+1)*D) of k_proj and v_proj. A key/value
// head is kept while at least one of its query heads is, so removing a query head drops its q rows and
// o columns, and removing the last query head of a group drops the group's k/v rows too. With R = 1
// every query head is its own group: it owns its q, k and v rows and its o columns.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "headprune/config.h"

namespace hp {

struct HeadGeometry {
  int64_t d_model = 0, head_dim = 0;
  int64_t group_size = 1;      // R
  std::vector<int64_t> heads;  // kept query heads, original ids, increasing
  bool qkv_bias = true, o_bias = true;
  bool qk_norm = false;  // RMSNorm over head_dim on queries and keys (ModelConfig::qk_norm), epsilon norm_eps
  double norm_eps = 1e-6;
  bool scaled = true;  // scores q.k times 1/sqrt(head_dim) (ModelConfig::scaled_attention; T5: unscaled)
  double score_scale() const;

  // Multi-head attention (one key/value head per query head) with every bias.
  static HeadGeometry mha(int64_t d_model, int64_t head_dim, std::vector<int64_t> heads) {
    HeadGeometry g;
    g.d_model = d_model;
    g.head_dim = head_dim;
    g.heads = std::move(heads);
    return g;
  }

  int64_t n_heads_kept() const { return static_cast<int64_t>(heads.size()); }  // H
  std::vector<int64_t> kv_heads() const;  // kept key/value heads, original ids, increasing
  int64_t n_kv_heads_kept() const { return static_cast<int64_t>(kv_heads().size()); }  // G
  bool grouped() const { return group_size > 1; }
  // For each kept query head (by position), the position of its key/value head among kv_heads().
  std::vector<int64_t> kv_positions() const;
  int64_t position_of(int64_t head) const;  // position of an original query head id, or -1
  int64_t q_width() const { return n_heads_kept() * head_dim; }      // rows of q_proj, columns of o_proj
  int64_t kv_width() const { return n_kv_heads_kept() * head_dim; }  // rows of k_proj and v_proj

  // Removing heads (original ids, each kept): the geometry that remains and the indices to keep.
  struct Cut {
    std::vector<int64_t> heads;           // the kept query heads afterwards
    std::vector<int64_t> q_rows;          // rows of q_proj (and columns of o_proj) to keep
    std::vector<int64_t> kv_rows;         // rows of k_proj and v_proj to keep
    std::vector<int64_t> head_positions;  // entries of head_mask to keep
  };
  Cut cut(const std::vector<int64_t>& remove) const;

  // Multiply-adds x 2 of the layer for `batch` sequences of tq queries over tk keys: the projections,
  // attention scores, weighted values and the output projection. 0 when no head is kept.
  double flops(double batch, double tq, double tk) const;
};

// The geometry of one attention layer of a model config.
HeadGeometry head_geometry(const ModelConfig& cfg, AttnType type, int64_t layer);

// Multiply-adds x 2 of one forward pass (projections, attention scores and weighted values,
// feed-forward, output layer); LayerNorm, softmax and activations are not counted. Attention
// layers with no heads count nothing (they are skipped). Encoder-decoder models get seq_len on
// both sides.
double forward_flops(const ModelConfig& cfg, int64_t batch, int64_t seq_len);
// A decoder LM generating with cached keys and values: new_tokens = 0 counts a prompt of `prompt`
// positions with the output layer at its last position only; otherwise new_tokens steps of one token
// per sequence after it, step i attending over prompt + i + 1 positions.
double generation_flops(const ModelConfig& cfg, int64_t batch, int64_t prompt, int64_t new_tokens);

// Bytes of the activations of one forward pass (training: kept for the backward pass, plus the
// gradient of the logits) at `element_bytes` per value: projections, attention scores, feed-forward
// and output layer. A lower bound of the peak, from the shapes alone (a double, so nothing
// overflows): checked against the available memory before a batch is allocated (util/runtime.h
// check_memory). Encoder-decoder models get seq_len on both sides.
double forward_memory_bytes(const ModelConfig& cfg, int64_t batch, int64_t seq_len, bool training,
                            double element_bytes = 4);

}  // namespace hp
