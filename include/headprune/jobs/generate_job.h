// The text-generation job: a decoder LM (GPT-2, LLaMA family, headprune's own) continues a prompt
// with its KV cache: greedy, beam search or sampling (decode/search.h). Prompts are text through the
// checkpoint's tokenizer (after its start token: bos, or eos for headprune's own LM streams), or token ids.
// An encoder-decoder (MarianMT, headprune's own) translates the prompt instead: the source's ids and
// its end token in, greedy or beam search from the tokenizer's start id out (eval/evaluate.h
// translation_decode).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/decode/search.h"
#include "headprune/jobs/job.h"

namespace hp {

struct GenerateRequest {
  std::string checkpoint;
  std::string prompt;             // text (needs the checkpoint's tokenizer)
  std::vector<int64_t> prompt_ids;  // or ids (used when set)
  bool add_bos = true;            // text prompts: the start token first (bos; eos, the line boundary, for headprune-bpe LMs)
  DecodeOptions decode;           // max_len = new tokens; beam_size; sample, temperature, top_k, top_p, seed
};

struct GenerateResult {
  std::vector<int64_t> prompt_ids, ids;  // ids: the continuation
  std::string text;                      // the continuation, decoded ("" without a tokenizer)
  double seconds = 0, tokens_per_s = 0;
  std::string dtype;  // the weights as loaded (--dtype, or as stored): "fp32", "bf16", "f16" (on the CPU computed in fp32)
  nlohmann::json to_json() const;
  void print(std::ostream& out) const;
};

GenerateResult run_generate(const GenerateRequest& req, const Runtime& rt, const JobEvents& events = {});

}  // namespace hp
