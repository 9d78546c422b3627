// One Transformer implementation, three architectures (config.h's Arch), each with the HF families
// read and written as it (src/io/hf/families.def) in brackets:
//   encoder_classifier  BERT-style: token + position (+ segment) embeddings, encoder, pooler over
//                       the first token, classification head; sentence pairs through segment ids. [bert]
//   decoder_lm          causal LM (decoder self-attention only): GPT-2 style, or the LLaMA block (RMSNorm,
//                       rotary positions, gated FFN, GQA). [gpt2, llama, mistral, qwen2, qwen3, phi3]
//   encoder_decoder     translation (encoder self, decoder self, cross attention). [marian, t5]
// Module names are checkpoint keys: encoder.layers.3.self_attn.q_proj.weight, ...
//
// Dimension legend: B batch, T source/input length, U target length, C d_model,
// V vocabulary, H heads kept in a layer.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "headprune/config.h"
#include "headprune/model/attention.h"
#include "headprune/model/layers.h"

namespace hp {

constexpr int64_t kIgnoreIndex = -100;  // label value skipped by the loss

// Inputs of every family. Unused fields stay undefined.
struct Batch {
  torch::Tensor input_ids;               // [B, T] int64
  torch::Tensor attention_mask;          // [B, T] 1 = token, 0 = padding; undefined: every token is real
                                         // (never derived from the ids: pad_id may be end-of-text)
  torch::Tensor segment_ids;             // [B, T] encoder_classifier sentence pairs (0/1)
  torch::Tensor decoder_input_ids;       // [B, U] encoder_decoder target prefix
  torch::Tensor decoder_attention_mask;  // [B, U] as attention_mask
  torch::Tensor labels;  // [B] class ids, or [B, T|U] next-token ids with kIgnoreIndex to skip

  int64_t size() const { return input_ids.defined() ? input_ids.size(0) : 0; }
  Batch to(const torch::Device& device) const;
  Batch rows(int64_t from, int64_t n) const;  // examples [from, from + n) (views)
  Batch map(const std::function<torch::Tensor(const torch::Tensor&)>& f) const;  // f on every defined field
};

struct ForwardOptions {
  bool return_attention = false;  // fill ModelOutput::attention (no second forward pass)
};

struct ModelOutput {
  torch::Tensor logits;  // [B, n_classes] or [B, T|U, V]
  // attention[type][layer]: probabilities [B, H, T, S] of the kept heads, in kept order.
  std::map<AttnType, std::vector<torch::Tensor>> attention;
};

// One encoder or decoder layer: self-attention, optional cross-attention, feed-forward,
// each wrapped in a residual connection with pre- or post-LayerNorm.
class TransformerLayerImpl : public torch::nn::Module {
 public:
  // Layer `layer` of the stack whose self-attention is `self_type`; with_cross adds cross-attention.
  TransformerLayerImpl(const ModelConfig& cfg, AttnType self_type, int64_t layer, bool with_cross);
  // x [B, T, C]; memory [B, S, C] (cross-attention input) or undefined.
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& self_mask, const torch::Tensor& memory,
                        const torch::Tensor& cross_mask, torch::Tensor* self_probs,
                        torch::Tensor* cross_probs, KVCache* self_cache = nullptr,
                        KVCache* cross_cache = nullptr, const Rope* rope = nullptr);

  MultiHeadAttention self_attn{nullptr}, cross_attn{nullptr};
  Norm self_attn_norm{nullptr}, cross_attn_norm{nullptr}, ffn_norm{nullptr};
  FeedForward ffn{nullptr};

 private:
  bool pre_norm_;
  double dropout_;
};
TORCH_MODULE(TransformerLayer);

// Embeddings + a stack of layers (+ final norm for pre-LN).
class StackImpl : public torch::nn::Module {
 public:
  // shared_tokens: another stack's token table to read instead of one of its own (not registered here:
  // one parameter; ModelConfig::share_embeddings).
  StackImpl(const ModelConfig& cfg, AttnType self_type, int64_t vocab, bool with_segments,
            torch::nn::Embedding shared_tokens = nullptr);
  // ids [B, T] -> hidden [B, T, C]. position_offset shifts positions (incremental decoding);
  // position_ids [T] (int64, on the device), when given, are the positions instead: a decoding step
  // that a CUDA graph replays reads its position from the device (not with relative positions).
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& segment_ids,
                        const torch::Tensor& self_mask, const torch::Tensor& memory,
                        const torch::Tensor& cross_mask, std::vector<torch::Tensor>* self_probs,
                        std::vector<torch::Tensor>* cross_probs, int64_t position_offset = 0,
                        std::vector<KVCache>* self_caches = nullptr,
                        std::vector<KVCache>* cross_caches = nullptr, const torch::Tensor& position_ids = {});

  // forward() in pieces: the embedded input with the rotary tables of its positions; the final norm.
  struct Embedded {
    torch::Tensor x;          // [B, T, C]
    std::optional<Rope> rope;  // rotary models
  };
  Embedded embed(const torch::Tensor& ids, const torch::Tensor& segment_ids, int64_t position_offset = 0,
                 const torch::Tensor& position_ids = {});
  torch::Tensor finish(const torch::Tensor& x);

  // The relative-position bias [1, n_heads, T, S] of queries q_offset .. q_offset+T-1 over keys 0 .. S-1,
  // every original head (positional "relative"; a layer reads its kept heads' columns).
  torch::Tensor position_bias(int64_t q_offset, int64_t T, int64_t S);

  torch::nn::Embedding embed_tokens{nullptr}, embed_positions{nullptr}, embed_segments{nullptr};
  torch::nn::Embedding relative_attention_bias{nullptr};  // [buckets, n_heads] (positional "relative")
  Norm embed_norm{nullptr}, final_norm{nullptr};
  torch::nn::ModuleList layers{nullptr};

  TransformerLayerImpl& layer(int64_t i) { return *layers[i]->as<TransformerLayerImpl>(); }
  int64_t n_layers() const { return static_cast<int64_t>(layers->size()); }

 private:
  torch::Tensor sinusoid_;  // [max_positions, C] (not a parameter)
  torch::Tensor inv_freq_;  // [D/2] rotary inverse frequencies (not a parameter; rotary models only)
  double embed_scale_ = 1.0;
  struct {
    bool bidirectional = true;  // the encoder's (keys on both sides); the decoder's look back only
    int64_t buckets = 0, max_distance = 0;
  } relative_;
  double dropout_;
  int64_t max_positions_;
};
TORCH_MODULE(Stack);

// One attention layer's head mask, for masking and for reading it back.
struct HeadMaskView {
  AttnType type;
  int64_t layer;
  std::vector<int64_t> heads;  // original ids, aligned with mask
  torch::Tensor mask;          // [H] the live buffer (writing 0 masks a head)
};

class TransformerImpl : public torch::nn::Module {
 public:
  explicit TransformerImpl(ModelConfig cfg);

  const ModelConfig& config() const { return cfg_; }
  ModelOutput forward(const Batch& batch, const ForwardOptions& opts = {});
  // Mean token (or example) cross-entropy of the family's task; label_smoothing in [0, 1).
  torch::Tensor loss(const ModelOutput& out, const Batch& batch, double label_smoothing = 0.0) const;

  // Encoder output [B, T, C] for encoder_decoder / encoder_classifier.
  torch::Tensor encode(const Batch& batch, std::map<AttnType, std::vector<torch::Tensor>>* attn = nullptr);
  torch::Tensor output_projection(const torch::Tensor& hidden) const;  // [.., C] -> [.., V]

  // Layer by layer, for single-stack models (decoder_lm, encoder_classifier): forward() in pieces
  // that can be recomputed one layer at a time (scoring a model whose whole graph does not fit) or run
  // by different processes (a pipeline). stack_end(stack_layer(...stack_layer(stack_begin(b).x)...))
  // gives forward(b).logits. Encoder-decoder models are std::invalid_argument.
  struct StackState {
    torch::Tensor x;           // [B, T, C] the embedded input
    torch::Tensor mask;        // the additive attention mask of every layer
    std::optional<Rope> rope;  // rotary models
  };
  StackState stack_begin(const Batch& batch);
  torch::Tensor stack_layer(int64_t layer, const torch::Tensor& x, const StackState& state);
  torch::Tensor stack_end(const torch::Tensor& x);  // final norm and the output head: the logits
  Stack& single_stack();

  MultiHeadAttentionImpl& attention(AttnType type, int64_t layer);
  std::vector<HeadMaskView> head_masks();  // every attention layer, in model order
  // Masking: set one head's mask entry (original id; 0 masks, 1 unmasks); throws
  // std::invalid_argument for a head the model does not have.
  void set_head_mask(const HeadId& head, double value);
  void mask_heads(const std::vector<HeadId>& heads) {
    for (const auto& h : heads) set_head_mask(h, 0.0);
  }
  void unmask_all();                       // every mask entry back to 1
  // The mask buffers become leaves whose .grad() backward fills: d loss / d xi_h at any mask value.
  void set_head_masks_requires_grad(bool on);
  std::vector<HeadId> masked_heads();      // heads whose mask entry is 0
  int64_t n_active_heads();                // heads kept and not masked
  int64_t n_parameters();

  Stack encoder{nullptr}, decoder{nullptr};
  Dense pooler{nullptr}, classifier{nullptr}, lm_head{nullptr};

 private:
  torch::Tensor classify(const torch::Tensor& hidden);          // the pooler and classifier on the first token
  torch::Tensor decoder_lm_mask(const Batch& batch) const;     // causal (and windowed) plus padding
  ModelConfig cfg_;
  torch::Tensor logits_bias_;  // [V] buffer "final_logits_bias" (ModelConfig::logits_bias), else undefined
};
TORCH_MODULE(Transformer);

// T5's bucket of each query-key distance (key position - query position) [T, S] int64: exact below
// half the buckets (per direction when bidirectional, else only keys at or before the query, later
// ones in bucket 0), logarithmic up to max_distance, the last bucket beyond.
torch::Tensor relative_position_buckets(const torch::Tensor& distance, bool bidirectional, int64_t buckets,
                                        int64_t max_distance);
// An attention layer's additive mask with the relative-position bias of its kept heads (original ids):
// [B or 1, H, T, S]; mask may be undefined.
torch::Tensor with_position_bias(const torch::Tensor& mask, const torch::Tensor& bias, const std::vector<int64_t>& heads);

// Additive attention masks (0 = attend, masked_score(dtype) = blocked).
// The score of a blocked key in an additive mask of this dtype: -1e9, or in fp16 a quarter of its lowest
// finite value (-16376), so that masks and a position bias added together stay finite there.
double masked_score(torch::ScalarType dtype);
// keep [B,S] (1 = token, 0 = padding) -> [B,1,1,S]; an undefined keep (no mask: every token is real, never
// derived from the ids) gives an undefined mask.
torch::Tensor padding_mask(const torch::Tensor& keep, torch::ScalarType dtype);
// [1,1,T,S] for T queries at positions S-T .. S-1 over S keys (S = T when omitted): a query sees the
// keys at or before its position, and with window > 0 only the last `window` of them (Mistral's
// sliding window: key j is seen by query i when i - window < j <= i).
torch::Tensor causal_mask(int64_t T, const torch::Device& device, torch::ScalarType dtype, int64_t window = 0,
                          int64_t S = -1);
// [1,1,1,S] for one query at the position `position` holds ([1] int64, on the device) over S keys, made
// on the device (a CUDA graph's decoding step): the keys after it blocked, and with window > 0 those
// `window` or more before it.
torch::Tensor causal_mask_at(const torch::Tensor& position, int64_t S, torch::ScalarType dtype, int64_t window = 0);

// Reproducible random initialization of every parameter (and random biases), for tests
// and benchmarks where exact zeros would hide mistakes.
void randomize_parameters(TransformerImpl& model, uint64_t seed, double std = 0.2);

}  // namespace hp
