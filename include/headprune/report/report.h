// `headprune plot` and `headprune report` as library calls: figures from result files, and one
// self-contained HTML page (no network, no external file: figures are inline SVG images) with the
// figures and tables of one run directory or of several side by side.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/io/formats.h"
#include "headprune/report/figures.h"

namespace hp {

// A result read from SOURCE (PATH or PATH#/pointer), labelled: `label`, else the pointer's last
// token, else the name of the directory holding the file. With `expect`, a result of another kind
// is refused naming SOURCE.
LabeledResult load_labeled(const std::string& source, const std::string& label = "",
                           const ResultKind* expect = nullptr);

struct FigureOptions {
  CurveAxis axis = CurveAxis::FractionPruned;
  ParetoOptions pareto;
  bool require_pareto = false;  // bench and run files given but no front possible: an error (else skipped)
};

// The figures of a set of results: one per importance map, one for all curves together, one per gates
// log, roles file, bench file and training history, and the accuracy-latency front of each bench file
// against the pruning/gates runs among the results. Figure names are unique.
std::vector<Figure> figures_for(const std::vector<LabeledResult>& results, const FigureOptions& opts,
                                std::vector<std::string>* notes = nullptr);

struct PlotRequest {
  std::vector<std::string> inputs;  // result sources
  std::vector<std::string> labels;  // optional, one per input
  std::string expect;               // optional kind name (importance, curve, ...): every input must be one
  std::string out_dir;
  bool overwrite = false;
  std::vector<ImageFormat> formats = {ImageFormat::Svg, ImageFormat::Png};
  bool scripts = true;  // keep NAME.gp (the gnuplot program, data inline) beside each figure
  std::vector<std::string> only;  // draw only figures whose name starts with one of these (importance, curve, pareto, ...)
  FigureOptions figures;
};

struct PlotResult {
  std::string out_dir;
  std::vector<Figure> figures;
  std::vector<std::string> files;  // relative to out_dir
  nlohmann::json to_json() const;  // figures.json: name, caption, files
  void print(std::ostream& out) const;
};

// Writes OUT/NAME.{svg,png,pdf} (+ NAME.gp) for every figure and OUT/figures.json; OUT as a whole
// (refused when it holds something, unless overwrite).
PlotResult run_plot(const PlotRequest& req);

struct ReportRequest {
  std::vector<std::string> runs;  // run directories (searched for result files) or result files
  std::vector<std::string> labels;
  std::string out;  // the HTML file
  std::string title = "headprune report";
  FigureOptions figures;
};

struct ReportResult {
  std::string out;
  size_t n_results = 0, n_figures = 0, n_tables = 0;
  std::vector<std::string> notes;  // what could not be drawn, and why
  void print(std::ostream& out) const;
};

// The results a run directory holds (importance.json, curve.json, gates.json, roles.json,
// summary.json, history.json and any bench JSON), searched a few levels deep, labelled by their
// directory relative to the run. A file named like a result that is none (the demo's summary.json)
// is skipped and, with `skipped`, listed there.
std::vector<LabeledResult> find_results(const std::string& run_dir, const std::string& run_label,
                                        std::vector<std::string>* skipped = nullptr);

ReportResult run_report(const ReportRequest& req);

}  // namespace hp
