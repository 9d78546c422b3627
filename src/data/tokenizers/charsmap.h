// SentencePiece's precompiled character map: the normalization rules of a model (nmt_nfkc, ...) as a
// darts-clone double-array trie over UTF-8 bytes whose values point into a pool of NUL-terminated
// replacement strings. Blob layout: uint32 trie size in bytes (little-endian), the trie's 32-bit units,
// then the pool. Read by sentencepiece's normalizer (longest rule at each position) and by HF's
// Precompiled normalizer (per grapheme cluster, first rule). Private to src/data/tokenizers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hp::tokenizer_detail {

class PrecompiledCharsmap {
 public:
  // Checks the layout; std::runtime_error "WHAT: ..." when it is broken. Every lookup is
  // bounds-checked, so a corrupt trie gives no match rather than a wild read.
  PrecompiledCharsmap(std::string_view blob, const std::string& what);

  // Every rule matching a prefix of `s`, shortest first: (bytes matched, replacement).
  std::vector<std::pair<size_t, std::string_view>> prefix_rules(std::string_view s) const;

  // sentencepiece: the text normalized by the longest rule at each position (characters no rule
  // matches are kept; an invalid UTF-8 byte becomes U+FFFD). Returns (replacement, bytes consumed)
  // for the prefix of `s`.
  std::pair<std::string, size_t> normalize_prefix(std::string_view s) const;
  // HF's Precompiled: each extended grapheme cluster shorter than 6 bytes replaced by the first
  // (shortest) rule matching a prefix of it, if any; else each of its characters so.
  std::string normalize_graphemes(const std::string& text) const;

 private:
  std::optional<std::string_view> replacement(uint32_t value) const;
  std::vector<uint32_t> units_;
  std::string pool_;
};

// The bytes of one UTF-8 character at the start of `s` (1..4), or 0 when they are not valid UTF-8.
size_t utf8_char_length(std::string_view s);

}  // namespace hp::tokenizer_detail
