// Model directories with their tokenizers (see header).
#include "headprune/data/model_dir.h"

#include <stdexcept>

#include "headprune/data/hf_tokenizers.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/hf.h"
#include "headprune/model/precision.h"

namespace hp {

bool is_headprune_tokenizer(const std::string& path) {
  try {
    const auto j = read_json_file(path);
    return j.is_object() && j.value("type", std::string()) == "headprune-bpe";
  } catch (const std::exception&) {
    return true;  // not JSON or not an object: headprune's loader says what is wrong with it
  }
}

std::map<std::string, std::string> tokenizer_files(const std::string& dir) {
  std::map<std::string, std::string> files;
  if (!is_hf_dir(dir))
    if (auto tok = read_checkpoint_file(dir, kTokenizerFile); !tok.empty()) files[kTokenizerFile] = std::move(tok);
  for (const auto& f : hf_tokenizer_files())
    if (auto bytes = read_checkpoint_file(dir, f); !bytes.empty()) files[f] = std::move(bytes);
  // The HF config a model came from, for its exports (an HF directory's own, or the one carried along).
  if (auto base = read_checkpoint_file(dir, is_hf_dir(dir) ? kConfigFile : kHfBaseConfigFile); !base.empty())
    files[kHfBaseConfigFile] = std::move(base);
  return files;
}

std::optional<Tokenizer> load_tokenizer(const std::string& dir) {
  const std::string tok = join_path(dir, kTokenizerFile);
  if (is_file(tok) && !is_hf_dir(dir) && is_headprune_tokenizer(tok)) return Tokenizer::load(tok);
  return load_hf_tokenizer(dir);
}

void check_tokenizer_fits(const Tokenizer& tokenizer, int64_t model_vocab, const std::string& dir) {
  if (tokenizer.vocab_size() > model_vocab)
    throw std::runtime_error(dir + ": the tokenizer has " + std::to_string(tokenizer.vocab_size()) +
                             " entries but the model's vocabulary only " + std::to_string(model_vocab) +
                             " (a tokenizer of another model?)");
}

LoadedModel open_model(const std::string& dir, const torch::Device& device, const LoadOptions& options) {
  LoadedModel m;
  m.dir = dir;
  m.model = load_checkpoint(dir, options);
  if (device != torch::Device(torch::kCPU)) m.model->to(device);
  m.dtype = m.model->parameters().front().scalar_type();
  widen_f16_on_cpu(*m.model);  // fp16 on the CPU computes in fp32 (model/precision.h)
  // headprune's own tokenizer.json ("type": "headprune-bpe"), else the HF tokenizer files (vocab.txt,
  // vocab.json + merges.txt, or HF's own tokenizer.json) of an HF directory or carried along into a
  // headprune checkpoint.
  m.tokenizer = load_tokenizer(dir);
  if (m.tokenizer) check_tokenizer_fits(*m.tokenizer, m.model->config().vocab_size, dir);
  m.tokenizer_files = tokenizer_files(dir);
  return m;
}

}  // namespace hp
