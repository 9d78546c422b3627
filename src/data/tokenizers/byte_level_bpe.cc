// Byte-level BPE (GPT-2): vocab.json + merges.txt, GPT-2's pre-tokenization pattern, bytes mapped to
// printable characters, BPE by merge rank, and added tokens (see headprune/data/hf_tokenizers.h).
// Reading tokenizer.json, and its normalizer and pre-tokenizer steps, is tokenizer_json.cc.
#include "headprune/data/hf_tokenizers.h"

#include <climits>
#include <functional>
#include <queue>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <unicode/uchar.h>

#include "bpe_pipeline.h"
#include "headprune/config.h"
#include "headprune/data/readers.h"
#include "headprune/io/files.h"
#include "unicode_text.h"

namespace hp {

using tokenizer_detail::category_starts;
using tokenizer_detail::code_points;
using tokenizer_detail::utf8;

namespace {

uint64_t merge_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// Python's str.isspace(), which the `regex` module's \s follows.
bool py_space(UChar32 c) { return u_isUWhiteSpace(c) || (c >= 0x1C && c <= 0x1F); }

constexpr int32_t kMergedAway = -2;  // bpe(): a symbol joined to the one before it

}  // namespace

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
  if (merges.size() >= static_cast<size_t>(INT32_MAX / 3))
    throw std::invalid_argument("merges: " + std::to_string(merges.size()) + " of them, more than a vocabulary can use");
  auto number = [&](const std::string& s) {
    return t.merge_symbols_.emplace(s, static_cast<int32_t>(t.merge_symbols_.size())).first->second;
  };
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto key = merge_key(number(merges[i].first), number(merges[i].second));
    t.merges_.emplace(key, std::make_pair(static_cast<int32_t>(i), number(merges[i].first + merges[i].second)));  // a repeated pair keeps its first rank
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = t.merge_symbols_.find(byte_symbols()[static_cast<size_t>(b)]);
    t.byte_merge_symbols_[static_cast<size_t>(b)] = it == t.merge_symbols_.end() ? -1 : it->second;
  }
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

std::vector<std::string> ByteLevelBpeTokenizer::pre_tokenize(const std::string& raw) const {
  const std::string text = valid_utf8(raw);  // the one rule for invalid UTF-8 (tokenizer.h)
  if (pipeline_) return pipeline_->pre_tokenize(text);
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

// Lowest rank first, ties to the leftmost pair, which is what GPT-2's bpe() (every occurrence of the
// best pair, left to right) and HF's BPE (a heap of pairs by rank and position) both come to. The
// symbols are a linked list over the piece; a heap holds (rank, left symbol) of adjacent pairs, and an
// entry whose pair has changed since it was pushed is skipped when it comes up: O(n log n).
std::vector<std::string> ByteLevelBpeTokenizer::bpe(const std::string& piece) const {
  const auto& table = byte_symbols();
  std::string mapped;  // the piece's bytes as printable symbols
  mapped.reserve(piece.size() * 2);
  const size_t n = piece.size();
  if (n >= static_cast<size_t>(INT32_MAX / 4))
    throw std::invalid_argument("byte-level BPE: a piece of " + std::to_string(n) + " bytes is too long");
  std::vector<int32_t> begin(n), sym(n), next(n), prev(n);
  for (size_t i = 0; i < n; ++i) {
    const auto b = static_cast<unsigned char>(piece[i]);
    begin[i] = static_cast<int32_t>(mapped.size());
    mapped += table[b];
    sym[i] = byte_merge_symbols_[b];
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  if (ignore_merges_ && ids_.count(mapped)) return {mapped};
  // The rank of merging symbol i with the next one, or -1.
  const auto rank = [&](int32_t i) -> std::pair<int32_t, int32_t> {
    if (i < 0 || next[i] < 0 || sym[i] < 0 || sym[next[i]] < 0) return {-1, -1};
    const auto it = merges_.find(merge_key(sym[i], sym[next[i]]));
    return it == merges_.end() ? std::make_pair(-1, -1) : it->second;
  };
  using Entry = std::pair<int32_t, int32_t>;  // (rank, left symbol's position)
  std::vector<Entry> initial;
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(n); ++i)
    if (const int32_t r = rank(i).first; r >= 0) initial.emplace_back(r, i);
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap(std::greater<Entry>(), std::move(initial));
  while (!heap.empty()) {
    const auto [r, i] = heap.top();
    heap.pop();
    if (sym[i] == kMergedAway) continue;
    const auto [now, merged] = rank(i);
    if (now != r) continue;  // stale: a neighbour has changed since this entry was pushed
    const int32_t j = next[i];
    sym[i] = merged;
    sym[j] = kMergedAway;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    if (const int32_t p = prev[i]; p >= 0)
      if (const int32_t pr = rank(p).first; pr >= 0) heap.emplace(pr, p);
    if (const int32_t nr = rank(i).first; nr >= 0) heap.emplace(nr, i);
  }
  {  // the heap's and the back links' memory back before the tokens are built
    decltype(heap) none;
    heap.swap(none);
    std::vector<int32_t>().swap(prev);
    std::vector<int32_t>().swap(sym);
  }
  size_t count = 0;
  for (int32_t i = n ? 0 : -1; i >= 0; i = next[i]) ++count;
  std::vector<std::string> out;
  out.reserve(count);
  for (int32_t i = n ? 0 : -1; i >= 0; i = next[i]) {
    const size_t from = static_cast<size_t>(begin[i]);
    const size_t to = next[i] >= 0 ? static_cast<size_t>(begin[next[i]]) : mapped.size();
    out.push_back(mapped.substr(from, to - from));
  }
  return out;
}

std::vector<std::string> ByteLevelBpeTokenizer::tokenize_plain(const std::string& text) const {
  std::vector<std::string> out;
  for (const auto& p : pre_tokenize(text))
    for (auto& t : bpe(p)) out.push_back(std::move(t));
  return out;
}

std::vector<std::string> ByteLevelBpeTokenizer::tokenize(const std::string& raw) const {
  const std::string text = valid_utf8(raw);  // the one rule for invalid UTF-8 (tokenizer.h)
  if (added_.empty()) return tokenize_plain(text);
  // Added tokens first: the earliest occurrence of any of them (the longest at that position) is one
  // token; the text between them is tokenized as usual.
  std::vector<std::string> out;
  tokenizer_detail::for_each_added(added_, text, [&](size_t from, size_t to, const int64_t* id) {
    if (id) out.push_back(text.substr(from, to - from));
    else for (auto& t : tokenize_plain(text.substr(from, to - from))) out.push_back(std::move(t));
  });
  return out;
}

// As tokenize(), without keeping every token's text: one piece's tokens at a time become ids.
std::vector<int64_t> ByteLevelBpeTokenizer::encode(const std::string& raw) const {
  const std::string text = valid_utf8(raw);  // the one rule for invalid UTF-8 (tokenizer.h)
  std::vector<int64_t> out;
  const auto plain = [&](const std::string& part) {
    for (const auto& piece : pre_tokenize(part))
      for (const auto& t : bpe(piece)) {
        const auto it = ids_.find(t);
        if (it == ids_.end()) throw std::invalid_argument("byte-level BPE: token '" + t + "' is not in the vocabulary");
        out.push_back(it->second);
      }
  };
  if (added_.empty()) {
    plain(text);
    return out;
  }
  tokenizer_detail::for_each_added(added_, text, [&](size_t from, size_t to, const int64_t* id) {
    if (id) out.push_back(*id);
    else plain(text.substr(from, to - from));
  });
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

}  // namespace hp
