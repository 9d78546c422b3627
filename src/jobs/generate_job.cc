// Text generation (see header).
#include "headprune/jobs/generate_job.h"

#include "headprune/data/tasks.h"
#include "headprune/eval/evaluate.h"

#include <chrono>
#include <ostream>
#include <stdexcept>

namespace hp {

nlohmann::json GenerateResult::to_json() const {
  return {{"prompt_ids", prompt_ids}, {"ids", ids}, {"text", text}, {"seconds", seconds}, {"tokens_per_s", tokens_per_s}, {"dtype", dtype}};
}

void GenerateResult::print(std::ostream& out) const { out << text << "\n"; }

GenerateResult run_generate(const GenerateRequest& req, const Runtime& rt, const JobEvents& events) {
  LoadedModel m = open_model(req.checkpoint, rt.device, load_options(rt));  // in --dtype
  const auto arch = m.model->config().arch;
  if (arch == Arch::EncoderClassifier)
    throw std::invalid_argument(req.checkpoint + ": generate needs a decoder LM or an encoder-decoder (translation), this is " +
                                to_string(arch));
  if (!req.prompt.empty() && !req.prompt_ids.empty())
    throw std::invalid_argument("generate: give the prompt as text (--prompt) or as token ids (--ids), not both");
  GenerateResult res;
  res.dtype = dtype_name(m.dtype);
  res.prompt_ids = req.prompt_ids;
  if (res.prompt_ids.empty() && arch == Arch::EncoderDecoder) {
    // The source sentence, framed as translation data is: its ids and the end token.
    if (!m.tokenizer) throw std::invalid_argument(req.checkpoint + ": no tokenizer; give the source as ids (--ids)");
    res.prompt_ids = translation_source(*m.tokenizer, req.prompt, m.model->config().max_positions).src;
  } else if (res.prompt_ids.empty()) {
    if (!m.tokenizer) throw std::invalid_argument(req.checkpoint + ": no tokenizer; give the prompt as ids (--ids)");
    // The sequence start the model was trained with: headprune's own LM streams separate lines by
    // eos and never contain bos (data/tasks.cc); HF tokenizers' models start with their bos token.
    if (req.add_bos)
      res.prompt_ids.push_back(m.tokenizer->kind() == "headprune-bpe" ? m.tokenizer->specials().eos
                                                                      : m.tokenizer->specials().bos);
    for (int64_t id : m.tokenizer->encode(req.prompt)) res.prompt_ids.push_back(id);
  }
  for (int64_t id : res.prompt_ids)
    if (id < 0 || id >= m.model->config().vocab_size)
      throw std::invalid_argument("prompt id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                  std::to_string(m.model->config().vocab_size) + ")");
  DecodeOptions o = req.decode;
  if (m.tokenizer) o.eos_id = m.tokenizer->specials().eos;
  // The model's positions bound the new tokens: said, not capped silently.
  const int64_t P = static_cast<int64_t>(res.prompt_ids.size()), positions = m.model->config().max_positions;
  const int64_t room = arch == Arch::EncoderDecoder ? positions - 1 : positions - P;
  if (o.max_len > room && room > 0)
    events.say("generate", "--max-new " + std::to_string(o.max_len) + " capped at " + std::to_string(room) +
                               (arch == Arch::EncoderDecoder ? ": the decoder has " + std::to_string(positions) + " positions"
                                                             : ": the model has " + std::to_string(positions) +
                                                                   " positions and the prompt takes " + std::to_string(P)));
  const auto t0 = std::chrono::steady_clock::now();
  if (arch == Arch::EncoderDecoder) {
    if (o.sample) throw std::invalid_argument("generate: sampling is for decoder LMs; a translation searches (greedy or --beam)");
    if (o.graphs != GraphReplay::Off)
      throw std::invalid_argument("generate: --graphs replays a decoder LM's decoding steps; a translation runs without");
    if (m.tokenizer) o = translation_decode(o, *m.tokenizer);
    Batch src;
    src.input_ids = torch::tensor(res.prompt_ids, torch::kLong).unsqueeze(0).to(rt.device);
    src.attention_mask = torch::ones_like(src.input_ids);
    res.ids = translate(*m.model, src, o).front();
  } else {
    res.ids = generate(*m.model, res.prompt_ids, o);
  }
  synchronize(rt.device);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.tokens_per_s = res.seconds > 0 ? static_cast<double>(res.ids.size()) / res.seconds : 0;
  if (m.tokenizer) res.text = m.tokenizer->decode(res.ids);
  events.say("generate", std::to_string(res.ids.size()) + " tokens in " + std::to_string(res.seconds) + " s");
  return res;
}

}  // namespace hp
