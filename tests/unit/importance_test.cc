// Head-importance scorers: dead heads rank last for every data-driven scorer, gradient
// importance equals finite differences, determinism, LRP conservation.
#include <cmath>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "headprune/data/synthetic.h"
#include "headprune/model/remove_heads.h"
#include "headprune/eval/evaluate.h"
#include "headprune/model/lrp.h"
#include "headprune/score/importance.h"
#include "headprune/train/trainer.h"
#include "headprune/util/log.h"
#include "test_util.h"

namespace hp {
namespace {

using test::synthetic_set;

// Makes head `h` an exact no-op: zero output-projection columns (it contributes nothing), zero
// query/key rows (its attention is uniform over the valid keys) and, where it owns them, zero value
// rows (its context is zero).
void kill_head(TransformerImpl& model, const HeadId& h) {
  torch::NoGradGuard no_grad;
  auto& attn = model.attention(h.type, h.layer);
  const int64_t k = attn.position_of(h.head);
  const int64_t D = attn.geometry().head_dim;
  attn.o_proj->weight.narrow(1, k * D, D).zero_();
  // Keys are zeroed only where the head owns them (a grouped layer shares them with other heads).
  std::vector<Dense*> owned = {&attn.q_proj};
  if (!attn.geometry().grouped()) {
    owned.push_back(&attn.k_proj);
    owned.push_back(&attn.v_proj);  // its context is zero too (what activation reads)
  }
  for (auto* lin : owned) {
    (*lin)->weight.narrow(0, k * D, D).zero_();
    if ((*lin)->bias.defined()) (*lin)->bias.narrow(0, k * D, D).zero_();
  }
}

std::vector<HeadId> dead_heads(Arch arch) {
  switch (arch) {
    case Arch::EncoderClassifier: return {{AttnType::EncoderSelf, 0, 1}, {AttnType::EncoderSelf, 1, 3}};
    case Arch::DecoderLM: return {{AttnType::DecoderSelf, 0, 2}, {AttnType::DecoderSelf, 1, 0}};
    case Arch::EncoderDecoder:
      return {{AttnType::EncoderSelf, 1, 0}, {AttnType::DecoderSelf, 0, 3}, {AttnType::Cross, 1, 2}};
  }
  return {};
}

class DeadHeads : public ::testing::TestWithParam<test::Fam> {};

// A model trained with some heads masked, whose weights are then zeroed and gates reopened:
// those heads are exact no-ops. Every data-driven scorer must rank them below every live head.
TEST_P(DeadHeads, EveryDataDrivenScorerRanksNoOpHeadsLast) {
  set_log_level(LogLevel::Warn);
  const Arch arch = test::arch_of(GetParam());
  ModelConfig cfg = test::config_of(GetParam());
  cfg.dropout = cfg.attention_dropout = 0.0;
  if (arch == Arch::EncoderClassifier) cfg.n_classes = 2;
  torch::manual_seed(5);
  Transformer model(cfg);
  const auto dead = dead_heads(arch);
  for (const auto& h : dead) kill_head(*model, h);
  model->mask_heads(dead);  // trained without them: they get no gradient and stay zero
  TrainData data{synthetic_examples(cfg, 512, 3, 10, 1), synthetic_examples(cfg, 64, 3, 10, 2)};
  TrainOptions o;
  o.max_steps = arch == Arch::EncoderDecoder ? 160 : 120;
  o.batch_tokens = 512;
  o.lr = 3e-3;
  o.warmup_steps = 10;
  o.eval_every = 1000;
  o.log_every = 1000;
  o.save_every = 100000;
  o.seed = 3;
  test::TempDir dir;
  train_model(model, data, o, dir.path);
  model->unmask_all();
  model->eval();

  const EvalSet set = synthetic_set(cfg, 96, 9);
  ScoreOptions opts;
  opts.metric = Metric::Loss;  // ablations compare losses (exact, no decoding)
  opts.bootstrap_samples = 50;
  opts.normalize = Normalization::None;  // the scorers' own values (a rank ties layers' last heads)
  const auto is_dead = [&](const HeadId& h) { return std::find(dead.begin(), dead.end(), h) != dead.end(); };
  for (ScoreMethod m : all_score_methods()) {
    if (!uses_data(m)) continue;
    // layer_drop scores layers (its heads tie: CalibrationScorersEqualHandComputedValues); activation
    // reads o_proj's input, which a grouped layer's no-op head still has (its values are shared).
    if (m == ScoreMethod::LayerDrop) continue;
    if (m == ScoreMethod::Activation && cfg.effective_kv_heads() < cfg.n_heads) continue;
    SCOPED_TRACE(to_string(m));
    const HeadScores s = score_heads(*model, set, m, opts);
    ASSERT_EQ(s.scores.size(), static_cast<size_t>(cfg.n_heads * (cfg.n_encoder_layers + cfg.n_decoder_layers *
                                                                   (arch == Arch::EncoderDecoder ? 2 : 1))));
    if (m == ScoreMethod::AllButOne) {
      // Keeping only a no-op head is masking the whole layer: exactly the same loss.
      size_t checked = 0;
      for (const auto& l : s.info["per_layer"]) {
        for (const auto& h : dead) {
          if (to_string(h.type) == l["attn_type"] && h.layer == l["layer"]) {
            EXPECT_EQ(s.at(h), l["layer_masked_metric"].get<double>()) << to_string(h);
            ++checked;
          }
        }
      }
      EXPECT_EQ(checked, dead.size());
      continue;
    }
    const auto oriented = [&](const HeadId& h) { return s.higher_is_important ? s.at(h) : -s.at(h); };
    double worst_dead = -1e300, best_live = 1e300;
    for (const auto& [h, v] : s.scores) {
      if (m == ScoreMethod::Ablation && !is_dead(h) && oriented(h) <= 0) continue;  // removal helps: see below
      if (is_dead(h))
        worst_dead = std::max(worst_dead, oriented(h));
      else
        best_live = std::min(best_live, oriented(h));
    }
    EXPECT_LT(worst_dead, best_live);
    if (m == ScoreMethod::Ablation) {
      // Masking a no-op head changes nothing, exactly; heads whose removal lowers the loss
      // rank below it by design (signed harm), every other head above it.
      for (const auto& h : dead) {
        EXPECT_EQ(s.at(h), 0.0) << to_string(h);
        EXPECT_EQ(s.columns.at("delta_loss").at(h), 0.0) << to_string(h);
        EXPECT_EQ(s.columns.at("significant").at(h), 0.0) << to_string(h);
      }
      continue;
    }
    // The bottom of the ranking is exactly the dead heads.
    const auto order = s.ascending_importance();
    for (size_t i = 0; i < dead.size(); ++i) EXPECT_TRUE(is_dead(order[i])) << to_string(order[i]);
  }
  set_log_level(LogLevel::Info);
}

INSTANTIATE_TEST_SUITE_P(Families, DeadHeads,
                         HP_ALL_FAMILIES);

class GradientImportance : public ::testing::TestWithParam<test::Fam> {};

// I_h = mean over examples of |d L(x) / d xi_h|, checked against central finite differences of
// each example's loss in the gate, in float64.
TEST_P(GradientImportance, EqualsFiniteDifferencesOfTheGates) {
  ModelConfig cfg = test::config_of(GetParam());
  auto model = test::make_model(cfg, 7, torch::kDouble);
  model->to(test::device());  // HP_TEST_DEVICE=cuda: gradients and differences on the GPU
  const EvalSet set = synthetic_set(cfg, 6, 4);
  ScoreOptions opts;
  opts.normalize = Normalization::None;
  const HeadScores s = score_heads(*model, set, ScoreMethod::Gradient, opts);

  const Batch b = collate(set.examples, cfg.arch, cfg.pad_id).to(test::device());
  const auto per_example = [&]() {
    torch::NoGradGuard no_grad;
    return per_example_nll(*model, model->forward(b), b).first.clone();
  };
  const double eps = 1e-6;
  int64_t checked = 0;
  for (const auto& g : model->head_masks()) {
    for (int64_t h : g.heads) {
      const HeadId id{g.type, g.layer, h};
      model->set_head_mask(id, 1.0 + eps);
      auto up = per_example();
      model->set_head_mask(id, 1.0 - eps);
      auto down = per_example();
      model->set_head_mask(id, 1.0);
      const double fd = ((up - down) / (2 * eps)).abs().mean().item<double>();
      EXPECT_NEAR(s.at(id), fd, 1e-6 * std::max(1.0, fd)) << to_string(id);
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int64_t>(s.scores.size()));
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Families, GradientImportance,
                         HP_ALL_FAMILIES);

// Grouped-query attention: a key/value group's gradient score is the gradient of one gate on the
// whole group, E|sum over its query heads of dL/dxi_h| (finite differences of scaling every query
// head of the group together), and the aggregated methods add up (or average) their heads.
TEST(Importance, KeyValueGroupScores) {
  const ModelConfig cfg = test::config_of(test::Fam::Llama);
  ASSERT_LT(cfg.effective_kv_heads(), cfg.n_heads);
  auto model = test::make_model(cfg, 7, torch::kDouble);
  const EvalSet set = synthetic_set(cfg, 6, 4);
  ScoreOptions opts;
  opts.normalize = Normalization::None;
  opts.unit = ScoreUnit::KvGroup;
  const HeadScores s = score_heads(*model, set, ScoreMethod::Gradient, opts);
  EXPECT_EQ(s.unit, ScoreUnit::KvGroup);
  const Batch b = collate(set.examples, cfg.arch, cfg.pad_id);
  const auto per_example = [&]() {
    torch::NoGradGuard no_grad;
    return per_example_nll(*model, model->forward(b), b).first.clone();
  };
  const int64_t R = cfg.n_heads / cfg.effective_kv_heads();
  const double eps = 1e-6;
  int64_t checked = 0;
  for (const auto& g : model->head_masks()) {
    for (int64_t kv = 0; kv < cfg.effective_kv_heads(); ++kv) {
      auto set_group = [&](double v) {
        for (int64_t h = kv * R; h < (kv + 1) * R; ++h) model->set_head_mask({g.type, g.layer, h}, v);
      };
      set_group(1.0 + eps);
      auto up = per_example();
      set_group(1.0 - eps);
      auto down = per_example();
      set_group(1.0);
      const double fd = ((up - down) / (2 * eps)).abs().mean().item<double>();
      const HeadId id{g.type, g.layer, kv};
      EXPECT_NEAR(s.at(id), fd, 1e-6 * std::max(1.0, fd)) << to_string(id);
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int64_t>(s.scores.size()));

  ScoreOptions heads = opts;
  heads.unit = ScoreUnit::Head;
  const HeadScores mag_h = score_heads(*model, set, ScoreMethod::Magnitude, heads);
  const HeadScores mag_g = score_heads(*model, set, ScoreMethod::Magnitude, opts);
  EXPECT_EQ(mag_g.unit, ScoreUnit::KvGroup);
  for (const auto& [id, v] : mag_g.scores) {
    double sum = 0;
    for (int64_t h = id.head * R; h < (id.head + 1) * R; ++h) sum += mag_h.at({id.type, id.layer, h});
    EXPECT_NEAR(v, sum, 1e-9 * std::max(1.0, sum)) << to_string(id);
  }
  EXPECT_THROW(score_heads(*model, set, ScoreMethod::AllButOne, opts), std::invalid_argument);
}

// Every row of the scorer table (score/scorers.def) keeps its promises, so a new row is tested by
// being added: its name parses back, --method all lists it, a scorer that needs no data runs without
// any, its default normalization is applied, and its key/value group rule holds on a grouped model.
TEST(Importance, ScorerTable) {
  const ModelConfig cfg = test::config_of(test::Fam::Llama);
  const int64_t R = cfg.n_heads / cfg.effective_kv_heads();
  ASSERT_GT(R, 1);
  auto model = test::make_model(cfg, 5, torch::kDouble);
  const EvalSet set = synthetic_set(cfg, 4, 2);
  EXPECT_EQ(parse_score_methods("all"), all_score_methods());
  EXPECT_EQ(all_score_methods().size(), scorers().size());
  std::set<std::string> names;
  for (const Scorer& row : scorers()) {
    SCOPED_TRACE(row.name);
    EXPECT_TRUE(names.insert(row.name).second) << "two rows named " << row.name;
    EXPECT_EQ(parse_score_method(row.name), row.method);
    EXPECT_EQ(parse_score_methods(row.name), std::vector<ScoreMethod>{row.method});
    EXPECT_EQ(&scorer(row.method), &row);
    EXPECT_EQ(uses_data(row.method), row.needs_data);
    ScoreOptions raw;
    raw.normalize = Normalization::None;
    raw.bootstrap_samples = 20;
    if (!row.needs_data) EXPECT_FALSE(score_heads(*model, EvalSet{}, row.method, raw).scores.empty());
    else EXPECT_THROW(score_heads(*model, EvalSet{}, row.method, raw), std::invalid_argument);
    const HeadScores heads = score_heads(*model, set, row.method, raw);
    EXPECT_EQ(heads.method, row.name);
    EXPECT_EQ(heads.scores.size(), static_cast<size_t>(cfg.n_heads_total(AttnType::DecoderSelf)));
    ScoreOptions defaults = raw;
    defaults.normalize.reset();
    if (row.normalization == Normalization::Layer) {
      const HeadScores n = score_heads(*model, set, row.method, defaults);
      for (int64_t l = 0; l < cfg.n_layers(AttnType::DecoderSelf); ++l) {
        double sq = 0, raw_sq = 0;
        for (int64_t h = 0; h < cfg.n_heads; ++h) {
          sq += std::pow(n.at({AttnType::DecoderSelf, l, h}), 2);
          raw_sq += std::pow(heads.at({AttnType::DecoderSelf, l, h}), 2);
        }
        if (raw_sq > 0) {
          EXPECT_NEAR(sq, 1.0, 1e-9) << "layer " << l;
        }
      }
    }
    ScoreOptions groups = raw;
    groups.unit = ScoreUnit::KvGroup;
    if (row.groups == GroupRule::None) {
      EXPECT_THROW(score_heads(*model, set, row.method, groups), std::invalid_argument);
      continue;
    }
    const HeadScores g = score_heads(*model, set, row.method, groups);
    EXPECT_EQ(g.unit, ScoreUnit::KvGroup);
    EXPECT_EQ(g.scores.size(), static_cast<size_t>(cfg.n_layers(AttnType::DecoderSelf) * cfg.effective_kv_heads()));
    if (row.groups == GroupRule::Native) continue;  // its own group form (KeyValueGroupScores checks gradient's)
    for (const auto& [id, v] : g.scores) {
      double sum = 0;
      for (int64_t h = id.head * R; h < (id.head + 1) * R; ++h) sum += heads.at({id.type, id.layer, h});
      const double want = row.groups == GroupRule::Sum ? sum : sum / static_cast<double>(R);
      EXPECT_NEAR(v, want, 1e-9 * std::max(1.0, std::abs(want))) << to_string(id);
    }
  }
}

// The calibration scorers of LLM pruning (Minitron's activations, LLM-Pruner's Taylor terms, layer
// drop) against the same quantities computed here by other routes: the gradients of every parameter
// from one backward pass, per-example loops over the captured o_proj input, a layer's attention run on
// its own from the stack's pieces.
TEST(Importance, CalibrationScorersEqualHandComputedValues) {
  for (test::Fam f : {test::Fam::DecoderLM, test::Fam::Llama}) {
    SCOPED_TRACE(test::name_of(f));
    const ModelConfig cfg = test::config_of(f);
    auto model = test::make_model(cfg, 11, torch::kDouble);
    model->eval();
    const EvalSet set = synthetic_set(cfg, 7, 3);
    const Batch b = collate(set.examples, cfg.arch, cfg.pad_id);
    const AttnType t = AttnType::DecoderSelf;
    const int64_t D = cfg.head_dim, R = cfg.n_heads / cfg.effective_kv_heads();
    ScoreOptions raw;
    raw.normalize = Normalization::None;
    raw.batch_tokens = 30;  // several batches: gradients and sums add across them

    // Taylor: every parameter's gradient of the summed per-example loss, by backward().
    for (auto& p : model->parameters()) p.set_requires_grad(true);
    model->zero_grad();
    per_example_nll(*model, model->forward(b), b).first.sum().backward();
    const auto taylor = score_heads(*model, set, ScoreMethod::Taylor, raw);
    ScoreOptions by_group = raw;
    by_group.unit = ScoreUnit::KvGroup;
    const auto taylor_groups = score_heads(*model, set, ScoreMethod::Taylor, by_group);
    const auto term = [](const torch::Tensor& w, int64_t dim, int64_t from, int64_t n) {
      return (w.narrow(dim, from, n) * w.grad().narrow(dim, from, n)).abs().sum().item<double>();
    };
    for (int64_t l = 0; l < cfg.n_decoder_layers; ++l) {
      auto& a = model->attention(t, l);
      const auto rows = [&](Dense& d, int64_t unit) {
        return term(d->weight, 0, unit * D, D) + (d->bias.defined() ? term(d->bias, 0, unit * D, D) : 0.0);
      };
      for (int64_t g = 0; g < cfg.effective_kv_heads(); ++g) {
        double group = rows(a.k_proj, g) + rows(a.v_proj, g);
        for (int64_t h = g * R; h < (g + 1) * R; ++h) {
          double head = rows(a.q_proj, h) + term(a.o_proj->weight, 1, h * D, D);
          group += head;
          if (R == 1) head += rows(a.k_proj, g) + rows(a.v_proj, g);  // its own keys and values go with it
          EXPECT_NEAR(taylor.at({t, l, h}), head, 1e-9 * head) << l << ":" << h;
          EXPECT_GT(head, 0.0);
        }
        EXPECT_NEAR(taylor_groups.at({t, l, g}), group, 1e-9 * group) << l << " group " << g;
      }
    }
    for (auto& p : model->parameters()) p.set_requires_grad(false);

    // Activation: the o_proj input of each example, averaged over its tokens, then RMS over examples.
    std::vector<torch::Tensor> ctx(static_cast<size_t>(cfg.n_decoder_layers));
    for (int64_t l = 0; l < cfg.n_decoder_layers; ++l)
      model->attention(t, l).on_context = [&ctx, l](const torch::Tensor& c) { ctx[static_cast<size_t>(l)] = c.clone(); };
    {
      torch::NoGradGuard no_grad;
      model->forward(b);
    }
    for (int64_t l = 0; l < cfg.n_decoder_layers; ++l) model->attention(t, l).on_context = nullptr;
    const auto act = score_heads(*model, set, ScoreMethod::Activation, raw);
    const auto act_groups = score_heads(*model, set, ScoreMethod::Activation, by_group);
    const int64_t B = b.size();
    for (int64_t l = 0; l < cfg.n_decoder_layers; ++l) {
      std::vector<double> group(static_cast<size_t>(cfg.effective_kv_heads()), 0.0);
      for (int64_t h = 0; h < cfg.n_heads; ++h) {
        double sum = 0;
        for (int64_t e = 0; e < B; ++e) {
          const int64_t n = b.attention_mask[e].sum().item<int64_t>();
          const auto m = ctx[static_cast<size_t>(l)][e][h].narrow(0, 0, n).mean(0);  // [D]; padding is on the right
          sum += m.pow(2).sum().item<double>();
        }
        group[static_cast<size_t>(h / R)] += sum;
        const double want = std::sqrt(sum / static_cast<double>(B));
        EXPECT_NEAR(act.at({t, l, h}), want, 1e-9 * want) << l << ":" << h;
      }
      for (int64_t g = 0; g < cfg.effective_kv_heads(); ++g) {
        const double want = std::sqrt(group[static_cast<size_t>(g)] / static_cast<double>(B));
        EXPECT_NEAR(act_groups.at({t, l, g}), want, 1e-9 * want) << l << " group " << g;
      }
    }

    // Layer drop: each layer's attention run alone on its input, 1 - cos over the valid tokens.
    const auto drop = score_heads(*model, set, ScoreMethod::LayerDrop, raw);
    torch::NoGradGuard no_grad;
    auto st = model->stack_begin(b);
    auto x = st.x;
    const auto valid = b.attention_mask.ne(0);
    for (int64_t l = 0; l < cfg.n_decoder_layers; ++l) {
      auto& layer = model->single_stack()->layer(l);
      const auto in = cfg.norm == NormPosition::Pre ? layer.self_attn_norm(x) : x;
      const auto out = layer.self_attn->forward(in, in, st.mask, nullptr, nullptr, false, st.rope ? &*st.rope : nullptr);
      const auto turn = 1.0 - torch::cosine_similarity(x, x + out, -1);
      const double want = turn.masked_select(valid).mean().item<double>();
      for (int64_t h = 0; h < cfg.n_heads; ++h) EXPECT_NEAR(drop.at({t, l, h}), want, 1e-9) << l << ":" << h;
      EXPECT_NEAR(drop.columns.at("layer_cosine").at({t, l, 0}), 1.0 - want, 1e-9);
      x = model->stack_layer(l, x, st);
    }
  }
}

TEST(Importance, LayerwiseGradientsEqualTheWholeGraph) {
  // Recomputing one layer's graph at a time gives the whole graph's gate gradients, per head and per
  // key/value group, per example and per token, and the whole graph's Taylor scores (weight
  // gradients), on every single-stack family (with heads removed and a layer emptied); an
  // encoder-decoder is refused with the reason, and taylor's pipeline too.
  for (test::Fam f : {test::Fam::EncoderClassifier, test::Fam::DecoderLM, test::Fam::Llama}) {
    SCOPED_TRACE(test::name_of(f));
    const ModelConfig cfg = test::config_of(f);
    auto model = test::make_model(cfg, 7, torch::kDouble);
    const AttnType t = cfg.attn_types().front();
    std::vector<HeadId> drop;
    for (int64_t h = 0; h < cfg.n_heads; ++h) drop.push_back({t, 0, h});  // layer 0 emptied
    drop.push_back({t, 1, 1});
    model = remove_heads(*model, drop);
    const EvalSet set = synthetic_set(cfg, 9, 5);
    for (ScoreUnit unit : {ScoreUnit::Head, ScoreUnit::KvGroup}) {
      for (Granularity g : {Granularity::Example, Granularity::Token}) {
        ScoreOptions whole;
        whole.normalize = Normalization::None;
        whole.unit = unit;
        whole.granularity = g;
        whole.batch_tokens = 40;  // several batches
        ScoreOptions layerwise = whole;
        layerwise.layerwise = true;
        const auto a = score_heads(*model, set, ScoreMethod::Gradient, whole);
        const auto b = score_heads(*model, set, ScoreMethod::Gradient, layerwise);
        ASSERT_EQ(a.scores.size(), b.scores.size());
        for (const auto& [head, v] : a.scores) EXPECT_NEAR(b.at(head), v, 1e-9 * std::max(1.0, std::abs(v)));
        EXPECT_EQ(b.info.value("layerwise", ""), "one layer's graph at a time");
      }
      ScoreOptions whole;
      whole.normalize = Normalization::None;
      whole.unit = unit;
      whole.batch_tokens = 40;
      ScoreOptions layerwise = whole;
      layerwise.layerwise = true;
      const auto a = score_heads(*model, set, ScoreMethod::Taylor, whole);
      const auto b = score_heads(*model, set, ScoreMethod::Taylor, layerwise);
      ASSERT_EQ(a.scores.size(), b.scores.size());
      double largest = 0;
      for (const auto& [head, v] : a.scores) {
        EXPECT_NEAR(b.at(head), v, 1e-9 * std::max(1.0, std::abs(v))) << "taylor";
        largest = std::max(largest, std::abs(v));
      }
      EXPECT_GT(largest, 1e-6);  // the weights' gradients reached the scores
      EXPECT_EQ(b.info.value("layerwise", ""), "one layer's graph at a time");
      EXPECT_EQ(b.info.value("forward_passes", 0), 2);
    }
  }
  const auto refusal = [](test::Fam f, ScoreMethod m, const ScoreOptions& o) {
    auto model = test::make_model(test::config_of(f), 7, torch::kDouble);
    return test::error_of([&] { score_heads(*model, synthetic_set(model->config(), 4, 5), m, o); });
  };
  ScoreOptions pipeline, layerwise;
  pipeline.pipeline = true;
  layerwise.layerwise = true;
  std::string e = refusal(test::Fam::Llama, ScoreMethod::Taylor, pipeline);
  EXPECT_NE(e.find("--pipeline splits the layers for the gradient scorer only"), std::string::npos) << e;
  e = refusal(test::Fam::EncoderDecoder, ScoreMethod::Gradient, layerwise);
  EXPECT_NE(e.find("single-stack models"), std::string::npos) << e;
}

TEST(Importance, ScoresAreDeterministic) {
  ModelConfig cfg = tiny_config(Arch::EncoderDecoder);
  auto model = test::make_model(cfg, 3);
  const EvalSet set = synthetic_set(cfg, 32, 5);
  ScoreOptions opts;
  opts.metric = Metric::Loss;
  opts.bootstrap_samples = 100;
  for (ScoreMethod m : all_score_methods()) {
    SCOPED_TRACE(to_string(m));
    const auto a = score_heads(*model, set, m, opts), b = score_heads(*model, set, m, opts);
    ASSERT_EQ(a.scores.size(), b.scores.size());
    for (const auto& [h, v] : a.scores) EXPECT_EQ(v, b.at(h)) << to_string(h);
    EXPECT_EQ(a.columns, b.columns);
  }
  // A different seed changes the random control.
  ScoreOptions other = opts;
  other.seed = 2;
  EXPECT_NE(score_heads(*model, set, ScoreMethod::Random, opts).scores,
            score_heads(*model, set, ScoreMethod::Random, other).scores);
}

TEST(Importance, ScoringLeavesTheModelAsItWas) {
  ModelConfig cfg = tiny_config(Arch::DecoderLM);
  auto model = test::make_model(cfg, 3);
  model->train();
  model->set_head_mask({AttnType::DecoderSelf, 1, 2}, 0.0);
  const EvalSet set = synthetic_set(cfg, 16, 5);
  ScoreOptions opts;
  opts.metric = Metric::Loss;
  opts.bootstrap_samples = 10;
  const Batch b = collate(set.examples, cfg.arch, cfg.pad_id);
  model->eval();
  const auto before = model->forward(b).logits.clone();
  model->train();
  for (ScoreMethod m : all_score_methods()) score_heads(*model, set, m, opts);
  EXPECT_TRUE(model->is_training());
  for (const auto& p : model->parameters()) EXPECT_TRUE(p.requires_grad());
  const std::vector<HeadId> still_masked{HeadId{AttnType::DecoderSelf, 1, 2}};
  EXPECT_EQ(model->masked_heads(), still_masked);
  model->eval();
  EXPECT_EQ(test::max_abs_diff(before, model->forward(b).logits), 0.0);
}

TEST(Importance, MaskedAndRemovedHeads) {
  ModelConfig cfg = tiny_config(Arch::EncoderClassifier);
  auto model = test::make_model(cfg, 3);
  const EvalSet set = synthetic_set(cfg, 16, 5);
  const HeadId masked{AttnType::EncoderSelf, 0, 1};
  model->set_head_mask(masked, 0.0);
  ScoreOptions opts;
  opts.normalize = Normalization::None;
  auto s = score_heads(*model, set, ScoreMethod::Gradient, opts);
  EXPECT_EQ(s.scores.size(), 8u);
  // A masked head still has a gradient (Michel: its gate's derivative at 0), but no output.
  EXPECT_EQ(score_heads(*model, set, ScoreMethod::OutputNorm, opts).at(masked), 0.0);
  EXPECT_THROW(score_heads(*model, EvalSet{}, ScoreMethod::Gradient, opts), std::invalid_argument);
  EXPECT_THROW(parse_score_method("sixteen"), std::invalid_argument);
  EXPECT_EQ(parse_score_method("all-but-one"), ScoreMethod::AllButOne);
}

TEST(Importance, AblationReportsSignificanceAndAllButOneItsBestHead) {
  ModelConfig cfg = tiny_config(Arch::EncoderClassifier);
  auto model = test::make_model(cfg, 3);
  const EvalSet set = synthetic_set(cfg, 40, 5);
  ScoreOptions opts;
  opts.bootstrap_samples = 200;
  const auto a = score_heads(*model, set, ScoreMethod::Ablation, opts);
  ASSERT_EQ(a.scores.size(), 8u);
  for (const char* col : {"delta_loss", "delta_metric", "p_value", "significant"})
    EXPECT_EQ(a.columns.at(col).size(), 8u) << col;
  for (const auto& [h, p] : a.columns.at("p_value")) {
    EXPECT_GE(p, 0.0);
    EXPECT_LE(p, 1.0);
    EXPECT_EQ(a.columns.at("significant").at(h), p < opts.significance ? 1.0 : 0.0);
  }
  EXPECT_TRUE(a.info.contains("n_significant"));
  // Masking a head and measuring directly gives the reported change in loss.
  const HeadId h{AttnType::EncoderSelf, 1, 2};
  const double base = measure(*model, set, {Metric::Loss}).at(Metric::Loss).value();
  model->set_head_mask(h, 0.0);
  const double masked = measure(*model, set, {Metric::Loss}).at(Metric::Loss).value();
  model->set_head_mask(h, 1.0);
  EXPECT_NEAR(a.columns.at("delta_loss").at(h), masked - base, 1e-9);

  const auto abo = score_heads(*model, set, ScoreMethod::AllButOne, opts);
  ASSERT_EQ(abo.scores.size(), 8u);
  ASSERT_TRUE(abo.info.contains("per_layer"));
  EXPECT_EQ(abo.info["per_layer"].size(), 2u);
}

// With zero biases the alpha-beta rule conserves relevance through each operation.
TEST(Lrp, RulesConserveRelevance) {
  torch::manual_seed(1);
  auto x = torch::randn({3, 5, 8}, torch::kDouble).requires_grad_(true);
  auto w = torch::randn({6, 8}, torch::kDouble);
  auto R = torch::rand({3, 5, 6}, torch::kDouble);
  {
    lrp::Scope scope;
    auto y = lrp::linear(x, w, torch::Tensor());
    auto rx = torch::autograd::grad({y}, {x}, {R})[0];
    EXPECT_NEAR(rx.sum().item<double>(), R.sum().item<double>(), 1e-3 * R.sum().item<double>());
    EXPECT_GE(rx.min().item<double>(), -1e-12);  // alpha = beta = 0.5: all shares are positive
  }
  {
    lrp::Scope scope;
    auto a = torch::randn({3, 5, 6}, torch::kDouble).requires_grad_(true);
    auto b = torch::randn({3, 5, 6}, torch::kDouble).requires_grad_(true);
    auto y = lrp::add(a, b);
    auto g = torch::autograd::grad({y}, {a, b}, {R});
    EXPECT_NEAR((g[0] + g[1]).sum().item<double>(), R.sum().item<double>(), 1e-3 * R.sum().item<double>());
  }
  {
    lrp::Scope scope;
    auto p = torch::softmax(torch::randn({2, 4, 5, 7}, torch::kDouble), -1);
    auto v = torch::randn({2, 4, 7, 3}, torch::kDouble).requires_grad_(true);
    auto Rm = torch::rand({2, 4, 5, 3}, torch::kDouble);
    auto y = lrp::mix(p, v);
    auto rv = torch::autograd::grad({y}, {v}, {Rm})[0];
    EXPECT_NEAR(rv.sum().item<double>(), Rm.sum().item<double>(), 1e-3 * Rm.sum().item<double>());
  }
  // Outside a scope the functions are the plain operations, with ordinary gradients.
  EXPECT_FALSE(lrp::active());
  auto y = lrp::linear(x, w, torch::Tensor());
  EXPECT_EQ(test::max_abs_diff(y, torch::linear(x, w)), 0.0);
  auto g = torch::autograd::grad({y.sum()}, {x})[0];
  EXPECT_LT(test::max_abs_diff(g, w.sum(0).expand_as(x)), 1e-12);
}

TEST(Lrp, ModelForwardIsUnchangedInsideAScope) {
  for (Arch arch : {Arch::EncoderClassifier, Arch::DecoderLM, Arch::EncoderDecoder}) {
    ModelConfig cfg = tiny_config(arch);
    auto model = test::make_model(cfg, 3);
    const Batch b = test::make_batch(cfg);
    const auto plain = model->forward(b).logits.detach();
    lrp::Scope scope;
    EXPECT_LT(test::max_abs_diff(plain, model->forward(b).logits.detach()), 1e-5) << to_string(arch);
  }
}

}  // namespace
}  // namespace hp
