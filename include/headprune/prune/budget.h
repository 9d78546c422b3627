// Pruning to a budget: latency, memory (weights and key/value cache), key/value cache alone, or
// parameters. Each attention layer's cost is a function of the key/value groups it keeps (a group
// is one head in a model without grouped-query attention), with keeping none, the emptied layer, an
// option of its own:
//   latency   measured on this device at the target batch and length, not counted in FLOPs: for
//             each attention type and each count c the model with every layer of that type keeping c
//             groups is timed (the rest as it is), all variants interleaved in one benchmark
//             (eval/benchmark.h). With T(c) = the full model's median / the variant's median speed-up
//             over it in the same round, a layer keeping c groups costs
//             (T(c) - T(0)) / layers, and a plan is predicted at T(full) + Σ_l (cost(c_l) - cost(full_l)).
//   params    counted: a group's q/k/v rows and o columns (and biases);
//   kv-cache  bytes: 2 (keys and values) x batch x context x head_dim x element size per group of a
//             layer that caches (decoder self-attention, cross-attention);
//   memory    the weights' bytes plus the key/value cache.
// The plan is a multiple-choice knapsack: for each layer the number of groups it keeps (its most
// important ones by a group importance map), maximizing the importance kept with the predicted cost
// at most the budget (costs rounded up to 1/4000 of the room above the emptied model, so the
// prediction meets the budget exactly as computed).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/model/transformer.h"
#include "headprune/prune/plan.h"
#include "headprune/score/head_scores.h"
#include "headprune/util/names.h"
#include "headprune/util/options.h"

namespace hp {

enum class BudgetKind { Latency, Memory, KvCache, Params };
const NameTable<BudgetKind>& budget_kind_names();  // latency, memory, kv-cache (kv_cache), params
std::string to_string(BudgetKind k);

struct Budget {
  BudgetKind kind = BudgetKind::Latency;
  double value = 1;       // relative: a share of the model as it is; else ms, bytes or parameters
  bool relative = true;
  std::string text;       // as given
  nlohmann::json to_json() const;
};
// "latency=0.7x" (or 70%), "latency=12ms", "memory=3.5GiB" (GB, MiB, MB, KiB, KB or bytes), "memory=0.8x",
// "kv-cache=512MiB", "params=0.75x", "params=80M" (K, M, B or a count). Errors name the part at fault.
Budget parse_budget(const std::string& text);

// Where the budget is measured: the batch and length the latency is timed at, and the batch and
// context the key/value cache is sized for.
struct BudgetShape {
  int64_t batch = 1, seq_len = 128;
  int64_t context = 2048;  // kv-cache and memory: cached positions per sequence
  int64_t warmup = 2, reps = 15;  // latency measurement
  // latency: every model of the table and of the check is timed for at least this long (more rounds
  // than `reps` where needed: BenchOptions::min_seconds)
  double min_seconds = 2.0;
  // latency: the plan aims this share below the budget, room for the timing noise of the check
  double margin = 0.03;
  // latency: plan from each attention type's times on their least-squares line in the kept count
  // (fit_kept_line) rather than from the times as measured, whose noise the knapsack would chase
  bool fit_line = true;
  nlohmann::json to_json() const;
};

// BudgetShape's options: `prune --budget-*` and Python's budget_shape={...} (util/options.h).
const OptionTable<BudgetShape>& budget_shape_table();

// A latency table's model times by kept count (T[c], c = 0 .. G; T[G] the full model) with T[1 .. G]
// replaced by their least-squares line in c. T[0], every layer emptied, stays as measured: the step down
// when a layer empties is its own. With fewer than three points in 1 .. G, T is returned as it is.
// Why: the knapsack picks the counts whose measured time came out low, so a noisy table's prediction
// is biased low (bench/budget.sh: shares 2-3 % under the measurement).
std::vector<double> fit_kept_line(const std::vector<double>& T);
// BudgetShape::fit_line by name, one spelling for the CLI, the Python module and the JSON: "linear" or
// "measured"; any other name is std::invalid_argument saying so.
bool parse_budget_table(const std::string& name);
const char* budget_table_name(bool fit_line);

struct LayerCost {
  AttnType type = AttnType::EncoderSelf;
  int64_t layer = 0;
  std::vector<HeadId> groups;  // the groups the layer keeps now, (type, layer, key/value head id)
  std::vector<double> cost;    // cost[c]: the layer keeping c of them, c = 0 .. groups.size()
};

struct CostTable {
  BudgetKind kind = BudgetKind::Latency;
  std::string unit;  // ms, bytes or parameters
  double full = 0;   // the model as it is
  std::vector<LayerCost> layers;
  nlohmann::json measured;  // latency: per attention type, the medians T(c) (and the shape, environment)
  double emptied() const;   // every layer emptied: the least a plan can cost
  // The cost with layers[i] keeping kept[i] groups.
  double predict(const std::vector<int64_t>& kept) const;
  nlohmann::json to_json() const;
};

// Counted costs (params, kv-cache, memory) of the model as it is. A kv-cache budget on a model that
// caches nothing (an encoder) is std::invalid_argument.
CostTable counted_costs(TransformerImpl& model, BudgetKind kind, const BudgetShape& shape);
// Measured latency costs: the full model and its variants (every layer of a type keeping c groups)
// timed in one rotation. Every layer of an attention type must keep the same number of groups (prune
// from a model whose layers are alike), else std::invalid_argument. progress(done, total).
CostTable latency_costs(TransformerImpl& model, const BudgetShape& shape,
                        const std::function<void(int64_t, int64_t)>& progress = nullptr);

struct BudgetPlan {
  PruningPlan plan;          // every query head of the groups that go
  double limit = 0;          // the budget in the table's unit
  double predicted = 0;      // the chosen model's cost by the table
  double importance_kept = 0, importance_total = 0;
  std::vector<int64_t> kept;  // groups kept per layer of the table
  nlohmann::json to_json(const CostTable& table) const;
};

// The knapsack. `groups` is a key/value group importance map (ScoreUnit::KvGroup) of the model the
// table was made for. A limit below CostTable::emptied() is std::invalid_argument saying the least
// reachable cost.
// shape Uniform: every layer of a stack keeps the same number of groups (at least one), the counts that
// keep the most importance within the limit; a model whose layers keep different numbers, or a limit
// no such count fits, is std::invalid_argument.
BudgetPlan plan_to_budget(const CostTable& table, const HeadScores& groups, const ModelConfig& cfg, double limit,
                          PlanShape shape = PlanShape::PerLayer);

// Two models timed side by side, interleaved, at the shape (the check of a latency plan: the unpruned
// model and the chosen one): their medians and b's median time ratio to a in the same round.
struct LatencyPair {
  double a_ms = 0, b_ms = 0, share = 1;
};
LatencyPair measure_latency_pair(TransformerImpl& a, TransformerImpl& b, const BudgetShape& shape);

// What the model a budget plan (plan.info as plan_to_budget wrote it) chose turned out to cost:
// latency measured side by side with the unpruned model, the counted kinds counted again on the
// pruned model. {kind, unit, limit, predicted, measured, error (predicted / measured - 1), met
// (measured <= limit; for a relative latency budget, the measured share)}; latency adds
// measured_unpruned, predicted_share, measured_share, share_error and drift (the unpruned model's time
// at the check over the table's, minus 1).
nlohmann::json check_budget(TransformerImpl& unpruned, TransformerImpl& pruned, const PruningPlan& plan,
                            const BudgetShape& shape);

}  // namespace hp
