// A model's forward pass at inference, replayed per shape (util/shape_graphs.h): CUDA graphs for
// `bench --graphs cuda` at its exact shapes and `eval --graphs cuda` over a data set's batches, which
// are padded up to a few buckets so that a handful of recordings serve them all. Logits only: the
// attention maps and the gates' gradients need the ordinary forward pass.
#pragma once

#include <cstdint>
#include <memory>

#include "headprune/model/transformer.h"
#include "headprune/util/shape_graphs.h"

namespace hp {

// The bucket of a size: the next power of two at or above n, at most `limit` (n itself when above).
int64_t graph_bucket(int64_t n, int64_t limit);

class GraphForward {
 public:
  // buckets: pad every batch's rows and lengths up to graph_bucket (lengths at most max_positions) with
  // padding tokens that the attention masks block; without, one recording per shape met. The model's
  // head masks and weights must not change while this object is used (the recordings hold them).
  GraphForward(TransformerImpl& model, GraphReplay mode, bool buckets);
  // model.forward(b).logits for b's own rows and positions: a view of the recording's outputs, valid
  // until the next call.
  torch::Tensor logits(const Batch& b);
  size_t recorded() const { return graphs_->recorded(); }

 private:
  TransformerImpl& model_;
  bool buckets_;
  std::unique_ptr<ShapeGraphs> graphs_;
};

}  // namespace hp
