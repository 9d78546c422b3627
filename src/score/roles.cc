// Head roles: word-level pointers from attention maps and the three role classifiers (see header).
#include "headprune/score/roles.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>

#include "headprune/data/dataset.h"

namespace hp {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The most frequent value of a count map (ties: the value closest to 0, then the smaller).
std::pair<int64_t, int64_t> mode(const std::map<int64_t, int64_t>& counts) {
  std::pair<int64_t, int64_t> best{0, -1};
  for (const auto& [v, n] : counts) {
    const bool better = n > best.second || (n == best.second && std::llabs(v) < std::llabs(best.first));
    if (better) best = {v, n};
  }
  return best;
}

}  // namespace

std::vector<std::vector<int64_t>> word_pointers(const torch::Tensor& attention,
                                                const std::vector<std::pair<int64_t, int64_t>>& word_spans) {
  if (attention.dim() != 3) throw std::invalid_argument("word_pointers: attention must be [H, T, S]");
  const int64_t h = attention.size(0), t = attention.size(1), s = attention.size(2);
  const auto w = static_cast<int64_t>(word_spans.size());
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(h));
  if (w == 0) return out;
  auto firsts = torch::empty({w}, torch::kLong);
  auto to_word = torch::zeros({s, w}, torch::kFloat);
  for (int64_t j = 0; j < w; ++j) {
    const auto [b, e] = word_spans[static_cast<size_t>(j)];
    if (b < 0 || e <= b || e > std::min(t, s))
      throw std::invalid_argument("word_pointers: word " + std::to_string(j) + " spans [" + std::to_string(b) + ", " +
                                  std::to_string(e) + "), outside the attention map");
    firsts[j] = b;
    to_word.slice(0, b, e).select(1, j).fill_(1.0f);
  }
  auto rows = attention.to(torch::kFloat).index_select(1, firsts.to(attention.device()));  // [H, W, S]
  auto best = torch::matmul(rows, to_word.to(rows.device())).argmax(-1).to(torch::kCPU).contiguous();  // [H, W]
  auto a = best.accessor<int64_t, 2>();
  for (int64_t k = 0; k < h; ++k) {
    out[k].resize(static_cast<size_t>(w));
    for (int64_t i = 0; i < w; ++i) out[k][i] = a[k][i];
  }
  return out;
}

PositionalRole classify_positional(const Pointers& p, const RoleOptions& o) {
  std::map<int64_t, int64_t> offsets;
  int64_t n = 0;
  for (const auto& sent : p)
    for (size_t i = 0; i < sent.size(); ++i) {
      ++offsets[sent[i] - static_cast<int64_t>(i)];
      ++n;
    }
  PositionalRole r;
  if (n == 0) return r;
  const auto [off, count] = mode(offsets);
  r.offset = off;
  r.share = static_cast<double>(count) / static_cast<double>(n);
  r.is_role = r.share >= o.positional_share;
  return r;
}

std::vector<RelationScore> score_relations(const Pointers& p, const std::vector<UdSentence>& sentences,
                                           const RoleOptions& o) {
  if (p.size() != sentences.size())
    throw std::invalid_argument("score_relations: pointers for " + std::to_string(p.size()) + " sentences, " +
                                std::to_string(sentences.size()) + " sentences");
  std::vector<RelationScore> out;
  for (const auto& rel : o.relations) {
    for (const bool to_head : {true, false}) {
      RelationScore r;
      r.relation = rel;
      r.direction = to_head ? "dep->head" : "head->dep";
      std::map<int64_t, int64_t> offsets;
      int64_t hits = 0;
      for (size_t s = 0; s < sentences.size(); ++s) {
        const auto& words = sentences[s].words;
        if (p[s].size() != words.size())
          throw std::invalid_argument("score_relations: sentence " + std::to_string(s) + " has " +
                                      std::to_string(words.size()) + " words but " + std::to_string(p[s].size()) +
                                      " pointers");
        for (size_t d = 0; d < words.size(); ++d) {
          if (words[d].head == 0 || words[d].deprel != rel) continue;
          const int64_t dep = static_cast<int64_t>(d), head = words[d].head - 1;
          const int64_t from = to_head ? dep : head, to = to_head ? head : dep;
          ++r.pairs;
          ++offsets[to - from];
          hits += p[s][static_cast<size_t>(from)] == to;
        }
      }
      if (r.pairs > 0) {
        const auto [off, count] = mode(offsets);
        r.baseline_offset = off;
        r.baseline = static_cast<double>(count) / static_cast<double>(r.pairs);
        r.accuracy = static_cast<double>(hits) / static_cast<double>(r.pairs);
      }
      out.push_back(r);
    }
  }
  return out;
}

RareRole classify_rare(const Pointers& p, const std::vector<int64_t>& rarest, const RoleOptions& o) {
  if (p.size() != rarest.size()) throw std::invalid_argument("classify_rare: one rarest word per sentence expected");
  int64_t hits = 0, n = 0;
  for (size_t s = 0; s < p.size(); ++s)
    for (auto ptr : p[s]) {
      hits += ptr == rarest[s];
      ++n;
    }
  RareRole r;
  r.share = n > 0 ? static_cast<double>(hits) / static_cast<double>(n) : 0.0;
  r.is_role = r.share > o.rare_share;
  return r;
}

HeadRoles classify_head(const HeadId& head, const Pointers& p, const std::vector<UdSentence>& sentences,
                        const std::vector<int64_t>& rarest, const RoleOptions& o) {
  HeadRoles r;
  r.head = head;
  r.positional = classify_positional(p, o);
  r.relations = score_relations(p, sentences, o);
  for (const auto& s : r.relations)
    if (s.pairs > 0 && s.accuracy >= s.baseline + o.syntactic_margin) r.syntactic = true;
  r.rare = classify_rare(p, rarest, o);
  return r;
}

nlohmann::json HeadRoles::to_json() const {
  nlohmann::json rel = nlohmann::json::array();
  for (const auto& s : relations)
    rel.push_back({{"relation", s.relation},
                   {"direction", s.direction},
                   {"pairs", s.pairs},
                   {"accuracy", s.accuracy},
                   {"baseline", s.baseline},
                   {"baseline_offset", s.baseline_offset}});
  return {{"head", to_string(head)},
          {"positional", positional.is_role},
          {"positional_offset", positional.offset},
          {"positional_share", positional.share},
          {"syntactic", syntactic},
          {"rare", rare.is_role},
          {"rare_share", rare.share},
          {"relations", rel}};
}

std::unordered_map<std::string, int64_t> word_frequencies(const std::vector<UdSentence>& corpus) {
  std::unordered_map<std::string, int64_t> f;
  for (const auto& s : corpus)
    for (const auto& w : s.words) ++f[lower(w.form)];
  return f;
}

std::vector<int64_t> rarest_words(const std::vector<UdSentence>& sentences,
                                  const std::unordered_map<std::string, int64_t>& freq) {
  std::vector<int64_t> out;
  for (const auto& s : sentences) {
    int64_t best = 0, best_f = -1;
    for (size_t i = 0; i < s.words.size(); ++i) {
      const auto it = freq.find(lower(s.words[i].form));
      const int64_t f = it == freq.end() ? 0 : it->second;
      if (best_f < 0 || f < best_f) {
        best = static_cast<int64_t>(i);
        best_f = f;
      }
    }
    out.push_back(best);
  }
  return out;
}

ModelPointers head_pointers(TransformerImpl& model, const Tokenizer& tok, const std::vector<UdSentence>& sentences,
                            int64_t batch_size, const std::function<void(int64_t, int64_t)>& progress) {
  const ModelConfig& cfg = model.config();
  ModelPointers mp;
  mp.type = cfg.arch == Arch::DecoderLM ? AttnType::DecoderSelf : AttnType::EncoderSelf;
  const bool lead_bos = cfg.arch != Arch::EncoderDecoder, trail_eos = cfg.arch != Arch::DecoderLM;
  struct Item {
    Example ex;
    std::vector<std::pair<int64_t, int64_t>> spans;
    size_t sentence;
  };
  std::vector<Item> items;
  for (size_t s = 0; s < sentences.size(); ++s) {
    Item it;
    it.sentence = s;
    if (lead_bos) it.ex.src.push_back(tok.specials().bos);
    for (const auto& w : sentences[s].words) {
      auto ids = tok.encode(w.form);
      if (ids.empty()) ids.push_back(tok.specials().unk);
      const auto b = static_cast<int64_t>(it.ex.src.size());
      it.ex.src.insert(it.ex.src.end(), ids.begin(), ids.end());
      it.spans.emplace_back(b, static_cast<int64_t>(it.ex.src.size()));
    }
    if (trail_eos) it.ex.src.push_back(tok.specials().eos);
    if (static_cast<int64_t>(it.ex.src.size()) > cfg.max_positions) continue;
    if (cfg.arch == Arch::EncoderClassifier) {
      it.ex.segments.assign(it.ex.src.size(), 0);
      it.ex.label = 0;
    }
    if (cfg.arch == Arch::EncoderDecoder) it.ex.tgt = {tok.specials().bos, tok.specials().eos};
    items.push_back(std::move(it));
  }
  for (const auto& it : items) mp.sentences.push_back(sentences[it.sentence]);
  const auto& layers = cfg.heads(mp.type);
  for (size_t l = 0; l < layers.size(); ++l)
    for (auto h : layers[l]) mp.heads[{mp.type, static_cast<int64_t>(l), h}].resize(items.size());

  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  ForwardOptions fo;
  fo.return_attention = true;
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t start = 0; start < n; start += batch_size) {
    const int64_t end = std::min(n, start + batch_size);
    std::vector<const Example*> ex;
    for (int64_t i = start; i < end; ++i) ex.push_back(&items[static_cast<size_t>(i)].ex);
    auto out = model.forward(collate(ex, cfg.arch, cfg.pad_id).to(model.parameters().front().device()), fo);
    const auto& maps = out.attention.at(mp.type);
    for (size_t l = 0; l < layers.size(); ++l) {
      if (layers[l].empty() || !maps[l].defined()) continue;
      for (int64_t i = start; i < end; ++i) {
        const auto ptr = word_pointers(maps[l][i - start], items[static_cast<size_t>(i)].spans);
        for (size_t k = 0; k < layers[l].size(); ++k)
          mp.heads[{mp.type, static_cast<int64_t>(l), layers[l][k]}][static_cast<size_t>(i)] = ptr[k];
      }
    }
    if (progress) progress(end, n);
  }
  model.train(was_training);
  return mp;
}

}  // namespace hp
