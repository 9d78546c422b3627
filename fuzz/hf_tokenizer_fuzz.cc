// An HF tokenizer directory as load_hf_tokenizer reads it (four parts of one input): tokenizer.json
// (a byte-level BPE with its Split regexes, or a SentencePiece-style one), source.spm and vocab.json
// (Marian: the .spm's pieces mapped to ids through vocab.json, read before tokenizer.json), then
// text. Empty parts are left out of the directory. An accepted tokenizer encodes the text and
// decodes the ids it produced; a regex that backtracks catastrophically must stop with an error
// naming tokenizer.json (ICU's time limit), never hang the harness.
#include <unistd.h>

#include "fuzz_util.h"
#include "headprune/data/hf_tokenizers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = hp_fuzz::split(data, size, 4);
  const std::string dir = hp_fuzz::work_dir() + "/hf_tokenizer";
  const std::string mkdir = "mkdir -p '" + dir + "'";
  if (std::system(mkdir.c_str()) != 0) std::abort();
  const char* names[] = {"tokenizer.json", "source.spm", "vocab.json"};
  std::vector<std::string> paths;
  for (int k = 0; k < 3; ++k) {
    const std::string path = dir + "/" + names[k];
    unlink(path.c_str());
    if (!parts[static_cast<size_t>(k)].empty()) {
      hp_fuzz::write_file(std::string("hf_tokenizer/") + names[k], parts[static_cast<size_t>(k)]);
      paths.push_back(path);
    }
  }
  hp_fuzz::expect_clean_rejection([&] {
    const auto tok = hp::load_hf_tokenizer(dir);
    if (!tok) return;
    (void)tok->vocab_size();
    for (const std::string& s : {parts[3], std::string("a small test, with \xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9 and 12 digits")}) {
      try {
        (void)tok->decode(tok->encode(s, true));
      } catch (const std::invalid_argument&) {  // a byte or character with no token in this vocabulary
      }
    }
  }, paths.empty() ? std::vector<std::string>{dir} : paths);
  return 0;
}
