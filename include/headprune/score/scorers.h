// The scorer table (score/scorers.def): one row per head-importance scorer, the one place that says
// what a scorer is called, whether it reads data, how its maps are normalized by default, how it
// scores a key/value group and what its passes cost in memory. score_heads (score/importance.h) dispatches through it; the CLI's help and
// `--method all` read it.
#pragma once

#include <string>
#include <vector>

#include "headprune/score/head_scores.h"
#include "headprune/util/names.h"

namespace hp {

class TransformerImpl;
struct EvalSet;
struct ScoreOptions;

enum class ScoreMethod {
#define HP_SCORER(id, ...) id,
#include "headprune/score/scorers.def"
#undef HP_SCORER
};

// How a scorer gives a key/value group's score (ScoreOptions::unit = kv_group).
enum class GroupRule {
  Native,  // the scorer gates or masks the whole group itself (gradient, ablation)
  Sum,     // the sum of its query heads' raw scores (scores that add up: norms, relevance)
  Mean,    // their mean (per-head statistics: confidence, entropy, random)
  None,    // query heads only (all_but_one)
};

// What a scorer's passes hold in memory (the memory plan, jobs/job.h plan_scoring_memory, reads it);
// ordered: a run of several scorers costs the most of theirs.
enum class ScorerCost {
  Forward,             // forward passes, or the weights only
  Backward,            // a backward pass through the graph (gradient, lrp)
  BackwardWeightSums,  // a backward pass reaching the attention weights, their gradient sums kept (taylor)
};

using ScoreFn = HeadScores (*)(TransformerImpl& model, const EvalSet& data, const ScoreOptions& opts);

struct Scorer {
  ScoreMethod method;
  std::string name;  // canonical; '-' is accepted for '_' ("all-but-one")
  bool needs_data;
  Normalization normalization;
  GroupRule groups;
  ScorerCost cost;
  ScoreFn fn;  // raw scores (not normalized) of opts.unit; Sum/Mean rows are called with query heads only
  std::string help;
};

const std::vector<Scorer>& scorers();  // in table order
const Scorer& scorer(ScoreMethod m);
const NameTable<ScoreMethod>& score_method_names();
std::string to_string(ScoreMethod m);
ScoreMethod parse_score_method(const std::string& s);
// A --method value: one name, or "all" for every row in table order.
std::vector<ScoreMethod> parse_score_methods(const std::string& s);
std::vector<ScoreMethod> all_score_methods();
bool uses_data(ScoreMethod m);                       // scorer(m).needs_data
Normalization default_normalization(ScoreMethod m);  // scorer(m).normalization
// The most any of `methods` costs (Forward for none).
ScorerCost scoring_cost(const std::vector<ScoreMethod>& methods);
// "gradient (Michel et al.: ...), ablation (...), ..." for help texts.
std::string score_methods_help();

}  // namespace hp
