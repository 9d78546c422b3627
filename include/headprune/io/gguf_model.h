// A (pruned) LLaMA-family model as a GGUF file that llama.cpp runs (io/gguf.h is the container).
//
// Architecture: when every layer keeps the same number of query and key/value heads (and every
// key/value head serves the same number of them), the model's own: `llama` (Llama, Mistral), `qwen2`
// (a Qwen2-shaped model whose heads still fill hidden_size), `qwen3` (q_norm / k_norm). Otherwise
// `deci` (DeciLM / Llama-3.1-Nemotron), which reads head counts per layer:
//   - a key/value head serving c query heads where another serves c' is repeated (c / gcd) times, so
//     every group has gcd(c, c', ...) heads: exact, the repeated heads read the same keys and values;
//   - a layer that keeps no head has no attention tensors at all (deci skips its attention), except
//     layer 0, from which llama.cpp reads the head size, and a layer whose output projection has a bias
//     (which the model still adds): those keep one stand-in head whose value and output weights are
//     zero (it adds exactly nothing but that bias);
//   - q and k rows permuted per head from HF's rotate-half layout to llama.cpp's interleaved pairs,
//     as llama.cpp's own converter does for `llama` (qwen2 and qwen3 rotate halves: not permuted).
// Qwen3's q_norm / k_norm and partial rotary (Phi-3) have no `deci` form: such a model with uneven
// layers is std::invalid_argument, as is any model outside the LLaMA family.
// Masked heads are removed first. 2-D weights in the type asked for (F32, F16, BF16, or ggml's blocks
// Q8_0 / Q4_0: a weight whose rows do not split into 32-value blocks stays F16, as llama.cpp's
// converter does; under Q4_0 the output projection, or the token embedding when tied, is Q8_0, as
// llama.cpp's quantizer gives it a higher type); norms, biases and llama3's rope_freqs always F32, as
// that converter writes them. Sliding-window attention
// (Mistral) is exact up to the window: the file's context_length is capped there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "headprune/io/gguf.h"
#include "headprune/model/transformer.h"

namespace hp {

// The tokenizer as GGUF's tokenizer.ggml.* keys say it (built from tokenizer files by
// data/gguf_vocab.h).
struct GgufVocab {
  std::string model;  // "llama" (SentencePiece: pieces scored) or "gpt2" (byte-level BPE: merges)
  std::string pre;    // gpt2: llama.cpp's pre-tokenizer ("gpt-2", "llama-bpe", "qwen2")
  std::vector<std::string> tokens;
  std::vector<double> scores;    // llama
  std::vector<int64_t> types;    // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<std::string> merges;  // gpt2: "left right"
  int64_t bos = -1, eos = -1, unk = -1, pad = -1;  // -1: none
  bool add_bos = false, add_eos = false, add_space_prefix = true;
};

// What the file says of the model (for messages and tests).
struct GgufLayout {
  std::string arch;
  std::vector<int64_t> n_head, n_head_kv;  // per layer, as written (after group equalization)
  std::vector<int64_t> stand_in_layers;    // emptied layers given a zero stand-in head
  std::vector<std::string> kept_f16;       // a block type asked for: the 2-D tensors kept F16 instead
  GgmlType output_type = GgmlType::F32;    // the output projection's (the token embedding's when tied)
};

// The output projection's type when none is asked for (the token embedding when tied; the weight whose
// rounding costs most, so under a block type it is kept a step higher): q8_0 -> f16 (measured on
// stories260K in llama.cpp: per-token loss +0.84 % of f32's, against +1.29 % with a q8_0 output;
// llama-quantize's --output-tensor-type f16), q4_0 -> q8_0 (llama.cpp raises it too, to Q6_K, which is
// not written here), otherwise the weights' own type.
GgmlType default_gguf_output_type(GgmlType weights);

// The 2-D weights' type, and the output projection's.
struct GgufTypes {
  GgufTypes(GgmlType w) : weights(w), output(default_gguf_output_type(w)) {}  // NOLINT(google-explicit-constructor)
  GgufTypes(GgmlType w, GgmlType o) : weights(w), output(o) {}
  GgmlType weights;
  GgmlType output;
};

// The file's metadata and tensors (each made, and quantized, when written); `type` the 2-D weights'.
GgufFile to_gguf(TransformerImpl& model, const GgufVocab& vocab, GgufTypes types, const std::string& name,
                 GgufLayout* layout = nullptr);
// std::invalid_argument when the model is not of the LLaMA family (checked by to_gguf too).
void check_gguf_family(const ModelConfig& cfg);
GgmlType parse_gguf_dtype(const std::string& s);  // "f32", "f16", "bf16", "q8_0", "q4_0"

}  // namespace hp
