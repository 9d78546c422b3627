// Corpus BLEU as sacreBLEU computes it by default (see header): the 13a tokenizer, clipped
// n-gram statistics summed over the corpus, 'exp' smoothing and the brevity penalty. The regex
// substitutions of sacreBLEU are re-done as left-to-right scans with the same non-overlapping
// match semantics, byte-wise on UTF-8 (they only look at ASCII, so the result is the same).
#include "headprune/eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <unordered_map>

namespace hp {
namespace {

constexpr int kMaxOrder = 4;

// Length of the UTF-8 sequence starting at s[i] (1 for a byte that does not start a valid one)
// and its code point.
size_t utf8_at(const std::string& s, size_t i, uint32_t* cp) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) {
    *cp = b;
    return 1;
  }
  uint32_t v = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c >> 6) != 0x2) {
      *cp = b;
      return 1;
    }
    v = (v << 6) | (c & 0x3F);
  }
  *cp = v;
  return len;
}

// Python's str.isspace(), which str.split() and str.rstrip() use.
bool is_python_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// str.split() with no argument: runs of whitespace separate tokens, none are empty.
std::vector<std::string> split_whitespace(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t len = utf8_at(s, i, &cp);
    if (is_python_space(cp)) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.append(s, i, len);
    }
    i += len;
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::string rstrip_whitespace(const std::string& s) {
  size_t end = 0;  // one past the last non-space code point
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t len = utf8_at(s, i, &cp);
    i += len;
    if (!is_python_space(cp)) end = i;
  }
  return s.substr(0, end);
}

// str.replace(from, to): every non-overlapping occurrence, left to right, in one pass.
void replace_all(std::string& s, const std::string& from, const std::string& to) {
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_period_or_comma(char c) { return c == '.' || c == ','; }

// The class [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII symbols and punctuation except ' , - .
bool is_split_symbol(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
         (c >= ':' && c <= '@') || c == '/';
}

// re.sub of a two-character pattern (first(c0) and second(c1)) with c0 + mid + c1 + after, scanning
// left to right and resuming after each match, as Python does.
template <typename First, typename Second>
std::string sub_pairs(const std::string& s, First first, Second second, const char* before, const char* mid,
                      const char* after) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      out += before;
      out += s[i];
      out += mid;
      out += s[i + 1];
      out += after;
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

std::vector<std::string> tokens_13a(const std::string& line) {
  std::string s = rstrip_whitespace(line);  // sacreBLEU's _preprocess_segment
  replace_all(s, "<skipped>", "");
  replace_all(s, "-\n", "");
  replace_all(s, "\n", " ");
  replace_all(s, "&quot;", "\"");
  replace_all(s, "&amp;", "&");
  replace_all(s, "&lt;", "<");
  replace_all(s, "&gt;", ">");
  s = " " + s + " ";

  std::string spaced;  // ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> " \1 "
  spaced.reserve(s.size() * 2);
  for (char c : s) {
    if (is_split_symbol(c)) {
      spaced += ' ';
      spaced += c;
      spaced += ' ';
    } else {
      spaced += c;
    }
  }
  auto not_digit = [](char c) { return !is_digit(c); };
  // ([^0-9])([\.,]) -> "\1 \2 ": period and comma unless preceded by a digit.
  s = sub_pairs(spaced, not_digit, is_period_or_comma, "", " ", " ");
  // ([\.,])([^0-9]) -> " \1 \2": period and comma unless followed by a digit.
  s = sub_pairs(s, is_period_or_comma, not_digit, " ", " ", "");
  // ([0-9])(-) -> "\1 \2 ": dash after a digit.
  s = sub_pairs(s, is_digit, [](char c) { return c == '-'; }, "", " ", " ");
  return split_whitespace(s);
}

// Counts of every n-gram (1 <= n <= 4) per order; keys join tokens with ' ' (tokens hold no spaces).
using NgramCounts = std::array<std::unordered_map<std::string, int64_t>, kMaxOrder>;

NgramCounts count_ngrams(const std::vector<std::string>& tokens) {
  NgramCounts counts;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string key;
    for (int n = 0; n < kMaxOrder && i + n < tokens.size(); ++n) {
      if (n > 0) key += ' ';
      key += tokens[i + n];
      ++counts[n][key];
    }
  }
  return counts;
}

// sacreBLEU's my_log: log, floored to a huge negative number at 0.
double floored_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

}  // namespace

std::string tokenize_13a(const std::string& line) {
  std::string out;
  for (const auto& t : tokens_13a(line)) {
    if (!out.empty()) out += ' ';
    out += t;
  }
  return out;
}

BleuStats sentence_bleu_stats(const std::string& hypothesis, const std::string& reference) {
  const auto hyp = tokens_13a(hypothesis);
  const auto ref = tokens_13a(reference);
  BleuStats st;
  st.sys_len = static_cast<int64_t>(hyp.size());
  st.ref_len = static_cast<int64_t>(ref.size());
  const NgramCounts hyp_counts = count_ngrams(hyp);
  const NgramCounts ref_counts = count_ngrams(ref);
  for (int n = 0; n < kMaxOrder; ++n) {
    for (const auto& kv : hyp_counts[n]) {
      st.totals[n] += kv.second;
      auto it = ref_counts[n].find(kv.first);
      if (it != ref_counts[n].end()) st.matches[n] += std::min(kv.second, it->second);
    }
  }
  return st;
}

BleuStats& BleuStats::operator+=(const BleuStats& o) {
  for (int n = 0; n < kMaxOrder; ++n) {
    matches[n] += o.matches[n];
    totals[n] += o.totals[n];
  }
  sys_len += o.sys_len;
  ref_len += o.ref_len;
  return *this;
}

BleuResult bleu_from_stats(const BleuStats& st) {
  BleuResult r;
  r.signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:headprune";
  r.matches = st.matches;
  r.totals = st.totals;
  r.sys_len = st.sys_len;
  r.ref_len = st.ref_len;
  const auto sys = static_cast<double>(r.sys_len), ref = static_cast<double>(r.ref_len);
  if (r.sys_len < r.ref_len)
    r.brevity_penalty = r.sys_len > 0 ? std::exp(1 - ref / sys) : 0.0;
  else
    r.brevity_penalty = 1.0;

  // No match of any order: score 0 and every precision stays 0 (sacreBLEU returns early).
  if (std::all_of(r.matches.begin(), r.matches.end(), [](int64_t m) { return m == 0; })) return r;

  double smooth = 1.0;
  for (int n = 0; n < kMaxOrder; ++n) {
    if (r.totals[n] == 0) break;  // later precisions stay 0, which makes the score 0
    const auto total = static_cast<double>(r.totals[n]);
    if (r.matches[n] == 0) {
      smooth *= 2;
      r.precisions[n] = 100.0 / (smooth * total);
    } else {
      r.precisions[n] = 100.0 * static_cast<double>(r.matches[n]) / total;
    }
  }
  double log_sum = 0;
  for (double p : r.precisions) log_sum += floored_log(p);
  r.score = r.brevity_penalty * std::exp(log_sum / kMaxOrder);
  return r;
}

BleuResult corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  if (hypotheses.size() != references.size())
    throw std::invalid_argument("corpus_bleu: " + std::to_string(hypotheses.size()) + " hypotheses but " +
                                std::to_string(references.size()) + " references, expected one reference each");
  BleuStats total;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    if (references[i].empty())
      throw std::invalid_argument("corpus_bleu: reference " + std::to_string(i) + " is empty");
    total += sentence_bleu_stats(hypotheses[i], references[i]);
  }
  return bleu_from_stats(total);
}

}  // namespace hp
