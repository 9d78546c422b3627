// SentencePiece's precompiled character map (see charsmap.h).
#include "charsmap.h"

#include <memory>
#include <stdexcept>

#include <unicode/brkiter.h>
#include <unicode/unistr.h>

namespace hp::tokenizer_detail {

namespace {

// darts-clone's unit fields.
bool has_leaf(uint32_t u) { return (u >> 8) & 1; }
uint32_t value_of(uint32_t u) { return u & ((1U << 31) - 1); }
uint32_t label_of(uint32_t u) { return u & ((1U << 31) | 0xFF); }
uint32_t offset_of(uint32_t u) { return (u >> 10) << ((u & (1U << 9)) >> 6); }

}  // namespace

size_t utf8_char_length(std::string_view s) {
  if (s.empty()) return 0;
  const auto b0 = static_cast<unsigned char>(s[0]);
  size_t n;
  uint32_t cp;
  if (b0 < 0x80) return 1;
  if ((b0 & 0xE0) == 0xC0) n = 2, cp = b0 & 0x1F;
  else if ((b0 & 0xF0) == 0xE0) n = 3, cp = b0 & 0x0F;
  else if ((b0 & 0xF8) == 0xF0) n = 4, cp = b0 & 0x07;
  else return 0;
  if (s.size() < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and code points past U+10FFFF are invalid.
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

PrecompiledCharsmap::PrecompiledCharsmap(std::string_view blob, const std::string& what) {
  if (blob.size() <= 4) throw std::runtime_error(what + ": the precompiled charsmap is " + std::to_string(blob.size()) + " bytes, too short");
  uint32_t trie_bytes = 0;
  for (int k = 3; k >= 0; --k) trie_bytes = (trie_bytes << 8) | static_cast<unsigned char>(blob[static_cast<size_t>(k)]);
  if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > blob.size() - 4)
    throw std::runtime_error(what + ": the precompiled charsmap's trie size " + std::to_string(trie_bytes) +
                             " does not fit its " + std::to_string(blob.size()) + " bytes");
  units_.resize(trie_bytes / 4);
  for (size_t i = 0; i < units_.size(); ++i) {
    uint32_t u = 0;
    for (int k = 3; k >= 0; --k) u = (u << 8) | static_cast<unsigned char>(blob[4 + 4 * i + static_cast<size_t>(k)]);
    units_[i] = u;
  }
  pool_ = std::string(blob.substr(4 + trie_bytes));
}

std::optional<std::string_view> PrecompiledCharsmap::replacement(uint32_t value) const {
  if (value >= pool_.size()) return std::nullopt;
  const size_t end = pool_.find('\0', value);
  if (end == std::string::npos) return std::nullopt;
  return std::string_view(pool_).substr(value, end - value);
}

std::vector<std::pair<size_t, std::string_view>> PrecompiledCharsmap::prefix_rules(std::string_view s) const {
  std::vector<std::pair<size_t, std::string_view>> out;
  size_t node = 0;
  if (units_.empty()) return out;
  node ^= offset_of(units_[0]);
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) break;  // the trie's keys are NUL-terminated
    node ^= c;
    if (node >= units_.size()) break;
    const uint32_t unit = units_[node];
    if (label_of(unit) != c) break;
    node ^= offset_of(unit);
    if (has_leaf(unit)) {
      if (node >= units_.size()) break;
      if (const auto r = replacement(value_of(units_[node]))) out.emplace_back(i + 1, *r);
    }
  }
  return out;
}

std::pair<std::string, size_t> PrecompiledCharsmap::normalize_prefix(std::string_view s) const {
  const auto rules = prefix_rules(s);
  if (!rules.empty()) return {std::string(rules.back().second), rules.back().first};
  const size_t n = utf8_char_length(s);
  if (n == 0) return {"\xEF\xBF\xBD", 1};
  return {std::string(s.substr(0, n)), n};
}

std::string PrecompiledCharsmap::normalize_graphemes(const std::string& text) const {
  UErrorCode err = U_ZERO_ERROR;
  const icu::UnicodeString u = icu::UnicodeString::fromUTF8(text);
  std::unique_ptr<icu::BreakIterator> it(icu::BreakIterator::createCharacterInstance(icu::Locale::getRoot(), err));
  if (U_FAILURE(err) || !it) throw std::runtime_error(std::string("tokenizer: ICU grapheme iterator: ") + u_errorName(err));
  it->setText(u);
  std::string out;
  for (int32_t a = it->first(), b = it->next(); b != icu::BreakIterator::DONE; a = b, b = it->next()) {
    std::string g;
    u.tempSubStringBetween(a, b).toUTF8String(g);
    if (g.size() < 6) {
      const auto rules = prefix_rules(g);
      if (!rules.empty()) {
        out += rules.front().second;
        continue;
      }
    }
    for (size_t i = 0; i < g.size();) {
      const size_t n = std::max<size_t>(1, utf8_char_length(std::string_view(g).substr(i)));
      const auto rules = prefix_rules(std::string_view(g).substr(i, n));
      if (!rules.empty()) out += rules.front().second;
      else out.append(g, i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace hp::tokenizer_detail
