// Tokenizer files as GGUF vocabulary keys (see header).
#include "headprune/data/gguf_vocab.h"

#include <stdexcept>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "headprune/data/sentencepiece.h"
#include "headprune/data/tokenizer.h"
#include "headprune/io/files.h"

namespace hp {

namespace {

constexpr int64_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6;

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw std::invalid_argument("GGUF export: " + file + ": " + what);
}

const nlohmann::json* find(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && !j.at(key).is_null() ? &j.at(key) : nullptr;
}

// A special token as tokenizer_config.json writes it: "<s>" or {"content": "<s>", ...}.
std::string token_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v.at("content").is_string()) return v.at("content").get<std::string>();
  return {};
}

// bos / eos / unk / pad and add_bos / add_eos from tokenizer_config.json, where it has them.
void apply_config(GgufVocab& v, const std::map<std::string, std::string>& files, const std::string& dir) {
  const auto it = files.find("tokenizer_config.json");
  if (it == files.end()) return;
  const std::string path = join_path(dir, it->first);
  const auto j = parse_json(it->second, path);
  std::unordered_map<std::string, int64_t> ids;
  for (size_t i = 0; i < v.tokens.size(); ++i) ids.emplace(v.tokens[i], static_cast<int64_t>(i));
  for (const auto& [key, id] : {std::pair<const char*, int64_t*>{"bos_token", &v.bos}, {"eos_token", &v.eos},
                                {"unk_token", &v.unk}, {"pad_token", &v.pad}}) {
    const auto* t = find(j, key);
    if (!t) continue;
    const auto found = ids.find(token_text(*t));
    if (found == ids.end()) fail(path, std::string("\"") + key + "\" " + t->dump() + " is not in the vocabulary");
    *id = found->second;
  }
  for (const auto& [key, flag] : {std::pair<const char*, bool*>{"add_bos_token", &v.add_bos}, {"add_eos_token", &v.add_eos}}) {
    const auto* f = find(j, key);
    if (!f) continue;
    if (!f->is_boolean()) fail(path, std::string("\"") + key + "\" should be true or false, got " + f->dump());
    *flag = f->get<bool>();
  }
}

GgufVocab from_sentencepiece(const std::string& bytes, const std::string& path) {
  const auto m = SentencePieceModel::parse(bytes, path);
  if (m.algorithm != SentencePieceModel::Algorithm::Bpe)
    fail(path, "a Unigram SentencePiece model (T5, Marian) has no GGUF form for llama.cpp's decoders (BPE only)");
  GgufVocab v;
  v.model = "llama";
  for (const auto& p : m.pieces) {
    v.tokens.push_back(p.text);
    v.scores.push_back(p.score);
    v.types.push_back(static_cast<int64_t>(p.type));
  }
  v.bos = m.bos_id, v.eos = m.eos_id, v.unk = m.unk_id, v.pad = m.pad_id;
  v.add_bos = true;  // LlamaTokenizer's default
  v.add_space_prefix = m.normalizer.add_dummy_prefix;
  return v;
}

// HF's tokenizer.json merges: "a b" strings or ["a", "b"] pairs.
std::vector<std::pair<std::string, std::string>> merges_of(const nlohmann::json& model, const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto* merges = find(model, "merges");
  if (!merges || !merges->is_array()) fail(path, "model.merges should be an array");
  for (const auto& m : *merges) {
    if (m.is_string()) {
      const auto s = m.get<std::string>();
      const auto sp = s.find(' ', 1);
      if (sp == std::string::npos) fail(path, "merge \"" + s + "\" is not two pieces separated by a space");
      out.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      fail(path, "a merge should be \"a b\" or [\"a\", \"b\"], got " + m.dump());
    }
  }
  return out;
}

// Tokens by id from model.vocab ({piece: id}) and added_tokens; every id below the largest present.
void read_tokens(GgufVocab& v, const nlohmann::json& j, const nlohmann::json& model, const std::string& path) {
  std::map<int64_t, std::pair<std::string, int64_t>> by_id;  // id -> (text, type)
  const auto* vocab = find(model, "vocab");
  if (!vocab || !vocab->is_object()) fail(path, "model.vocab should be an object {piece: id}");
  for (const auto& [piece, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) fail(path, "model.vocab[\"" + piece + "\"] is not an id");
    by_id[id.get<int64_t>()] = {piece, kNormal};
  }
  if (const auto* added = find(j, "added_tokens"); added && added->is_array())
    for (const auto& a : *added) {
      if (!a.is_object() || !a.contains("id") || !a.at("id").is_number_integer() || !a.contains("content"))
        fail(path, "added_tokens entry " + a.dump() + " has no id or content");
      by_id[a.at("id").get<int64_t>()] = {a.at("content").get<std::string>(), a.value("special", false) ? kControl : kUserDefined};
    }
  int64_t next = 0;
  for (const auto& [id, tt] : by_id) {
    if (id != next) fail(path, "no token has id " + std::to_string(next) + " (ids must run from 0 without gaps)");
    v.tokens.push_back(tt.first);
    v.types.push_back(tt.second);
    ++next;
  }
}

// llama.cpp's name for a byte-level BPE's pre-tokenizer.
std::string pre_tokenizer_name(const nlohmann::json& j, const std::string& path) {
  static const std::map<std::string, std::string> known = {
      {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
       "llama-bpe"},
      {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
       "qwen2"},
  };
  const auto* pre = find(j, "pre_tokenizer");
  if (!pre) fail(path, "a byte-level BPE without a pre_tokenizer");
  if (pre->value("type", "") == "ByteLevel") {
    if (!pre->value("use_regex", true)) fail(path, "pre_tokenizer ByteLevel without its regex has no llama.cpp form");
    return "gpt-2";
  }
  const std::string dump = pre->dump();
  if (pre->value("type", "") == "Sequence" && pre->contains("pretokenizers"))
    for (const auto& p : pre->at("pretokenizers"))
      if (p.value("type", "") == "Split" && p.contains("pattern") && p.at("pattern").contains("Regex")) {
        const std::string regex = p.at("pattern").at("Regex").get<std::string>();
        const auto it = known.find(regex);
        if (it == known.end())
          fail(path, "the pre-tokenizer's regex " + nlohmann::json(regex).dump() +
                         " is not one llama.cpp is known by headprune to have (Llama 3's, Qwen2's)");
        return it->second;
      }
  fail(path, "pre_tokenizer " + dump.substr(0, 200) + " has no llama.cpp form (ByteLevel, or a Split by Llama 3's or Qwen2's regex)");
}

GgufVocab from_tokenizer_json(const std::string& bytes, const std::string& path) {
  const auto j = parse_json(bytes, path);
  GgufVocab v;
  if (j.value("type", "") == "headprune-bpe") {  // headprune's own: specials 0..3, characters, merge results
    Tokenizer::from_serialized(bytes, path);       // checked as headprune loads it (errors name the file)
    v.model = "llama";
    const auto& vocab = j.at("vocab");
    const auto n_merges = static_cast<int64_t>(j.at("merges").size());
    const int64_t first_merged = static_cast<int64_t>(vocab.size()) - n_merges;
    for (size_t i = 0; i < vocab.size(); ++i) {
      const auto id = static_cast<int64_t>(i);
      v.tokens.push_back(vocab[i].get<std::string>());
      v.types.push_back(id == 3 ? kUnknown : id < 4 ? kControl : kNormal);
      v.scores.push_back(id >= first_merged ? -static_cast<double>(id - first_merged) : -static_cast<double>(n_merges + id));
    }
    v.pad = 0, v.bos = 1, v.eos = 2, v.unk = 3;
    return v;
  }
  const auto* model = find(j, "model");
  if (!model || !model->is_object()) fail(path, "no model section");
  const std::string type = model->value("type", find(*model, "merges") ? "BPE" : "");
  if (type != "BPE") fail(path, "a " + (type.empty() ? std::string("non-BPE") : type) + " tokenizer has no GGUF form for llama.cpp's decoders (BPE only)");
  read_tokens(v, j, *model, path);
  const auto merges = merges_of(*model, path);
  if (model->value("byte_fallback", false)) {  // SentencePiece-style: scored pieces
    v.model = "llama";
    std::unordered_map<std::string, int64_t> rank;
    for (size_t r = 0; r < merges.size(); ++r) rank.emplace(merges[r].first + merges[r].second, static_cast<int64_t>(r));
    for (size_t i = 0; i < v.tokens.size(); ++i) {
      const auto& t = v.tokens[i];
      const auto r = rank.find(t);
      v.scores.push_back(r != rank.end() ? -static_cast<double>(r->second)
                                         : -static_cast<double>(merges.size() + i));  // never made by a merge: last
      const bool byte = t.size() == 6 && t.rfind("<0x", 0) == 0 && t.back() == '>';
      if (v.types[i] == kNormal && byte) v.types[i] = kByte;
    }
    if (const auto* unk = find(*model, "unk_token"); unk && unk->is_string())
      for (size_t i = 0; i < v.tokens.size(); ++i)
        if (v.tokens[i] == unk->get<std::string>()) v.unk = static_cast<int64_t>(i), v.types[i] = kUnknown;
    const std::string dump = j.dump();
    v.add_space_prefix = dump.find("\"prepend_scheme\":\"never\"") == std::string::npos &&
                         (dump.find("\"Metaspace\"") != std::string::npos || dump.find("\"Prepend\"") != std::string::npos);
    v.add_bos = true;
  } else {
    v.model = "gpt2";
    v.pre = pre_tokenizer_name(j, path);
    for (const auto& [a, b] : merges) v.merges.push_back(a + " " + b);
  }
  return v;
}

GgufVocab from_vocab_merges(const std::string& vocab_bytes, const std::string& merges_bytes, const std::string& dir) {
  nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", parse_json(vocab_bytes, join_path(dir, "vocab.json"))}}},
                      {"pre_tokenizer", {{"type", "ByteLevel"}}}};
  auto& merges = j["model"]["merges"] = nlohmann::json::array();
  size_t start = 0;
  while (start < merges_bytes.size()) {
    size_t end = merges_bytes.find('\n', start);
    if (end == std::string::npos) end = merges_bytes.size();
    std::string line = merges_bytes.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line.rfind("#version", 0) != 0) merges.push_back(line);
    start = end + 1;
  }
  return from_tokenizer_json(j.dump(), join_path(dir, "vocab.json"));
}

}  // namespace

GgufVocab gguf_vocab(const std::map<std::string, std::string>& files, const std::string& dir) {
  GgufVocab v;
  if (const auto it = files.find("tokenizer.model"); it != files.end()) {
    v = from_sentencepiece(it->second, join_path(dir, it->first));
  } else if (const auto t = files.find("tokenizer.json"); t != files.end()) {
    v = from_tokenizer_json(t->second, join_path(dir, t->first));
  } else if (files.count("vocab.json") && files.count("merges.txt")) {
    v = from_vocab_merges(files.at("vocab.json"), files.at("merges.txt"), dir);
  } else {
    throw std::invalid_argument("GGUF export: " + dir + " has no tokenizer llama.cpp can use (tokenizer.model, "
                                "tokenizer.json, or vocab.json with merges.txt); a GGUF file carries its tokenizer");
  }
  apply_config(v, files, dir);
  return v;
}

}  // namespace hp
