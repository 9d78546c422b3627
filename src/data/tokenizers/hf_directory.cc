// The HF tokenizers behind headprune's Tokenizer interface, and which of them a checkpoint
// directory holds: vocab.txt, vocab.json + merges.txt, or tokenizer.json, with the specials of
// tokenizer_config.json (see headprune/data/hf_tokenizers.h).
#include "headprune/data/hf_tokenizers.h"

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "headprune/data/sentencepiece.h"
#include "headprune/io/files.h"

namespace hp {

namespace {

// An HF tokenizer (WordPieceTokenizer or ByteLevelBpeTokenizer) behind the Tokenizer interface;
// decode() leaves out the special ids in `skip`.
template <typename T>
class HfBackend : public Tokenizer::Backend {
 public:
  HfBackend(T t, std::vector<int64_t> skip, std::string kind, SpecialFrame frame)
      : t_(std::move(t)), skip_(std::move(skip)), kind_(std::move(kind)), frame_(std::move(frame)) {}
  std::vector<int64_t> encode(const std::string& text) const override { return t_.encode(text); }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::vector<int64_t> kept;
    for (const int64_t i : ids)
      if (std::find(skip_.begin(), skip_.end(), i) == skip_.end()) kept.push_back(i);
    return t_.decode(kept);
  }
  int64_t vocab_size() const override { return t_.vocab_size(); }
  const std::string& piece(int64_t id) const override { return t_.token(id); }
  std::string kind() const override { return kind_; }
  SpecialFrame frame() const override { return frame_; }

 private:
  T t_;
  std::vector<int64_t> skip_;
  std::string kind_;
  SpecialFrame frame_;
};

std::string special(const std::map<std::string, std::string>& m, const std::string& key, const std::string& fallback) {
  const auto it = m.find(key);
  return it == m.end() ? fallback : it->second;
}

template <typename T>
int64_t special_id(const T& t, const std::string& token, const std::string& role) {
  const auto id = t.id(token);
  if (!id) throw std::invalid_argument("tokenizer: the " + role + " token '" + token + "' is not in the vocabulary");
  return *id;
}

// tokenizer_config.json: special tokens as strings or {"content": ...} objects, and flags.
struct HfTokenizerConfig {
  std::map<std::string, std::string> specials;
  nlohmann::json raw = nlohmann::json::object();
};

HfTokenizerConfig read_tokenizer_config(const std::string& dir) {
  HfTokenizerConfig c;
  const std::string path = join_path(dir, "tokenizer_config.json");
  if (!is_file(path)) return c;
  c.raw = read_json_file(path);
  if (!c.raw.is_object()) throw std::runtime_error(path + ": expected a JSON object");
  for (const char* key : {"cls_token", "sep_token", "pad_token", "unk_token", "bos_token", "eos_token"}) {
    if (!c.raw.contains(key) || c.raw[key].is_null()) continue;
    const auto& v = c.raw[key];
    if (v.is_string()) c.specials[key] = v.get<std::string>();
    else if (v.is_object() && v.contains("content") && v["content"].is_string())
      c.specials[key] = v["content"].get<std::string>();
    else throw std::runtime_error(path + ": \"" + key + "\" should be a string or {\"content\": ...}, got " + v.dump());
  }
  return c;
}

template <typename T>
T flag(const nlohmann::json& j, const char* key, T fallback, const std::string& dir) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::runtime_error(join_path(dir, "tokenizer_config.json") + ": \"" + key + "\" has the wrong type: " +
                             j[key].dump());
  }
}

// Whether a tokenizer.json holds a SentencePiece-style model (Unigram, or BPE with byte fallback or
// without a ByteLevel step) rather than a byte-level BPE.
bool is_sentencepiece_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("model") || !j.at("model").is_object()) return false;  // the byte-level reader says why
  const auto& m = j.at("model");
  const std::string type = m.value("type", std::string(m.contains("merges") ? "BPE" : "Unigram"));
  if (type != "BPE") return true;
  if (m.value("byte_fallback", false)) return true;
  for (const char* section : {"pre_tokenizer", "decoder"})
    if (j.contains(section) && j.at(section).dump().find("\"ByteLevel\"") != std::string::npos) return false;
  return true;
}

}  // namespace

const std::vector<std::string>& hf_tokenizer_files() {
  static const std::vector<std::string> files = {"vocab.txt",       "vocab.json",      "merges.txt",
                                                 "tokenizer.json",  "tokenizer.model", "source.spm",
                                                 "target.spm",      "tokenizer_config.json", "special_tokens_map.json"};
  return files;
}

Tokenizer as_tokenizer(WordPieceTokenizer wp, const std::map<std::string, std::string>& st) {
  Tokenizer::Specials sp;
  sp.pad = special_id(wp, special(st, "pad_token", "[PAD]"), "padding");
  sp.bos = special_id(wp, special(st, "cls_token", "[CLS]"), "classification ([CLS])");
  sp.eos = special_id(wp, special(st, "sep_token", "[SEP]"), "separator ([SEP])");
  sp.unk = special_id(wp, special(st, "unk_token", "[UNK]"), "unknown");
  std::vector<int64_t> skip = {sp.pad, sp.bos, sp.eos};
  SpecialFrame frame{{sp.bos}, {sp.eos}};
  return Tokenizer(std::make_shared<HfBackend<WordPieceTokenizer>>(std::move(wp), std::move(skip), "wordpiece", std::move(frame)), sp);
}

Tokenizer as_tokenizer(ByteLevelBpeTokenizer bpe, const std::map<std::string, std::string>& st) {
  Tokenizer::Specials sp;
  sp.eos = special_id(bpe, special(st, "eos_token", "<|endoftext|>"), "end of text");
  sp.bos = special_id(bpe, special(st, "bos_token", "<|endoftext|>"), "start of text");
  sp.unk = special_id(bpe, special(st, "unk_token", "<|endoftext|>"), "unknown");
  sp.pad = special_id(bpe, special(st, "pad_token", special(st, "eos_token", "<|endoftext|>")), "padding");
  std::vector<int64_t> skip = {sp.pad, sp.bos, sp.eos, sp.unk};
  SpecialFrame frame = bpe.frame();
  return Tokenizer(std::make_shared<HfBackend<ByteLevelBpeTokenizer>>(std::move(bpe), std::move(skip), "byte-level-bpe",
                                                                      std::move(frame)),
                   sp);
}

Tokenizer as_tokenizer(SentencePieceTokenizer spt, const std::map<std::string, std::string>& st) {
  Tokenizer::Specials sp;
  sp.unk = special_id(spt, special(st, "unk_token", "<unk>"), "unknown");
  sp.eos = special_id(spt, special(st, "eos_token", "</s>"), "end of sequence");
  // No start token (T5, Marian): decoders start from the padding id, as theirs do.
  sp.pad = special_id(spt, special(st, "pad_token", spt.id("<pad>") ? "<pad>" : special(st, "eos_token", "</s>")), "padding");
  sp.bos = st.count("bos_token") || spt.id("<s>") ? special_id(spt, special(st, "bos_token", "<s>"), "start of sequence") : sp.pad;
  std::vector<int64_t> skip = spt.special_ids();
  for (const int64_t id : {sp.pad, sp.bos, sp.eos, sp.unk}) skip.push_back(id);
  SpecialFrame frame = spt.frame();
  const std::string kind = spt.kind();
  return Tokenizer(std::make_shared<HfBackend<SentencePieceTokenizer>>(std::move(spt), std::move(skip), kind, std::move(frame)), sp);
}

namespace {

// as_tokenizer, a missing special token named with the vocabulary file (the loaders name their
// files in their own errors).
template <typename T>
Tokenizer with_specials(const std::string& vocab_file, T t, const std::map<std::string, std::string>& specials) {
  try {
    return as_tokenizer(std::move(t), specials);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(vocab_file + ": " + e.what());
  }
}

}  // namespace

std::optional<Tokenizer> load_hf_tokenizer(const std::string& dir) {
  const std::string vocab_txt = join_path(dir, "vocab.txt"), vocab_json = join_path(dir, "vocab.json"),
                    merges = join_path(dir, "merges.txt");
  if (is_file(vocab_txt)) {
    const auto cfg = read_tokenizer_config(dir);
    WordPieceTokenizer::Options o;
    o.do_lower_case = flag<bool>(cfg.raw, "do_lower_case", true, dir);
    if (cfg.raw.contains("strip_accents") && !cfg.raw["strip_accents"].is_null())
      o.strip_accents = flag<bool>(cfg.raw, "strip_accents", true, dir);
    o.tokenize_chinese_chars = flag<bool>(cfg.raw, "tokenize_chinese_chars", true, dir);
    o.unk_token = special(cfg.specials, "unk_token", "[UNK]");
    return with_specials(vocab_txt, WordPieceTokenizer::load(vocab_txt, o), cfg.specials);
  }
  if (const std::string source = join_path(dir, "source.spm"); is_file(source)) {
    // Marian (opus-mt): source.spm's pieces, ids from vocab.json.
    if (!is_file(vocab_json)) throw std::runtime_error(source + ": a Marian tokenizer needs vocab.json beside it");
    const auto cfg = read_tokenizer_config(dir);
    return with_specials(source, SentencePieceTokenizer::load(source).with_vocabulary(vocab_json), cfg.specials);
  }
  if (is_file(vocab_json) || is_file(merges)) {
    if (!is_file(vocab_json) || !is_file(merges))
      throw std::runtime_error((is_file(vocab_json) ? vocab_json : merges) + ": a GPT-2 tokenizer needs both vocab.json "
                               "and merges.txt, found only this one");
    const auto cfg = read_tokenizer_config(dir);
    return with_specials(vocab_json, ByteLevelBpeTokenizer::load(vocab_json, merges), cfg.specials);
  }
  if (const std::string tj = join_path(dir, "tokenizer.json"); is_file(tj)) {
    const nlohmann::json file = read_json_file(tj);  // parsed once for both readers (Mistral's is 1.8 MB)
    auto cfg = read_tokenizer_config(dir);
    if (is_sentencepiece_json(file)) return with_specials(tj, SentencePieceTokenizer::from_tokenizer_json(file, tj), cfg.specials);
    auto t = ByteLevelBpeTokenizer::from_tokenizer_json(file, tj);
    // Without tokenizer_config.json: the usual names of the families' specials among the added tokens.
    auto pick = [&](const char* key, std::initializer_list<const char*> names) {
      if (cfg.specials.count(key)) return;
      for (const char* n : names)
        if (t.id(n)) {
          cfg.specials[key] = n;
          return;
        }
    };
    pick("eos_token", {"<|endoftext|>", "<|end_of_text|>", "</s>", "<|im_end|>", "<|eot_id|>"});
    pick("bos_token", {"<|begin_of_text|>", "<s>", "<|endoftext|>"});
    if (!cfg.specials.count("bos_token") && cfg.specials.count("eos_token")) cfg.specials["bos_token"] = cfg.specials["eos_token"];
    if (!cfg.specials.count("unk_token") && cfg.specials.count("eos_token")) cfg.specials["unk_token"] = cfg.specials["eos_token"];
    return with_specials(tj, std::move(t), cfg.specials);
  }
  if (const std::string model = join_path(dir, "tokenizer.model"); is_file(model)) {
    // A Llama-style sentencepiece model: <s> before the text unless add_bos_token is false, </s>
    // after it when add_eos_token is true (LlamaTokenizer's flags).
    const auto cfg = read_tokenizer_config(dir);
    const auto sm = SentencePieceModel::load(model);
    auto t = SentencePieceTokenizer::from_model(sm, model);
    SpecialFrame frame;
    if (flag<bool>(cfg.raw, "add_bos_token", true, dir) && sm.bos_id >= 0) frame.before.push_back(sm.bos_id);
    if (flag<bool>(cfg.raw, "add_eos_token", false, dir) && sm.eos_id >= 0) frame.after.push_back(sm.eos_id);
    t.set_frame(std::move(frame));
    return with_specials(model, std::move(t), cfg.specials);
  }
  return std::nullopt;
}

}  // namespace hp
