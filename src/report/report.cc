// `plot` (figures from result files) and `report` (one self-contained HTML page of one run directory
// or several side by side, figures inlined as SVG) behind the library calls of report/report.h.
#include "headprune/report/report.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "headprune/io/files.h"
#include "headprune/io/outputs.h"
#include "headprune/report/escape.h"
#include "headprune/version.h"

namespace hp {

namespace fs = std::filesystem;

namespace {

std::string default_label(const std::string& source) {
  const auto hash = source.find('#');
  if (hash != std::string::npos) {
    std::string ptr = source.substr(hash + 1);
    while (!ptr.empty() && ptr.back() == '/') ptr.pop_back();
    const auto slash = ptr.rfind('/');
    const std::string last = slash == std::string::npos ? ptr : ptr.substr(slash + 1);
    if (!last.empty()) return last;
  }
  const fs::path p(source.substr(0, hash));
  const std::string dir = p.parent_path().filename().string();
  return dir.empty() || dir == "." ? p.stem().string() : dir;
}

void make_names_unique(std::vector<Figure>& figs, const std::vector<std::string>& labels) {
  std::map<std::string, int> count;
  for (const auto& f : figs) ++count[f.name];
  std::set<std::string> used;
  for (size_t i = 0; i < figs.size(); ++i) {
    std::string n = figs[i].name;
    if (count[n] > 1 && !labels[i].empty()) n += "_" + file_name_part(labels[i]);
    std::string u = n;
    for (int k = 2; used.count(u); ++k) u = n + "_" + std::to_string(k);
    used.insert(u);
    figs[i].name = u;
  }
}

}  // namespace

LabeledResult load_labeled(const std::string& source, const std::string& label, const ResultKind* expect) {
  LabeledResult r;
  r.source = source;
  r.label = label.empty() ? default_label(source) : label;
  if (expect) {
    r.json = read_result(source, *expect);
  } else {
    r.json = read_any_result(source).first;
  }
  return r;
}

std::vector<Figure> figures_for(const std::vector<LabeledResult>& results, const FigureOptions& opts,
                                std::vector<std::string>* notes) {
  std::vector<Figure> figs;
  std::vector<std::string> labels;
  auto add = [&](Figure f, const std::string& label) {
    figs.push_back(std::move(f));
    labels.push_back(label);
  };
  std::vector<LabeledResult> curves, runs, benches;
  for (const auto& r : results) {
    const auto kind = result_kind(r.json, r.source);
    if (!kind) throw std::invalid_argument(r.source + ": not a headprune result");
    switch (*kind) {
      case ResultKind::History: add(history_figure(r), r.label); break;
      case ResultKind::Importance:
        for (auto& f : importance_figures(r)) add(std::move(f), r.label);
        break;
      case ResultKind::Curve: curves.push_back(r); break;
      case ResultKind::Gates:
        add(gates_figure(r), r.label);
        runs.push_back(r);
        break;
      case ResultKind::Roles: add(roles_figure(r), r.label); break;
      case ResultKind::Bench:
        add(bench_figure(r), r.label);
        benches.push_back(r);
        break;
      case ResultKind::Summary: runs.push_back(r); break;
    }
  }
  if (!curves.empty()) add(curve_figure(curves, opts.axis), curves.size() == 1 ? curves[0].label : "");
  for (const auto& b : benches) {
    if (runs.empty()) continue;
    try {
      add(pareto_figure(b, runs, opts.pareto), b.label);
    } catch (const std::invalid_argument& e) {
      if (opts.require_pareto) throw;
      if (notes) notes->push_back(std::string("no accuracy-latency front: ") + e.what());
    }
  }
  make_names_unique(figs, labels);
  return figs;
}

// ---- plot ----------------------------------------------------------------------------------------

nlohmann::json PlotResult::to_json() const {
  nlohmann::json figs = nlohmann::json::array();
  for (const auto& f : figures) {
    nlohmann::json files_of = nlohmann::json::array();
    for (const auto& file : files)
      if (file.rfind(f.name + ".", 0) == 0) files_of.push_back(file);
    figs.push_back({{"name", f.name}, {"caption", f.caption}, {"files", files_of}});
  }
  return {{"generator", std::string("headprune ") + HP_VERSION_STRING}, {"figures", figs}};
}

void PlotResult::print(std::ostream& out) const {
  for (const auto& f : figures) out << f.name << ": " << f.caption << "\n";
  out << "wrote " << files.size() << " files for " << figures.size() << " figures to " << out_dir << "\n";
}

PlotResult run_plot(const PlotRequest& req) {
  if (req.inputs.empty()) throw std::invalid_argument("plot: no result files given");
  if (!req.labels.empty() && req.labels.size() != req.inputs.size())
    throw std::invalid_argument("plot: " + std::to_string(req.labels.size()) + " labels for " +
                                std::to_string(req.inputs.size()) + " inputs (give one per input, or none)");
  if (req.formats.empty()) throw std::invalid_argument("plot: no image format");
  std::optional<ResultKind> expect;
  if (!req.expect.empty()) {
    for (const auto& f : result_formats())
      if (req.expect == f.name) expect = f.kind;
    if (!expect) {
      std::string kinds;
      for (const auto& f : result_formats()) kinds += (kinds.empty() ? "" : ", ") + std::string(f.name);
      throw std::invalid_argument("plot: --kind '" + req.expect + "': expected one of " + kinds);
    }
  }
  std::vector<LabeledResult> results;
  for (size_t i = 0; i < req.inputs.size(); ++i)
    results.push_back(load_labeled(req.inputs[i], req.labels.empty() ? "" : req.labels[i], expect ? &*expect : nullptr));
  FigureOptions fo = req.figures;
  fo.require_pareto = true;
  PlotResult res;
  res.figures = figures_for(results, fo);
  if (!req.only.empty()) {
    std::vector<Figure> kept;
    for (auto& f : res.figures)
      for (const auto& prefix : req.only)
        if (f.name.rfind(prefix, 0) == 0) {
          kept.push_back(std::move(f));
          break;
        }
    if (kept.empty()) {
      std::string names;
      for (const auto& f : res.figures) names += (names.empty() ? "" : ", ") + f.name;
      throw std::invalid_argument("plot: --only matches none of the figures these results give (" + names + ")");
    }
    res.figures = std::move(kept);
  }
  if (res.figures.empty())
    throw std::invalid_argument("plot: nothing to draw (prune summaries alone draw the accuracy-latency front only "
                                "together with a bench file)");
  std::vector<NamedPath> inputs;
  for (const auto& in : req.inputs) inputs.push_back({in.substr(0, in.find('#')), "the result"});
  OutputDir out(req.out_dir, {"plot", req.overwrite, false, inputs});
  res.out_dir = req.out_dir;
  for (const auto& f : res.figures) {
    for (ImageFormat fmt : req.formats) {
      const std::string file = f.name + "." + extension(fmt);
      render(f, fmt, join_path(out.path(), file));
      res.files.push_back(file);
    }
    if (req.scripts) {
      const std::string file = f.name + ".gp";
      write_file_atomic(join_path(out.path(), file),
                        gnuplot_program(f, ImageFormat::Svg, f.name + ".svg"));
      res.files.push_back(file);
    }
  }
  write_json_file(join_path(out.path(), "figures.json"), res.to_json());
  out.commit();
  return res;
}

// ---- report --------------------------------------------------------------------------------------

namespace {

const std::set<std::string> kResultNames = {"importance.json", "curve.json", "gates.json", "roles.json",
                                            "summary.json",    "history.json"};
const std::set<std::string> kNotResults = {"config.json", "tokenizer.json", "trainer_state.json", "train_config.json",
                                           "plan.json",   "tokenizer_config.json", "figures.json", "vocab.json"};

std::string base64(const std::string& in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += t[v >> 18], out += t[(v >> 12) & 63], out += t[(v >> 6) & 63], out += t[v & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += t[v >> 18], out += t[(v >> 12) & 63], out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += t[v >> 18], out += t[(v >> 12) & 63], out += t[(v >> 6) & 63], out += '=';
  }
  return out;
}

std::string cell(const nlohmann::json& v, int digits = 4) {
  if (v.is_null()) return "";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) {
    std::ostringstream o;
    o << std::setprecision(digits) << v.get<double>();
    return o.str();
  }
  if (v.is_string()) return xml_text(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  return xml_text(v.dump());
}

struct Table {
  std::string caption;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string html() const {
    std::ostringstream s;
    s << "<table><caption>" << xml_text(caption) << "</caption><thead><tr>";
    for (const auto& h : header) s << "<th>" << xml_text(h) << "</th>";
    s << "</tr></thead><tbody>";
    for (const auto& r : rows) {
      s << "<tr>";
      for (const auto& c : r) s << "<td>" << c << "</td>";
      s << "</tr>";
    }
    s << "</tbody></table>\n";
    return s.str();
  }
};

// The stage table of a prune summary or a gates result.
std::optional<Table> stage_table(const LabeledResult& r) {
  if (!r.json.contains("stages") || !r.json["stages"].is_array()) return std::nullopt;
  Table t;
  const std::string metric = r.json.value("metric", std::string("metric"));
  t.caption = r.label + ": " + metric + " at each stage (" + r.source + ")";
  t.header = {"stage", "heads", "parameters", "loss", metric};
  for (const auto& s : r.json["stages"])
    t.rows.push_back({cell(s.value("stage", nlohmann::json())), cell(s.value("heads", nlohmann::json())),
                      cell(s.value("params", nlohmann::json()), 10), cell(s.value("loss", nlohmann::json())),
                      cell(s.value("metric", nlohmann::json()))});
  return t;
}

Table bench_table(const LabeledResult& r) {
  Table t;
  t.caption = r.label + ": latency (" + r.source + ")";
  t.header = {"model", "precision", "batch", "length", "median ms", "p10 ms", "p90 ms", "speedup", "FLOP ideal"};
  for (const auto& x : r.json["records"]) {
    auto v = [&](const char* k) { return x.contains(k) ? x[k] : nlohmann::json(); };
    t.rows.push_back({cell(v("model")), cell(v("precision")), cell(v("batch")), cell(v("seq_len")), cell(v("median_ms")),
                      cell(v("p10_ms")), cell(v("p90_ms")), cell(v("measured_speedup"), 3), cell(v("ideal_speedup"), 3)});
  }
  return t;
}

std::optional<Table> environment_table(const LabeledResult& r) {
  if (!r.json.contains("environment") || !r.json["environment"].is_object()) return std::nullopt;
  Table t;
  t.caption = r.label + ": where it ran";
  t.header = {"", ""};
  for (const auto& [k, v] : r.json["environment"].items()) t.rows.push_back({xml_text(k), cell(v)});
  return t;
}

const char* kStyle = R"(
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .9em; color: #444; }
table { border-collapse: collapse; margin: 1em 0; font-size: .9em; }
caption { text-align: left; font-weight: bold; padding-bottom: .3em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.notes { color: #8a4b00; } code { background: #f3f3f3; padding: 0 .2em; }
)";

// Counts the figures the browser drew: <body data-figures="drawn/total">, for headless checks.
const char* kCheckScript = R"(
<script>
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('figure img');
  var drawn = 0;
  imgs.forEach(function (i) { if (i.complete && i.naturalWidth > 0 && i.getBoundingClientRect().height > 0) drawn++; });
  document.body.setAttribute('data-figures', drawn + '/' + imgs.length);
});
</script>
)";

}  // namespace

std::vector<LabeledResult> find_results(const std::string& run_dir, const std::string& run_label,
                                        std::vector<std::string>* skipped) {
  std::vector<LabeledResult> out;
  if (is_file(run_dir) || run_dir.find('#') != std::string::npos) {
    out.push_back(load_labeled(run_dir, run_label));
    return out;
  }
  if (!is_directory(run_dir)) throw std::invalid_argument("report: " + run_dir + ": no such run directory or result file");
  std::vector<fs::path> files;
  walk_directory(run_dir, [&](const DirEntry& e) {
    if (e.is_dir) return e.depth < 4 && !(e.name.size() > 8 && e.name.substr(e.name.size() - 8) == ".partial");  // not an unfinished output
    if (e.is_file && fs::path(e.name).extension() == ".json" && !kNotResults.count(e.name)) files.push_back(e.path);
    return false;
  });
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const std::string name = f.filename().string();
    const bool expected = kResultNames.count(name) > 0;
    if (!expected && fs::file_size(f) > (16u << 20)) continue;
    nlohmann::json j;
    try {
      j = read_json_file(f.string());
    } catch (const std::exception&) {
      if (expected) throw;  // a damaged result is an error; another JSON file is not ours
      continue;
    }
    const auto kind = result_kind(j, f.string());
    if (!kind) {
      if (expected && skipped) skipped->push_back(f.string() + ": not a headprune result, skipped");
      continue;
    }
    LabeledResult r;
    r.source = f.string();
    const std::string rel = fs::relative(f.parent_path(), run_dir).string();
    r.label = rel == "." || rel.empty() ? run_label : run_label + "/" + rel;
    if (!expected && *kind == ResultKind::Bench) r.label = run_label + "/" + f.stem().string();
    r.json = std::move(j);
    out.push_back(std::move(r));
  }
  return out;
}

void ReportResult::print(std::ostream& o) const {
  o << "wrote " << out << ": " << n_results << " results, " << n_figures << " figures, " << n_tables << " tables\n";
  for (const auto& n : notes) o << "note: " << n << "\n";
}

namespace {
// The report's marker: an HTML file whose head names headprune as its generator is an earlier report.
constexpr const char* kGeneratorMeta = "<meta name=\"generator\" content=\"headprune ";
OutputFile report_output(const std::string& path) {
  return {path, "--out", "an HTML report", file_head_contains(kGeneratorMeta)};
}

// Its arguments, and --out: before any work (io/outputs.h).
void check_report_request(const ReportRequest& req) {
  if (req.runs.empty()) throw std::invalid_argument("report: no run directory given");
  if (req.out.empty()) throw std::invalid_argument("report: --out FILE.html is required");
  if (!req.labels.empty() && req.labels.size() != req.runs.size())
    throw std::invalid_argument("report: " + std::to_string(req.labels.size()) + " labels for " +
                                std::to_string(req.runs.size()) + " runs (give one per run, or none)");
  std::vector<NamedPath> inputs;
  for (const auto& r : req.runs) inputs.push_back({r.substr(0, r.find('#')), "the run"});
  check_output_file(report_output(req.out), inputs);
}

// One run of the report: its label (unique in the page), where it is, and its results.
struct ReportRun {
  std::string label, path;
  std::vector<LabeledResult> results;
};

// The label of run i: the one given, else the run directory's name (or the result's default label);
// made unique among `used` with _2, _3, ...
std::string run_label(const ReportRequest& req, size_t i, std::set<std::string>& used) {
  std::string label = req.labels.empty() ? "" : req.labels[i];
  if (label.empty()) {
    std::string p = req.runs[i].substr(0, req.runs[i].find('#'));
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    label = is_directory(p) ? fs::path(p).filename().string() : default_label(req.runs[i]);
  }
  for (int k = 2; used.count(label); ++k) label += "_" + std::to_string(k);
  used.insert(label);
  return label;
}

// The runs with their results; a run with none is an error. Counts the results and keeps the notes.
std::vector<ReportRun> load_runs(const ReportRequest& req, ReportResult& res) {
  std::vector<ReportRun> runs;
  std::set<std::string> used_labels;
  for (size_t i = 0; i < req.runs.size(); ++i) {
    const std::string label = run_label(req, i, used_labels);
    ReportRun run{label, req.runs[i], find_results(req.runs[i], label, &res.notes)};
    if (run.results.empty())
      throw std::invalid_argument("report: " + req.runs[i] +
                                  " holds no headprune result (importance.json, curve.json, gates.json, roles.json, "
                                  "summary.json, history.json or a bench JSON)");
    res.n_results += run.results.size();
    runs.push_back(std::move(run));
  }
  return runs;
}

// The page's figures: drawn as SVG into the scratch directory, then inlined as data: URIs, each named
// PREFIX_NAME, unique in the page.
class PageFigures {
 public:
  PageFigures(std::string scratch, ReportResult& res) : scratch_(std::move(scratch)), res_(res) {}

  std::string html(std::vector<Figure> figs, const std::string& prefix) {
    for (auto& f : figs) {
      std::string n = file_name_part(prefix) + "_" + f.name;
      for (int k = 2; names_.count(n); ++k) n = file_name_part(prefix) + "_" + f.name + "_" + std::to_string(k);
      names_.insert(n);
      f.name = n;
    }
    std::string out;
    for (const auto& f : figs) out += figure_html(f);
    return out;
  }

 private:
  std::string figure_html(const Figure& f) {
    const std::string path = join_path(scratch_, f.name + ".svg");
    render(f, ImageFormat::Svg, path);
    ++res_.n_figures;
    return "<figure data-figure=\"" + xml_text(f.name) + "\"><img alt=\"" + xml_text(f.caption) +
           "\" width=\"" + std::to_string(f.width) + "\" height=\"" + std::to_string(f.height) +
           "\" src=\"data:image/svg+xml;base64," + base64(read_file(path)) + "\"><figcaption>" + xml_text(f.caption) +
           "</figcaption></figure>\n";
  }

  std::string scratch_;
  ReportResult& res_;
  std::set<std::string> names_;
};

// A run's section: what it holds, its tables, its figures.
std::string run_section(const ReportRun& run, const FigureOptions& fo, PageFigures& figures, ReportResult& res) {
  std::ostringstream body;
  body << "<section><h2>" << xml_text(run.label) << "</h2><p>From <code>" << xml_text(run.path) << "</code>: ";
  std::map<std::string, int> kinds;
  for (const auto& r : run.results) ++kinds[to_string(*result_kind(r.json, r.source))];
  bool first = true;
  for (const auto& [k, n] : kinds) body << (first ? "" : ", ") << n << " " << k << (n > 1 ? " files" : " file"), first = false;
  body << ".</p>\n";
  for (const auto& r : run.results) {
    if (auto t = stage_table(r)) body << t->html(), ++res.n_tables;
    if (result_kind(r.json, r.source) == ResultKind::Bench) {
      body << bench_table(r).html(), ++res.n_tables;
      if (auto e = environment_table(r)) body << e->html(), ++res.n_tables;
    }
  }
  body << figures.html(figures_for(run.results, fo, &res.notes), run.label);
  body << "</section>\n";
  return body.str();
}

// The curves of every run on one axis, when there are runs and curves to compare.
std::string compared_section(const std::vector<ReportRun>& runs, CurveAxis axis, PageFigures& figures) {
  if (runs.size() <= 1) return "";
  std::vector<LabeledResult> curves;
  for (const auto& run : runs)
    for (const auto& r : run.results)
      if (result_kind(r.json, r.source) == ResultKind::Curve) curves.push_back(r);
  std::string cmp;
  if (curves.size() > 1) cmp = figures.html({curve_figure(curves, axis)}, "compare");
  if (cmp.empty()) return "";
  return "<section><h2>Compared</h2>\n" + cmp + "</section>\n";
}

std::string notes_section(const std::vector<std::string>& notes) {
  if (notes.empty()) return "";
  std::ostringstream body;
  body << "<section><h2>Notes</h2><ul class=\"notes\">";
  for (const auto& n : notes) body << "<li>" << xml_text(n) << "</li>";
  body << "</ul></section>\n";
  return body.str();
}

// The whole page around the sections.
std::string report_page(const std::string& title, size_t n_runs, const std::string& body) {
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n" << kGeneratorMeta << HP_VERSION_STRING
       << "\">\n<title>" << xml_text(title)
       << "</title>\n<style>" << kStyle << "</style></head>\n<body>\n<h1>" << xml_text(title) << "</h1>\n<p>"
       << "Written by headprune " << HP_VERSION_STRING << " from " << n_runs << (n_runs == 1 ? " run" : " runs")
       << ". Self-contained: the figures are inline SVG, drawn with gnuplot from the result files named under each "
          "one; <code>headprune plot</code> writes them as SVG, PNG or PDF.</p>\n"
       << body << kCheckScript << "</body></html>\n";
  return html.str();
}

}  // namespace

ReportResult run_report(const ReportRequest& req) {
  check_report_request(req);
  ReportResult res;
  res.out = req.out;
  const std::vector<ReportRun> runs = load_runs(req, res);

  // Figures are drawn as SVG into a scratch directory beside the page (.OUT.headprune-figures.PID.RANDOM),
  // then inlined as data: URIs. Not into the system's temp directory: a report killed there (SIGKILL
  // cannot be caught) left its figures, tens of megabytes, where nothing removes them; beside OUT the
  // next report to OUT removes them (io/outputs.h), and the lock keeps two reports off one OUT.
  const PathLock lock(req.out);
  const ScratchDir scratch_dir = ScratchDir::beside(req.out, "figures");
  PageFigures figures(scratch_dir.path(), res);
  std::string body;
  for (const auto& run : runs) body += run_section(run, req.figures, figures, res);
  body += compared_section(runs, req.figures.axis, figures);
  body += notes_section(res.notes);
  write_output_file(report_output(req.out), report_page(req.title, runs.size(), body));
  return res;
}

}  // namespace hp
