// Byte-pair-encoding tokenizer (see header). Training keeps incremental pair counts, a pair -> words
// index and a max-heap with lazy invalidation, so each merge only revisits the words that contain the
// merged pair. Encoding replays the merges lowest rank first over a linked list of symbols per word.
#include "headprune/data/tokenizer.h"

#include <algorithm>
#include <mutex>
#include <queue>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <nlohmann/json.hpp>
#include <unicode/utf8.h>

#include "headprune/io/files.h"

namespace hp {

struct Tokenizer::Model {
  std::vector<std::string> pieces;                  // id -> piece
  std::vector<std::pair<int32_t, int32_t>> merges;  // merge i joins these ids into id first_merge_id + i
  int32_t first_merge_id = 0;                       // 4 + the number of characters
  std::unordered_map<std::string, int32_t> char_ids;
  std::unordered_map<uint64_t, int32_t>
      merge_ids;  // (left << 32 | right) -> result id, which is also its rank
  std::string json;
};

struct Tokenizer::Cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int64_t>> words;
};

namespace {

using json = nlohmann::json;

const char* const kMarker = "\xE2\x96\x81";  // "▁" U+2581, starts every word
const char* const kType = "headprune-bpe";
constexpr int64_t kVersion = 1;
constexpr size_t kMaxCachedWords = size_t(1) << 20;  // the cache is cleared when it grows past this
const char* const kSpecials[] = {"<pad>", "<s>", "</s>", "<unk>"};

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the UTF-8 character starting at s[i], with `valid` false (and length 1) for a byte that
// does not start a well-formed sequence (overlong forms, surrogates and values past U+10FFFF included).
size_t char_length(const std::string& s, size_t i, bool* valid, uint32_t* code_point = nullptr) {
  const auto at = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0; };
  const unsigned char c = at(0);
  size_t n = 0;
  uint32_t cp = 0;
  if (c < 0x80) {
    n = 1, cp = c;
  } else if (c >= 0xC2 && c <= 0xDF) {
    n = 2, cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    const unsigned char c1 = at(1);
    if ((c == 0xE0 && c1 >= 0xA0) || (c == 0xED && c1 < 0xA0) || (c != 0xE0 && c != 0xED))
      n = 3, cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    const unsigned char c1 = at(1);
    if ((c == 0xF0 && c1 >= 0x90) || (c == 0xF4 && c1 < 0x90) || (c > 0xF0 && c < 0xF4)) n = 4, cp = c & 0x07;
  }
  for (size_t k = 1; k < n; ++k) {
    if (!is_continuation(at(k))) {
      n = 0;
      break;
    }
    cp = (cp << 6) | (at(k) & 0x3F);
  }
  *valid = n > 0;
  if (code_point) *code_point = n > 0 ? cp : c;
  return n > 0 ? n : 1;
}

// Word separators: ASCII and Unicode whitespace, and "▁" itself (so it only ever starts a piece).
bool is_separator(uint32_t cp) {
  if (cp <= ' ') return cp == ' ' || (cp >= '\t' && cp <= '\r');  // \t \n \v \f \r
  if (cp >= 0x2000 && cp <= 0x200A) return true;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000 || cp == 0x2581;
}

// Calls f(word) for each whitespace-separated word of `text` (without the "▁" prefix).
template <typename F>
void for_each_word(const std::string& text, F&& f) {
  size_t start = 0, i = 0;
  while (i < text.size()) {
    bool valid = false;
    uint32_t cp = 0;
    const size_t n = char_length(text, i, &valid, &cp);
    if (valid && is_separator(cp)) {
      if (i > start) f(text.substr(start, i - start));
      start = i + n;
    }
    i += n;
  }
  if (i > start) f(text.substr(start, i - start));
}

// The characters of "▁" + word, each with whether it is well-formed UTF-8.
template <typename F>
void for_each_char(const std::string& word, F&& f) {
  f(std::string(kMarker), true);
  for (size_t i = 0; i < word.size();) {
    bool valid = false;
    const size_t n = char_length(word, i, &valid);
    f(word.substr(i, n), valid);
    i += n;
  }
}

bool is_single_char(const std::string& piece) {
  bool valid = false;
  return !piece.empty() && char_length(piece, 0, &valid) == piece.size() && valid;
}

// k of n indices, uniformly, in increasing order (selection sampling, Knuth's Algorithm S).
std::vector<size_t> sample_indices(size_t n, size_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> out;
  out.reserve(k);
  for (size_t i = 0; i < n && out.size() < k; ++i) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1), same on every platform
    if (u * static_cast<double>(n - i) < static_cast<double>(k - out.size())) out.push_back(i);
  }
  return out;
}

// Checks pieces + merges (whatever their origin) and builds the lookup tables and the JSON text.
std::shared_ptr<const Tokenizer::Model> build_model(std::vector<std::string> pieces,
                                                    std::vector<std::pair<int32_t, int32_t>> merges,
                                                    const std::string& what) {
  const auto fail = [&](const std::string& msg) { throw std::runtime_error(what + ": " + msg); };
  const int64_t n_merges = static_cast<int64_t>(merges.size());
  const int64_t n_chars = static_cast<int64_t>(pieces.size()) - 4 - n_merges;
  if (pieces.size() > static_cast<size_t>(INT32_MAX))
    fail("expected at most " + std::to_string(INT32_MAX) + " pieces, got " + std::to_string(pieces.size()));
  if (n_chars < 1)
    fail("expected 4 special pieces, at least one character and one piece per merge in \"vocab\", got " +
         std::to_string(pieces.size()) + " pieces for " + std::to_string(n_merges) + " merges");
  auto m = std::make_shared<Tokenizer::Model>();
  m->first_merge_id = static_cast<int32_t>(4 + n_chars);
  std::unordered_map<std::string, int32_t> ids;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].empty()) fail("expected a non-empty piece at id " + std::to_string(i) + ", got \"\"");
    if (!ids.emplace(pieces[i], static_cast<int32_t>(i)).second)
      fail("piece \"" + pieces[i] + "\" appears twice (ids " + std::to_string(ids[pieces[i]]) + " and " +
           std::to_string(i) + ")");
  }
  for (int32_t id = 0; id < 4; ++id)
    if (pieces[id] != kSpecials[id])
      fail("expected special piece " + std::string(kSpecials[id]) + " at id " + std::to_string(id) +
           ", got \"" + pieces[id] + "\"");
  for (int32_t id = 4; id < m->first_merge_id; ++id) {
    if (!is_single_char(pieces[id]))
      fail("expected a single character at id " + std::to_string(id) + " (ids 4.." +
           std::to_string(m->first_merge_id - 1) + " are the alphabet), got \"" + pieces[id] + "\"");
    if (id > 4 && !(pieces[id - 1] < pieces[id]))
      fail("expected the characters at ids 4.." + std::to_string(m->first_merge_id - 1) +
           " sorted by code point, but \"" + pieces[id - 1] + "\" comes before \"" + pieces[id] + "\"");
    m->char_ids.emplace(pieces[id], id);
  }
  if (!m->char_ids.count(kMarker))
    fail("expected the word marker \"" + std::string(kMarker) + "\" in the alphabet");
  for (int64_t i = 0; i < n_merges; ++i) {
    const int32_t result = static_cast<int32_t>(m->first_merge_id + i);
    const auto [left, right] = merges[i];
    const auto where = "merge " + std::to_string(i) + " (piece " + std::to_string(result) + ")";
    if (left < 4 || right < 4 || left >= result || right >= result)
      fail(where + ": expected parts among the non-special pieces before it, ids 4.." +
           std::to_string(result - 1) + ", got ids " + std::to_string(left) + " and " +
           std::to_string(right));
    if (pieces[left] + pieces[right] != pieces[result])
      fail(where + ": expected \"" + pieces[left] + "\" + \"" + pieces[right] + "\" at id " +
           std::to_string(result) + ", got \"" + pieces[result] + "\"");
    if (!m->merge_ids.emplace(pair_key(left, right), result).second)
      fail(where + ": the pair \"" + pieces[left] + "\" \"" + pieces[right] + "\" is merged twice");
  }
  nlohmann::ordered_json j;
  j["type"] = kType;
  j["version"] = kVersion;
  j["vocab"] = pieces;
  auto& jm = j["merges"] = nlohmann::ordered_json::array();
  for (const auto& [left, right] : merges) jm.push_back({pieces[left], pieces[right]});
  m->json = j.dump() + "\n";  // compact, fields in this order, UTF-8 kept as is
  m->pieces = std::move(pieces);
  m->merges = std::move(merges);
  return m;
}

// ---- training ----

// Orders heap entries: higher count first, then the smaller (left, right) piece bytes.
struct PairEntry {
  int64_t count;
  uint64_t key;
};

struct PairLess {
  const std::vector<std::string>* pieces;
  bool operator()(const PairEntry& a, const PairEntry& b) const {
    if (a.count != b.count) return a.count < b.count;
    const std::string& al = (*pieces)[a.key >> 32];
    const std::string& bl = (*pieces)[b.key >> 32];
    if (al != bl) return al > bl;
    return (*pieces)[a.key & 0xFFFFFFFFu] > (*pieces)[b.key & 0xFFFFFFFFu];
  }
};

class BpeTrainer {
 public:
  BpeTrainer(std::vector<std::vector<int32_t>> words, std::vector<int64_t> freqs,
             std::vector<std::string> pieces)
      : words_(std::move(words)),
        freqs_(std::move(freqs)),
        pieces_(std::move(pieces)),
        heap_(PairLess{&pieces_}) {
    for (size_t i = 0; i < pieces_.size(); ++i) piece_ids_.emplace(pieces_[i], static_cast<int32_t>(i));
    for (size_t w = 0; w < words_.size(); ++w) {
      add_pairs(w, +1);
      index_pairs(w, -1);
    }
    flush();
  }
  BpeTrainer(const BpeTrainer&) = delete;  // heap_ points at pieces_
  BpeTrainer& operator=(const BpeTrainer&) = delete;

  // Merges until there are vocab_size pieces or no pair occurs twice.
  void run(int64_t vocab_size) {
    while (static_cast<int64_t>(pieces_.size()) < vocab_size && !heap_.empty()) {
      const PairEntry top = heap_.top();
      heap_.pop();
      const auto it = counts_.find(top.key);
      if (it == counts_.end() || it->second != top.count) continue;  // stale entry
      if (top.count < 2) break;
      const int32_t left = static_cast<int32_t>(top.key >> 32),
                    right = static_cast<int32_t>(top.key & 0xFFFFFFFFu);
      std::string joined = pieces_[left] + pieces_[right];
      if (piece_ids_.count(joined)) {
        // The same string was already built another way: pieces stay distinct, this pair never merges.
        counts_.erase(it);
        banned_.insert(top.key);
        continue;
      }
      const int32_t id = static_cast<int32_t>(pieces_.size());
      pieces_.push_back(joined);
      piece_ids_.emplace(std::move(joined), id);
      merges_.emplace_back(left, right);
      merge(top.key, left, right, id);
    }
  }

  std::vector<std::string>& pieces() { return pieces_; }
  std::vector<std::pair<int32_t, int32_t>>& merges() { return merges_; }

 private:
  // Adds sign * the word's frequency to the count of each adjacent pair (<unk> never pairs).
  void add_pairs(size_t w, int sign) {
    const auto& s = words_[w];
    for (size_t i = 0; i + 1 < s.size(); ++i)
      if (s[i] != Tokenizer::kUnk && s[i + 1] != Tokenizer::kUnk)
        delta_[pair_key(s[i], s[i + 1])] += sign * freqs_[w];
  }

  // Records word w under its pairs (those involving `only` when it is >= 0).
  void index_pairs(size_t w, int32_t only) {
    const auto& s = words_[w];
    const int32_t wi = static_cast<int32_t>(w);
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      if (s[i] == Tokenizer::kUnk || s[i + 1] == Tokenizer::kUnk) continue;
      if (only >= 0 && s[i] != only && s[i + 1] != only) continue;
      auto& list = where_[pair_key(s[i], s[i + 1])];
      if (list.empty() || list.back() != wi) list.push_back(wi);
    }
  }

  // Applies the pending count changes and pushes the new counts.
  void flush() {
    for (const auto& [key, d] : delta_) {
      if (d == 0 || banned_.count(key)) continue;
      int64_t& c = counts_[key];
      c += d;
      if (c > 0) {
        heap_.push({c, key});
      } else {
        counts_.erase(key);
      }
    }
    delta_.clear();
  }

  void merge(uint64_t key, int32_t left, int32_t right, int32_t id) {
    std::vector<int32_t> words;
    if (auto it = where_.find(key); it != where_.end()) {
      words = std::move(it->second);
      where_.erase(it);
    }
    std::vector<int32_t> next;
    for (int32_t w : words) {
      auto& s = words_[w];
      bool found = false;
      for (size_t i = 0; i + 1 < s.size() && !found; ++i) found = s[i] == left && s[i + 1] == right;
      if (!found) continue;  // stale: an earlier merge changed this word
      add_pairs(w, -1);
      next.clear();
      for (size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
          next.push_back(id);
          i += 2;
        } else {
          next.push_back(s[i++]);
        }
      }
      s.swap(next);
      add_pairs(w, +1);
      index_pairs(w, id);
    }
    flush();
  }

  std::vector<std::vector<int32_t>> words_;
  std::vector<int64_t> freqs_;
  std::vector<std::string> pieces_;
  std::unordered_map<std::string, int32_t> piece_ids_;
  std::vector<std::pair<int32_t, int32_t>> merges_;
  std::unordered_map<uint64_t, int64_t> counts_;              // pair -> weighted count (> 0)
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;  // pair -> words that had it (may be stale)
  std::unordered_map<uint64_t, int64_t> delta_;               // pending count changes
  std::unordered_set<uint64_t> banned_;                       // pairs whose result already exists
  std::priority_queue<PairEntry, std::vector<PairEntry>, PairLess> heap_;
};

// ---- encoding ----

std::vector<int64_t> encode_word(const Tokenizer::Model& m, const std::string& word) {
  std::vector<int32_t> sym;
  for_each_char(word, [&](const std::string& c, bool) {
    const auto it = m.char_ids.find(c);
    sym.push_back(it == m.char_ids.end() ? static_cast<int32_t>(Tokenizer::kUnk) : it->second);
  });
  const int n = static_cast<int>(sym.size());
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
  std::vector<bool> alive(n, true);
  // (rank, position of the left symbol), smallest first: equal ranks apply left to right.
  using Candidate = std::pair<int32_t, int>;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  const auto rank = [&](int i) -> int32_t {  // result id of merging i with its right neighbour, or -1
    if (i < 0 || next[i] < 0) return -1;
    const auto it = m.merge_ids.find(pair_key(sym[i], sym[next[i]]));
    return it == m.merge_ids.end() ? -1 : it->second;
  };
  const auto offer = [&](int i) {
    const int32_t r = rank(i);
    if (r >= 0) heap.emplace(r, i);
  };
  for (int i = 0; i + 1 < n; ++i) offer(i);
  while (!heap.empty()) {
    const auto [r, i] = heap.top();
    heap.pop();
    if (!alive[i] || rank(i) != r) continue;  // stale
    const int j = next[i];
    sym[i] = r;
    alive[j] = false;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    offer(prev[i]);
    offer(i);
  }
  std::vector<int64_t> out;
  for (int i = 0; i >= 0; i = next[i]) out.push_back(sym[i]);
  return out;
}

std::string string_field(const json& j, const char* key, const std::string& what) {
  if (!j.contains(key)) throw std::runtime_error(what + ": expected a \"" + key + "\" field, found none");
  if (!j[key].is_string())
    throw std::runtime_error(what + ": expected \"" + key + "\" to be a string, got " + j[key].dump());
  return j[key].get<std::string>();
}

}  // namespace

std::string valid_utf8(std::string text) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const auto n = static_cast<int64_t>(text.size());
  int64_t i = 0;
  while (i < n) {  // ASCII runs quickly; anything else by ICU's decoder
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    int32_t k = 0, len = static_cast<int32_t>(std::min<int64_t>(n - i, 4));
    UChar32 c;
    U8_NEXT(p + i, k, len, c);
    if (c < 0) break;
    i += k;
  }
  if (i == n) return text;
  // U8_NEXT consumes one maximal subpart of an ill-formed sequence (ICU 60 and later), the unit that
  // becomes one U+FFFD.
  std::string out(text, 0, static_cast<size_t>(i));
  out.reserve(text.size() + 16);
  while (i < n) {
    int32_t k = 0, len = static_cast<int32_t>(std::min<int64_t>(n - i, 4));
    UChar32 c;
    U8_NEXT(p + i, k, len, c);
    if (c < 0) out += "\xEF\xBF\xBD";
    else out.append(text, static_cast<size_t>(i), static_cast<size_t>(k));
    i += k;
  }
  return out;
}

Tokenizer::Tokenizer(std::shared_ptr<const Model> model)
    : model_(std::move(model)), cache_(std::make_shared<Cache>()) {}

Tokenizer::Tokenizer(std::shared_ptr<const Backend> backend, const Specials& specials)
    : backend_(std::move(backend)), specials_(specials) {
  if (!backend_) throw std::invalid_argument("tokenizer: no backend");
  for (const int64_t id : {specials.pad, specials.bos, specials.eos, specials.unk})
    if (id < 0 || id >= backend_->vocab_size())
      throw std::invalid_argument("tokenizer: special id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                  std::to_string(backend_->vocab_size()) + ")");
}

std::string Tokenizer::kind() const { return backend_ ? backend_->kind() : kType; }

SpecialFrame Tokenizer::frame() const { return backend_ ? backend_->frame() : SpecialFrame{}; }

std::vector<int64_t> Tokenizer::encode(const std::string& text, bool add_special_tokens) const {
  std::vector<int64_t> ids = encode(text);
  if (!add_special_tokens) return ids;
  const SpecialFrame f = frame();
  ids.insert(ids.begin(), f.before.begin(), f.before.end());
  ids.insert(ids.end(), f.after.begin(), f.after.end());
  return ids;
}

Tokenizer Tokenizer::train(const std::vector<std::string>& sentences, const TokenizerTrainOptions& opts) {
  auto bad = [](const std::string& msg) { throw std::invalid_argument("tokenizer training: " + msg); };
  if (opts.kind != "bpe")
    bad("the tokenizer kind must be 'bpe' (the only one supported), got '" + opts.kind + "'");
  if (opts.vocab_size <= 4 || opts.vocab_size > INT32_MAX)
    bad("vocab_size must be > 4 (the special pieces) and fit an int32, got " +
        std::to_string(opts.vocab_size));
  if (!(opts.character_coverage > 0 && opts.character_coverage <= 1))
    bad("character_coverage must be in (0, 1], got " + std::to_string(opts.character_coverage));
  if (opts.max_sentences < 0) bad("max_sentences must be >= 0, got " + std::to_string(opts.max_sentences));
  if (sentences.empty()) bad("no sentences");

  // Word frequencies over the (sampled) sentences.
  std::unordered_map<std::string, int64_t> freq;
  const auto count_words = [&](const std::string& s) {
    for_each_word(s, [&](std::string w) { ++freq[std::move(w)]; });
  };
  if (opts.max_sentences > 0 && static_cast<size_t>(opts.max_sentences) < sentences.size()) {
    for (size_t i : sample_indices(sentences.size(), static_cast<size_t>(opts.max_sentences), opts.seed))
      count_words(sentences[i]);
  } else {
    for (const auto& s : sentences) count_words(s);
  }
  std::vector<std::pair<std::string, int64_t>> words(freq.begin(), freq.end());
  freq.clear();
  std::sort(words.begin(), words.end());

  // Alphabet: the most frequent well-formed characters up to the coverage, plus "▁".
  std::unordered_map<std::string, int64_t> char_counts;
  int64_t total = 0;
  for (const auto& word : words) {
    const int64_t f = word.second;  // a named copy: lambdas cannot capture structured bindings in C++17
    for_each_char(word.first, [&](const std::string& c, bool valid) {
      total += f;
      if (valid) char_counts[c] += f;
    });
  }
  std::vector<std::pair<std::string, int64_t>> by_count(char_counts.begin(), char_counts.end());
  std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second
                                : a.first < b.first;  // UTF-8 byte order = code point order
  });
  std::vector<std::string> alphabet = {kMarker};
  const double threshold = opts.character_coverage * static_cast<double>(total);
  int64_t covered = 0;
  for (const auto& [c, n] : by_count) {
    if (static_cast<double>(covered) >= threshold) break;
    covered += n;
    if (c != kMarker) alphabet.push_back(c);
  }
  std::sort(alphabet.begin(), alphabet.end());
  const int64_t minimum = 4 + static_cast<int64_t>(alphabet.size());
  if (opts.vocab_size < minimum)
    bad("vocab_size must be at least " + std::to_string(minimum) + " (4 special pieces + " +
        std::to_string(alphabet.size()) + " characters kept at character_coverage " +
        std::to_string(opts.character_coverage) + "), got " + std::to_string(opts.vocab_size));

  std::vector<std::string> pieces(std::begin(kSpecials), std::end(kSpecials));
  std::unordered_map<std::string, int32_t> char_ids;
  for (const auto& c : alphabet) {
    char_ids.emplace(c, static_cast<int32_t>(pieces.size()));
    pieces.push_back(c);
  }
  std::vector<std::vector<int32_t>> symbols;
  std::vector<int64_t> counts;
  symbols.reserve(words.size());
  counts.reserve(words.size());
  for (auto& [w, f] : words) {
    std::vector<int32_t> s;
    for_each_char(w, [&](const std::string& c, bool) {
      const auto it = char_ids.find(c);
      s.push_back(it == char_ids.end() ? static_cast<int32_t>(kUnk) : it->second);
    });
    symbols.push_back(std::move(s));
    counts.push_back(f);
    std::string().swap(w);
  }
  BpeTrainer trainer(std::move(symbols), std::move(counts), std::move(pieces));
  trainer.run(opts.vocab_size);
  return Tokenizer(
      build_model(std::move(trainer.pieces()), std::move(trainer.merges()), "trained tokenizer"));
}

Tokenizer Tokenizer::from_serialized(const std::string& bytes, const std::string& what) {
  // parse_json: every JSON fault (syntax, a number out of range, a repeated key) names the file.
  json j;
  try {
    j = parse_json(bytes, what);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + " (expected a headprune-bpe tokenizer JSON file, got text that is not JSON)");
  }
  if (!j.is_object())
    throw std::runtime_error(what + ": expected a JSON object, got " + std::string(j.type_name()));
  for (const auto& item : j.items()) {
    const std::string& k = item.key();
    if (k != "type" && k != "version" && k != "vocab" && k != "merges")
      throw std::runtime_error(what + ": unexpected field \"" + k +
                               "\" (expected only type, version, vocab and merges)");
  }
  const std::string type = string_field(j, "type", what);
  if (type != kType)
    throw std::runtime_error(what + ": expected \"type\": \"" + kType + "\", got \"" + type + "\"");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kVersion)
    throw std::runtime_error(what + ": expected \"version\": " + std::to_string(kVersion) + ", got " +
                             (j.contains("version") ? j["version"].dump() : std::string("none")));
  if (!j.contains("vocab") || !j["vocab"].is_array())
    throw std::runtime_error(what + ": expected \"vocab\" to be an array of strings");
  if (!j.contains("merges") || !j["merges"].is_array())
    throw std::runtime_error(what + ": expected \"merges\" to be an array of [left, right] string pairs");
  std::vector<std::string> pieces;
  std::unordered_map<std::string, int32_t> ids;
  for (const auto& p : j["vocab"]) {
    if (!p.is_string())
      throw std::runtime_error(what + ": expected vocab entry " + std::to_string(pieces.size()) +
                               " to be a string, got " + p.dump());
    pieces.push_back(p.get<std::string>());
    ids.emplace(pieces.back(),
                static_cast<int32_t>(pieces.size() - 1));  // duplicates are reported by build_model
  }
  std::vector<std::pair<int32_t, int32_t>> merges;
  for (const auto& mj : j["merges"]) {
    const std::string where = what + ": merge " + std::to_string(merges.size());
    if (!mj.is_array() || mj.size() != 2 || !mj[0].is_string() || !mj[1].is_string())
      throw std::runtime_error(where + ": expected a [left, right] pair of strings, got " + mj.dump());
    int32_t part[2];
    for (int k = 0; k < 2; ++k) {
      const auto it = ids.find(mj[k].get<std::string>());
      if (it == ids.end())
        throw std::runtime_error(where + ": expected \"" + mj[k].get<std::string>() +
                                 "\" in the vocabulary, found none");
      part[k] = it->second;
    }
    merges.emplace_back(part[0], part[1]);
  }
  return Tokenizer(build_model(std::move(pieces), std::move(merges), what));
}

Tokenizer Tokenizer::load(const std::string& path) { return from_serialized(read_file(path), path); }

void Tokenizer::save(const std::string& path) const { write_file_atomic(path, serialized()); }

std::vector<int64_t> Tokenizer::encode(const std::string& raw) const {
  // One rule for invalid UTF-8 before any kind of tokenizer sees the text (each HF kind applies the
  // same valid_utf8() at its own entry too, for callers that use it directly; valid text passes as is).
  const std::string text = valid_utf8(raw);
  if (backend_) return backend_->encode(text);
  std::vector<int64_t> out;
  for_each_word(text, [&](const std::string& w) {
    {
      std::lock_guard<std::mutex> lock(cache_->mutex);
      const auto it = cache_->words.find(w);
      if (it != cache_->words.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int64_t> ids = encode_word(*model_, w);
    out.insert(out.end(), ids.begin(), ids.end());
    std::lock_guard<std::mutex> lock(cache_->mutex);
    if (cache_->words.size() >= kMaxCachedWords) cache_->words.clear();
    cache_->words.emplace(w, std::move(ids));
  });
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  if (backend_) return backend_->decode(ids);
  const int64_t n = vocab_size();
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id < 0 || id >= n)
      throw std::invalid_argument("tokenizer: id " + std::to_string(id) + " at position " +
                                  std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(n) +
                                  ")");
    if (id > kUnk) joined += model_->pieces[id];  // the special ids are 0..3; <unk> too is dropped
  }
  const std::string marker = kMarker;
  std::string text;
  text.reserve(joined.size());
  for (size_t i = 0; i < joined.size();) {
    if (joined.compare(i, marker.size(), marker) == 0) {
      text += ' ';
      i += marker.size();
    } else {
      text += joined[i++];
    }
  }
  if (!text.empty() && text[0] == ' ') text.erase(0, 1);
  return text;
}

int64_t Tokenizer::vocab_size() const {
  return backend_ ? backend_->vocab_size() : static_cast<int64_t>(model_->pieces.size());
}

std::string Tokenizer::serialized() const {
  if (backend_) throw std::logic_error("tokenizer: a " + backend_->kind() + " tokenizer is kept in its own files");
  return model_->json;
}

const std::string& Tokenizer::piece(int64_t id) const {
  if (backend_) return backend_->piece(id);
  if (id < 0 || id >= vocab_size())
    throw std::invalid_argument("tokenizer: piece id " + std::to_string(id) +
                                " is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")");
  return model_->pieces[id];
}

}  // namespace hp
