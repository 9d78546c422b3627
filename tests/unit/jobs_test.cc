// The jobs as a library user calls them: train a small model on the synthetic task, then prune,
// score, draw a curve and learn gates on it exactly as the command line does, in process.
#include <filesystem>

#include <gtest/gtest.h>

#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/jobs/gates_job.h"
#include "headprune/jobs/importance_job.h"
#include "headprune/jobs/prune_job.h"
#include "headprune/jobs/train_job.h"
#include "test_util.h"

namespace hp {
namespace {

namespace fs = std::filesystem;

class Jobs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    TrainRequest tr;
    tr.family = Arch::EncoderClassifier;
    tr.out_dir = *dir_ / "train";
    tr.max_steps = 30;
    tr.eval_every = 30;
    run_train(tr, runtime());
  }
  static void TearDownTestSuite() { delete dir_; }
  static Runtime runtime() {
    Runtime rt;
    rt.threads = 2;
    rt.seed = 3;
    return rt;
  }
  static DataSource small_data() {
    DataSource d;
    d.synthetic_examples = 48;
    d.synthetic_train = 200;
    return d;
  }
  static std::string checkpoint() { return *dir_ / "train/best"; }
  static test::TempDir* dir_;
};
test::TempDir* Jobs::dir_ = nullptr;

TEST_F(Jobs, PruneWritesTheModelPlanAndSummaryAndChecksThem) {
  PruneRequest r;
  r.checkpoint = checkpoint();
  r.out_dir = *dir_ / "prune";
  r.plan.strategy = PlanStrategy::Score;
  r.plan.target = parse_target("0.5");
  r.data = small_data();
  r.finetune.steps = 5;
  std::vector<std::string> notes;
  JobEvents ev;
  ev.note = [&](const std::string& tag, const std::string& line) { notes.push_back("[" + tag + "] " + line); };
  const PruneResult res = run_prune(r, runtime(), ev);
  ASSERT_EQ(res.stages.rows.size(), 4u);
  EXPECT_EQ(res.stages.rows[0].heads, 8);
  EXPECT_EQ(res.stages.rows[2].heads, 4);
  EXPECT_LT(res.stages.rows[2].params, res.stages.rows[0].params);
  EXPECT_NEAR(res.stages.rows[1].loss, res.stages.rows[2].loss, 1e-5) << "masked and removed differ";
  ASSERT_TRUE(res.checks.masked_vs_removed);
  EXPECT_LE(*res.checks.masked_vs_removed, 1e-5);
  EXPECT_EQ(res.checks.reloaded, 0.0);
  EXPECT_FALSE(res.checks.compensation.is_null());
  EXPECT_EQ(read_json_file(r.out_dir + "/summary.json"), res.to_json());
  EXPECT_EQ(read_plan(r.out_dir + "/plan.json").heads, res.plan.heads);
  EXPECT_EQ(load_checkpoint(r.out_dir + "/model")->n_active_heads(), 4);
  ASSERT_FALSE(notes.empty());
  EXPECT_EQ(notes.back(), "[prune] score:gradient:global: 4 heads");
  // The same with distillation from the unpruned model: the fine-tuning run records it, the pruned
  // model differs from the one fine-tuned on the task alone; --mask-only cannot be distilled.
  PruneRequest kd = r;
  kd.out_dir = *dir_ / "prune_kd";
  kd.finetune.distill_weight = 0.7;
  kd.finetune.distill_temperature = 2.0;
  const PruneResult distilled = run_prune(kd, runtime());
  const auto opts = read_json_file(kd.out_dir + "/finetune/last/trainer_state.json").at("options");
  EXPECT_EQ(opts.at("distill_weight"), 0.7);
  EXPECT_EQ(opts.at("distill_temperature"), 2.0);
  EXPECT_EQ(distilled.plan.heads, res.plan.heads);
  EXPECT_NE(distilled.stages.rows[3].loss, res.stages.rows[3].loss);
  kd.out_dir = *dir_ / "prune_kd_mask";
  kd.mask_only = true;
  EXPECT_NE(test::error_of([&] { run_prune(kd, runtime()); }).find("--mask-only"), std::string::npos);
  r.out_dir.clear();
  EXPECT_THROW(run_prune(r, runtime()), std::invalid_argument);
}

TEST_F(Jobs, ImportanceAndCurveWriteWhatTheyReturn) {
  ImportanceRequest ir;
  ir.checkpoint = checkpoint();
  ir.out_dir = *dir_ / "importance";
  ir.methods = {ScoreMethod::Gradient, ScoreMethod::Magnitude};
  ir.data = small_data();
  const auto imp = run_importance(ir, runtime());
  ASSERT_EQ(imp.maps.size(), 2u);
  const auto maps = read_maps(ir.out_dir + "/importance.json");
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[1].scores, imp.maps[1].scores);

  CurveRequest cr;
  cr.checkpoint = checkpoint();
  cr.out_dir = *dir_ / "curve";
  cr.series = {parse_curve_series("gradient"), parse_curve_series("random")};
  cr.fractions = {0, 0.5};
  cr.data = small_data();
  const auto curve = run_curve(cr, runtime());
  ASSERT_EQ(curve.points.size(), 4u);
  EXPECT_EQ(curve.points[1].n_pruned, 4);
  EXPECT_EQ(read_json_file(cr.out_dir + "/curve.json"), curve.to_json());
  EXPECT_EQ(curve.score_data, curve.data);

  // Heads chosen on one split, the metric reported on another: the plan is the one the test split
  // gives, the metric the valid split's.
  cr.out_dir.clear();
  cr.series = {parse_curve_series("gradient")};
  cr.data.score_split = "test";
  const auto split = run_curve(cr, runtime());
  cr.data.split = "test";
  const auto on_test = run_curve(cr, runtime());
  EXPECT_NE(split.score_data, split.data);
  EXPECT_EQ(split.score_data, on_test.data);
  EXPECT_EQ(split.points[1].pruned, on_test.points[1].pruned);
  EXPECT_EQ(split.points[0].metric, curve.points[0].metric);
}

TEST_F(Jobs, GatesWriteTheirLogAndPlan) {
  GatesRequest gr;
  gr.checkpoint = checkpoint();
  gr.out_dir = *dir_ / "gates";
  gr.gate.method = GateMethod::Pass;
  gr.gate.period = 10;
  gr.gate.max_extra_steps = 100;
  gr.prune = parse_target("0.5");
  gr.steps = 20;
  gr.data = small_data();
  const auto res = run_gates(gr, runtime());
  EXPECT_EQ(res.options.target_kept, 4);
  EXPECT_EQ(res.plan.heads, res.gates.closed);
  ASSERT_FALSE(res.gates.log.empty());
  const auto csv = read_file(gr.out_dir + "/gates_log.csv");
  EXPECT_EQ(static_cast<size_t>(std::count(csv.begin(), csv.end(), '\n')), 1 + res.gates.log.size() * 8);
  EXPECT_EQ(read_json_file(gr.out_dir + "/gates.json").at("log"), res.gates.log_json());
  EXPECT_TRUE(fs::exists(gr.out_dir + "/model/model.safetensors"));
  // The same plan application as prune (jobs/apply_plan.h): both output checks, in gates.json too.
  ASSERT_TRUE(res.checks.masked_vs_removed);
  EXPECT_LE(*res.checks.masked_vs_removed, 1e-5);
  EXPECT_EQ(res.checks.reloaded, 0.0);
  EXPECT_EQ(read_json_file(gr.out_dir + "/gates.json").at("checks").at("reloaded_max_abs_diff"), 0.0);
  EXPECT_EQ(PruningPlan::from_json(read_json_file(gr.out_dir + "/plan.json")).heads, res.plan.heads);
}

}  // namespace
}  // namespace hp
