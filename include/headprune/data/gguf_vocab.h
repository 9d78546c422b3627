// A model directory's tokenizer as GGUF's tokenizer.ggml.* keys (io/gguf_model.h's GgufVocab), so a
// text prompt runs in llama.cpp as it does in headprune:
//   tokenizer.model (SentencePiece BPE: Llama-2, Mistral) -> "llama": its pieces, scores and types;
//   HF tokenizer.json, BPE with byte_fallback (the same models' tokenizer.json) -> "llama", each piece
//     scored by minus the rank of the merge that makes it (llama.cpp merges the best-scored pair, HF
//     the lowest-ranked merge: the same order);
//   HF tokenizer.json, byte-level BPE (Llama 3, Qwen2, phi-2, GPT-2) or vocab.json + merges.txt -> "gpt2"
//     with its merges; the pre-tokenizer named as llama.cpp knows it ("gpt-2" for ByteLevel's own
//     pattern, "llama-bpe" and "qwen2" for their Split regexes; another regex is an error naming it);
//   headprune's own BPE -> "llama" (words are "▁word", merges by rank; llama.cpp splits on spaces only,
//     so text whose words are separated by single spaces tokenizes alike).
// bos / eos / unk / pad and add_bos_token / add_eos_token from tokenizer_config.json where it says,
// else the tokenizer's own. A Unigram or WordPiece tokenizer (T5, BERT) has no form here: an error
// naming the file.
#pragma once

#include <map>
#include <string>

#include "headprune/io/gguf_model.h"

namespace hp {

// files: name -> bytes (data/model_dir.h tokenizer_files); `dir` names them in errors.
GgufVocab gguf_vocab(const std::map<std::string, std::string>& files, const std::string& dir);

}  // namespace hp
