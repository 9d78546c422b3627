// Byte-level BPE from HF's tokenizer.json: the model (vocabulary, merges, ignore_merges), the added
// tokens, the normalizer and pre-tokenizer pipeline (regexes on ICU), and the decoder, which must be
// ByteLevel (see headprune/data/hf_tokenizers.h).
#include <algorithm>
#include <climits>
#include <map>
#include <stdexcept>
#include <utility>

#include "bpe_pipeline.h"
#include "tokenizer_json.h"
#include "headprune/config.h"
#include "headprune/io/files.h"

namespace hp {

namespace tokenizer_detail {

// An error of a tokenizer.json field: "PATH: FIELD: WHAT".
std::runtime_error field_error(const std::string& path, const std::string& field, const std::string& what) {
  return std::runtime_error(path + ": " + field + ": " + what);
}

// model.vocab: {token: id}; an id too large for int64 becomes -1, which from_parts reports.
std::map<std::string, int64_t> read_vocab(const nlohmann::json& model, const std::string& path) {
  if (!model.contains("vocab") || !model.at("vocab").is_object())
    throw field_error(path, "model.vocab", "expected {token: id}");
  std::map<std::string, int64_t> vocab;
  for (auto it = model.at("vocab").begin(); it != model.at("vocab").end(); ++it) {
    if (!it.value().is_number_integer())
      throw field_error(path, "model.vocab", "the id of '" + it.key() + "' is not an integer");
    vocab[it.key()] = it.value().is_number_unsigned() && it.value().get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                          ? -1
                          : it.value().get<int64_t>();
  }
  return vocab;
}

// model.merges, in rank order: "a b" strings or ["a", "b"] pairs; none when absent.
std::vector<std::pair<std::string, std::string>> read_merges(const nlohmann::json& model, const std::string& path) {
  std::vector<std::pair<std::string, std::string>> merges;
  if (!model.contains("merges")) return merges;
  if (!model.at("merges").is_array()) throw field_error(path, "model.merges", "expected a list");
  for (const auto& m : model.at("merges")) {
    if (m.is_string()) {
      const std::string l = m.get<std::string>();
      const auto sp = l.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= l.size() || l.find(' ', sp + 1) != std::string::npos)
        throw field_error(path, "model.merges", "expected \"a b\", got '" + l + "'");
      merges.emplace_back(l.substr(0, sp), l.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      throw field_error(path, "model.merges", "expected \"a b\" or [\"a\", \"b\"], got " + m.dump());
    }
  }
  return merges;
}

const nlohmann::json& model_section(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object() || !j.contains("model") || !j.at("model").is_object())
    throw field_error(path, "model", "missing (not a tokenizer.json?)");
  return j.at("model");
}

std::vector<AddedToken> read_added_tokens(const nlohmann::json& j, const std::string& path, bool check_flags) {
  std::vector<AddedToken> out;
  if (!j.contains("added_tokens") || j.at("added_tokens").is_null()) return out;
  if (!j.at("added_tokens").is_array()) throw field_error(path, "added_tokens", "expected a list");
  for (const auto& a : j.at("added_tokens")) {
    if (!a.is_object() || !a.contains("id") || !a.at("id").is_number_integer() || !a.contains("content") ||
        !a.at("content").is_string() || a.at("content").get<std::string>().empty())
      throw field_error(path, "added_tokens", "expected {\"id\": N, \"content\": \"...\"}, got " + a.dump());
    AddedToken t;
    t.id = a.at("id").get<int64_t>();
    t.content = a.at("content").get<std::string>();
    t.special = a.value("special", false);
    if (t.id < 0 || t.id >= ConfigLimits::vocab)
      throw field_error(path, "added_tokens", "id " + std::to_string(t.id) + " out of range");
    if (check_flags)
      for (const char* flag : {"lstrip", "rstrip", "single_word"})
        if (a.value(flag, false))
          throw field_error(path, "added_tokens", "'" + t.content + "' has " + flag + " set, which is not supported");
    out.push_back(std::move(t));
  }
  return out;
}

namespace {

// One post-processor (a Sequence: each of its parts), its special ids appended to `f`.
void add_post_processor(const nlohmann::json& p, const std::string& field, const std::string& path, SpecialFrame& f) {
  if (p.is_null()) return;
  const std::string type = p.value("type", std::string());
  auto ids_of = [&](const std::string& name) {
    const auto& st = p.value("special_tokens", nlohmann::json::object());
    if (!st.contains(name) || !st.at(name).contains("ids") || !st.at(name).at("ids").is_array())
      throw field_error(path, field + ".special_tokens", "has no ids for '" + name + "'");
    std::vector<int64_t> ids;
    for (const auto& i : st.at(name).at("ids")) {
      if (!i.is_number_integer()) throw field_error(path, field + ".special_tokens", "ids of '" + name + "' are not integers");
      ids.push_back(i.get<int64_t>());
    }
    return ids;
  };
  if (type == "Sequence") {
    for (const auto& x : p.value("processors", nlohmann::json::array())) add_post_processor(x, field + ".processors", path, f);
  } else if (type == "TemplateProcessing") {
    const auto& single = p.value("single", nlohmann::json::array());
    if (!single.is_array()) throw field_error(path, field + ".single", "expected a list");
    bool after = false;
    for (const auto& item : single) {
      if (item.contains("Sequence")) {
        after = true;
      } else if (item.contains("SpecialToken") && item.at("SpecialToken").contains("id") &&
                 item.at("SpecialToken").at("id").is_string()) {
        for (auto id : ids_of(item.at("SpecialToken").at("id").get<std::string>())) (after ? f.after : f.before).push_back(id);
      } else {
        throw field_error(path, field + ".single", "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}, got " + item.dump());
      }
    }
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    for (const char* k : {"cls", "sep"}) {
      const auto& v = p.value(k, nlohmann::json());
      if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer())
        throw field_error(path, field + "." + k, "expected [\"token\", id]");
      (std::string(k) == "cls" ? f.before : f.after).push_back(v[1].get<int64_t>());
    }
  } else if (type != "ByteLevel") {
    throw field_error(path, field, "post-processor '" + type +
                                       "' is not supported (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence)");
  }
}

}  // namespace

SpecialFrame read_post_processor(const nlohmann::json& j, const std::string& path) {
  SpecialFrame f;
  add_post_processor(j.value("post_processor", nlohmann::json()), "post_processor", path, f);
  return f;
}

std::string base64_decode(const std::string& in, const std::string& path, const std::string& field) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') break;
    else throw field_error(path, field, "not base64 (character " + std::to_string(static_cast<unsigned char>(c)) + ")");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

namespace {

// HF's regexes (Rust regex / Oniguruma) read by ICU: \s and \S become Unicode White_Space, which is
// what those engines mean by them (ICU's own \s leaves out a few separators).
std::string icu_pattern(const std::string& p) {
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\' && i + 1 < p.size()) {
      if (p[i + 1] == 's') out += "\\p{White_Space}";
      else if (p[i + 1] == 'S') out += "\\P{White_Space}";
      else out += p.substr(i, 2);
      ++i;
    } else {
      out += p[i];
    }
  }
  return out;
}

// What an ICU error of a regex from a file says.
std::string regex_failure(UErrorCode err, int32_t time_limit, int32_t length) {
  if (err == U_REGEX_TIME_OUT)
    return "matching ran past ICU's time limit (" + std::to_string(time_limit) + " steps on a text of " +
           std::to_string(length) + " UTF-16 units; a pattern that backtracks catastrophically, such as (a+)+$?)";
  if (err == U_REGEX_STACK_OVERFLOW)
    return "matching needed more than ICU's backtracking stack limit of " +
           std::to_string(FileRegex::kStackLimitBytes >> 20) + " MiB";
  return std::string("ICU failed: ") + u_errorName(err);
}

}  // namespace

FileRegex::FileRegex(const std::string& pattern, bool literal, const std::string& path, const std::string& field)
    : pattern_(pattern), literal_(literal), path_(path), field_(field) {
  UErrorCode err = U_ZERO_ERROR;
  UParseError pe{};
  const icu::UnicodeString compiled = icu::UnicodeString::fromUTF8(literal ? pattern : icu_pattern(pattern));
  re_.reset(icu::RegexPattern::compile(compiled, literal ? UREGEX_LITERAL : 0, pe, err));
  if (U_FAILURE(err) || !re_)
    throw field_error(path, field,
                      std::string(literal ? "the string" : "the regex") + " '" + pattern + "' does not compile (" +
                          u_errorName(err) + " at offset " + std::to_string(pe.offset) + ")");
}

int32_t FileRegex::time_limit(int32_t length) {
  return kTimeLimitBase + length / kTimeLimitUnitsPerStep;
}

std::runtime_error FileRegex::error(const std::string& what) const {
  return field_error(path_, field_, (literal_ ? "the string '" : "the regex '") + pattern_ + "': " + what);
}

void FileRegex::for_each_match(const icu::UnicodeString& text,
                               const std::function<void(int32_t, int32_t)>& on_match) const {
  UErrorCode err = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(re_->matcher(text, err));
  const int32_t n = text.length();
  const int32_t limit = time_limit(n);
  if (U_SUCCESS(err)) m->setTimeLimit(limit, err);
  if (U_SUCCESS(err)) m->setStackLimit(kStackLimitBytes, err);
  if (U_FAILURE(err) || !m) throw error(regex_failure(err, limit, n));
  // find(start) resets the matcher, so the time limit holds for each match, not for the whole text.
  for (int32_t pos = 0; pos <= n;) {
    const bool found = m->find(pos, err);
    if (U_FAILURE(err)) throw error(regex_failure(err, limit, n));
    if (!found) break;
    const int32_t a = m->start(err), b = m->end(err);
    if (U_FAILURE(err)) throw error(regex_failure(err, limit, n));
    if (b > a) {
      on_match(a, b);
      pos = b;
    } else {  // an empty match splits nothing; the next try starts one code point on
      if (b >= n) break;
      pos = text.moveIndex32(b, 1);
    }
  }
}

}  // namespace tokenizer_detail

using tokenizer_detail::FileRegex;
using tokenizer_detail::field_error;
using tokenizer_detail::read_merges;
using tokenizer_detail::read_vocab;

namespace {

// The pieces of `text` by a Split step (behavior Isolated): each match and each gap between matches,
// empty ones left out. Every U_FAILURE is an error naming the file, the field and the pattern.
std::vector<std::string> split_isolated(const FileRegex& re, const std::string& text) {
  std::vector<std::string> out;
  const icu::UnicodeString u = icu::UnicodeString::fromUTF8(text);
  int32_t last = 0;
  auto piece = [&](int32_t a, int32_t b) {
    if (b <= a) return;
    std::string sub;
    u.tempSubStringBetween(a, b).toUTF8String(sub);
    out.push_back(std::move(sub));
  };
  re.for_each_match(u, [&](int32_t a, int32_t b) {
    piece(last, a);
    piece(a, b);
    last = b;
  });
  piece(last, u.length());
  return out;
}

// The "model" section, checked to be a BPE that reads bytes (no byte fallback, no continuing-subword
// prefix, no end-of-word suffix).
const nlohmann::json& bpe_model(const nlohmann::json& j, const std::string& path) {
  const auto& model = tokenizer_detail::model_section(j, path);
  if (model.value("type", std::string("BPE")) != "BPE")
    throw field_error(path, "model.type",
                      "'" + model.value("type", std::string()) + "' is not supported (byte-level BPE only)");
  if (model.value("byte_fallback", false))
    throw field_error(path, "model.byte_fallback", "byte fallback: a SentencePiece-style BPE, not byte-level (SentencePieceTokenizer reads it)");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(k) && model.at(k).is_string() && !model.at(k).get<std::string>().empty())
      throw field_error(path, std::string("model.") + k, "is not supported");
  return model;
}

// A Split pre-tokenizer's pattern (a Regex, or a String matched as it is), compiled; only behavior
// Isolated, not inverted.
std::shared_ptr<const FileRegex> split_pattern(const nlohmann::json& p, const std::string& f, const std::string& path) {
  if (p.value("behavior", std::string("Isolated")) != "Isolated" || p.value("invert", false))
    throw field_error(path, f,
                      "Split with behavior '" + p.value("behavior", std::string()) + "'" +
                          (p.value("invert", false) ? " inverted" : "") + " is not supported (Isolated only)");
  const auto& pat = p.value("pattern", nlohmann::json::object());
  if (pat.contains("Regex") && pat.at("Regex").is_string())
    return std::make_shared<const FileRegex>(pat.at("Regex").get<std::string>(), false, path, f + ".pattern");
  if (pat.contains("String") && pat.at("String").is_string())
    return std::make_shared<const FileRegex>(pat.at("String").get<std::string>(), true, path, f + ".pattern");
  throw field_error(path, f + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
}

// "decoder": none, or ByteLevel.
void check_decoder(const nlohmann::json& j, const std::string& path) {
  if (const auto& d = j.value("decoder", nlohmann::json()); !d.is_null() && d.value("type", std::string()) != "ByteLevel")
    throw field_error(path, "decoder", "'" + d.value("type", std::string()) + "' is not supported (ByteLevel)");
}

}  // namespace

// ---- the pipeline ------------------------------------------------------------------------------

std::shared_ptr<const ByteLevelBpeTokenizer::Pipeline> ByteLevelBpeTokenizer::Pipeline::read(
    const nlohmann::json& tokenizer_json, const std::string& path) {
  auto pipeline = std::make_shared<Pipeline>();
  pipeline->path = path;
  pipeline->add_normalizer(tokenizer_json.value("normalizer", nlohmann::json()), "normalizer", path);
  pipeline->add_pre_tokenizer(tokenizer_json.value("pre_tokenizer", nlohmann::json()), "pre_tokenizer", path);
  if (!std::any_of(pipeline->steps.begin(), pipeline->steps.end(), [](const Step& st) { return st.byte_level; }))
    throw field_error(path, "pre_tokenizer", "no ByteLevel step: not a byte-level BPE");
  return pipeline;
}

// Normalizer: none, NFC/NFD/NFKC/NFKD, or a Sequence of them.
void ByteLevelBpeTokenizer::Pipeline::add_normalizer(const nlohmann::json& n, const std::string& f,
                                                     const std::string& path) {
  if (n.is_null()) return;
  const std::string type = n.value("type", std::string());
  UErrorCode err = U_ZERO_ERROR;
  if (type == "Sequence") {
    for (const auto& x : n.value("normalizers", nlohmann::json::array())) add_normalizer(x, f + ".normalizers", path);
  } else if (type == "NFC") {
    normalizers.push_back(icu::Normalizer2::getNFCInstance(err));
  } else if (type == "NFD") {
    normalizers.push_back(icu::Normalizer2::getNFDInstance(err));
  } else if (type == "NFKC") {
    normalizers.push_back(icu::Normalizer2::getNFKCInstance(err));
  } else if (type == "NFKD") {
    normalizers.push_back(icu::Normalizer2::getNFKDInstance(err));
  } else {
    throw field_error(path, f, "normalizer '" + type + "' is not supported (NFC, NFD, NFKC, NFKD, Sequence)");
  }
  if (U_FAILURE(err)) throw field_error(path, f, std::string("ICU: ") + u_errorName(err));
}

// Pre-tokenizer: ByteLevel, Split, or a Sequence of them.
void ByteLevelBpeTokenizer::Pipeline::add_pre_tokenizer(const nlohmann::json& p, const std::string& f,
                                                        const std::string& path) {
  if (p.is_null()) return;
  const std::string type = p.value("type", std::string());
  if (type == "Sequence") {
    for (const auto& x : p.value("pretokenizers", nlohmann::json::array())) add_pre_tokenizer(x, f + ".pretokenizers", path);
  } else if (type == "ByteLevel") {
    Step st;
    st.byte_level = true;
    st.use_regex = p.value("use_regex", true);
    st.add_prefix_space = p.value("add_prefix_space", false);
    steps.push_back(st);
  } else if (type == "Split") {
    Step st;
    st.split = split_pattern(p, f, path);
    steps.push_back(st);
  } else {
    throw field_error(path, f, "pre-tokenizer '" + type + "' is not supported (ByteLevel, Split, Sequence)");
  }
}

std::vector<std::string> ByteLevelBpeTokenizer::Pipeline::pre_tokenize(const std::string& text) const {
  std::string normalized = text;
  for (const auto* n : normalizers) {
    UErrorCode err = U_ZERO_ERROR;
    const icu::UnicodeString u = n->normalize(icu::UnicodeString::fromUTF8(normalized), err);
    if (U_FAILURE(err)) throw field_error(path, "normalizer", std::string("ICU's normalization failed: ") + u_errorName(err));
    normalized.clear();
    u.toUTF8String(normalized);
  }
  std::vector<std::string> pieces = {normalized};
  for (const auto& st : steps) {
    std::vector<std::string> next;
    for (auto& p : pieces) {
      if (st.split) {
        for (auto& q : split_isolated(*st.split, p)) next.push_back(std::move(q));
        continue;
      }
      if (st.add_prefix_space && (p.empty() || p[0] != ' ')) p.insert(p.begin(), ' ');
      if (!st.use_regex) {
        next.push_back(std::move(p));
        continue;
      }
      ByteLevelBpeTokenizer gpt2;  // GPT-2's pattern on this piece
      for (auto& q : gpt2.pre_tokenize(p)) next.push_back(std::move(q));
    }
    pieces = std::move(next);
  }
  return pieces;
}

// ---- the tokenizer -----------------------------------------------------------------------------

ByteLevelBpeTokenizer ByteLevelBpeTokenizer::from_tokenizer_json(const std::string& path) {
  return from_tokenizer_json(read_json_file(path), path);
}

ByteLevelBpeTokenizer ByteLevelBpeTokenizer::from_tokenizer_json(const nlohmann::json& j, const std::string& path) {
  const auto& model = bpe_model(j, path);
  const auto vocab = read_vocab(model, path);
  const auto merges = read_merges(model, path);
  ByteLevelBpeTokenizer t;
  try {
    t = from_parts(vocab, merges);
  } catch (const std::invalid_argument& e) {
    throw field_error(path, "model.vocab", e.what());
  }
  t.ignore_merges_ = model.value("ignore_merges", false);
  for (const auto& a : tokenizer_detail::read_added_tokens(j, path, false)) {
    const int64_t id = a.id;
    const std::string& content = a.content;
    const auto known = t.by_id_.find(id);
    if (known != t.by_id_.end() && known->second != content)
      throw field_error(path, "added_tokens",
                        "id " + std::to_string(id) + " is '" + known->second + "' in the vocabulary, '" + content + "' here");
    t.by_id_[id] = content;
    t.ids_[content] = id;
    t.added_[content] = id;
  }
  t.pipeline_ = Pipeline::read(j, path);
  check_decoder(j, path);
  t.frame_ = tokenizer_detail::read_post_processor(j, path);
  return t;
}

}  // namespace hp
