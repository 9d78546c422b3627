// `headprune plot` and `headprune report`: options -> PlotRequest / ReportRequest -> report/report.h.
#include <memory>
#include <ostream>

#include "common.h"
#include "headprune/report/report.h"

namespace hp::cli {

namespace {

void add_figure_options(CLI::App* sub, FigureOptions& f, std::shared_ptr<std::string> axis) {
  sub->add_option("--axis", *axis, "pruning curves: x axis 'pruned' (% of heads pruned) or 'kept' (heads kept)")
      ->check(CLI::IsMember({"pruned", "kept"}))
      ->capture_default_str();
  sub->add_option("--batch", f.pareto.batch, "accuracy-latency front: the bench batch size (default: the file's first)")
      ->check(at_least(1));
  sub->add_option("--seq", f.pareto.seq_len, "accuracy-latency front: the bench length (default: the file's first)")
      ->check(at_least(1));
  sub->add_option("--precision", f.pareto.precision, "accuracy-latency front: fp32, bf16 or int8 (default: the file's first)");
}

CurveAxis parse_axis(const std::string& s) { return s == "kept" ? CurveAxis::HeadsKept : CurveAxis::FractionPruned; }

}  // namespace

void register_plot(CLI::App& app, Context& ctx) {
  auto r = std::make_shared<PlotRequest>();
  auto formats = std::make_shared<std::vector<std::string>>(std::vector<std::string>{"svg", "png"});
  auto axis = std::make_shared<std::string>("pruned");
  auto* sub = app.add_subcommand(
      "plot", "Figures (SVG, PNG, PDF) from result files: importance, curves, gates, roles, bench, history, Pareto front");
  sub->add_option("results", r->inputs,
                  "result files (importance.json, curve.json, gates.json, roles.json, summary.json, history.json, "
                  "bench JSON); FILE#/json/pointer picks a result inside a larger JSON")
      ->required();
  sub->add_option("--label", r->labels, "a label per result, in order (default: its directory or pointer name)");
  sub->add_option("--kind", r->expect, "refuse any input that is not of this kind (importance, curve, gates, ...)");
  sub->add_option("--format", *formats, "svg, png and/or pdf")->check(CLI::IsMember({"svg", "png", "pdf"}))->capture_default_str();
  sub->add_option("--only", r->only, "draw only the figures whose name starts with this (importance, curve, gates, "
                  "roles, bench, history, pareto)");
  sub->add_flag("!--no-scripts", r->scripts, "do not keep NAME.gp (the gnuplot program with its data) beside each figure");
  add_figure_options(sub, r->figures, axis);
  add_out_option(sub, r->out_dir, r->overwrite, "write the figures and figures.json here");
  sub->get_option("--out")->required();
  sub->callback([&ctx, r, formats, axis] {
    r->formats.clear();
    for (const auto& f : *formats) r->formats.push_back(parse_image_format(f));
    r->figures.axis = parse_axis(*axis);
    run_plot(*r).print(ctx.out);
  });
}

void register_report(CLI::App& app, Context& ctx) {
  auto r = std::make_shared<ReportRequest>();
  auto axis = std::make_shared<std::string>("pruned");
  auto* sub = app.add_subcommand("report", "One self-contained HTML page with the figures and tables of runs");
  sub->add_option("runs", r->runs, "run directories (searched for result files), or result files")->required();
  sub->add_option("--label", r->labels, "a label per run, in order (default: the directory name)");
  sub->add_option("--title", r->title, "the page title")->capture_default_str();
  sub->add_option("--out", r->out, "the HTML file to write")->required();
  add_figure_options(sub, r->figures, axis);
  sub->callback([&ctx, r, axis] {
    r->figures.axis = parse_axis(*axis);
    run_report(*r).print(ctx.out);
  });
}

}  // namespace hp::cli
