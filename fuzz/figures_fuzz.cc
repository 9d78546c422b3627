// The figure writers (report/figures.h) and the escaping they share (report/escape.h), with
// arbitrary text where result files, directory names and arguments put text: labels, method names,
// attention types, strategies, models, checkpoints, precisions. Input: three parts (fuzz_util.h's
// split): the label, and two strings for the other fields. gnuplot is not run; instead:
//  - every program of every figure, in every format, passes gnuplot_program_problem (datablocks
//    intact, literals closed on their line, nothing but set/unset/plot/array commands, no control
//    character, valid UTF-8, no "]]>");
//  - the label changes only the contents of string literals and comments: the program's skeleton is
//    the same as with a harmless label of the same length (so the label placement is the same);
//  - figure names are file-name parts; display_text is idempotent, leaves display text unchanged,
//    xml_text leaves no markup character, and gnuplot_string makes one literal.
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "headprune/io/formats.h"
#include "headprune/report/escape.h"
#include "headprune/report/figures.h"
#include "headprune/report/report.h"

namespace {

using nlohmann::json;

json stages() {
  return {{{"stage", "before"}, {"heads", 8}, {"params", 1000.0}, {"loss", 0.5}, {"metric", 0.9}},
          {{"stage", "removed"}, {"heads", 4}, {"params", 600.0}, {"loss", 0.6}, {"metric", 0.85}}};
}

// One result of each kind, with the fuzzed text in its string fields.
std::vector<hp::LabeledResult> results(const std::string& label, const std::string& a, const std::string& b) {
  std::vector<hp::LabeledResult> out;
  auto add = [&](json j, hp::ResultKind kind, const std::string& source) {
    if (kind != hp::ResultKind::History) hp::stamp_format(j, kind);
    out.push_back({label, source + a, std::move(j)});
  };
  json heads = json::array();
  for (const std::string& t : {b, std::string("cross")})
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < 2; ++h)
        heads.push_back({{"attn_type", t}, {"layer", l}, {"head", h}, {"score", 0.1 * (l + h)}, {"significant", h}});
  add({{"maps", {{{"method", a}, {"normalization", b}, {"unit", "head"}, {"heads", heads}}}}}, hp::ResultKind::Importance,
      "importance.json");
  add({{"metric", b}, {"n_heads", 8},
       {"points", {{{"strategy", a}, {"fraction", 0.25}, {"n_pruned", 2}, {"metric", 0.8}, {"metric_finetuned", 0.85}},
                   {{"strategy", a}, {"fraction", 0.5}, {"n_pruned", 4}, {"metric", 0.7}},
                   {{"strategy", b}, {"fraction", 0.5}, {"n_pruned", 4}, {"metric", 0.6}}}}},
      hp::ResultKind::Curve, "curve.json");
  const std::string h0 = b + ":0:0", h1 = b + ":1:1";
  add({{"heads", {h0, h1}}, {"options", {{"method", a}}}, {"result", {{"closed", {h1}}, {"target_kept", 1}}},
       {"log", {{{"step", 10}, {"p_open", {0.9, 0.5}}, {"expected_open", 1.4}}, {{"step", 20}, {"p_open", {0.95, 0.1}}}}},
       {"checkpoint", a}, {"metric", "accuracy"}, {"stages", stages()}, {"model", b}},
      hp::ResultKind::Gates, "gates.json");
  add({{"heads", {{{"head", h0}, {"positional", true}, {"positional_offset", -1}, {"pruned", true}},
                  {{"head", h1}, {"syntactic", true}}}},
       {"shares", nullptr}, {"thresholds", json::object()}},
      hp::ResultKind::Roles, "roles.json");
  json records = json::array();
  for (const auto& [m, ms] : {std::pair<std::string, double>{a, 10.0}, {b, 6.0}, {a + "/" + b, 5.0}})
    records.push_back({{"model", m}, {"batch", 1}, {"seq_len", 32}, {"precision", "fp32"}, {"median_ms", ms},
                       {"heads", 8}, {"params", 1000}, {"measured_speedup", 1.5}, {"ideal_speedup", 2.0}, {"mode", b}});
  records.push_back({{"model", a}, {"batch", 2}, {"seq_len", 32}, {"precision", b}, {"median_ms", 12.0}});
  add({{"environment", {{a, b}}}, {"records", records}}, hp::ResultKind::Bench, "bench.json");
  add(json::array({{{"step", 1}, {"train_loss", 2.0}, {"loss", 2.1}, {"accuracy", 0.5}},
                   {{"step", 2}, {"train_loss", 1.5}, {"loss", 1.8}, {"accuracy", 0.6}}}),
      hp::ResultKind::History, "history.json");
  add({{"checkpoint", a}, {"metric", "accuracy"}, {"plan", json::object()}, {"stages", stages()}, {"model", a + "/" + b}},
      hp::ResultKind::Summary, "summary.json");
  return out;
}

// Every figure of the results and its program in each format ("" programs for what was refused: a
// head name the text made unreadable is an error, which is fine).
std::vector<std::pair<hp::Figure, std::vector<std::string>>> programs(const std::vector<hp::LabeledResult>& rs) {
  std::vector<hp::Figure> figs;
  try {
    figs = hp::figures_for(rs, {});
  } catch (const std::invalid_argument&) {
    // a name that is no TYPE:LAYER:HEAD and the like: draw each kind alone
    for (const auto& r : rs) {
      try {
        for (auto& f : hp::figures_for({r}, {})) figs.push_back(std::move(f));
      } catch (const std::invalid_argument&) {
      }
    }
  }
  std::vector<std::pair<hp::Figure, std::vector<std::string>>> out;
  for (auto& f : figs) {
    std::vector<std::string> ps;
    for (auto fmt : {hp::ImageFormat::Svg, hp::ImageFormat::Png, hp::ImageFormat::Pdf})
      ps.push_back(hp::gnuplot_program(f, fmt, f.name + "." + hp::extension(fmt)));
    out.push_back({std::move(f), std::move(ps)});
  }
  return out;
}

void check_text(const std::string& s) {
  const std::string d = hp::display_text(s);
  if (hp::display_text(d) != d) hp_fuzz::finding("display_text is not idempotent");
  if (d.find("]]>") != std::string::npos) hp_fuzz::finding("display_text left \"]]>\"");
  for (unsigned char c : d)
    if (c < 0x20 || c == 0x7F) hp_fuzz::finding("display_text left a control character");
  bool plain = true;  // printable ASCII without "]]>" comes back as it is
  for (unsigned char c : s) plain &= c >= 0x20 && c < 0x7F;
  if (plain && s.find("]]>") == std::string::npos && d != s) hp_fuzz::finding("display_text changed plain text");
  const std::string x = hp::xml_text(s);
  if (x.find_first_of("<>\"'") != std::string::npos) hp_fuzz::finding("xml_text left a markup character");
  for (size_t at = x.find('&'); at != std::string::npos; at = x.find('&', at + 1))
    if (x.compare(at, 5, "&amp;") && x.compare(at, 4, "&lt;") && x.compare(at, 4, "&gt;") && x.compare(at, 6, "&quot;") &&
        x.compare(at, 5, "&#39;"))
      hp_fuzz::finding("xml_text left a bare '&'");
  // one literal, as gnuplot's scanner splits it (a quote it took for the end would leave two)
  std::string skeleton;
  if (!hp::gnuplot_program_problem("set title " + hp::gnuplot_string(s) + "\n", &skeleton).empty() ||
      skeleton != "set title ''\n")
    hp_fuzz::finding("gnuplot_string made a bad literal");
  if (!hp::gnuplot_program_problem("# " + hp::gnuplot_comment(s) + "\nset title 'x'\n").empty())
    hp_fuzz::finding("gnuplot_comment made a bad comment");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // longer text finds nothing new, and every figure holds it several times
  const auto parts = hp_fuzz::split(data, size, 3);
  for (const auto& p : parts) check_text(p);
  const auto hostile = programs(results(parts[0], parts[1], parts[2]));
  const auto harmless = programs(results(std::string(parts[0].size(), 'a'), parts[1], parts[2]));
  if (hostile.size() != harmless.size()) hp_fuzz::finding("the label changed which figures are drawn");
  for (size_t i = 0; i < hostile.size(); ++i) {
    const auto& [fig, progs] = hostile[i];
    if (fig.name.empty() || hp::file_name_part(fig.name) != fig.name) hp_fuzz::finding("figure name '" + fig.name + "' is no file name");
    for (size_t k = 0; k < progs.size(); ++k) {
      std::string skel, skel_harmless;
      const std::string problem = hp::gnuplot_program_problem(progs[k], &skel);
      if (!problem.empty()) hp_fuzz::finding("figure " + fig.name + ": " + problem + "\n" + progs[k]);
      const std::string p2 = hp::gnuplot_program_problem(harmless[i].second[k], &skel_harmless);
      if (!p2.empty()) hp_fuzz::finding("figure " + fig.name + " (harmless label): " + p2);
      if (skel != skel_harmless)
        hp_fuzz::finding("figure " + fig.name + ": the label changed the program's structure\n" + skel + "\n----\n" + skel_harmless);
    }
  }
  return 0;
}
