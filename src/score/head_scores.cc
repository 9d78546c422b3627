// Head-importance maps: normalization, files, heat maps, correlation (see header).
#include "headprune/score/head_scores.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>

#include "headprune/io/files.h"
#include "headprune/io/formats.h"
#include "headprune/util/json_fields.h"

namespace hp {

const NameTable<Normalization>& normalization_names() {
  static const NameTable<Normalization> t{"normalization",
                                          {{Normalization::None, {"none"}},
                                           {Normalization::Layer, {"layer"}},
                                           {Normalization::Global, {"global"}},
                                           {Normalization::Rank, {"rank"}}}};
  return t;
}
std::string to_string(Normalization n) { return normalization_names().name(n); }
Normalization parse_normalization(const std::string& s) { return normalization_names().parse(s); }

double HeadScores::at(const HeadId& h) const {
  auto it = scores.find(h);
  if (it == scores.end()) throw std::invalid_argument("score map '" + method + "' has no head " + to_string(h));
  return it->second;
}

std::vector<HeadId> HeadScores::ascending_importance() const {
  std::vector<std::pair<double, HeadId>> v;
  for (const auto& [h, s] : scores) v.push_back({higher_is_important ? s : -s, h});
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return a.second < b.second;
  });
  std::vector<HeadId> out;
  for (const auto& p : v) out.push_back(p.second);
  return out;
}

std::vector<AttnType> HeadScores::attn_types() const {
  std::set<AttnType> seen;
  for (const auto& kv : scores) seen.insert(kv.first.type);
  std::vector<AttnType> out;
  for (AttnType t : kAllAttnTypes)
    if (seen.count(t)) out.push_back(t);
  return out;
}

const NameTable<ScoreUnit>& score_unit_names() {
  static const NameTable<ScoreUnit> t{"score unit", {{ScoreUnit::Head, {"head"}}, {ScoreUnit::KvGroup, {"kv_group", "group"}}}};
  return t;
}
std::string to_string(ScoreUnit u) { return score_unit_names().name(u); }
ScoreUnit parse_score_unit(const std::string& s) { return score_unit_names().parse(s); }

HeadScores aggregate_groups(const HeadScores& heads, const ModelConfig& cfg, bool mean) {
  if (heads.unit != ScoreUnit::Head) throw std::invalid_argument("aggregate_groups: the map already scores groups");
  HeadScores g;
  g.method = heads.method;
  g.unit = ScoreUnit::KvGroup;
  g.higher_is_important = heads.higher_is_important;
  g.normalization = heads.normalization;
  g.info = heads.info;
  g.info["group_rule"] = mean ? "mean over the group's query heads" : "sum over the group's query heads";
  const int64_t R = cfg.n_heads / cfg.effective_kv_heads();
  std::map<HeadId, int64_t> n;
  for (const auto& [h, v] : heads.scores) {
    const HeadId group{h.type, h.layer, h.head / R};
    g.scores[group] += v;
    ++n[group];
  }
  if (mean)
    for (auto& [h, v] : g.scores) v /= static_cast<double>(n.at(h));
  return g;
}

nlohmann::json HeadScores::to_json() const {
  nlohmann::json heads = nlohmann::json::array();
  for (const auto& [h, s] : scores) {
    nlohmann::json row = {{"attn_type", to_string(h.type)}, {"layer", h.layer}, {"head", h.head}, {"score", s}};
    for (const auto& [name, col] : columns) {
      auto it = col.find(h);
      if (it != col.end()) row[name] = it->second;
    }
    heads.push_back(row);
  }
  nlohmann::json j = {{"method", method},
          {"higher_is_important", higher_is_important},
          {"normalization", to_string(normalization)},
          {"info", info},
          {"heads", heads}};
  if (unit != ScoreUnit::Head) j["unit"] = to_string(unit);
  return j;
}

HeadScores HeadScores::from_json(const nlohmann::json& j) {
  const JsonStyle style{"field", "is missing", JsonStyle::Nulls::Invalid, JsonStyle::Error::InvalidArgument};
  const JsonFields f(j, "score map", style);
  HeadScores s;
  s.method = f.req_str("method");
  s.higher_is_important = f.opt_bool("higher_is_important", true);
  s.unit = parse_score_unit(f.opt_str("unit", "head"));
  s.normalization = parse_normalization(f.opt_str("normalization", "none"));
  if (f.has("info")) s.info = f.at("info");
  if (!f.at("heads").is_array()) f.fail("heads", "must be an array");
  for (const auto& row_json : f.at("heads")) {
    const JsonFields row(row_json, "score map: heads[]", style);
    const HeadId h{parse_attn_type(row.req_str("attn_type")), row.req_int("layer"), row.req_int("head")};
    if (s.scores.count(h)) f.fail("heads", "head " + to_string(h) + " appears twice");
    s.scores[h] = row.req_num("score");
    for (auto it = row_json.begin(); it != row_json.end(); ++it) {
      const std::string& k = it.key();
      if (k == "attn_type" || k == "layer" || k == "head" || k == "score") continue;
      s.columns[k][h] = row.req_num(k);  // a further column: a number per head
    }
  }
  return s;
}

void normalize(HeadScores& s, Normalization n) {
  if (n == Normalization::Layer) {
    std::map<std::pair<AttnType, int64_t>, double> sq;
    for (const auto& [h, v] : s.scores) sq[{h.type, h.layer}] += v * v;
    for (auto& [h, v] : s.scores) {
      const double norm = std::sqrt(sq[{h.type, h.layer}]);
      if (norm > 0) v /= norm;
    }
  } else if (n == Normalization::Global && !s.scores.empty()) {
    double lo = s.scores.begin()->second, hi = lo;
    for (const auto& kv : s.scores) {
      lo = std::min(lo, kv.second);
      hi = std::max(hi, kv.second);
    }
    for (auto& kv : s.scores) kv.second = hi > lo ? (kv.second - lo) / (hi - lo) : 0.0;
  } else if (n == Normalization::Rank) {
    // Each layer's heads, least important first (orientation and ties as ascending_importance), scored
    // k/n for the k-th of n: higher is then more important, and a global ranking takes the same share
    // of every layer.
    std::map<std::pair<AttnType, int64_t>, std::vector<HeadId>> order;
    for (const auto& h : s.ascending_importance()) order[{h.type, h.layer}].push_back(h);
    for (const auto& [layer, heads] : order)
      for (size_t k = 0; k < heads.size(); ++k)
        s.scores[heads[k]] = static_cast<double>(k + 1) / static_cast<double>(heads.size());
    s.higher_is_important = true;
  }
  if (n != Normalization::None) s.normalization = n;
}

nlohmann::json maps_to_json(const std::vector<HeadScores>& maps) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& m : maps) arr.push_back(m.to_json());
  nlohmann::json j = {{"maps", arr}};
  stamp_format(j, ResultKind::Importance);
  return j;
}

std::vector<HeadScores> maps_from_json(const nlohmann::json& j, const std::string& what) {
  try {
    std::vector<HeadScores> out;
    if (j.is_object() && j.contains("format")) check_result(j, ResultKind::Importance, what);
    if (j.is_object() && j.contains("maps")) {
      if (!j.at("maps").is_array()) throw std::invalid_argument("'maps' must be an array");
      for (const auto& m : j.at("maps")) out.push_back(HeadScores::from_json(m));
    } else {
      out.push_back(HeadScores::from_json(j));  // a single map
    }
    return out;
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(what + ": " + e.what());
  }
}

std::vector<HeadScores> read_maps(const std::string& path) {
  const auto hash = path.find('#');  // PATH#/pointer: a map file kept inside a larger JSON
  return maps_from_json(hash == std::string::npos ? read_json_file(path) : read_result(path, ResultKind::Importance), path);
}

std::string maps_to_csv(const std::vector<HeadScores>& maps) {
  std::set<std::string> names;
  for (const auto& m : maps)
    for (const auto& c : m.columns) names.insert(c.first);
  std::ostringstream o;
  o << std::setprecision(10);
  o << "method,attn_type,layer,head,score";
  for (const auto& n : names) o << "," << n;
  o << "\n";
  for (const auto& m : maps) {
    for (const auto& [h, s] : m.scores) {
      o << m.method << (m.unit == ScoreUnit::KvGroup ? ":kv_group" : "") << "," << to_string(h.type) << "," << h.layer << "," << h.head << "," << s;
      for (const auto& n : names) {
        o << ",";
        auto c = m.columns.find(n);
        if (c != m.columns.end()) {
          auto it = c->second.find(h);
          if (it != c->second.end()) o << it->second;
        }
      }
      o << "\n";
    }
  }
  return o.str();
}

void print_heat_map(std::ostream& out, const HeadScores& s, const ModelConfig& cfg) {
  static const char* kShades[] = {"  ", "░░", "▒▒", "▓▓", "██"};
  if (s.scores.empty()) {
    out << s.method << ": no heads\n";
    return;
  }
  double lo = s.scores.begin()->second, hi = lo;
  for (const auto& kv : s.scores) {
    lo = std::min(lo, kv.second);
    hi = std::max(hi, kv.second);
  }
  const bool groups = s.unit == ScoreUnit::KvGroup;
  out << s.method << (groups ? " per key/value group" : "") << " ("
      << (s.normalization == Normalization::None ? "raw" : to_string(s.normalization) + "-normalized")
      << ", darker = " << (s.higher_is_important ? "higher" : "lower") << " = more important; range "
      << std::setprecision(3) << lo << " .. " << hi << ")\n";
  for (AttnType t : s.attn_types()) {
    out << "  " << to_string(t) << "\n";
    for (int64_t l = 0; l < cfg.n_layers(t); ++l) {
      std::ostringstream cells, nums;
      nums << std::setprecision(3);  // 3 significant digits: ablation deltas can be tiny
      for (int64_t h = 0; h < (groups ? cfg.effective_kv_heads() : cfg.n_heads); ++h) {
        auto it = s.scores.find({t, l, h});
        if (it == s.scores.end()) {
          cells << " .";
          nums << "         .";
          continue;
        }
        double f = hi > lo ? (it->second - lo) / (hi - lo) : 1.0;
        if (!s.higher_is_important) f = 1.0 - f;
        cells << kShades[std::clamp(static_cast<int>(f * 4.999), 0, 4)];
        nums << std::setw(10) << it->second;
      }
      out << "    L" << std::left << std::setw(3) << l << std::right << "|" << cells.str() << "|" << nums.str() << "\n";
    }
  }
}

std::vector<double> average_ranks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double avg = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) r[order[k]] = avg;
    i = j + 1;
  }
  return r;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) throw std::invalid_argument("pearson: sizes differ");
  const size_t n = x.size();
  if (n < 2) return 0.0;
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(n);
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0.0;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  return pearson(average_ranks(x), average_ranks(y));
}

Agreement agreement(const HeadScores& a, const HeadScores& b, const AttnType* only) {
  std::vector<double> x, y;
  for (const auto& [h, v] : a.scores) {
    if (only && h.type != *only) continue;
    auto it = b.scores.find(h);
    if (it == b.scores.end()) continue;
    x.push_back(v);
    y.push_back(it->second);
  }
  Agreement r;
  r.n = static_cast<int64_t>(x.size());
  r.pearson = pearson(x, y);
  r.spearman = spearman(x, y);
  return r;
}

}  // namespace hp
