// sentencepiece's model files: ModelProto read with the wire-format reader, checked, and turned into
// a SentencePieceTokenizer that encodes as sentencepiece does; Marian's vocab.json mapping (see
// headprune/data/sentencepiece.h).
#include <algorithm>
#include <cfloat>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "headprune/io/files.h"
#include "headprune/util/protowire.h"
#include "sp_detail.h"

namespace hp {

namespace {

using PieceType = SentencePieceModel::PieceType;

SentencePieceModel::Piece read_piece(std::string_view bytes, const std::string& what) {
  ProtoReader r(bytes, what);
  SentencePieceModel::Piece p;
  while (r.next()) {
    switch (r.field()) {
      case 1: p.text = std::string(r.bytes()); break;
      case 2: p.score = r.float32(); break;
      case 3: {
        const int64_t t = r.int_value();
        if (t < 1 || t > 6) r.fail("type " + std::to_string(t) + " is not a piece type (1..6)");
        p.type = static_cast<PieceType>(t);
        break;
      }
      default: r.skip();
    }
  }
  return p;
}

void read_trainer_spec(std::string_view bytes, const std::string& what, SentencePieceModel& m) {
  ProtoReader r(bytes, what + ": trainer_spec");
  while (r.next()) {
    switch (r.field()) {
      case 3: {
        const int64_t t = r.int_value();
        if (t < 1 || t > 4) r.fail("model_type " + std::to_string(t) + " is unknown (1 UNIGRAM, 2 BPE, 3 WORD, 4 CHAR)");
        m.algorithm = static_cast<SentencePieceModel::Algorithm>(t);
        break;
      }
      case 24: m.treat_whitespace_as_suffix = r.boolean(); break;
      case 35: m.byte_fallback = r.boolean(); break;
      case 40: m.unk_id = static_cast<int32_t>(r.int_value()); break;
      case 41: m.bos_id = static_cast<int32_t>(r.int_value()); break;
      case 42: m.eos_id = static_cast<int32_t>(r.int_value()); break;
      case 43: m.pad_id = static_cast<int32_t>(r.int_value()); break;
      default: r.skip();
    }
  }
}

void read_normalizer_spec(std::string_view bytes, const std::string& what, SentencePieceModel::Normalizer& n) {
  ProtoReader r(bytes, what + ": normalizer_spec");
  while (r.next()) {
    switch (r.field()) {
      case 1: n.name = std::string(r.bytes()); break;
      case 2: n.precompiled_charsmap = std::string(r.bytes()); break;
      case 3: n.add_dummy_prefix = r.boolean(); break;
      case 4: n.remove_extra_whitespaces = r.boolean(); break;
      case 5: n.escape_whitespaces = r.boolean(); break;
      default: r.skip();
    }
  }
}

// The checks sentencepiece makes when it loads a model, and the kinds headprune does not read.
void check(const SentencePieceModel& m, const std::string& what) {
  auto bad = [&](const std::string& field, const std::string& problem) {
    throw std::runtime_error(what + ": " + field + ": " + problem);
  };
  if (m.pieces.empty()) bad("pieces", "none (not a sentencepiece model?)");
  if (m.algorithm == SentencePieceModel::Algorithm::Word || m.algorithm == SentencePieceModel::Algorithm::Char)
    bad("trainer_spec.model_type", std::string(m.algorithm == SentencePieceModel::Algorithm::Word ? "WORD" : "CHAR") +
                                       " models are not supported (UNIGRAM, BPE)");
  if (m.treat_whitespace_as_suffix) bad("trainer_spec.treat_whitespace_as_suffix", "is not supported");
  std::unordered_map<std::string_view, size_t> seen;
  int unknowns = 0, bytes = 0;
  for (size_t i = 0; i < m.pieces.size(); ++i) {
    const auto& p = m.pieces[i];
    const std::string field = "pieces[" + std::to_string(i) + "]";
    if (p.text.empty()) bad(field, "the piece is empty");
    if (const auto [it, fresh] = seen.emplace(p.text, i); !fresh)
      bad(field, "'" + p.text + "' is already pieces[" + std::to_string(it->second) + "]");
    if (p.type == PieceType::Unknown) ++unknowns;
    if (p.type == PieceType::Byte) {
      if (!m.byte_fallback) bad(field, "byte piece '" + p.text + "' in a model without byte_fallback");
      if (tokenizer_detail::byte_of_piece(p.text) < 0) bad(field, "byte piece '" + p.text + "' is not <0xXX>");
      ++bytes;
    }
  }
  if (unknowns != 1) bad("pieces", std::to_string(unknowns) + " pieces of type UNKNOWN, expected exactly one");
  if (m.byte_fallback && bytes != 256) bad("pieces", "byte_fallback with " + std::to_string(bytes) + " byte pieces, expected 256");
  const auto n = static_cast<int64_t>(m.pieces.size());
  if (m.unk_id < 0 || m.unk_id >= n || m.pieces[static_cast<size_t>(m.unk_id)].type != PieceType::Unknown)
    bad("trainer_spec.unk_id", std::to_string(m.unk_id) + " is not the UNKNOWN piece");
  for (auto [name, id] : {std::pair<const char*, int64_t>{"bos_id", m.bos_id}, {"eos_id", m.eos_id}, {"pad_id", m.pad_id}})
    if (id < -1 || id >= n) bad(std::string("trainer_spec.") + name, std::to_string(id) + " is outside [-1, " + std::to_string(n) + ")");
}

}  // namespace

SentencePieceModel SentencePieceModel::parse(std::string_view bytes, const std::string& what) {
  SentencePieceModel m;
  ProtoReader r(bytes, what);
  while (r.next()) {
    switch (r.field()) {
      case 1: m.pieces.push_back(read_piece(r.bytes(), what + ": pieces[" + std::to_string(m.pieces.size()) + "]")); break;
      case 2: read_trainer_spec(r.bytes(), what, m); break;
      case 3: read_normalizer_spec(r.bytes(), what, m.normalizer); break;
      default: r.skip();
    }
  }
  check(m, what);
  if (!m.normalizer.precompiled_charsmap.empty())
    tokenizer_detail::PrecompiledCharsmap(m.normalizer.precompiled_charsmap, what + ": normalizer_spec.precompiled_charsmap");
  return m;
}

SentencePieceModel SentencePieceModel::load(const std::string& path) {
  if (!is_file(path)) throw std::runtime_error(path + ": no such file (a sentencepiece model, tokenizer.model or *.spm)");
  return parse(read_file(path, 1ULL << 30), path);
}

SentencePieceTokenizer SentencePieceTokenizer::load(const std::string& model_path) {
  return from_model(SentencePieceModel::load(model_path), model_path);
}

SentencePieceTokenizer SentencePieceTokenizer::from_model(const SentencePieceModel& sp, const std::string& what) {
  auto impl = std::make_shared<Impl>();
  auto model = std::make_shared<Impl::Model>();
  float lowest = FLT_MAX, highest = FLT_MIN;  // over normal pieces, as sentencepiece (FLT_MIN: its starting value)
  for (const auto& p : sp.pieces) {
    model->pieces.push_back(p.text);
    model->scores.push_back(p.score);
    model->types.push_back(p.type);
    if (p.type == PieceType::Normal) lowest = std::min(lowest, p.score), highest = std::max(highest, p.score);
  }
  for (size_t i = 0; i < model->pieces.size(); ++i) {
    const auto t = model->types[i];
    if (t == PieceType::Normal || t == PieceType::UserDefined || t == PieceType::Unused) {
      model->lookup.emplace(model->pieces[i], static_cast<int64_t>(i));
      model->max_piece_bytes = std::max(model->max_piece_bytes, model->pieces[i].size());
    }
    if (t == PieceType::UserDefined) impl->user_defined.push_back(model->pieces[i]);
  }
  model->index_prefixes();
  model->unk_score = (lowest == FLT_MAX ? 0.0f : lowest) - 10.0f;
  model->user_defined_bonus = highest;
  model->float_scores = true;
  std::sort(impl->user_defined.begin(), impl->user_defined.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  impl->algorithm = sp.algorithm == SentencePieceModel::Algorithm::Bpe ? Impl::Algorithm::BpeByScore : Impl::Algorithm::Unigram;
  impl->kind = sp.algorithm == SentencePieceModel::Algorithm::Bpe ? "sentencepiece-bpe" : "sentencepiece-unigram";
  impl->unk_id = impl->model_unk_id = sp.unk_id;
  impl->byte_fallback = sp.byte_fallback;
  impl->fuse_unk = true;
  impl->byte_ids.fill(-1);
  for (size_t i = 0; i < sp.pieces.size(); ++i) {
    const auto& p = sp.pieces[i];
    if (p.type == PieceType::Byte) impl->byte_ids[static_cast<size_t>(tokenizer_detail::byte_of_piece(p.text))] = static_cast<int64_t>(i);
    if (p.type == PieceType::Control || p.type == PieceType::Unknown) impl->specials.push_back(static_cast<int64_t>(i));
  }
  Impl::Normalizer n{Impl::Normalizer::Kind::SentencePiece};
  if (!sp.normalizer.precompiled_charsmap.empty())
    n.charsmap = std::make_shared<tokenizer_detail::PrecompiledCharsmap>(sp.normalizer.precompiled_charsmap,
                                                                         what + ": normalizer_spec.precompiled_charsmap");
  n.add_dummy_prefix = sp.normalizer.add_dummy_prefix;
  n.remove_extra_whitespaces = sp.normalizer.remove_extra_whitespaces;
  n.escape_whitespaces = sp.normalizer.escape_whitespaces;
  impl->normalizers.push_back(n);
  Impl::Decoder d{Impl::Decoder::Kind::SentencePiece};
  d.drop_first_space = sp.normalizer.add_dummy_prefix || sp.normalizer.remove_extra_whitespaces;
  impl->decoders.push_back(d);
  impl->model = std::move(model);
  impl->index_tokens();
  return SentencePieceTokenizer(std::move(impl));
}

SentencePieceTokenizer SentencePieceTokenizer::with_vocabulary(const std::string& vocab_json) const {
  const nlohmann::json j = read_json_file(vocab_json);
  if (!j.is_object()) throw std::runtime_error(vocab_json + ": expected a JSON object {piece: id}");
  auto impl = std::make_shared<Impl>(*impl_);
  impl->tokens.clear();
  impl->ids.clear();
  // Ids are bounded by the number of entries before anything is allocated for them: n distinct ids
  // below n are 0..n-1, as every Marian vocab.json has them (an id of 1e8 would otherwise cost GBs).
  const auto entries = static_cast<int64_t>(j.size());
  impl->tokens.assign(j.size(), std::string());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_number_integer() || (it.value().is_number_unsigned() && it.value().get<uint64_t>() >= static_cast<uint64_t>(entries)) ||
        it.value().get<int64_t>() < 0 || it.value().get<int64_t>() >= entries)
      throw std::runtime_error(vocab_json + ": the id of '" + it.key() + "' is " + it.value().dump() +
                               ", expected an integer in [0, " + std::to_string(entries) + ") (below the number of entries)");
    const auto id = it.value().get<int64_t>();
    if (!impl->tokens[static_cast<size_t>(id)].empty())
      throw std::runtime_error(vocab_json + ": id " + std::to_string(id) + " is used by '" +
                               impl->tokens[static_cast<size_t>(id)] + "' and '" + it.key() + "'");
    impl->tokens[static_cast<size_t>(id)] = it.key();
    impl->ids.emplace(it.key(), id);
  }
  auto need = [&](const char* piece) {
    const auto it = impl->ids.find(piece);
    if (it == impl->ids.end()) throw std::runtime_error(vocab_json + ": has no '" + std::string(piece) + "'");
    return it->second;
  };
  const int64_t unk = need("<unk>"), eos = need("</s>");
  impl->ids_by_text = true;
  impl->unk_id = unk;
  impl->specials = {unk, eos};
  if (const auto pad = impl->ids.find("<pad>"); pad != impl->ids.end()) impl->specials.push_back(pad->second);
  // MarianTokenizer finds its special tokens in the text before sentencepiece sees it.
  impl->added.clear();
  for (const int64_t id : impl->specials) impl->added.emplace_back(impl->tokens[static_cast<size_t>(id)], id);
  std::stable_sort(impl->added.begin(), impl->added.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::sort(impl->specials.begin(), impl->specials.end());
  impl->frame = SpecialFrame{{}, {eos}};
  impl->decoders.push_back(Impl::Decoder{Impl::Decoder::Kind::Trim});  // MarianTokenizer strips what it decodes
  return SentencePieceTokenizer(std::move(impl));
}

}  // namespace hp
