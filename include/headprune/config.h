// Model architecture: the typed description a model is built from and saved with.
// It flows one way: config.json -> ModelConfig (validated once) -> module constructors.
// Heads are kept per attention type and per layer as *original* head ids, so a pruned
// (heterogeneous) model is described exactly and reports never need index shifting.
#pragma once

#include <cstdint>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hp {

enum class Arch { EncoderClassifier, DecoderLM, EncoderDecoder };
enum class AttnType { EncoderSelf, DecoderSelf, Cross };
enum class Activation { Gelu, GeluTanh, Relu, Silu };
enum class NormPosition { Pre, Post };
enum class NormKind { LayerNorm, RmsNorm };
// Learned and sinusoidal positions are added to the embeddings; rotary positions (RoPE, LLaMA
// family) rotate each head's queries and keys inside attention; relative positions (T5) add a learned
// bias per head and bucketed query-key distance to the attention scores.
enum class Positional { Learned, Sinusoidal, Rotary, Relative };
// Rotary frequency scaling, as HF's rope_scaling / rope_parameters "rope_type": default (none),
// linear (positions / factor), llama3 (Llama 3.1's wavelength-dependent interpolation).
enum class RopeScalingType { Default, Linear, Llama3 };

constexpr AttnType kAllAttnTypes[] = {AttnType::EncoderSelf, AttnType::DecoderSelf,
                                      AttnType::Cross};

std::string to_string(Arch a);
std::string to_string(AttnType t);
std::string to_string(Activation a);
std::string to_string(NormPosition n);
std::string to_string(Positional p);
std::string to_string(NormKind k);
std::string to_string(RopeScalingType t);
// Parse the names used in config.json and on the command line; throw std::invalid_argument
// listing the accepted names otherwise.
Arch parse_arch(const std::string& s);
AttnType parse_attn_type(const std::string& s);
Activation parse_activation(const std::string& s);
NormPosition parse_norm_position(const std::string& s);
Positional parse_positional(const std::string& s);
NormKind parse_norm_kind(const std::string& s);
RopeScalingType parse_rope_scaling_type(const std::string& s);
template <typename E>
class NameTable;
const NameTable<Arch>& arch_names();
const NameTable<AttnType>& attn_type_names();

// One head, named by its original id: stable across pruning.
struct HeadId {
  AttnType type = AttnType::EncoderSelf;
  int64_t layer = 0;
  int64_t head = 0;
  bool operator==(const HeadId& o) const {
    return type == o.type && layer == o.layer && head == o.head;
  }
  bool operator<(const HeadId& o) const;
};
std::string to_string(const HeadId& h);  // "encoder_self:2:5"
inline std::ostream& operator<<(std::ostream& o, const HeadId& h) { return o << to_string(h); }
// Parses "TYPE:LAYER:HEAD" (type names as in to_string, or enc/dec/cross).
HeadId parse_head_id(const std::string& s);

// Bounds every config is checked against before anything is allocated: far above any real model
// (the largest vocabularies are ~256k tokens, d_ff ~53k, 128 heads, 126 layers), far below sizes whose
// products overflow.
struct ConfigLimits {
  static constexpr int64_t vocab = 1 << 24;      // vocab_size, tgt_vocab_size
  static constexpr int64_t dim = 1 << 17;        // d_model, d_ff, head_dim
  static constexpr int64_t heads = 4096;         // n_heads
  static constexpr int64_t layers = 4096;        // per stack
  static constexpr int64_t positions = 1 << 22;  // max_positions
  static constexpr int64_t classes = 1 << 20;    // n_classes, n_segments
};

struct RopeScaling {
  RopeScalingType type = RopeScalingType::Default;
  double factor = 1.0;                 // linear, llama3
  double low_freq_factor = 1.0;        // llama3
  double high_freq_factor = 4.0;       // llama3
  int64_t original_max_positions = 0;  // llama3: the pre-training context (HF original_max_position_embeddings)
  bool operator==(const RopeScaling& o) const {
    return type == o.type && factor == o.factor && low_freq_factor == o.low_freq_factor &&
           high_freq_factor == o.high_freq_factor && original_max_positions == o.original_max_positions;
  }
};

struct ModelConfig {
  Arch arch = Arch::EncoderClassifier;
  int64_t vocab_size = 0;      // source / only vocabulary
  int64_t tgt_vocab_size = 0;  // encoder-decoder target vocabulary (0 = same as vocab_size)
  int64_t d_model = 0;
  int64_t d_ff = 0;
  int64_t n_heads = 0;     // original (query) heads per attention layer, ids 0..n_heads-1; the
                           // heads a pruned layer keeps are listed below (model/geometry.h)
  int64_t head_dim = 0;    // 0 = d_model / n_heads
  int64_t n_kv_heads = 0;  // key/value heads per attention layer (grouped-query attention: query
                           // head h reads key/value head h / (n_heads / n_kv_heads)); 0 = n_heads
  bool qkv_bias = true;    // biases on the query, key and value projections
  bool o_bias = true;      // bias on the output projection
  bool mlp_bias = true;    // biases on the feed-forward projections
  // RMSNorm over head_dim on each query and key head, before the rotary embedding (Qwen3's q_norm and
  // k_norm: one weight of head_dim shared by the heads, so removing heads leaves it as it is).
  bool qk_norm = false;
  // Feed-forward: fc2(act(fc1(x))), or gated (SwiGLU with silu, LLaMA family):
  // fc2(act(gate(x)) * fc1(x)), fc1 being HF's up_proj and fc2 its down_proj.
  bool gated_ffn = false;
  NormKind norm_kind = NormKind::LayerNorm;  // rms_norm: weight only, statistics in fp32
  double rope_theta = 10000.0;               // rotary base (positional "rotary")
  RopeScaling rope_scaling;
  // Rotary: the channels of each head that are rotated, the first ones; the rest pass unrotated
  // (Phi-3 / Phi-4's partial_rotary_factor x head_dim). 0 = all of head_dim.
  int64_t rotary_dim = 0;
  // Relative positions (T5): each stack holds a table relative_attention_bias [buckets, n_heads]
  // (original head ids as columns, so a layer that loses a head stops reading that column and the
  // other layers keep it); query-key distances fall into `relative_buckets` buckets, exact up to half
  // of them (per direction in the encoder, backwards only in the decoder), logarithmic up to
  // `relative_max_distance`.
  int64_t relative_buckets = 32;
  int64_t relative_max_distance = 128;
  // Attention scores q.k scaled by 1/sqrt(head_dim) (false: unscaled, T5).
  bool scaled_attention = true;
  // The decoder output multiplied by this before the output projection (T5 with a tied output:
  // d_model^-0.5).
  double output_scale = 1.0;
  int64_t sliding_window = 0;  // causal self-attention sees at most this many positions back (0 = all; Mistral)
  int64_t n_encoder_layers = 0;
  int64_t n_decoder_layers = 0;
  double dropout = 0.1;
  double attention_dropout = 0.1;
  // Dropout on the feed-forward block's hidden activation, between act(fc1(x)) and fc2 (fairseq's
  // activation_dropout). Negative: the same as `dropout` (configs without the field, as before it
  // existed). HF BERT, GPT-2 and LLaMA have none: their importers set 0.
  double activation_dropout = -1.0;
  double ffn_dropout() const { return activation_dropout < 0 ? dropout : activation_dropout; }
  int64_t max_positions = 512;
  Positional positional = Positional::Learned;
  // Sinusoidal positions: sin on the first half of the channels and cos on the second half (Marian),
  // instead of interleaved (sin on even channels, cos on odd ones, Vaswani et al.); same frequencies.
  bool split_sinusoid = false;
  Activation activation = Activation::Gelu;
  NormPosition norm = NormPosition::Post;
  bool embed_layer_norm = true;  // LayerNorm after the embeddings (BERT); false for GPT-2
  bool tie_embeddings = true;    // output projection shares the (target) token embedding
  // Encoder-decoder: one token table for both stacks (encoder.embed_tokens, which the decoder reads too;
  // HF's model.shared of Marian and T5): one parameter, trained by both sides. Needs one vocabulary.
  bool share_embeddings = false;
  // A fixed bias added to the output logits (Marian's final_logits_bias): a buffer
  // "final_logits_bias" [target vocabulary], loaded and saved with the weights, not trained.
  bool logits_bias = false;
  int64_t n_segments = 0;        // segment (token type) embeddings; 0 = none
  int64_t n_classes = 0;         // encoder classifier only
  double layer_norm_eps = 1e-5;
  int64_t pad_id = 0;

  // Kept original head ids per layer; empty vectors mean "not built yet" and are filled
  // with all heads by finalize(). Only the attention types of the arch may be non-empty.
  std::vector<std::vector<int64_t>> encoder_self_heads;
  std::vector<std::vector<int64_t>> decoder_self_heads;
  std::vector<std::vector<int64_t>> cross_heads;

  // Fill defaults (head_dim, all heads kept) and validate; throws std::invalid_argument
  // naming the field and what was expected.
  void finalize();

  // The parameters the model will hold, from the shapes alone (nothing allocated; a double, so a
  // hostile config cannot overflow it). Checked before building: against the machine's memory, and
  // by the loaders against the tensors a file actually holds.
  double approx_parameters() const;

  int64_t effective_tgt_vocab() const { return tgt_vocab_size > 0 ? tgt_vocab_size : vocab_size; }
  int64_t effective_kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }
  bool has(AttnType t) const;
  int64_t n_layers(AttnType t) const;
  const std::vector<std::vector<int64_t>>& heads(AttnType t) const;
  std::vector<std::vector<int64_t>>& heads(AttnType t);
  std::vector<AttnType> attn_types() const;
  int64_t n_heads_kept(AttnType t) const;  // summed over layers
  int64_t n_heads_total(AttnType t) const { return n_layers(t) * n_heads; }  // before any pruning

  // n_kv_heads, qkv_bias and o_bias are written only when they differ from their defaults.
  nlohmann::json to_json() const;
  // Strict: unknown keys, wrong types and out-of-range values are errors naming the key.
  static ModelConfig from_json(const nlohmann::json& j);
};

// Throws std::invalid_argument for a head of an attention type the model lacks, a layer or head
// id out of range, a head already removed, or a head listed twice.
void validate_heads(const ModelConfig& cfg, const std::vector<HeadId>& heads);

// ---- what an exporter can say ----------------------------------------------------------------------
// The keys of ModelConfig's fields as config.json names them (to_json), in the table's order.
std::vector<std::string> config_field_keys();
// The fields whose to_json entry differs from a default ModelConfig's (an absent entry is one value).
std::vector<std::string> non_default_config_fields(const ModelConfig& c);
// Fields that change training only (dropout rates): never refused by an exporter.
const std::set<std::string>& training_only_config_fields();
// An exporter's allow-list: throws std::invalid_argument "<who>: the model's <field> (<value>) has no
// form ..." for the first non-default field that is neither in `expressible` nor training-only.
// Every exporter calls it, so a new ModelConfig field is refused everywhere until an exporter lists it.
void require_expressible(const ModelConfig& c, const std::set<std::string>& expressible, const std::string& who);

// Small ready-made configs for tests and the demo.
ModelConfig tiny_config(Arch arch);
// A LLaMA-style decoder LM: rotary positions, RMSNorm, SwiGLU, grouped-query attention (4 query heads
// reading 2 key/value heads), no biases, untied output.
ModelConfig tiny_llama_config();

}  // namespace hp
