// The baseline of `headprune bench --textbook`: a BERT-style encoder classifier written the
// straightforward way with LibTorch's stock modules (torch::nn::Linear for Q, K, V and the output
// projection, nn::LayerNorm, nn::Embedding, nn::Dropout; heads split with view/transpose, scores
// scaled after the matmul), as a textbook implementation would be. It copies the weights of an
// unpruned headprune model, so both compute the same function (up to rounding) and timing them
// side by side measures only the implementation.
//
// Supported: encoder_classifier, post-LN, learned positions, embedding LayerNorm, every head kept with
// its own key/value head and biases on every projection (model/geometry.h), gelu / gelu_tanh / relu.
// Anything else throws.
#pragma once

#include <torch/torch.h>

#include "headprune/model/geometry.h"
#include "headprune/model/transformer.h"

namespace hp {

class TextbookEncoderLayerImpl : public torch::nn::Module {
 public:
  TextbookEncoderLayerImpl(const ModelConfig& cfg, const HeadGeometry& geometry);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);  // x [B, T, C], mask [B, 1, 1, T]
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, out{nullptr}, fc1{nullptr}, fc2{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::Dropout dropout{nullptr};

 private:
  int64_t n_heads_, head_dim_;
  Activation act_;
};
TORCH_MODULE(TextbookEncoderLayer);

class TextbookClassifierImpl : public torch::nn::Module {
 public:
  // Same architecture as `source`, weights copied from it.
  explicit TextbookClassifierImpl(TransformerImpl& source);
  torch::Tensor forward(const Batch& batch);  // logits [B, n_classes]
  torch::nn::Embedding tokens{nullptr}, positions{nullptr}, segments{nullptr};
  torch::nn::LayerNorm embed_norm{nullptr};
  torch::nn::Dropout embed_dropout{nullptr};
  torch::nn::ModuleList layers{nullptr};
  torch::nn::Linear pooler{nullptr}, classifier{nullptr};
};
TORCH_MODULE(TextbookClassifier);

}  // namespace hp
