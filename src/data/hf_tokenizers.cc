// WordPiece (BERT) and byte-level BPE (GPT-2) tokenizers (see header).
#include "headprune/data/hf_tokenizers.h"

#include "headprune/config.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <climits>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include "headprune/data/readers.h"
#include "headprune/io/files.h"

namespace hp {

namespace {

// UTF-8 -> code points; an invalid byte becomes U+FFFD.
std::vector<UChar32> code_points(const std::string& s) {
  std::vector<UChar32> out;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const auto n = static_cast<int32_t>(s.size());
  for (int32_t i = 0; i < n;) {
    UChar32 c;
    U8_NEXT(p, i, n, c);
    out.push_back(c < 0 ? 0xFFFD : c);
  }
  return out;
}

std::string utf8(UChar32 c) {
  char buf[4];
  int32_t n = 0;
  U8_APPEND_UNSAFE(buf, n, c);
  return std::string(buf, static_cast<size_t>(n));
}

std::string utf8(const std::vector<UChar32>& cs) {
  std::string out;
  for (auto c : cs) out += utf8(c);
  return out;
}

bool category_starts(UChar32 c, char letter) {
  const auto t = static_cast<UCharCategory>(u_charType(c));
  switch (letter) {
    case 'C':
      return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_SURROGATE || t == U_PRIVATE_USE_CHAR ||
             t == U_UNASSIGNED;
    case 'P':
      return t == U_DASH_PUNCTUATION || t == U_START_PUNCTUATION || t == U_END_PUNCTUATION ||
             t == U_CONNECTOR_PUNCTUATION || t == U_OTHER_PUNCTUATION || t == U_INITIAL_PUNCTUATION ||
             t == U_FINAL_PUNCTUATION;
    case 'L':
      return t == U_UPPERCASE_LETTER || t == U_LOWERCASE_LETTER || t == U_TITLECASE_LETTER ||
             t == U_MODIFIER_LETTER || t == U_OTHER_LETTER;
    case 'N':
      return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
  }
  return false;
}

// BERT's definitions (transformers' tokenization_bert / tokenization_utils).
bool bert_whitespace(UChar32 c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || u_charType(c) == U_SPACE_SEPARATOR;
}
bool bert_control(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return category_starts(c, 'C');
}
bool bert_punctuation(UChar32 c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  return category_starts(c, 'P');
}
bool cjk(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

std::string lower_case(const std::string& s) {
  std::string out;
  icu::UnicodeString::fromUTF8(s).toLower(icu::Locale::getRoot()).toUTF8String(out);
  return out;
}

// Unicode normalization form NFC (decompose = false) or NFD (true).
std::string normalize(const std::string& s, bool decompose) {
  const char* form = decompose ? "NFD" : "NFC";
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* norm =
      decompose ? icu::Normalizer2::getNFDInstance(err) : icu::Normalizer2::getNFCInstance(err);
  if (U_FAILURE(err)) throw std::runtime_error(std::string("ICU: no ") + form + " normalizer");
  icu::UnicodeString d = norm->normalize(icu::UnicodeString::fromUTF8(s), err);
  if (U_FAILURE(err)) throw std::runtime_error(std::string("ICU: ") + form + " normalization failed");
  std::string out;
  d.toUTF8String(out);
  return out;
}

std::string strip_accents(const std::string& s) {
  std::vector<UChar32> kept;
  for (auto c : code_points(normalize(s, true)))
    if (u_charType(c) != U_NON_SPACING_MARK) kept.push_back(c);
  return utf8(kept);
}

// Python's str.isspace(), which the `regex` module's \s follows.
bool py_space(UChar32 c) { return u_isUWhiteSpace(c) || (c >= 0x1C && c <= 0x1F); }

}  // namespace

// ---- WordPiece -------------------------------------------------------------------------------

WordPieceTokenizer WordPieceTokenizer::from_vocab(const std::vector<std::string>& vocab, const Options& opts,
                                                  const std::string& what) {
  if (vocab.empty()) throw std::invalid_argument(what + ": empty vocabulary");
  WordPieceTokenizer t;
  t.opts_ = opts;
  t.vocab_ = vocab;
  for (size_t i = 0; i < vocab.size(); ++i) {
    const auto [it, fresh] = t.ids_.emplace(vocab[i], static_cast<int64_t>(i));
    if (!fresh)
      throw std::invalid_argument(what + ": token '" + vocab[i] + "' on lines " + std::to_string(it->second + 1) +
                                  " and " + std::to_string(i + 1));
  }
  if (!t.ids_.count(opts.unk_token))
    throw std::invalid_argument(what + ": no unknown token '" + opts.unk_token + "' in the vocabulary");
  return t;
}

WordPieceTokenizer WordPieceTokenizer::load(const std::string& vocab_txt, const Options& opts) {
  auto lines = read_lines(vocab_txt);
  for (auto& l : lines)  // HF strips the line end only; keep inner and leading spaces as they are
    while (!l.empty() && (l.back() == '\r' || l.back() == '\n')) l.pop_back();
  return from_vocab(lines, opts, vocab_txt);
}

std::vector<std::string> WordPieceTokenizer::basic_tokenize(const std::string& text) const {
  // Clean, space out CJK characters, then split on whitespace.
  std::vector<UChar32> cleaned;
  for (auto c : code_points(text)) {
    if (c == 0 || c == 0xFFFD || bert_control(c)) continue;
    if (bert_whitespace(c)) {
      cleaned.push_back(' ');
    } else if (opts_.tokenize_chinese_chars && cjk(c)) {
      cleaned.push_back(' ');
      cleaned.push_back(c);
      cleaned.push_back(' ');
    } else {
      cleaned.push_back(c);
    }
  }
  cleaned = code_points(normalize(utf8(cleaned), false));  // as HF's BasicTokenizer (NFC before splitting)
  std::vector<std::string> words;
  std::vector<UChar32> cur;
  auto flush_word = [&] {
    if (cur.empty()) return;
    std::string w = utf8(cur);
    cur.clear();
    const bool strip = opts_.strip_accents.value_or(opts_.do_lower_case);
    if (opts_.do_lower_case) w = lower_case(w);
    if (strip) w = strip_accents(w);
    // Split on punctuation: each punctuation character is a token of its own.
    std::vector<UChar32> piece;
    for (auto c : code_points(w)) {
      if (bert_punctuation(c)) {
        if (!piece.empty()) words.push_back(utf8(piece));
        piece.clear();
        words.push_back(utf8(c));
      } else {
        piece.push_back(c);
      }
    }
    if (!piece.empty()) words.push_back(utf8(piece));
  };
  for (auto c : cleaned) {
    if (c == ' ') flush_word();
    else cur.push_back(c);
  }
  flush_word();
  return words;
}

std::vector<std::string> WordPieceTokenizer::wordpiece(const std::string& word) const {
  const auto cs = code_points(word);
  if (static_cast<int64_t>(cs.size()) > opts_.max_chars_per_word) return {opts_.unk_token};
  std::vector<std::string> out;
  size_t start = 0;
  while (start < cs.size()) {
    size_t end = cs.size();
    std::string found;
    while (start < end) {
      std::string sub = utf8(std::vector<UChar32>(cs.begin() + static_cast<std::ptrdiff_t>(start),
                                                  cs.begin() + static_cast<std::ptrdiff_t>(end)));
      if (start > 0) sub = "##" + sub;
      if (ids_.count(sub)) {
        found = sub;
        break;
      }
      --end;
    }
    if (found.empty()) return {opts_.unk_token};  // one unmatchable piece makes the whole word unknown
    out.push_back(found);
    start = end;
  }
  return out;
}

std::vector<std::string> WordPieceTokenizer::tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (const auto& w : basic_tokenize(text))
    for (auto& p : wordpiece(w)) out.push_back(std::move(p));
  return out;
}

std::vector<int64_t> WordPieceTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> out;
  for (const auto& t : tokenize(text)) out.push_back(ids_.at(t));
  return out;
}

std::optional<int64_t> WordPieceTokenizer::id(const std::string& token) const {
  const auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string& WordPieceTokenizer::token(int64_t id) const {
  if (id < 0 || id >= vocab_size())
    throw std::invalid_argument("WordPiece: id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                std::to_string(vocab_size()) + ")");
  return vocab_[static_cast<size_t>(id)];
}

std::string WordPieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (const int64_t i : ids) {
    const std::string& t = token(i);
    if (t.rfind("##", 0) == 0) out += t.substr(2);
    else out += (out.empty() ? "" : " ") + t;
  }
  return out;
}

// ---- byte-level BPE -------------------------------------------------------------------------

const std::vector<std::string>& ByteLevelBpeTokenizer::byte_symbols() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      t[static_cast<size_t>(b)] = utf8(printable ? b : next++);
    }
    return t;
  }();
  return table;
}

ByteLevelBpeTokenizer ByteLevelBpeTokenizer::from_parts(const std::map<std::string, int64_t>& vocab,
                                                        const std::vector<std::pair<std::string, std::string>>& merges) {
  ByteLevelBpeTokenizer t;
  for (const auto& [tok, id] : vocab) {
    if (id < 0 || id >= ConfigLimits::vocab)
      throw std::invalid_argument("vocabulary: token '" + tok + "' has id " + std::to_string(id) + ", outside [0, " +
                                  std::to_string(ConfigLimits::vocab) + ")");
    if (!t.by_id_.emplace(id, tok).second)
      throw std::invalid_argument("vocabulary: id " + std::to_string(id) + " is used twice");
    t.ids_[tok] = id;
  }
  for (size_t i = 0; i < merges.size(); ++i) t.ranks_.emplace(merges[i], static_cast<int64_t>(i));
  return t;
}

ByteLevelBpeTokenizer ByteLevelBpeTokenizer::load(const std::string& vocab_json, const std::string& merges_txt) {
  const nlohmann::json j = read_json_file(vocab_json);
  if (!j.is_object()) throw std::runtime_error(vocab_json + ": expected a JSON object {token: id}");
  std::map<std::string, int64_t> vocab;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_number_integer())
      throw std::runtime_error(vocab_json + ": the id of '" + it.key() + "' is not an integer");
    vocab[it.key()] = it.value().is_number_unsigned() && it.value().get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                          ? -1  // reported as out of range below
                          : it.value().get<int64_t>();
  }
  std::vector<std::pair<std::string, std::string>> merges;
  const auto lines = read_lines(merges_txt);
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& l = lines[i];
    if ((i == 0 && l.rfind("#version", 0) == 0) || l.empty()) continue;
    const auto sp = l.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 >= l.size() || l.find(' ', sp + 1) != std::string::npos)
      throw std::runtime_error(merges_txt + ":" + std::to_string(i + 1) + ": expected two symbols separated by one "
                               "space, got '" + l + "'");
    merges.emplace_back(l.substr(0, sp), l.substr(sp + 1));
  }
  try {
    return from_parts(vocab, merges);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(vocab_json + ": " + e.what());
  }
}

// ---- tokenizer.json ---------------------------------------------------------------------------

struct ByteLevelBpeTokenizer::Pipeline {
  std::vector<const icu::Normalizer2*> normalizers;  // applied in order
  struct Step {
    std::shared_ptr<icu::RegexPattern> split;  // Split(Regex, Isolated): matches and the gaps between them
    bool byte_level = false;                   // ByteLevel: GPT-2's pattern when use_regex
    bool use_regex = false, add_prefix_space = false;
  };
  std::vector<Step> steps;
};

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

std::vector<std::string> split_isolated(const icu::RegexPattern& re, const std::string& text) {
  std::vector<std::string> out;
  UErrorCode err = U_ZERO_ERROR;
  const icu::UnicodeString u = icu::UnicodeString::fromUTF8(text);
  std::unique_ptr<icu::RegexMatcher> m(re.matcher(u, err));
  if (U_FAILURE(err)) throw std::runtime_error(std::string("tokenizer: regex matcher: ") + u_errorName(err));
  int32_t last = 0;
  auto piece = [&](int32_t a, int32_t b) {
    if (b <= a) return;
    std::string sub;
    u.tempSubStringBetween(a, b).toUTF8String(sub);
    out.push_back(std::move(sub));
  };
  while (m->find(err) && U_SUCCESS(err)) {
    const int32_t a = m->start(err), b = m->end(err);
    if (b == a) continue;  // an empty match splits nothing
    piece(last, a);
    piece(a, b);
    last = b;
  }
  piece(last, u.length());
  return out;
}

}  // namespace

ByteLevelBpeTokenizer ByteLevelBpeTokenizer::from_tokenizer_json(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  auto fail = [&](const std::string& field, const std::string& what) -> std::runtime_error {
    return std::runtime_error(path + ": " + field + ": " + what);
  };
  if (!j.is_object() || !j.contains("model") || !j.at("model").is_object()) throw fail("model", "missing (not a tokenizer.json?)");
  const auto& model = j.at("model");
  if (model.value("type", std::string("BPE")) != "BPE")
    throw fail("model.type", "'" + model.value("type", std::string()) + "' is not supported (byte-level BPE only)");
  if (model.value("byte_fallback", false)) throw fail("model.byte_fallback", "byte fallback (SentencePiece-style BPE) is not supported");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(k) && model.at(k).is_string() && !model.at(k).get<std::string>().empty())
      throw fail(std::string("model.") + k, "is not supported");
  if (!model.contains("vocab") || !model.at("vocab").is_object()) throw fail("model.vocab", "expected {token: id}");
  std::map<std::string, int64_t> vocab;
  for (auto it = model.at("vocab").begin(); it != model.at("vocab").end(); ++it) {
    if (!it.value().is_number_integer()) throw fail("model.vocab", "the id of '" + it.key() + "' is not an integer");
    vocab[it.key()] = it.value().is_number_unsigned() && it.value().get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                          ? -1
                          : it.value().get<int64_t>();
  }
  std::vector<std::pair<std::string, std::string>> merges;
  if (model.contains("merges")) {
    if (!model.at("merges").is_array()) throw fail("model.merges", "expected a list");
    for (const auto& m : model.at("merges")) {
      if (m.is_string()) {
        const std::string l = m.get<std::string>();
        const auto sp = l.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= l.size() || l.find(' ', sp + 1) != std::string::npos)
          throw fail("model.merges", "expected \"a b\", got '" + l + "'");
        merges.emplace_back(l.substr(0, sp), l.substr(sp + 1));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        throw fail("model.merges", "expected \"a b\" or [\"a\", \"b\"], got " + m.dump());
      }
    }
  }
  ByteLevelBpeTokenizer t;
  try {
    t = from_parts(vocab, merges);
  } catch (const std::invalid_argument& e) {
    throw fail("model.vocab", e.what());
  }
  t.ignore_merges_ = model.value("ignore_merges", false);
  if (j.contains("added_tokens") && !j.at("added_tokens").is_null()) {
    if (!j.at("added_tokens").is_array()) throw fail("added_tokens", "expected a list");
    for (const auto& a : j.at("added_tokens")) {
      if (!a.is_object() || !a.contains("id") || !a.at("id").is_number_integer() || !a.contains("content") ||
          !a.at("content").is_string() || a.at("content").get<std::string>().empty())
        throw fail("added_tokens", "expected {\"id\": N, \"content\": \"...\"}, got " + a.dump());
      const int64_t id = a.at("id").get<int64_t>();
      const std::string content = a.at("content").get<std::string>();
      if (id < 0 || id >= ConfigLimits::vocab) throw fail("added_tokens", "id " + std::to_string(id) + " out of range");
      const auto known = t.by_id_.find(id);
      if (known != t.by_id_.end() && known->second != content)
        throw fail("added_tokens", "id " + std::to_string(id) + " is '" + known->second + "' in the vocabulary, '" + content + "' here");
      t.by_id_[id] = content;
      t.ids_[content] = id;
      t.added_[content] = id;
    }
  }
  auto pipeline = std::make_shared<Pipeline>();
  // Normalizer: none, NFC/NFD/NFKC/NFKD, or a Sequence of them.
  std::function<void(const nlohmann::json&, const std::string&)> normalizer = [&](const nlohmann::json& n, const std::string& f) {
    if (n.is_null()) return;
    const std::string type = n.value("type", std::string());
    UErrorCode err = U_ZERO_ERROR;
    if (type == "Sequence") {
      for (const auto& x : n.value("normalizers", nlohmann::json::array())) normalizer(x, f + ".normalizers");
    } else if (type == "NFC") {
      pipeline->normalizers.push_back(icu::Normalizer2::getNFCInstance(err));
    } else if (type == "NFD") {
      pipeline->normalizers.push_back(icu::Normalizer2::getNFDInstance(err));
    } else if (type == "NFKC") {
      pipeline->normalizers.push_back(icu::Normalizer2::getNFKCInstance(err));
    } else if (type == "NFKD") {
      pipeline->normalizers.push_back(icu::Normalizer2::getNFKDInstance(err));
    } else {
      throw fail(f, "normalizer '" + type + "' is not supported (NFC, NFD, NFKC, NFKD, Sequence)");
    }
    if (U_FAILURE(err)) throw fail(f, std::string("ICU: ") + u_errorName(err));
  };
  normalizer(j.value("normalizer", nlohmann::json()), "normalizer");
  std::function<void(const nlohmann::json&, const std::string&)> pre = [&](const nlohmann::json& p, const std::string& f) {
    if (p.is_null()) return;
    const std::string type = p.value("type", std::string());
    if (type == "Sequence") {
      for (const auto& x : p.value("pretokenizers", nlohmann::json::array())) pre(x, f + ".pretokenizers");
    } else if (type == "ByteLevel") {
      Pipeline::Step st;
      st.byte_level = true;
      st.use_regex = p.value("use_regex", true);
      st.add_prefix_space = p.value("add_prefix_space", false);
      pipeline->steps.push_back(st);
    } else if (type == "Split") {
      if (p.value("behavior", std::string("Isolated")) != "Isolated" || p.value("invert", false))
        throw fail(f, "Split with behavior '" + p.value("behavior", std::string()) + "'" +
                          (p.value("invert", false) ? " inverted" : "") + " is not supported (Isolated only)");
      const auto& pat = p.value("pattern", nlohmann::json::object());
      std::string regex;
      if (pat.contains("Regex") && pat.at("Regex").is_string()) {
        regex = icu_pattern(pat.at("Regex").get<std::string>());
      } else if (pat.contains("String") && pat.at("String").is_string()) {
        regex = "\\Q" + pat.at("String").get<std::string>() + "\\E";
      } else {
        throw fail(f + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
      }
      UErrorCode err = U_ZERO_ERROR;
      UParseError pe;
      std::shared_ptr<icu::RegexPattern> re(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(regex), 0, pe, err));
      if (U_FAILURE(err) || !re)
        throw fail(f + ".pattern", "the regex does not compile (" + std::string(u_errorName(err)) + " at offset " +
                                       std::to_string(pe.offset) + ")");
      Pipeline::Step st;
      st.split = re;
      pipeline->steps.push_back(st);
    } else {
      throw fail(f, "pre-tokenizer '" + type + "' is not supported (ByteLevel, Split, Sequence)");
    }
  };
  pre(j.value("pre_tokenizer", nlohmann::json()), "pre_tokenizer");
  if (!std::any_of(pipeline->steps.begin(), pipeline->steps.end(), [](const Pipeline::Step& st) { return st.byte_level; }))
    throw fail("pre_tokenizer", "no ByteLevel step: not a byte-level BPE");
  if (const auto& d = j.value("decoder", nlohmann::json()); !d.is_null() && d.value("type", std::string()) != "ByteLevel")
    throw fail("decoder", "'" + d.value("type", std::string()) + "' is not supported (ByteLevel)");
  t.pipeline_ = pipeline;
  return t;
}

std::vector<std::string> ByteLevelBpeTokenizer::pre_tokenize(const std::string& text) const {
  if (pipeline_) {
    std::string normalized = text;
    for (const auto* n : pipeline_->normalizers) {
      UErrorCode err = U_ZERO_ERROR;
      const icu::UnicodeString u = n->normalize(icu::UnicodeString::fromUTF8(normalized), err);
      if (U_FAILURE(err)) throw std::runtime_error(std::string("tokenizer: normalization failed: ") + u_errorName(err));
      normalized.clear();
      u.toUTF8String(normalized);
    }
    std::vector<std::string> pieces = {normalized};
    for (const auto& st : pipeline_->steps) {
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
  const auto cs = code_points(text);
  const size_t n = cs.size();
  std::vector<std::string> out;
  auto run = [&](size_t i, auto pred) {
    while (i < n && pred(cs[i])) ++i;
    return i;
  };
  auto letter = [](UChar32 c) { return category_starts(c, 'L'); };
  auto number = [](UChar32 c) { return category_starts(c, 'N'); };
  auto other = [](UChar32 c) { return !py_space(c) && !category_starts(c, 'L') && !category_starts(c, 'N'); };
  size_t i = 0;
  while (i < n) {
    size_t end = 0;
    // 's 't 're 've 'm 'll 'd
    if (cs[i] == '\'' && i + 1 < n) {
      for (const char* suf : {"s", "t", "re", "ve", "m", "ll", "d"}) {
        const size_t len = std::char_traits<char>::length(suf);
        bool ok = true;
        for (size_t k = 0; ok && k < len; ++k) ok = i + 1 + k < n && cs[i + 1 + k] == static_cast<UChar32>(suf[k]);
        if (ok) {
          end = i + 1 + len;
          break;
        }
      }
    }
    const size_t j = (cs[i] == ' ' && i + 1 < n) ? i + 1 : i;  // the optional leading space
    if (!end && letter(cs[j])) end = run(j, letter);
    if (!end && number(cs[j])) end = run(j, number);
    if (!end && other(cs[j])) end = run(j, other);
    if (!end) {
      // \s+(?!\S): whitespace not followed by a non-space, else \s+.
      const size_t w = run(i, py_space);
      end = (w < n && w - i > 1) ? w - 1 : w;
    }
    out.push_back(utf8(std::vector<UChar32>(cs.begin() + static_cast<std::ptrdiff_t>(i),
                                            cs.begin() + static_cast<std::ptrdiff_t>(end))));
    i = end;
  }
  return out;
}

std::vector<std::string> ByteLevelBpeTokenizer::bpe(const std::string& piece) const {
  std::vector<std::string> syms;
  for (unsigned char b : piece) syms.push_back(byte_symbols()[b]);
  if (ignore_merges_) {
    std::string whole;
    for (const auto& x : syms) whole += x;
    if (ids_.count(whole)) return {whole};
  }
  while (syms.size() > 1) {
    int64_t best = LLONG_MAX;
    size_t at = 0;
    for (size_t k = 0; k + 1 < syms.size(); ++k) {
      const auto it = ranks_.find({syms[k], syms[k + 1]});
      if (it != ranks_.end() && it->second < best) {
        best = it->second;
        at = k;
      }
    }
    if (best == LLONG_MAX) break;
    // Merge every occurrence of the best pair, left to right (as GPT-2's bpe() does).
    const std::string a = syms[at], b = syms[at + 1];
    std::vector<std::string> merged;
    for (size_t k = 0; k < syms.size();) {
      if (k + 1 < syms.size() && syms[k] == a && syms[k + 1] == b) {
        merged.push_back(a + b);
        k += 2;
      } else {
        merged.push_back(syms[k++]);
      }
    }
    syms = std::move(merged);
  }
  return syms;
}

std::vector<std::string> ByteLevelBpeTokenizer::tokenize_plain(const std::string& text) const {
  std::vector<std::string> out;
  for (const auto& p : pre_tokenize(text))
    for (auto& t : bpe(p)) out.push_back(std::move(t));
  return out;
}

std::vector<std::string> ByteLevelBpeTokenizer::tokenize(const std::string& text) const {
  if (added_.empty()) return tokenize_plain(text);
  // Added tokens first: the earliest occurrence of any of them (the longest at that position) is one
  // token; the text between them is tokenized as usual.
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string::npos, best_len = 0;
    for (const auto& [content, id] : added_) {
      const size_t at = text.find(content, pos);
      if (at == std::string::npos) continue;
      if (at < best || (at == best && content.size() > best_len)) best = at, best_len = content.size();
    }
    const size_t stop = best == std::string::npos ? text.size() : best;
    if (stop > pos)
      for (auto& t : tokenize_plain(text.substr(pos, stop - pos))) out.push_back(std::move(t));
    if (best == std::string::npos) break;
    out.push_back(text.substr(best, best_len));
    pos = best + best_len;
  }
  return out;
}

std::vector<int64_t> ByteLevelBpeTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> out;
  for (const auto& t : tokenize(text)) {
    const auto it = ids_.find(t);
    if (it == ids_.end()) throw std::invalid_argument("byte-level BPE: token '" + t + "' is not in the vocabulary");
    out.push_back(it->second);
  }
  return out;
}

std::string ByteLevelBpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  static const std::unordered_map<std::string, unsigned char> back = [] {
    std::unordered_map<std::string, unsigned char> m;
    for (int b = 0; b < 256; ++b) m[byte_symbols()[static_cast<size_t>(b)]] = static_cast<unsigned char>(b);
    return m;
  }();
  std::string out;
  for (auto id : ids) {
    const auto it = by_id_.find(id);
    if (it == by_id_.end()) throw std::invalid_argument("byte-level BPE: id " + std::to_string(id) + " is not in the vocabulary");
    if (const auto a = added_.find(it->second); a != added_.end() && a->second == id) {
      out += it->second;  // added tokens are plain text, not byte symbols
      continue;
    }
    for (auto c : code_points(it->second)) {
      const auto b = back.find(utf8(c));
      if (b == back.end()) throw std::invalid_argument("byte-level BPE: token '" + it->second + "' is not byte-level");
      out.push_back(static_cast<char>(b->second));
    }
  }
  return out;
}

std::optional<int64_t> ByteLevelBpeTokenizer::id(const std::string& token) const {
  const auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string& ByteLevelBpeTokenizer::token(int64_t id) const {
  const auto it = by_id_.find(id);
  if (it == by_id_.end()) throw std::invalid_argument("byte-level BPE: id " + std::to_string(id) + " is not in the vocabulary");
  return it->second;
}

// ---- behind the Tokenizer interface ----------------------------------------------------------

namespace {

// An HF tokenizer (WordPieceTokenizer or ByteLevelBpeTokenizer) behind the Tokenizer interface;
// decode() leaves out the special ids in `skip`.
template <typename T>
class HfBackend : public Tokenizer::Backend {
 public:
  HfBackend(T t, std::vector<int64_t> skip, std::string kind)
      : t_(std::move(t)), skip_(std::move(skip)), kind_(std::move(kind)) {}
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

 private:
  T t_;
  std::vector<int64_t> skip_;
  std::string kind_;
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

}  // namespace

const std::vector<std::string>& hf_tokenizer_files() {
  static const std::vector<std::string> files = {"vocab.txt", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json",
                                                 "special_tokens_map.json"};
  return files;
}

Tokenizer as_tokenizer(WordPieceTokenizer wp, const std::map<std::string, std::string>& st) {
  Tokenizer::Specials sp;
  sp.pad = special_id(wp, special(st, "pad_token", "[PAD]"), "padding");
  sp.bos = special_id(wp, special(st, "cls_token", "[CLS]"), "classification ([CLS])");
  sp.eos = special_id(wp, special(st, "sep_token", "[SEP]"), "separator ([SEP])");
  sp.unk = special_id(wp, special(st, "unk_token", "[UNK]"), "unknown");
  std::vector<int64_t> skip = {sp.pad, sp.bos, sp.eos};
  return Tokenizer(std::make_shared<HfBackend<WordPieceTokenizer>>(std::move(wp), std::move(skip), "wordpiece"), sp);
}

Tokenizer as_tokenizer(ByteLevelBpeTokenizer bpe, const std::map<std::string, std::string>& st) {
  Tokenizer::Specials sp;
  sp.eos = special_id(bpe, special(st, "eos_token", "<|endoftext|>"), "end of text");
  sp.bos = special_id(bpe, special(st, "bos_token", "<|endoftext|>"), "start of text");
  sp.unk = special_id(bpe, special(st, "unk_token", "<|endoftext|>"), "unknown");
  sp.pad = special_id(bpe, special(st, "pad_token", special(st, "eos_token", "<|endoftext|>")), "padding");
  std::vector<int64_t> skip = {sp.pad, sp.bos, sp.eos, sp.unk};
  return Tokenizer(std::make_shared<HfBackend<ByteLevelBpeTokenizer>>(std::move(bpe), std::move(skip), "byte-level-bpe"),
                   sp);
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
  if (is_file(vocab_json) || is_file(merges)) {
    if (!is_file(vocab_json) || !is_file(merges))
      throw std::runtime_error(dir + ": a GPT-2 tokenizer needs both vocab.json and merges.txt, found only " +
                               (is_file(vocab_json) ? "vocab.json" : "merges.txt"));
    const auto cfg = read_tokenizer_config(dir);
    return with_specials(vocab_json, ByteLevelBpeTokenizer::load(vocab_json, merges), cfg.specials);
  }
  const std::string tj = join_path(dir, "tokenizer.json");
  if (is_file(tj)) {
    auto cfg = read_tokenizer_config(dir);
    auto t = ByteLevelBpeTokenizer::from_tokenizer_json(tj);
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
  return std::nullopt;
}

}  // namespace hp
