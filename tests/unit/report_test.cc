// Result formats (io/formats.h) and figures (report/figures.h): kinds and versions are checked with
// the file named; figures are built from crafted results and drawn by gnuplot into valid SVG.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "headprune/io/files.h"
#include "headprune/io/formats.h"
#include "headprune/report/escape.h"
#include "headprune/report/figures.h"
#include "headprune/report/report.h"
#include "test_util.h"

namespace hp {
namespace {

using test::error_of;

nlohmann::json importance_json() {
  nlohmann::json heads = nlohmann::json::array();
  for (const char* t : {"encoder_self", "cross"})
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < 4; ++h)
        heads.push_back({{"attn_type", t}, {"layer", l}, {"head", h}, {"score", 0.1 * (l * 4 + h)},
                         {"significant", h == 2 ? 1.0 : 0.0}});
  nlohmann::json j = {{"maps", {{{"method", "ablation"}, {"higher_is_important", true}, {"normalization", "none"},
                                  {"info", nlohmann::json::object()}, {"heads", heads}}}}};
  stamp_format(j, ResultKind::Importance);
  return j;
}

nlohmann::json stages(int heads_after, double params_after, double metric_before, double metric_after) {
  return {{{"stage", "before"}, {"heads", 8}, {"params", 1000.0}, {"loss", 0.5}, {"metric", metric_before}},
          {{"stage", "removed"}, {"heads", heads_after}, {"params", params_after}, {"loss", 0.6}, {"metric", metric_after}}};
}

TEST(Formats, TagsAndKinds) {
  EXPECT_EQ(format_tag(ResultKind::Curve), "headprune-curve/1");
  nlohmann::json j = {{"points", nlohmann::json::array()}};
  EXPECT_EQ(result_kind(j, "x"), ResultKind::Curve);  // an older file, recognised by its keys
  stamp_format(j, ResultKind::Curve);
  EXPECT_EQ(result_kind(j, "x"), ResultKind::Curve);
  EXPECT_EQ(result_kind(nlohmann::json{{"format", "headprune-plan/1"}}, "x"), std::nullopt);
  EXPECT_EQ(result_kind(nlohmann::json::parse(R"([{"step": 1, "loss": 2}])"), "x"), ResultKind::History);
  EXPECT_EQ(result_kind(nlohmann::json{{"a", 1}}, "x"), std::nullopt);
}

TEST(Formats, WrongKindVersionAndTagNameTheSource) {
  nlohmann::json curve = {{"points", nlohmann::json::array()}};
  stamp_format(curve, ResultKind::Curve);
  const std::string e1 = error_of([&] { check_result(curve, ResultKind::Importance, "runs/a/curve.json"); });
  EXPECT_NE(e1.find("runs/a/curve.json: expected a headprune importance result (format headprune-importance/1"), std::string::npos) << e1;
  EXPECT_NE(e1.find("got a curve result"), std::string::npos) << e1;
  curve["format"] = "headprune-curve/2";
  const std::string e2 = error_of([&] { result_kind(curve, "f.json"); });
  EXPECT_NE(e2.find("f.json: format headprune-curve/2 is not readable"), std::string::npos) << e2;
  curve["format"] = "headprune-curve/x";
  EXPECT_NE(error_of([&] { result_kind(curve, "f.json"); }).find("must be an integer"), std::string::npos);
  curve["format"] = "other/1";
  EXPECT_EQ(result_kind(curve, "f.json"), std::nullopt);
  const std::string e4 = error_of([&] { check_result(curve, ResultKind::Curve, "f.json"); });
  EXPECT_NE(e4.find("f.json: expected a headprune curve result"), std::string::npos) << e4;
  EXPECT_NE(e4.find("got format other/1"), std::string::npos) << e4;
  const std::string e3 = error_of([&] { check_result(nlohmann::json{{"a", 1}}, ResultKind::Gates, "g.json"); });
  EXPECT_NE(e3.find("g.json: expected a headprune gates result"), std::string::npos) << e3;
  EXPECT_NE(e3.find("got an object with keys a"), std::string::npos) << e3;
}

TEST(Formats, ReadsAResultThroughAJsonPointer) {
  test::TempDir dir;
  const std::string path = dir / "study.json";
  write_json_file(path, {{"parts", {{"imp", importance_json()}}}});
  EXPECT_EQ(read_result(path + "#/parts/imp", ResultKind::Importance)["maps"].size(), 1u);
  EXPECT_NE(error_of([&] { read_result(path + "#/parts/none", ResultKind::Importance); }).find("nothing at /parts/none"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_result(path + "#/parts", ResultKind::Importance); }).find(path + "#/parts: expected"),
            std::string::npos);
  EXPECT_EQ(load_labeled(path + "#/parts/imp").label, "imp");
}

TEST(Figures, ImportanceHasAPanelPerAttentionTypeAndRingsSignificantHeads) {
  const auto figs = importance_figures({"m", "imp.json", importance_json()});
  ASSERT_EQ(figs.size(), 1u);
  EXPECT_EQ(figs[0].name, "importance_ablation");
  EXPECT_NE(figs[0].script.find("set multiplot layout 1,2"), std::string::npos);
  EXPECT_NE(figs[0].script.find("title 'significant (bootstrap test)'"), std::string::npos);
  // the significant heads' block lists head 2 of each layer and nothing else
  const auto& s = figs[0].script;
  const std::string open = "$s0 << EOD\n";
  const auto b = s.find(open) + open.size(), e = s.find("EOD\n", b);
  EXPECT_EQ(s.substr(b, e - b), "2 0\n2 1\n");
}

TEST(Figures, GatesLogMustMatchItsHeads) {
  nlohmann::json g = {{"heads", {"encoder_self:0:0", "encoder_self:0:1"}},
                      {"options", {{"method", "pass"}}},
                      {"log", {{{"step", 10}, {"p_open", {0.9}}}}}};
  const std::string e = error_of([&] { gates_figure({"g", "g.json", g}); });
  EXPECT_NE(e.find("g.json: log[0]: 'p_open' has 1 values for 2 heads"), std::string::npos) << e;
}

TEST(Figures, ParetoFrontKeepsTheNonDominatedModels) {
  nlohmann::json bench = {{"environment", nlohmann::json::object()}, {"records", nlohmann::json::array()}};
  auto rec = [&](const std::string& model, double ms) {
    bench["records"].push_back({{"model", model}, {"batch", 1}, {"seq_len", 32}, {"precision", "fp32"},
                                {"median_ms", ms}, {"heads", 8}, {"params", 1000}});
  };
  rec("base", 10.0);
  rec("a/model", 6.0);
  rec("b/model", 7.0);  // slower than a and less accurate: dominated
  rec("c/model", 4.0);
  auto run = [&](const std::string& dir, double metric) {
    nlohmann::json r = {{"checkpoint", "base"}, {"metric", "accuracy"}, {"plan", nlohmann::json::object()},
                        {"stages", stages(4, 600, 0.90, metric)}, {"model", dir + "/model"}};
    stamp_format(r, ResultKind::Summary);
    return LabeledResult{dir, dir + "/summary.json", r};
  };
  const auto pts = pareto_points({"bench", "bench.json", bench}, {run("a", 0.88), run("b", 0.85), run("c", 0.80)}, {});
  ASSERT_EQ(pts.size(), 4u);
  std::map<std::string, bool> front;
  for (const auto& p : pts) front[p.label] = p.front;
  EXPECT_TRUE(front["base, unpruned"]);
  EXPECT_TRUE(front["a"]);
  EXPECT_FALSE(front["b"]);
  EXPECT_TRUE(front["c"]);
  // models the runs did not write cannot be placed: an error that says which models were known
  ParetoOptions at4;
  at4.batch = 4;
  const std::string e = error_of([&] { pareto_points({"bench", "bench.json", bench}, {run("zz", 0.5)}, at4); });
  EXPECT_NE(e.find("bench.json: only 0 of its models at batch 4"), std::string::npos) << e;
}

TEST(Figures, ParetoLabelsOfNearbyModelsDoNotOverprint) {
  nlohmann::json bench = {{"environment", nlohmann::json::object()}, {"records", nlohmann::json::array()}};
  auto run = [&](const std::string& dir, double metric, double ms) {
    bench["records"].push_back({{"model", dir + "/model"}, {"batch", 1}, {"seq_len", 32}, {"precision", "fp32"},
                                {"median_ms", ms}, {"heads", 8}, {"params", 1000}});
    nlohmann::json r = {{"checkpoint", "base"}, {"metric", "accuracy"}, {"plan", nlohmann::json::object()},
                        {"stages", stages(4, 600, 0.90, metric)}, {"model", dir + "/model"}};
    stamp_format(r, ResultKind::Summary);
    return LabeledResult{dir, dir + "/summary.json", r};
  };
  // a and b almost on one spot: b's label goes below its point; c, far off, keeps the usual place
  // above; d, level with a and b just after them, reaches the next free line (two above)
  const std::vector<LabeledResult> runs = {run("a", 0.80, 18.0), run("b", 0.8001, 18.1), run("c", 0.70, 10.0),
                                            run("d", 0.80, 18.2)};
  const std::string script = pareto_figure({"bench", "bench.json", bench}, runs, {}).script;
  // each line's labels: a datablock of positions and an array of texts, "labelsN[K] = 'TEXT'"
  const auto line_of = [&](const std::string& text) {
    const auto at = script.find("] = '" + text + "'\n");
    if (at == std::string::npos) return std::string("none");
    const auto from = script.rfind("\nlabels", at) + 7;
    return script.substr(from, script.find('[', from) - from);
  };
  EXPECT_EQ(line_of("a (8 heads)"), "0") << script;
  EXPECT_EQ(line_of("c (8 heads)"), "0") << script;
  EXPECT_EQ(line_of("b (8 heads)"), "1") << script;
  EXPECT_EQ(line_of("d (8 heads)"), "2") << script;
  EXPECT_EQ(script.find("$labels3"), std::string::npos) << script;  // unused lines are left out (gnuplot cannot plot an empty block)
  EXPECT_NE(script.find("$labels1 using 1:2:(labels1[$0+1]) with labels left offset 1,-0.9"), std::string::npos) << script;
  EXPECT_EQ(gnuplot_program_problem(script), "");
}

TEST(Figures, GnuplotDrawsValidSvg) {
  test::TempDir dir;
  const std::string svg = dir / "imp.svg";
  render(importance_figures({"m", "imp.json", importance_json()})[0], ImageFormat::Svg, svg);
  const std::string text = read_file(svg);
  EXPECT_EQ(text.rfind("<?xml", 0), 0u);
  EXPECT_NE(text.find("</svg>"), std::string::npos);
  EXPECT_NE(text.find("significant"), std::string::npos);
  // a broken program is an error naming the figure, and leaves no file behind
  Figure bad{"broken", "a broken figure", "plot $nothing using 1:2\n"};
  const std::string e = error_of([&] { render(bad, ImageFormat::Svg, dir / "broken.svg"); });
  EXPECT_NE(e.find("gnuplot failed on figure 'broken'"), std::string::npos) << e;
  EXPECT_FALSE(is_file(dir / "broken.svg"));
}


TEST(Figures, RolesMapDrawsWithAndWithoutPositionalLabels) {
  test::TempDir dir;
  auto roles = [](bool positional) {
    nlohmann::json heads = nlohmann::json::array();
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < 2; ++h)
        heads.push_back({{"head", "encoder_self:" + std::to_string(l) + ":" + std::to_string(h)},
                         {"positional", positional && h == 0}, {"positional_offset", -1},
                         {"syntactic", l == 1}, {"rare", false}, {"pruned", h == 1}});
    nlohmann::json j = {{"heads", heads}, {"shares", nullptr}, {"thresholds", nlohmann::json::object()}};
    stamp_format(j, ResultKind::Roles);
    return LabeledResult{"r", "roles.json", j};
  };
  const Figure with = roles_figure(roles(true));
  EXPECT_NE(with.script.find("\"-1\""), std::string::npos);  // the offset a positional head attends to
  EXPECT_NE(with.script.find("title 'pruned'"), std::string::npos);
  render(with, ImageFormat::Svg, dir / "a.svg");
  // no positional head: no label plot at all (gnuplot 5.4 crashes on an empty one)
  const Figure without = roles_figure(roles(false));
  EXPECT_EQ(without.script.find("with labels"), std::string::npos);
  render(without, ImageFormat::Svg, dir / "b.svg");
  EXPECT_NE(read_file(dir / "b.svg").find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace hp
