// HF's tokenizer.json of a SentencePiece-style model (BPE with byte_fallback: Llama-2, Mistral;
// Unigram: T5) read into a SentencePieceTokenizer: the model, the added tokens, the normalizer,
// pre-tokenizer, post-processor and decoder (see headprune/data/sentencepiece.h).
#include <algorithm>
#include <cfloat>
#include <limits>

#include "headprune/config.h"
#include "headprune/io/files.h"
#include "sp_detail.h"
#include "tokenizer_json.h"

namespace hp {

using tokenizer_detail::field_error;
using Impl = SentencePieceTokenizer::Impl;

namespace {

std::string string_field(const nlohmann::json& o, const char* key, const std::string& fallback, const std::string& path,
                         const std::string& field) {
  if (!o.contains(key) || o.at(key).is_null()) return fallback;
  if (!o.at(key).is_string()) throw field_error(path, field + "." + key, "expected a string, got " + o.at(key).dump());
  return o.at(key).get<std::string>();
}

// A Replace's pattern: {"String": "..."} only (HF also allows a regex).
std::string string_pattern(const nlohmann::json& o, const std::string& path, const std::string& field) {
  const auto& pat = o.value("pattern", nlohmann::json());
  if (!pat.is_object() || !pat.contains("String") || !pat.at("String").is_string())
    throw field_error(path, field + ".pattern", "expected {\"String\": ...} (a Regex pattern is not supported), got " + pat.dump());
  return pat.at("String").get<std::string>();
}

void add_normalizer(const nlohmann::json& n, const std::string& f, const std::string& path, Impl& impl) {
  if (n.is_null()) return;
  using K = Impl::Normalizer::Kind;
  const std::string type = n.value("type", std::string());
  Impl::Normalizer x{K::Replace};
  UErrorCode err = U_ZERO_ERROR;
  if (type == "Sequence") {
    for (const auto& m : n.value("normalizers", nlohmann::json::array())) add_normalizer(m, f + ".normalizers", path, impl);
    return;
  } else if (type == "Precompiled") {
    const std::string b64 = string_field(n, "precompiled_charsmap", "", path, f);
    if (b64.empty()) return;  // no rules
    x.kind = K::Precompiled;
    x.charsmap = std::make_shared<tokenizer_detail::PrecompiledCharsmap>(
        tokenizer_detail::base64_decode(b64, path, f + ".precompiled_charsmap"), path + ": " + f + ".precompiled_charsmap");
  } else if (type == "Prepend") {
    x.kind = K::Prepend;
    x.to = string_field(n, "prepend", "", path, f);
  } else if (type == "Replace") {
    x.from = string_pattern(n, path, f);
    x.to = string_field(n, "content", "", path, f);
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    x.kind = K::Unicode;
    x.unicode = type == "NFC" ? icu::Normalizer2::getNFCInstance(err)
                : type == "NFD" ? icu::Normalizer2::getNFDInstance(err)
                : type == "NFKC" ? icu::Normalizer2::getNFKCInstance(err)
                                 : icu::Normalizer2::getNFKDInstance(err);
    if (U_FAILURE(err)) throw field_error(path, f, std::string("ICU: ") + u_errorName(err));
  } else if (type == "Strip") {
    x.kind = K::Strip;
    x.strip_left = n.value("strip_left", true);
    x.strip_right = n.value("strip_right", true);
  } else if (type == "Lowercase") {
    x.kind = K::Lowercase;
  } else {
    throw field_error(path, f, "normalizer '" + type + "' is not supported (Precompiled, Prepend, Replace, NFC, NFD, NFKC, NFKD, "
                                                       "Strip, Lowercase, Sequence)");
  }
  impl.normalizers.push_back(std::move(x));
}

// Metaspace's prepend scheme: "always", "first", "never", or the older add_prefix_space flag.
Impl::PreTokenizer::Prepend prepend_scheme(const nlohmann::json& o, const std::string& path, const std::string& f) {
  using P = Impl::PreTokenizer::Prepend;
  if (o.contains("prepend_scheme") && !o.at("prepend_scheme").is_null()) {
    const std::string s = string_field(o, "prepend_scheme", "always", path, f);
    if (s == "always") return P::Always;
    if (s == "first") return P::First;
    if (s == "never") return P::Never;
    throw field_error(path, f + ".prepend_scheme", "'" + s + "' is not one of always, first, never");
  }
  return o.value("add_prefix_space", true) ? P::Always : P::Never;
}

void add_pre_tokenizer(const nlohmann::json& p, const std::string& f, const std::string& path, Impl& impl) {
  if (p.is_null()) return;
  const std::string type = p.value("type", std::string());
  if (type == "Sequence") {
    for (const auto& x : p.value("pretokenizers", nlohmann::json::array())) add_pre_tokenizer(x, f + ".pretokenizers", path, impl);
  } else if (type == "WhitespaceSplit") {
    impl.pre_tokenizers.push_back(Impl::PreTokenizer{Impl::PreTokenizer::Kind::WhitespaceSplit});
  } else if (type == "Metaspace") {
    Impl::PreTokenizer m{Impl::PreTokenizer::Kind::Metaspace};
    m.replacement = string_field(p, "replacement", m.replacement, path, f);
    m.prepend = prepend_scheme(p, path, f);
    m.split = p.value("split", true);
    impl.pre_tokenizers.push_back(m);
  } else {
    throw field_error(path, f, "pre-tokenizer '" + type + "' is not supported here (Metaspace, WhitespaceSplit, Sequence)");
  }
}

void add_decoder(const nlohmann::json& d, const std::string& f, const std::string& path, Impl& impl) {
  if (d.is_null()) return;
  using K = Impl::Decoder::Kind;
  const std::string type = d.value("type", std::string());
  Impl::Decoder x{K::Fuse};
  if (type == "Sequence") {
    for (const auto& e : d.value("decoders", nlohmann::json::array())) add_decoder(e, f + ".decoders", path, impl);
    return;
  } else if (type == "Replace") {
    x.kind = K::Replace;
    x.from = string_pattern(d, path, f);
    x.to = string_field(d, "content", "", path, f);
  } else if (type == "ByteFallback") {
    x.kind = K::ByteFallback;
  } else if (type == "Fuse") {
    x.kind = K::Fuse;
  } else if (type == "Strip") {
    x.kind = K::Strip;
    x.from = string_field(d, "content", " ", path, f);
    x.start = d.value("start", size_t{0});
    x.stop = d.value("stop", size_t{0});
  } else if (type == "Metaspace") {
    x.kind = K::Metaspace;
    x.from = string_field(d, "replacement", "\xE2\x96\x81", path, f);
    x.drop_first_space = prepend_scheme(d, path, f) != Impl::PreTokenizer::Prepend::Never;
  } else {
    throw field_error(path, f, "decoder '" + type + "' is not supported here (Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence)");
  }
  impl.decoders.push_back(std::move(x));
}

// The piece table, with a piece for every id in [0, largest].
void put_piece(Impl::Model& m, int64_t id, const std::string& piece, double score, const std::string& path) {
  if (id < 0 || id >= ConfigLimits::vocab) throw field_error(path, "model.vocab", "id " + std::to_string(id) + " out of range");
  if (static_cast<size_t>(id) >= m.pieces.size()) {
    m.pieces.resize(static_cast<size_t>(id) + 1);
    m.scores.resize(static_cast<size_t>(id) + 1, 0.0);
    m.types.resize(static_cast<size_t>(id) + 1, SentencePieceModel::PieceType::Normal);
  }
  if (!m.pieces[static_cast<size_t>(id)].empty())
    throw field_error(path, "model.vocab", "id " + std::to_string(id) + " is used by '" + m.pieces[static_cast<size_t>(id)] +
                                               "' and '" + piece + "'");
  m.pieces[static_cast<size_t>(id)] = piece;
  m.scores[static_cast<size_t>(id)] = score;
}

void index_pieces(Impl::Model& m, const std::string& path) {
  for (size_t i = 0; i < m.pieces.size(); ++i) {
    if (m.pieces[i].empty()) continue;
    if (!m.lookup.emplace(m.pieces[i], static_cast<int64_t>(i)).second)
      throw field_error(path, "model.vocab", "'" + m.pieces[i] + "' appears twice");
    m.max_piece_bytes = std::max(m.max_piece_bytes, m.pieces[i].size());
  }
  m.index_prefixes();
}

// model: Unigram ({"vocab": [[piece, score], ...], "unk_id": N, "byte_fallback": bool}).
void read_unigram(const nlohmann::json& model, const std::string& path, Impl& impl, Impl::Model& m) {
  const auto& vocab = model.value("vocab", nlohmann::json());
  if (!vocab.is_array() || vocab.empty()) throw field_error(path, "model.vocab", "expected a non-empty list of [piece, score]");
  double lowest = std::numeric_limits<double>::max();
  for (size_t i = 0; i < vocab.size(); ++i) {
    const auto& e = vocab[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number() || e[0].get<std::string>().empty())
      throw field_error(path, "model.vocab[" + std::to_string(i) + "]", "expected [\"piece\", score], got " + e.dump());
    put_piece(m, static_cast<int64_t>(i), e[0].get<std::string>(), e[1].get<double>(), path);
    lowest = std::min(lowest, e[1].get<double>());
  }
  m.unk_score = lowest - 10.0;
  if (!model.contains("unk_id") || !model.at("unk_id").is_number_integer())
    throw field_error(path, "model.unk_id", "missing (a Unigram model needs an unknown piece)");
  impl.model_unk_id = model.at("unk_id").get<int64_t>();
  if (impl.model_unk_id < 0 || impl.model_unk_id >= static_cast<int64_t>(vocab.size()))
    throw field_error(path, "model.unk_id", std::to_string(impl.model_unk_id) + " is not an index of model.vocab");
  impl.algorithm = Impl::Algorithm::Unigram;
  impl.kind = "sentencepiece-unigram";
  impl.fuse_unk = true;
}

// model: BPE with byte_fallback (vocab, merges, unk_token, fuse_unk, ignore_merges).
void read_bpe(const nlohmann::json& model, const std::string& path, Impl& impl, Impl::Model& m) {
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!string_field(model, k, "", path, "model").empty()) throw field_error(path, std::string("model.") + k, "is not supported");
  if (model.contains("dropout") && model.at("dropout").is_number() && model.at("dropout").get<double>() > 0)
    throw field_error(path, "model.dropout", "BPE dropout is not supported (inference only)");
  for (const auto& [piece, id] : tokenizer_detail::read_vocab(model, path)) put_piece(m, id, piece, 0.0, path);
  index_pieces(m, path);
  const auto merges = tokenizer_detail::read_merges(model, path);
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    const auto ia = m.lookup.find(a), ib = m.lookup.find(b), ab = m.lookup.find(a + b);
    if (ia == m.lookup.end() || ib == m.lookup.end() || ab == m.lookup.end())
      throw field_error(path, "model.merges[" + std::to_string(r) + "]", "'" + a + " " + b + "': a piece is not in model.vocab");
    m.merges.emplace(std::make_pair(ia->second, ib->second), std::make_pair(static_cast<int64_t>(r), ab->second));
  }
  const std::string unk = string_field(model, "unk_token", "", path, "model");
  impl.model_unk_id = -1;
  if (!unk.empty()) {
    const auto it = m.lookup.find(unk);
    if (it == m.lookup.end()) throw field_error(path, "model.unk_token", "'" + unk + "' is not in model.vocab");
    impl.model_unk_id = it->second;
  }
  impl.algorithm = Impl::Algorithm::BpeByRank;
  impl.kind = "sentencepiece-bpe";
  impl.fuse_unk = model.value("fuse_unk", false);
  impl.ignore_merges = model.value("ignore_merges", false);
}

}  // namespace

SentencePieceTokenizer SentencePieceTokenizer::from_tokenizer_json(const std::string& path) {
  return from_tokenizer_json(read_json_file(path), path);
}

SentencePieceTokenizer SentencePieceTokenizer::from_tokenizer_json(const nlohmann::json& j, const std::string& path) {
  const auto& model = tokenizer_detail::model_section(j, path);
  auto impl = std::make_shared<Impl>();
  auto m = std::make_shared<Impl::Model>();
  // Older files leave out the type: merges make a BPE, a list vocabulary a Unigram.
  const std::string type = model.value(
      "type", std::string(model.contains("merges") ? "BPE" : model.value("vocab", nlohmann::json()).is_array() ? "Unigram" : ""));
  if (type == "Unigram") {
    read_unigram(model, path, *impl, *m);
    index_pieces(*m, path);
  } else if (type == "BPE") {
    read_bpe(model, path, *impl, *m);
  } else {
    throw field_error(path, "model.type", "'" + type + "' is not a SentencePiece-style model (BPE with byte_fallback, Unigram)");
  }
  impl->byte_fallback = model.value("byte_fallback", false);
  impl->byte_ids.fill(-1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    if (const auto it = m->lookup.find(name); it != m->lookup.end()) impl->byte_ids[static_cast<size_t>(b)] = it->second;
  }
  for (const auto& a : tokenizer_detail::read_added_tokens(j, path, true)) {
    if (static_cast<size_t>(a.id) < m->pieces.size() && !m->pieces[static_cast<size_t>(a.id)].empty() &&
        m->pieces[static_cast<size_t>(a.id)] != a.content)
      throw field_error(path, "added_tokens", "id " + std::to_string(a.id) + " is '" + m->pieces[static_cast<size_t>(a.id)] +
                                                  "' in model.vocab, '" + a.content + "' here");
    impl->added.emplace_back(a.content, a.id);
    if (a.special) impl->specials.push_back(a.id);
  }
  std::stable_sort(impl->added.begin(), impl->added.end(), [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
  if (impl->model_unk_id >= 0) impl->specials.push_back(impl->model_unk_id);
  add_normalizer(j.value("normalizer", nlohmann::json()), "normalizer", path, *impl);
  add_pre_tokenizer(j.value("pre_tokenizer", nlohmann::json()), "pre_tokenizer", path, *impl);
  add_decoder(j.value("decoder", nlohmann::json()), "decoder", path, *impl);
  impl->frame = tokenizer_detail::read_post_processor(j, path);
  impl->unk_id = impl->model_unk_id;
  impl->model = std::move(m);
  impl->index_tokens();
  return SentencePieceTokenizer(std::move(impl));
}

}  // namespace hp
