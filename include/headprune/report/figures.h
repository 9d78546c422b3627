// Figures from the result files headprune writes (io/formats.h): importance heat maps, pruning
// curves, gate trajectories, head-role maps, benchmark latencies, training histories and the
// accuracy-latency Pareto front of a set of pruned models.
//
// A figure is a gnuplot script with its data inline (datablocks), so it can be kept beside the image
// and restyled by hand; render() runs gnuplot (Debian gnuplot-nox; HP_GNUPLOT overrides the program)
// for SVG (vector), PNG or PDF. Colours: Okabe-Ito for categories and series, viridis for heat maps
// (both readable with the common colour-vision deficiencies); series also differ by point and dash.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace hp {

struct Figure {
  std::string name;     // file stem, e.g. "importance_gradient"
  std::string caption;  // one sentence: what is drawn and from which file (display text: report/escape.h)
  std::string script;   // gnuplot commands after the terminal and output (data inline; text from results only
                        // in string literals, report/escape.h)
  int width = 720, height = 440;  // pixels (SVG, PNG); PDF at 100 pixels per inch
};

// A result with the label it is drawn under (a run's name; defaults come from its path).
struct LabeledResult {
  std::string label, source;  // source: the file (or FILE#/pointer) it was read from
  nlohmann::json json;
};

enum class CurveAxis { FractionPruned, HeadsKept };

// One figure per map (method and unit): layers x heads by original id, one panel per attention type,
// significant heads (ablation with a bootstrap test) ringed.
std::vector<Figure> importance_figures(const LabeledResult& importance);
// Every strategy of every curve file on one axis; fine-tuned points dashed in the same colour.
Figure curve_figure(const std::vector<LabeledResult>& curves, CurveAxis axis);
// P(open) of every gate over training (colour = layer, dashed = closed at the end) above the expected
// number of open gates and the target.
Figure gates_figure(const LabeledResult& gates);
// Each head's role (positional, syntactic, rare-word, several, none), pruned heads crossed.
Figure roles_figure(const LabeledResult& roles);
// Median latency vs batch size for each model, precision and length; measured vs ideal speedup.
Figure bench_figure(const LabeledResult& bench);
// Training and validation loss and the task metric over steps.
Figure history_figure(const LabeledResult& history);

// The accuracy-latency plane: each model of a bench file that a pruning or gates run produced (its
// "model"), and the runs' starting checkpoint (their "before" stage); the non-dominated points are
// joined. Latency at one batch size, length and precision (0 / "" = the file's first).
struct ParetoOptions {
  int64_t batch = 0, seq_len = 0;
  std::string precision;
};
struct ParetoPoint {
  std::string label, model;
  double latency_ms = 0, metric = 0, params = 0;
  int64_t heads = 0;
  bool front = false;
};
// `metric_name` and `used` (the options with the file's defaults filled in) are optional outputs.
std::vector<ParetoPoint> pareto_points(const LabeledResult& bench, const std::vector<LabeledResult>& runs,
                                       const ParetoOptions& opts, std::string* metric_name = nullptr,
                                       ParetoOptions* used = nullptr);
Figure pareto_figure(const LabeledResult& bench, const std::vector<LabeledResult>& runs, const ParetoOptions& opts);

enum class ImageFormat { Svg, Png, Pdf };
ImageFormat parse_image_format(const std::string& s);  // svg, png or pdf
std::string extension(ImageFormat f);

// The whole gnuplot program for one output file (`output` as gnuplot is to open it: render passes a
// file name in the figure's directory, NAME.gp names NAME.svg beside it).
std::string gnuplot_program(const Figure& fig, ImageFormat format, const std::string& output);
// Draws `fig` into `path` (written atomically), running gnuplot in path's directory; throws naming the
// figure and gnuplot's message when gnuplot fails or is missing, and refuses (never runs) a program
// that fails gnuplot_program_problem (report/escape.h).
void render(const Figure& fig, ImageFormat format, const std::string& path);

}  // namespace hp
