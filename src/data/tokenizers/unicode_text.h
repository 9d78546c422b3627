// UTF-8 and Unicode helpers shared by the HF tokenizers (wordpiece.cc, byte_level_bpe.cc). Private
// to src/data/tokenizers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <unicode/umachine.h>

namespace hp::tokenizer_detail {

// UTF-8 -> code points; each maximal ill-formed subsequence becomes one U+FFFD, the rule of
// valid_utf8() (headprune/data/tokenizer.h).
std::vector<UChar32> code_points(const std::string& s);

// Code points -> UTF-8.
std::string utf8(UChar32 c);
std::string utf8(const std::vector<UChar32>& cs);

// Whether c's Unicode general category is one of C (other), P (punctuation), L (letter) or N (number).
bool category_starts(UChar32 c, char letter);

// Added tokens in a text: calls f(from, to, id) for each stretch of `text` in order, where `id` points
// at the id of the added token that the stretch is, or is null for the text between them. At each
// point the earliest occurrence of any added token wins, the longest at that position (the first of
// `added`, a container of (content, id) pairs, among equals). Each token's next occurrence is kept
// and looked for again only once the text has moved past it: linear in the text for each token,
// whatever the number of matches.
template <typename Added, typename F>
void for_each_added(const Added& added, const std::string& text, F&& f) {
  std::vector<std::pair<const std::string*, const int64_t*>> tokens;
  for (const auto& a : added)
    if (!a.first.empty()) tokens.emplace_back(&a.first, &a.second);
  std::vector<size_t> at(tokens.size(), 0);
  for (size_t k = 0; k < tokens.size(); ++k) at[k] = text.find(*tokens[k].first);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string::npos, best_len = 0, best_k = 0;
    for (size_t k = 0; k < tokens.size(); ++k) {
      if (at[k] != std::string::npos && at[k] < pos) at[k] = text.find(*tokens[k].first, pos);
      if (at[k] == std::string::npos) continue;
      const size_t len = tokens[k].first->size();
      if (at[k] < best || (at[k] == best && len > best_len)) best = at[k], best_len = len, best_k = k;
    }
    const size_t stop = best == std::string::npos ? text.size() : best;
    if (stop > pos) f(pos, stop, static_cast<const int64_t*>(nullptr));
    if (best == std::string::npos) break;
    f(best, best + best_len, tokens[best_k].second);
    pos = best + best_len;
  }
}

}  // namespace hp::tokenizer_detail
