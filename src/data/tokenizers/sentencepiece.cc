// SentencePieceTokenizer at work: the text pipeline, BPE and Unigram segmentation, byte fallback, and
// decoding (see headprune/data/sentencepiece.h). Building one is sentencepiece_model.cc (model
// files) and sentencepiece_json.cc (tokenizer.json).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <queue>
#include <stdexcept>

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "sp_detail.h"
#include "unicode_text.h"

namespace hp {

using tokenizer_detail::byte_of_piece;
using tokenizer_detail::utf8_char_length;
using Impl = SentencePieceTokenizer::Impl;

namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581, sentencepiece's whitespace symbol

// One symbol of a segmentation: its text and model id (-1: not a piece of the model).
struct Sym {
  std::string text;
  int64_t id = -1;
};

size_t char_length(std::string_view s) { return std::max<size_t>(1, utf8_char_length(s)); }

// The longest user-defined piece starting `s`, or 0.
size_t user_defined_prefix(const std::vector<std::string>& user_defined, std::string_view s) {
  for (const auto& u : user_defined)
    if (s.substr(0, u.size()) == u) return u.size();
  return 0;
}

// Every occurrence of `from` (left to right, not overlapping) replaced by `to`, in one pass.
void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  size_t at = s.find(from);
  if (at == std::string::npos) return;
  std::string out;
  out.reserve(s.size());
  size_t done = 0;
  for (; at != std::string::npos; at = s.find(from, done)) {
    out.append(s, done, at - done);
    out += to;
    done = at + from.size();
  }
  out.append(s, done, std::string::npos);
  s.swap(out);
}

// sentencepiece's Normalizer::Normalize: rules (or the characters as they are), leading, trailing and
// repeated spaces dropped when asked, the dummy prefix, spaces as "▁".
std::string normalize_like_sentencepiece(const Impl::Normalizer& n, const std::vector<std::string>& user_defined,
                                         std::string_view in) {
  auto prefix = [&](std::string_view s) -> std::pair<std::string, size_t> {
    if (const size_t u = user_defined_prefix(user_defined, s)) return {std::string(s.substr(0, u)), u};
    if (n.charsmap) return n.charsmap->normalize_prefix(s);
    const size_t len = utf8_char_length(s);
    if (len == 0) return {"\xEF\xBF\xBD", 1};
    return {std::string(s.substr(0, len)), len};
  };
  if (n.remove_extra_whitespaces)
    while (!in.empty()) {
      auto p = prefix(in);
      if (p.first != " ") break;
      in.remove_prefix(p.second);
    }
  std::string out;
  if (in.empty()) return out;
  const std::string space = n.escape_whitespaces ? kSpace : " ";
  if (n.add_dummy_prefix) out += space;
  bool prev_space = n.remove_extra_whitespaces;
  while (!in.empty()) {
    auto [sp, consumed] = prefix(in);
    std::string_view v(sp);
    while (prev_space && !v.empty() && v.front() == ' ') v.remove_prefix(1);
    if (!v.empty()) {
      for (char c : v) out += (c == ' ' && n.escape_whitespaces) ? kSpace : std::string(1, c);
      prev_space = v.back() == ' ';
    }
    in.remove_prefix(consumed);
    if (!n.remove_extra_whitespaces) prev_space = false;
  }
  if (n.remove_extra_whitespaces)
    while (out.size() >= space.size() && out.compare(out.size() - space.size(), space.size(), space) == 0)
      out.resize(out.size() - space.size());
  return out;
}

std::string apply_normalizer(const Impl::Normalizer& n, const std::vector<std::string>& user_defined, std::string s) {
  using K = Impl::Normalizer::Kind;
  switch (n.kind) {
    case K::SentencePiece: return normalize_like_sentencepiece(n, user_defined, s);
    case K::Precompiled: return n.charsmap->normalize_graphemes(s);
    case K::Prepend: return s.empty() ? s : n.to + s;
    case K::Replace: replace_all(s, n.from, n.to); return s;
    case K::Unicode: {
      UErrorCode err = U_ZERO_ERROR;
      const icu::UnicodeString u = n.unicode->normalize(icu::UnicodeString::fromUTF8(s), err);
      if (U_FAILURE(err)) throw std::runtime_error(std::string("tokenizer: normalization failed: ") + u_errorName(err));
      std::string out;
      u.toUTF8String(out);
      return out;
    }
    case K::Lowercase: {
      icu::UnicodeString u = icu::UnicodeString::fromUTF8(s);
      u.toLower(icu::Locale::getRoot());
      std::string out;
      u.toUTF8String(out);
      return out;
    }
    case K::Strip: {
      auto cs = tokenizer_detail::code_points(s);
      size_t a = 0, b = cs.size();
      if (n.strip_left) while (a < b && u_isUWhiteSpace(cs[a])) ++a;
      if (n.strip_right) while (b > a && u_isUWhiteSpace(cs[b - 1])) --b;
      return tokenizer_detail::utf8(std::vector<UChar32>(cs.begin() + static_cast<std::ptrdiff_t>(a),
                                                        cs.begin() + static_cast<std::ptrdiff_t>(b)));
    }
  }
  return s;
}

// One pre-tokenizer on each piece; `first`: the piece starts the text (Metaspace's "first" scheme).
std::vector<std::string> apply_pre_tokenizer(const Impl::PreTokenizer& p, std::vector<std::string> pieces, bool first) {
  std::vector<std::string> out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::string& s = pieces[i];
    if (p.kind == Impl::PreTokenizer::Kind::WhitespaceSplit) {
      const auto cs = tokenizer_detail::code_points(s);
      std::vector<UChar32> word;
      for (size_t k = 0; k <= cs.size(); ++k) {
        if (k == cs.size() || u_isUWhiteSpace(cs[k])) {
          if (!word.empty()) out.push_back(tokenizer_detail::utf8(word));
          word.clear();
        } else {
          word.push_back(cs[k]);
        }
      }
      continue;
    }
    replace_all(s, " ", p.replacement);
    const bool prepend = p.prepend == Impl::PreTokenizer::Prepend::Always ||
                         (p.prepend == Impl::PreTokenizer::Prepend::First && first && i == 0);
    if (prepend && s.compare(0, p.replacement.size(), p.replacement) != 0) s = p.replacement + s;
    if (!p.split) {
      out.push_back(std::move(s));
      continue;
    }
    // Split before every replacement character, which stays with the text after it.
    size_t start = 0;
    for (size_t at = s.find(p.replacement, 1); at != std::string::npos; at = s.find(p.replacement, at + 1)) {
      if (at > start) out.push_back(s.substr(start, at - start));
      start = at;
    }
    if (start < s.size()) out.push_back(s.substr(start));
  }
  return out;
}

// Best path through the lattice of pieces (sentencepiece's optimized Viterbi; HF's Unigram is the
// same): at each character, every piece starting there extends the best path ending there; a
// character no single-character piece covers is unknown at the model's unknown score. Ties keep the
// path found first. The arithmetic is the reference's, since ties are decided by rounding: HF adds in
// double; sentencepiece (Score = float) keeps path scores in float but adds a piece's score in double
// and compares that sum with the stored float (an unknown character's sum stays float).
template <typename Score, typename Emit>
void unigram(const Impl::Model& m, const std::string& s, Emit&& emit) {
  if (s.size() >= static_cast<size_t>(INT32_MAX))
    throw std::invalid_argument("tokenizer: a piece of " + std::to_string(s.size()) + " bytes is too long");
  struct Best {
    Score score = 0;
    int32_t start = -1, id = -1;
  };
  const size_t n = s.size();
  std::vector<Best> best(n + 1);
  best[0].start = 0;
  for (size_t pos = 0; pos < n;) {
    const size_t mblen = std::min(char_length(std::string_view(s).substr(pos)), n - pos);
    const Score here = best[pos].score;
    bool single = false;
    for (size_t len = 1; len <= std::min(m.max_piece_bytes, n - pos); ++len) {
      const std::string_view candidate = std::string_view(s).substr(pos, len);
      const auto it = m.lookup.find(candidate);
      if (it == m.lookup.end()) {
        if (!m.proper_prefixes.count(candidate)) break;  // no piece starts with it: none is longer
        continue;
      }
      const auto id = it->second;
      const auto type = m.types[static_cast<size_t>(id)];
      if (type == SentencePieceModel::PieceType::Unused) continue;
      const double sc = type == SentencePieceModel::PieceType::UserDefined
                            ? static_cast<double>(len) * static_cast<double>(m.user_defined_bonus) - 0.1
                            : m.scores[static_cast<size_t>(id)];
      const double cand = sc + static_cast<double>(here);
      Best& t = best[pos + len];
      if (t.start < 0 || cand > static_cast<double>(t.score))
        t = Best{static_cast<Score>(cand), static_cast<int32_t>(pos), static_cast<int32_t>(id)};
      if (len == mblen) single = true;
    }
    if (!single) {
      const Score cand = static_cast<Score>(m.unk_score) + here;
      Best& t = best[pos + mblen];
      if (t.start < 0 || cand > t.score) t = Best{cand, static_cast<int32_t>(pos), -1};
    }
    pos += mblen;
  }
  std::vector<std::pair<int32_t, int32_t>> path;  // (start, id) of each piece, last first
  for (size_t end = n; end > 0;) {
    const Best& b = best[end];
    path.emplace_back(b.start, b.id);
    end = static_cast<size_t>(b.start);
  }
  std::vector<Best>().swap(best);
  for (size_t k = path.size(); k-- > 0;) {
    const auto start = static_cast<size_t>(path[k].first);
    const size_t end = k ? static_cast<size_t>(path[k - 1].first) : n;
    emit(Sym{s.substr(start, end - start), path[k].second});
  }
}

// BPE: start from characters (user-defined pieces whole), merge the best adjacent pair until none is
// left. By score (sentencepiece: the merged piece's score, highest first) or by rank (HF: the merges
// list, lowest first); ties go to the leftmost pair. sentencepiece may merge through an unused piece,
// which is split back afterwards. The symbols are spans of `s` in a linked list; the agenda holds
// (priority, left symbol, bytes of the pair) and an entry is stale when the pair at its left symbol no
// longer spans those bytes (a symbol only ever grows to the right, so the span fixes both halves):
// O(n log n) time and a few tens of bytes a character, whatever the length of the piece. The pieces
// go to emit(Sym&&) in order.
// BPE's first symbols: the characters of s, user-defined pieces whole (sentencepiece's rule).
struct BpeSymbols {
  std::vector<int32_t> begin, id;  // a symbol is s[begin[i], begin[next[i]]); its piece id (-1: none)
  std::vector<bool> frozen;        // a user-defined piece: never merged
};
BpeSymbols bpe_symbols(const Impl& impl, const std::string& s, bool by_rank) {
  if (s.size() >= static_cast<size_t>(INT32_MAX))
    throw std::invalid_argument("tokenizer: a piece of " + std::to_string(s.size()) + " bytes is too long");
  const Impl::Model& m = *impl.model;
  BpeSymbols out;
  for (size_t pos = 0; pos < s.size();) {
    const size_t u = by_rank ? 0 : user_defined_prefix(impl.user_defined, std::string_view(s).substr(pos));
    const size_t len = u ? u : std::min(char_length(std::string_view(s).substr(pos)), s.size() - pos);
    const auto it = m.lookup.find(std::string_view(s).substr(pos, len));
    out.begin.push_back(static_cast<int32_t>(pos));
    out.id.push_back(static_cast<int32_t>(it == m.lookup.end() ? -1 : it->second));
    out.frozen.push_back(u != 0);
    pos += len;
  }
  return out;
}

// sentencepiece's BPE may merge through an unused piece: such a piece goes out as the pieces it was
// merged from (recursively), every other piece as it is.
template <typename Emit>
void emit_split_unused(const Impl::Model& m, const std::map<std::string, std::pair<std::string, std::string>>& unmerge,
                       const std::string& t, Emit& emit) {
  const auto found = m.lookup.find(t);
  const int64_t pid = found == m.lookup.end() ? -1 : found->second;
  const auto it = unmerge.find(t);
  if (pid >= 0 && m.types[static_cast<size_t>(pid)] == SentencePieceModel::PieceType::Unused && it != unmerge.end()) {
    emit_split_unused(m, unmerge, it->second.first, emit);
    emit_split_unused(m, unmerge, it->second.second, emit);
    return;
  }
  emit(Sym{t, pid});
}

template <typename Emit>
void bpe(const Impl& impl, const std::string& s, Emit&& emit) {
  const Impl::Model& m = *impl.model;
  const bool by_rank = impl.algorithm == Impl::Algorithm::BpeByRank;
  auto lookup = [&](std::string_view t) -> int64_t {
    const auto it = m.lookup.find(t);
    return it == m.lookup.end() ? -1 : it->second;
  };
  BpeSymbols sym = bpe_symbols(impl, s, by_rank);
  const std::vector<int32_t>& begin = sym.begin;
  std::vector<int32_t>& id = sym.id;
  const std::vector<bool>& frozen = sym.frozen;
  const auto n = static_cast<int32_t>(begin.size());
  std::vector<int32_t> prev(static_cast<size_t>(n)), next(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) prev[static_cast<size_t>(i)] = i - 1, next[static_cast<size_t>(i)] = i + 1 < n ? i + 1 : -1;
  std::vector<bool> gone(static_cast<size_t>(n), false);  // merged into the symbol before it
  const auto end_of = [&](int32_t i) {
    const int32_t j = next[static_cast<size_t>(i)];
    return j >= 0 ? begin[static_cast<size_t>(j)] : static_cast<int32_t>(s.size());
  };
  struct Pair {
    float priority;  // exact: sentencepiece's scores are floats, HF's ranks are below 2^24
    int32_t left, bytes;
  };
  struct Worse {
    bool operator()(const Pair& a, const Pair& b) const {
      return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
    }
  };
  std::priority_queue<Pair, std::vector<Pair>, Worse> agenda;
  std::map<std::string, std::pair<std::string, std::string>> unmerge;  // unused piece -> its two halves
  // The merge of symbol l with the next one: (priority, merged id), or id -1 when there is none.
  auto merge_of = [&](int32_t l) -> std::pair<float, int64_t> {
    const int32_t r = l < 0 ? -1 : next[static_cast<size_t>(l)];
    if (r < 0 || frozen[static_cast<size_t>(l)] || frozen[static_cast<size_t>(r)]) return {0, -1};
    const int64_t a = id[static_cast<size_t>(l)], b = id[static_cast<size_t>(r)];
    if (by_rank) {
      if (a < 0 || b < 0) return {0, -1};
      const auto it = m.merges.find({a, b});
      if (it == m.merges.end()) return {0, -1};
      return {-static_cast<float>(it->second.first), it->second.second};
    }
    const size_t from = static_cast<size_t>(begin[static_cast<size_t>(l)]), to = static_cast<size_t>(end_of(r));
    if (to - from > m.max_piece_bytes) return {0, -1};
    const int64_t merged = lookup(std::string_view(s).substr(from, to - from));
    if (merged < 0) return {0, -1};
    return {static_cast<float>(m.scores[static_cast<size_t>(merged)]), merged};
  };
  auto consider = [&](int32_t l) {
    const auto [priority, merged] = merge_of(l);
    if (merged < 0) return;
    const int32_t r = next[static_cast<size_t>(l)];
    const int32_t from = begin[static_cast<size_t>(l)], mid = begin[static_cast<size_t>(r)], to = end_of(r);
    agenda.push(Pair{priority, l, to - from});
    if (!by_rank && m.types[static_cast<size_t>(merged)] == SentencePieceModel::PieceType::Unused)
      unmerge[s.substr(static_cast<size_t>(from), static_cast<size_t>(to - from))] = {
          s.substr(static_cast<size_t>(from), static_cast<size_t>(mid - from)), s.substr(static_cast<size_t>(mid), static_cast<size_t>(to - mid))};
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!agenda.empty()) {
    const Pair top = agenda.top();
    agenda.pop();
    const auto l = static_cast<size_t>(top.left);
    if (gone[l] || next[l] < 0 || end_of(next[l]) - begin[l] != top.bytes) continue;  // stale: a side has changed
    const auto merged = merge_of(top.left).second;
    if (merged < 0) continue;
    const auto r = static_cast<size_t>(next[l]);
    id[l] = static_cast<int32_t>(merged);
    gone[r] = true;
    next[l] = next[r];
    if (next[r] >= 0) prev[static_cast<size_t>(next[r])] = top.left;
    if (prev[l] >= 0) consider(prev[l]);
    consider(top.left);
  }
  decltype(agenda)().swap(agenda);  // the agenda's memory back before the pieces are emitted
  for (int32_t i = n ? 0 : -1; i >= 0; i = next[static_cast<size_t>(i)]) {
    const auto from = static_cast<size_t>(begin[static_cast<size_t>(i)]);
    std::string text = s.substr(from, static_cast<size_t>(end_of(i)) - from);
    if (by_rank) emit(Sym{std::move(text), id[static_cast<size_t>(i)]});
    else emit_split_unused(m, unmerge, text, emit);
  }
}

}  // namespace

void Impl::Model::index_prefixes() {
  proper_prefixes.clear();
  for (const auto& [piece, id] : lookup)
    for (size_t k = 1; k < piece.size(); ++k) proper_prefixes.insert(piece.substr(0, k));
}

int tokenizer_detail::byte_of_piece(const std::string& t) {
  unsigned v = 0;
  char tail = 0;
  if (t.size() != 6 || std::sscanf(t.c_str(), "<0x%2X%c", &v, &tail) != 2 || tail != '>') return -1;
  return static_cast<int>(v);
}

// ---- encoding ----------------------------------------------------------------------------------

namespace {

// The model's pieces of one pre-tokenized piece, with unknown characters as byte pieces (byte
// fallback, when every byte has its piece) or as <unk> (one per run when fuse_unk).
// Where the pieces go, in order, one at a time: the last one is held back, since an unknown run may
// still grow it (fuse_unk), and handed on when the next one comes or at flush(). Marian's pieces get
// their ids from vocab.json by their text on the way (not the added tokens, which have theirs).
class SymSink {
 public:
  SymSink(const Impl& impl, std::function<void(Sym&&)> consume) : impl_(impl), consume_(std::move(consume)) {}
  void push_back(Sym&& s, bool by_text = true) {
    flush();
    last_ = std::move(s);
    by_text_ = by_text;
    held_ = true;
  }
  Sym& back() { return last_; }
  void flush() {
    if (!held_) return;
    held_ = false;
    if (by_text_ && impl_.ids_by_text) {
      const auto it = impl_.ids.find(last_.text);
      last_.id = it == impl_.ids.end() ? impl_.unk_id : it->second;
    }
    consume_(std::move(last_));
  }

 private:
  const Impl& impl_;
  std::function<void(Sym&&)> consume_;
  Sym last_;
  bool by_text_ = false, held_ = false;
};

void segment(const Impl& impl, const std::string& s, SymSink& out) {
  if (s.empty()) return;
  bool prev_unk = false;
  // Each piece of the segmentation as it comes (no second list of them for a long piece).
  auto take = [&](Sym&& sym) {
    const bool unknown = sym.id < 0 || sym.id == impl.model_unk_id;
    if (unknown && impl.byte_fallback &&
        std::all_of(sym.text.begin(), sym.text.end(), [&](char c) { return impl.byte_ids[static_cast<unsigned char>(c)] >= 0; })) {
      for (char c : sym.text) {
        const int64_t id = impl.byte_ids[static_cast<unsigned char>(c)];
        out.push_back(Sym{impl.model->pieces[static_cast<size_t>(id)], id});
      }
      prev_unk = false;
      return;
    }
    if (unknown) {
      if (impl.model_unk_id < 0) throw std::invalid_argument("tokenizer: '" + sym.text + "' is unknown and the model has no unknown piece");
      // An unknown run keeps its text (sentencepiece's pieces show it; Marian looks it up).
      if (prev_unk && impl.fuse_unk) out.back().text += sym.text;
      else out.push_back(Sym{std::move(sym.text), impl.model_unk_id});
      prev_unk = true;
      return;
    }
    out.push_back(std::move(sym));
    prev_unk = false;
  };
  if (impl.algorithm == Impl::Algorithm::Unigram) {
    if (impl.model->float_scores) unigram<float>(*impl.model, s, take);
    else unigram<double>(*impl.model, s, take);
  } else if (impl.ignore_merges && impl.model->lookup.count(s)) {
    take(Sym{s, impl.model->lookup.at(s)});
  } else {
    bpe(impl, s, take);
  }
}

// HF's added tokens: the earliest match in the raw text (the longest there) is one token; the text
// between matches is (start offset, text).
template <typename F>
void split_added(const Impl& impl, const std::string& text, F&& on_text, SymSink& out) {
  tokenizer_detail::for_each_added(impl.added, text, [&](size_t from, size_t to, const int64_t* id) {
    if (id) out.push_back(Sym{text.substr(from, to - from), *id}, /*by_text=*/false);
    else on_text(from, text.substr(from, to - from));
  });
}

// Pieces with the ids the user sees (remapped through vocab.json for Marian), each handed to
// `consume` as it comes: no list of them all is kept.
void run(const Impl& impl, const std::string& raw, std::function<void(Sym&&)> consume) {
  const std::string text = valid_utf8(raw);  // the one rule for invalid UTF-8 (tokenizer.h)
  SymSink out(impl, std::move(consume));
  auto on_text = [&](size_t offset, std::string s) {
    for (const auto& n : impl.normalizers) s = apply_normalizer(n, impl.user_defined, std::move(s));
    std::vector<std::string> pieces = {std::move(s)};
    for (const auto& p : impl.pre_tokenizers) pieces = apply_pre_tokenizer(p, std::move(pieces), offset == 0);
    for (const auto& p : pieces) {
      segment(impl, p, out);
      out.flush();  // an unknown run never continues into the next piece
    }
  };
  split_added(impl, text, on_text, out);
  out.flush();
}

}  // namespace

std::vector<std::string> SentencePieceTokenizer::tokenize(const std::string& text) const {
  std::vector<std::string> out;
  run(*impl_, text, [&](Sym&& s) { out.push_back(std::move(s.text)); });
  return out;
}

std::vector<int64_t> SentencePieceTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> out;
  run(*impl_, text, [&](Sym&& s) { out.push_back(s.id); });
  return out;
}

// ---- decoding ----------------------------------------------------------------------------------

namespace {

// Bytes to text: sentencepiece keeps each valid character and turns each invalid byte into U+FFFD;
// HF's ByteFallback turns the whole run into one U+FFFD per byte unless all of it is valid.
std::string bytes_to_text(const std::string& bytes, bool per_character) {
  std::string out;
  const bool all_valid = [&] {
    for (size_t i = 0; i < bytes.size();) {
      const size_t n = utf8_char_length(std::string_view(bytes).substr(i));
      if (!n) return false;
      i += n;
    }
    return true;
  }();
  if (all_valid) return bytes;
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = per_character ? utf8_char_length(std::string_view(bytes).substr(i)) : 0;
    if (n) out.append(bytes, i, n), i += n;
    else out += "\xEF\xBF\xBD", ++i;
  }
  return out;
}

std::vector<std::string> apply_decoder(const Impl::Decoder& d, std::vector<std::string> toks) {
  using K = Impl::Decoder::Kind;
  std::vector<std::string> out;
  std::string bytes;
  auto flush = [&](bool per_character) {
    if (bytes.empty()) return;
    out.push_back(bytes_to_text(bytes, per_character));
    bytes.clear();
  };
  switch (d.kind) {
    case K::SentencePiece:
    case K::ByteFallback: {
      const bool spm = d.kind == K::SentencePiece;
      for (size_t i = 0; i < toks.size(); ++i) {
        if (const int b = byte_of_piece(toks[i]); b >= 0) {
          bytes.push_back(static_cast<char>(b));
          continue;
        }
        flush(spm);
        std::string t = std::move(toks[i]);
        if (spm) {
          replace_all(t, kSpace, " ");
          if (out.empty() && d.drop_first_space && !t.empty() && t[0] == ' ') t.erase(0, 1);
        }
        out.push_back(std::move(t));
      }
      flush(spm);
      return out;
    }
    case K::Replace:
      for (auto& t : toks) replace_all(t, d.from, d.to);
      return toks;
    case K::Fuse: {
      std::string all;
      for (const auto& t : toks) all += t;
      return {all};
    }
    case K::Strip:
      for (auto& t : toks) {
        size_t a = 0, b = t.size();
        for (size_t k = 0; k < d.start && t.compare(a, d.from.size(), d.from) == 0 && a < b; ++k) a += d.from.size();
        for (size_t k = 0; k < d.stop && b >= a + d.from.size() && t.compare(b - d.from.size(), d.from.size(), d.from) == 0; ++k)
          b -= d.from.size();
        t = t.substr(a, b - a);
      }
      return toks;
    case K::Trim: {
      std::string all;
      for (const auto& t : toks) all += t;
      Impl::Normalizer strip{Impl::Normalizer::Kind::Strip};
      strip.strip_left = strip.strip_right = true;
      return {apply_normalizer(strip, {}, all)};
    }
    case K::Metaspace:
      for (size_t i = 0; i < toks.size(); ++i) {
        replace_all(toks[i], d.from, " ");
        if (i == 0 && d.drop_first_space && !toks[i].empty() && toks[i][0] == ' ') toks[i].erase(0, 1);
      }
      return toks;
  }
  return toks;
}

}  // namespace

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> toks;
  for (const int64_t id : ids) {
    const std::string& t = token(id);
    if (std::binary_search(impl_->specials.begin(), impl_->specials.end(), id)) continue;
    toks.push_back(t);
  }
  for (const auto& d : impl_->decoders) toks = apply_decoder(d, std::move(toks));
  std::string out;
  for (const auto& t : toks) out += t;
  return out;
}

// ---- the vocabulary ----------------------------------------------------------------------------

void Impl::index_tokens() {
  tokens.clear();
  ids.clear();
  auto put = [&](int64_t id, const std::string& t) {
    if (id < 0) return;
    if (static_cast<size_t>(id) >= tokens.size()) tokens.resize(static_cast<size_t>(id) + 1);
    tokens[static_cast<size_t>(id)] = t;
    ids.emplace(t, id);
  };
  for (size_t i = 0; i < model->pieces.size(); ++i) put(static_cast<int64_t>(i), model->pieces[i]);
  for (const auto& [content, id] : added) put(id, content);
  std::sort(specials.begin(), specials.end());
  specials.erase(std::unique(specials.begin(), specials.end()), specials.end());
}

std::optional<int64_t> SentencePieceTokenizer::id(const std::string& piece) const {
  const auto it = impl_->ids.find(piece);
  if (it == impl_->ids.end()) return std::nullopt;
  return it->second;
}

const std::string& SentencePieceTokenizer::token(int64_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->tokens.size() ||
      (impl_->tokens[static_cast<size_t>(id)].empty()))
    throw std::invalid_argument("sentencepiece tokenizer: id " + std::to_string(id) + " is not in the vocabulary");
  return impl_->tokens[static_cast<size_t>(id)];
}

int64_t SentencePieceTokenizer::vocab_size() const { return static_cast<int64_t>(impl_->tokens.size()); }
std::string SentencePieceTokenizer::kind() const { return impl_->kind; }
const std::vector<int64_t>& SentencePieceTokenizer::special_ids() const { return impl_->specials; }
const SpecialFrame& SentencePieceTokenizer::frame() const { return impl_->frame; }

void SentencePieceTokenizer::set_frame(SpecialFrame frame) {
  // Copies share one Impl: copy it only when another tokenizer holds it too (every Impl is made
  // non-const by make_shared, so its sole owner may change it).
  auto mine = impl_.use_count() == 1 ? std::const_pointer_cast<Impl>(impl_) : std::make_shared<Impl>(*impl_);
  mine->frame = std::move(frame);
  impl_ = std::move(mine);
}

}  // namespace hp
