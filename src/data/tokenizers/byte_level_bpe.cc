// Byte-level BPE (GPT-2): vocab.json + merges.txt, GPT-2's pre-tokenization pattern, bytes mapped to
// printable characters, BPE by merge rank, and added tokens (see headprune/data/hf_tokenizers.h).
// Reading tokenizer.json, and its normalizer and pre-tokenizer steps, is tokenizer_json.cc.
#include "headprune/data/hf_tokenizers.h"

#include <climits>
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

// Python's str.isspace(), which the `regex` module's \s follows.
bool py_space(UChar32 c) { return u_isUWhiteSpace(c) || (c >= 0x1C && c <= 0x1F); }

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

std::vector<std::string> ByteLevelBpeTokenizer::pre_tokenize(const std::string& text) const {
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

}  // namespace hp
