// WordPiece (BERT): basic tokenization, then greedy longest-match-first word pieces (see
// headprune/data/hf_tokenizers.h).
#include "headprune/data/hf_tokenizers.h"

#include <stdexcept>

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "headprune/data/readers.h"
#include "unicode_text.h"

namespace hp {

using tokenizer_detail::category_starts;
using tokenizer_detail::code_points;
using tokenizer_detail::utf8;

namespace {

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

}  // namespace

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

}  // namespace hp
