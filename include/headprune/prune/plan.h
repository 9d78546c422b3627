// Pruning plans: which heads to prune (by original id), how they were chosen, and the
// strategies that build them. Plain C++ (no LibTorch): plans are built from a config and, for
// score-based strategies, a HeadScores map; applying one to a model is the core's masking
// (TransformerImpl::mask_heads) or physical removal (remove_heads).
//
// Strategies:
//   by score   least important first (HeadScores orientation), globally or per layer, to a
//              target fraction or count, keeping at least `min_per_layer` heads in every layer;
//   random     Budhraja et al.: uniformly at random among the heads of the eligible layers,
//              seeded; layer strategies (per attention type, L layers, layer l):
//                uniform            every layer;
//                avoid_middle       not the middle third: l < floor(L/3) or l >= L - floor(L/3);
//                avoid_consecutive  every other layer (l even), so no two pruned layers touch;
//                top                the upper half, l >= L/2;
//                bottom             the lower half, l < ceil(L/2);
//   layers     whole attention layers;
//   manual     a list of heads ("TYPE:LAYER:HEAD", or HF's {"layer": [heads]} for one type).
// Targets are fractions of the heads the model keeps now (or of the eligible heads' types when
// a strategy is restricted to some attention types), rounded to the nearest count.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/config.h"
#include "headprune/score/head_scores.h"

namespace hp {

struct PruningPlan {
  std::vector<HeadId> heads;  // sorted, unique
  std::string strategy;       // e.g. "score:gradient", "random:avoid_middle", "layers", "manual"
  nlohmann::json info = nlohmann::json::object();

  nlohmann::json to_json() const;
  // Strict: unknown head names, duplicate heads or a missing "heads" field are errors naming
  // `what` (e.g. the file).
  static PruningPlan from_json(const nlohmann::json& j, const std::string& what = "plan");
};

void save_plan(const std::string& path, const PruningPlan& plan);  // atomic
PruningPlan read_plan(const std::string& path);                    // errors name the path

// Checks a plan against a model: attention types the model has, layers and heads in range,
// every head still kept (not already removed). Pruning whole layers is allowed; pruning every
// head of the model is too (the model still runs: every attention is skipped).
void validate_plan(const PruningPlan& plan, const ModelConfig& cfg);

// How many heads: exactly one of fraction (in [0, 1]) or count (>= 0).
struct PruneTarget {
  std::optional<double> fraction;
  std::optional<int64_t> count;
  // Resolves against the number of candidate heads; throws std::invalid_argument for a
  // fraction outside [0, 1], a negative count, or a count above `available`.
  int64_t resolve(int64_t available, const std::string& what) const;
};
PruneTarget parse_target(const std::string& s);  // "0.3", "30%" (fractions) or "12" (count)

struct ScorePlanOptions {
  PruneTarget target;
  bool per_layer = false;     // the fraction of each layer (rounded per layer) instead of globally
  int64_t min_per_layer = 0;  // global ranking: never leave a layer with fewer heads than this
  std::vector<AttnType> only_types;  // restrict to these attention types (empty = all)
  std::vector<HeadId> exclude;       // heads that may not be chosen (e.g. already masked)
};
PruningPlan plan_by_score(const HeadScores& scores, const ModelConfig& cfg, const ScorePlanOptions& opts);

// Grouped-query attention: what a plan removes at a time.
//   head      query heads, anywhere (a key/value head goes when its last query head does);
//   group     whole key/value groups (the key/value head and every query head reading it), chosen by
//             a group map (ScoreUnit::KvGroup); targets count groups;
//   balanced  query heads, the same number from every group of a layer, so each key/value head
//             serves as many query heads as every other one of its layer (what llama.cpp's GGUF can
//             express: per-layer head_count and head_count_kv); targets count query heads and are
//             met in steps of one head per group of a layer, never overshot.
enum class PlanUnit { Head, KvGroup, Balanced };  // KvGroup: as ScoreUnit::KvGroup (whole key/value groups)
std::string to_string(PlanUnit u);
PlanUnit parse_plan_unit(const std::string& s);
const NameTable<PlanUnit>& plan_unit_names();

// Whole groups by a group map, least important first (per_layer: that fraction of each layer's groups),
// keeping min_per_layer query heads per layer.
PruningPlan plan_groups_by_score(const HeadScores& groups, const ModelConfig& cfg, const ScorePlanOptions& opts);
// Balanced query heads by a head map: a layer gives up its groups' least important remaining heads one
// "slice" (one head per group) at a time; the slice with the least summed importance goes first.
// A layer whose groups keep different numbers of heads is std::invalid_argument.
PruningPlan plan_balanced_by_score(const HeadScores& heads, const ModelConfig& cfg, const ScorePlanOptions& opts);

// The shape of a plan's result. per_layer: any head count in any layer (GGUF's deci, ONNX and
// headprune's own checkpoint hold it). uniform: every layer of a stack keeps the same number of
// key/value groups and every kept group the same number of query heads — an ordinary smaller model
// that HF's configs (num_attention_heads, num_key_value_heads, head_dim) and llama.cpp's own
// architectures say (io/hf.h's native layout).
enum class PlanShape { PerLayer, Uniform };
std::string to_string(PlanShape s);
PlanShape parse_plan_shape(const std::string& s);  // "per-layer" (or per_layer), "uniform"

// A uniform plan by a query-head map: for each stack (attention type), a shape (groups kept g, query
// heads kept per group r) applied to every layer — in each layer the r most important heads of each
// group, then the g groups whose kept heads sum to the most importance; the heads that must go
// together are judged by their summed importance. Of the shapes of all stacks together, the one that
// removes the most heads without passing the target (a count of query heads, or a fraction of those
// kept), the least importance at a tie. The model's kept heads must already be uniform (masked heads
// excluded); min_per_layer bounds g * r; per_layer targets are std::invalid_argument.
// kept_per_layer (by stack): the heads every layer of that stack keeps (g * r) instead of a target; the
// shape (g, r) and the heads still chosen by the scores.
PruningPlan plan_uniform_by_score(const HeadScores& heads, const ModelConfig& cfg, const ScorePlanOptions& opts,
                                  const std::map<AttnType, int64_t>* kept_per_layer = nullptr);

// A uniform plan's heads kept per layer, by stack, for a number of heads to remove, before any score is
// known (gates: the count each layer's gates are trained to keep): of the shapes (g groups of r query
// heads, g * r >= min_per_layer) of all stacks together, the combination that removes the most heads
// without passing `target_removed`, the stacks' kept fractions as even as possible at a tie. The
// model's heads must be uniform already.
std::map<AttnType, int64_t> uniform_kept_per_layer(const ModelConfig& cfg, int64_t target_removed, int64_t min_per_layer);
// The heads a model keeps when every layer of each stack keeps its count.
int64_t uniform_heads_kept(const ModelConfig& cfg, const std::map<AttnType, int64_t>& kept_per_layer);

// Which layers random pruning may take heads from (Budhraja et al.'s "layer strategies";
// `--layer-strategy` on the command line, "layer_strategy" in a plan's info).
enum class LayerChoice { Uniform, AvoidMiddle, AvoidConsecutive, Top, Bottom };
std::string to_string(LayerChoice s);
LayerChoice parse_layer_choice(const std::string& s);
const NameTable<LayerChoice>& layer_choice_names();
std::vector<LayerChoice> all_layer_choices();
bool layer_eligible(LayerChoice s, int64_t layer, int64_t n_layers);

struct RandomPlanOptions {
  PruneTarget target;
  LayerChoice layers = LayerChoice::Uniform;
  uint64_t seed = 1;
  std::vector<AttnType> only_types;
  std::vector<HeadId> exclude;
  // Uniform: plan_uniform_by_score on seeded random importances (every layer of a stack keeps the same
  // groups-by-heads shape, the shape and the heads chosen at random): the baseline of uniform plans.
  // Only with layers = Uniform.
  PlanShape shape = PlanShape::PerLayer;
};
PruningPlan plan_random(const ModelConfig& cfg, const RandomPlanOptions& opts);

// Every kept head of the given (attention type, layer) pairs.
PruningPlan plan_layers(const ModelConfig& cfg, const std::vector<std::pair<AttnType, int64_t>>& layers);

// "encoder_self:0:3,cross:1:2" (also enc/dec/cross), or HF's JSON form {"0": [1, 2], "3": [0]}
// (layers of `hf_type`, default the model's first attention type). Validated against cfg.
PruningPlan plan_manual(const std::string& spec, const ModelConfig& cfg, std::optional<AttnType> hf_type = {});

// Heads the model keeps (optionally only some attention types), in canonical order.
std::vector<HeadId> kept_heads(const ModelConfig& cfg, const std::vector<AttnType>& only_types = {});

}  // namespace hp
