// A head-importance map: one score per head, keyed by original head id (attention type, layer,
// head), with optional extra per-head columns (e.g. an ablation's p-value) and method metadata.
// Plain C++ (no LibTorch): maps are saved, loaded, normalized, compared and printed here.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/config.h"
#include "headprune/util/names.h"

namespace hp {

enum class Normalization { None, Layer, Global, Rank };
std::string to_string(Normalization n);
Normalization parse_normalization(const std::string& s);  // none | layer | global | rank
const NameTable<Normalization>& normalization_names();

// What a map scores: query heads (HeadId.head is the original query head id), or key/value groups of
// grouped-query attention (HeadId.head is the original key/value head id; the group is that key/value
// head and every query head reading it).
enum class ScoreUnit { Head, KvGroup };
std::string to_string(ScoreUnit u);
ScoreUnit parse_score_unit(const std::string& s);  // head | kv_group (also "group")
const NameTable<ScoreUnit>& score_unit_names();

struct HeadScores {
  std::string method;               // e.g. "gradient"
  ScoreUnit unit = ScoreUnit::Head;
  bool higher_is_important = true;  // orientation: entropy, for one, marks focused (low) heads
  Normalization normalization = Normalization::None;
  std::map<HeadId, double> scores;
  std::map<std::string, std::map<HeadId, double>> columns;  // extra per-head values
  nlohmann::json info = nlohmann::json::object();           // cost, base metric, per-layer summaries...

  bool has(const HeadId& h) const { return scores.count(h) > 0; }
  double at(const HeadId& h) const;  // std::invalid_argument naming the head if absent
  // Heads sorted from least to most important (ties broken by head id), for pruning.
  std::vector<HeadId> ascending_importance() const;
  std::vector<AttnType> attn_types() const;  // types present, in canonical order

  nlohmann::json to_json() const;
  static HeadScores from_json(const nlohmann::json& j);  // strict; errors name the field
};

// A query-head map summed (or, with mean = true, averaged) over the query heads of each key/value
// group the config keeps: the group map for scores that add up over heads. Columns are dropped.
HeadScores aggregate_groups(const HeadScores& heads, const ModelConfig& cfg, bool mean);

// Michel et al.: divide each layer's scores by their L2 norm (a layer of zeros stays zero).
// Global: min-max scaling to [0, 1] over all heads (Michel's code's normalize_global_importance).
// Rank: each head's rank within its layer, k/n from the least important (1/n) to the most (1), higher
// then more important: a global ranking takes the same share of every layer (for scores that mean
// something only within a layer; Minitron prunes every layer alike).
// Extra columns are left as they are.
void normalize(HeadScores& s, Normalization n);

// Several maps (e.g. one per method) in one file: {"maps": [...], plus any metadata}.
nlohmann::json maps_to_json(const std::vector<HeadScores>& maps);
std::vector<HeadScores> maps_from_json(const nlohmann::json& j, const std::string& what);
std::vector<HeadScores> read_maps(const std::string& path);  // errors name the path
// Long-format CSV, one row per (method, head): method,attn_type,layer,head,score,<columns...>.
std::string maps_to_csv(const std::vector<HeadScores>& maps);

// Compact terminal heat map: per attention type and layer one row of shaded cells and the
// scores themselves, shading relative to the map's range and orientation (darker = more
// important); heads absent from the map (removed) show as '.'.
void print_heat_map(std::ostream& out, const HeadScores& s, const ModelConfig& cfg);

struct Agreement {
  int64_t n = 0;  // heads present in both maps
  double spearman = 0, pearson = 0;
};
// Correlation over the heads both maps have (optionally only one attention type). Spearman uses
// average ranks for ties; orientation is ignored (raw scores are compared). Fewer than two
// common heads, or a constant map, give 0.
Agreement agreement(const HeadScores& a, const HeadScores& b, const AttnType* only = nullptr);

double pearson(const std::vector<double>& x, const std::vector<double>& y);
double spearman(const std::vector<double>& x, const std::vector<double>& y);
std::vector<double> average_ranks(const std::vector<double>& x);  // 1-based, ties averaged

}  // namespace hp
