// A (pruned) single-stack model as an ONNX graph (io/onnx.h is the container): BERT-style encoder
// classifiers (inputs input_ids, attention_mask and, with segments, token_type_ids; output logits
// [batch, classes]) and decoder LMs, GPT-style or of the LLaMA family (output logits [batch, sequence,
// vocabulary] of the whole sequence; with kv_cache optimum's cached decoder, below). Batch and sequence
// are dynamic; int64 inputs, float32
// weights and logits. Every layer keeps its own head count: a pruned layer is simply smaller, an emptied
// one has no attention at all (its output projection's bias, if any, is added), masked heads are
// removed first.
//
// Attention, per layer:
//   fused     ONNX Runtime's com.microsoft Attention op (one node with the layer's own num_heads; the
//             q/k/v weights concatenated) where it computes what the layer does: encoder layers without
//             rotary positions, per-head norms or grouped key/value heads. Nothing else runs it, and
//             ONNX Runtime's own BERT fusion does not recognise a layer whose head count differs from
//             the config's, so this is what makes pruned layers fast there;
//   standard  default-domain ops only (MatMul, Softmax, ...), for any ONNX runtime; grouped-query
//             attention gathers each query head's key/value head (uneven groups included), rotary
//             positions rotate halves from cos/sin tables.
// Auto is fused wherever it applies. Encoder-decoders and relative positions (T5) are
// std::invalid_argument, as is partial rotary (Phi-3).
#pragma once

#include <string>

#include "headprune/io/onnx.h"
#include "headprune/model/transformer.h"

namespace hp {

enum class OnnxAttention { Auto, Fused, Standard };
OnnxAttention parse_onnx_attention(const std::string& s);  // "auto", "fused", "standard"

struct OnnxExport {
  OnnxGraph graph;
  size_t fused_layers = 0, standard_layers = 0, empty_layers = 0;
  bool kv_cache = false;
  size_t cached_layers = 0;  // layers with past/present key/value tensors (those with heads)
};

// kv_cache (decoder LMs; std::invalid_argument otherwise): the graph HF's optimum writes for generation,
// which transformers.js and ONNX Runtime users run step by step —
//   inputs   input_ids [batch_size, sequence_length], attention_mask [batch_size, total_sequence_length]
//            (past and new tokens), position_ids [batch_size, sequence_length], and for every layer L
//            that has heads past_key_values.L.key / .value [batch_size, G_L, past_sequence_length, D];
//   outputs  logits [batch_size, sequence_length, vocabulary], present.L.key / .value (the past with
//            this call's keys/values appended, keys already rotated).
// G_L is the layer's own key/value head count (a number in the file: transformers.js sizes its empty
// first cache from the inputs' shapes, so uneven layers work); an emptied layer has no cache. An empty
// past (past_sequence_length 0) is the first call. Attention is in standard ops; OnnxAttention::Fused
// writes ONNX Runtime's GroupQueryAttention (com.microsoft) in every layer instead (right-padded rows only:
// it reads each row's length from the mask; layers whose key/value heads do not each serve as many
// consecutive query heads, or head sizes not a multiple of 8, are std::invalid_argument).
OnnxExport to_onnx(TransformerImpl& model, OnnxAttention attention = OnnxAttention::Auto, bool kv_cache = false);

}  // namespace hp
