// Each figure of report/figures.h as a gnuplot script with its data inline: importance heat maps,
// pruning curves, gates, head roles, benchmarks, training histories, the accuracy-latency front; then
// rendering them by running gnuplot.
#include "headprune/report/figures.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "headprune/io/files.h"
#include "headprune/report/escape.h"

namespace hp {

namespace {

// Okabe & Ito's colour-blind-safe palette, most distinct first (yellow last: weak on white).
const std::vector<std::string> kSeries = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                          "#E69F00", "#56B4E9", "#000000", "#F0E442"};
// Viridis, for ordered values.
const char* kViridis = "set palette defined (0 '#440154', 0.25 '#3b528b', 0.5 '#21918c', 0.75 '#5ec962', 1 '#fde725')\n";

std::string series_colour(size_t i) { return kSeries[i % kSeries.size()]; }
int point_type(size_t i) {
  static const int kTypes[] = {7, 5, 9, 13, 11, 4, 6, 8};  // filled circle, square, triangles, diamond, ...
  return kTypes[i % 8];
}

std::string num(double v) {
  if (!std::isfinite(v)) return "NaN";
  std::ostringstream o;
  o << std::setprecision(10) << v;
  return o.str();
}

// A datablock: $NAME << EOD, rows, EOD. Rows hold numbers and headprune's own short tokens, never
// text from a result (report/escape.h says why).
struct Block {
  Block() = default;
  explicit Block(std::string n) : name(std::move(n)) {}
  std::string name;
  std::ostringstream rows;
  std::string text() const { return "$" + name + " << EOD\n" + rows.str() + "EOD\n"; }
};

[[noreturn]] void bad(const LabeledResult& r, const std::string& what) {
  throw std::invalid_argument(r.source + ": " + what);
}

const nlohmann::json& need(const LabeledResult& r, const nlohmann::json& o, const char* key, const std::string& where) {
  if (!o.is_object() || !o.contains(key)) bad(r, where + " has no '" + key + "'");
  return o.at(key);
}

double need_number(const LabeledResult& r, const nlohmann::json& o, const char* key, const std::string& where) {
  const auto& v = need(r, o, key, where);
  if (!v.is_number()) bad(r, where + ": '" + key + "' must be a number, got " + v.dump());
  return v.get<double>();
}

std::string need_string(const LabeledResult& r, const nlohmann::json& o, const char* key, const std::string& where) {
  const auto& v = need(r, o, key, where);
  if (!v.is_string()) bad(r, where + ": '" + key + "' must be a string, got " + v.dump());
  return v.get<std::string>();
}

const nlohmann::json& need_array(const LabeledResult& r, const nlohmann::json& o, const char* key,
                                 const std::string& where) {
  const auto& v = need(r, o, key, where);
  if (!v.is_array()) bad(r, where + ": '" + key + "' must be an array");
  return v;
}

// "encoder_self:2:5" -> {"encoder_self", 2, 5}
struct HeadName {
  std::string type;
  int64_t layer = 0, head = 0;
};
HeadName parse_head(const LabeledResult& r, const std::string& s) {
  const auto a = s.find(':'), b = s.rfind(':');
  if (a == std::string::npos || a == b) bad(r, "head '" + s + "' is not TYPE:LAYER:HEAD");
  try {
    return {s.substr(0, a), std::stoll(s.substr(a + 1, b - a - 1)), std::stoll(s.substr(b + 1))};
  } catch (const std::exception&) {
    bad(r, "head '" + s + "' is not TYPE:LAYER:HEAD");
  }
}

std::string parent_directory(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

bool lower_is_better(const std::string& metric) { return metric == "perplexity" || metric == "loss"; }

std::string metric_axis(const std::string& metric) {
  if (metric == "accuracy") return "accuracy";
  if (metric == "bleu") return "BLEU";
  if (metric == "perplexity") return "perplexity (log scale)";
  if (metric == "loss") return "loss (nats per target)";
  return metric;
}

const char* kCommon =
    "set border lw 1 lc rgb '#333333'\n"
    "set grid lc rgb '#dddddd' lw 1\n"
    "set key noautotitle\n"
    "set tics nomirror\n";

}  // namespace

ImageFormat parse_image_format(const std::string& s) {
  if (s == "svg") return ImageFormat::Svg;
  if (s == "png") return ImageFormat::Png;
  if (s == "pdf") return ImageFormat::Pdf;
  throw std::invalid_argument("image format '" + s + "': expected svg, png or pdf");
}

std::string extension(ImageFormat f) {
  switch (f) {
    case ImageFormat::Svg: return "svg";
    case ImageFormat::Png: return "png";
    case ImageFormat::Pdf: return "pdf";
  }
  return "svg";
}

// ---- importance ----------------------------------------------------------------------------------

namespace {

// One map of an importance file: type -> layer -> head -> (score, significant), the types in the order
// they first appear, and the score range.
struct ImportanceMap {
  std::string method, norm;
  bool groups = false;  // unit kv_group: key/value groups, not heads
  bool higher = true;   // a higher score is more important
  std::map<std::string, std::map<int64_t, std::map<int64_t, std::pair<double, bool>>>> cells;
  std::vector<std::string> type_order;
  double lo = INFINITY, hi = -INFINITY;
  bool any_sig_column = false;  // some head has a "significant" field
};

// config.n_heads of the file, 0 when it does not say.
int64_t config_n_heads(const LabeledResult& r) {
  if (r.json.contains("config") && r.json["config"].is_object() && r.json["config"].contains("n_heads") &&
      r.json["config"]["n_heads"].is_number_integer())
    return r.json["config"]["n_heads"].get<int64_t>();
  return 0;
}

ImportanceMap read_importance_map(const LabeledResult& r, const nlohmann::json& m, const std::string& where) {
  ImportanceMap im;
  im.method = need_string(r, m, "method", where);
  const std::string unit = m.contains("unit") && m["unit"].is_string() ? m["unit"].get<std::string>() : "head";
  im.groups = unit == "kv_group";
  im.norm = m.contains("normalization") && m["normalization"].is_string() ? m["normalization"].get<std::string>()
                                                                           : "none";
  im.higher = !m.contains("higher_is_important") || m["higher_is_important"] != false;
  const auto& heads = need_array(r, m, "heads", where);
  for (size_t i = 0; i < heads.size(); ++i) {
    const auto& h = heads[i];
    const std::string hw = where + ".heads[" + std::to_string(i) + "]";
    const std::string type = need_string(r, h, "attn_type", hw);
    const double layer = need_number(r, h, "layer", hw), head = need_number(r, h, "head", hw);
    const double score = need_number(r, h, "score", hw);
    bool sig = false;
    if (h.contains("significant") && h["significant"].is_number()) {
      im.any_sig_column = true;
      sig = h["significant"].get<double>() > 0.5;
    }
    if (!im.cells.count(type)) im.type_order.push_back(type);
    im.cells[type][static_cast<int64_t>(layer)][static_cast<int64_t>(head)] = {score, sig};
    if (std::isfinite(score)) im.lo = std::min(im.lo, score), im.hi = std::max(im.hi, score);
  }
  if (im.cells.empty()) bad(r, where + " (" + im.method + ") scores no head");
  if (!(im.hi > im.lo)) im.hi = im.lo + 1;
  return im;
}

// Two datablocks per attention type t: $mt (head, layer, score, its label, the label's colour) and
// $st (the significant cells; a NaN row when none is).
std::string importance_blocks(const ImportanceMap& im) {
  std::string out;
  for (size_t t = 0; t < im.type_order.size(); ++t) {
    Block b{"m" + std::to_string(t)}, sigb{"s" + std::to_string(t)};
    for (const auto& [layer, hs] : im.cells.at(im.type_order[t])) {
      for (const auto& [head, v] : hs) {
        const double rel = (v.first - im.lo) / (im.hi - im.lo);
        b.rows << head << " " << layer << " " << num(v.first) << " \"" << std::setprecision(2) << std::fixed
               << v.first << std::defaultfloat << "\" " << (rel < 0.6 ? "0xffffff" : "0x000000") << "\n";
        if (v.second) sigb.rows << head << " " << layer << "\n";
      }
    }
    if (sigb.rows.str().empty()) sigb.rows << "NaN NaN\n";
    out += b.text() + sigb.text();
  }
  return out;
}

// The heat map of attention type t: layers by heads (or groups), the scores as labels when they fit,
// the significant cells framed; the colour box on the last panel only.
void importance_panel(std::ostream& s, const ImportanceMap& im, size_t t, int64_t n_heads_cfg) {
  const auto& layers_of_type = im.cells.at(im.type_order[t]);
  int64_t width = im.groups ? 0 : n_heads_cfg;
  for (const auto& [layer, hs] : layers_of_type)
    for (const auto& [head, v] : hs) width = std::max(width, head + 1);
  int64_t layers = 0;
  for (const auto& [layer, hs] : layers_of_type) layers = std::max(layers, layer + 1);
  s << "set title " << gnuplot_string(im.type_order[t]) << "\n";
  s << "set xlabel " << gnuplot_string(im.groups ? "key/value group" : "head (original id)") << "\n";
  s << "set ylabel 'layer'\n";
  s << "set xrange [-0.5:" << width - 0.5 << "]\nset yrange [-0.5:" << layers - 0.5 << "]\n";
  s << "set xtics 0,1," << width - 1 << " out\nset ytics 0,1," << layers - 1 << " out\n";
  if (t + 1 < im.type_order.size()) s << "unset colorbox\n";
  else s << "set colorbox\n";
  const bool labels = width * layers <= 160;
  s << "plot $m" << t << " using 1:2:(0.5):(0.5):3 with boxxyerror fc palette";
  if (labels) s << ", $m" << t << " using 1:2:4:5 with labels font ',8' tc rgb variable";
  if (im.any_sig_column)
    s << ", $s" << t << " using 1:2:(0.44):(0.44) with boxxyerror fs empty border lc rgb '#D55E00' lw 3 lc rgb '#D55E00'"
      << (t == 0 ? " title 'significant (bootstrap test)'" : "");
  s << "\n";
}

// One map's figure: a panel per attention type side by side, on one colour scale.
Figure importance_figure(const LabeledResult& r, const ImportanceMap& im, std::string name, int64_t n_heads_cfg) {
  const size_t n_types = im.type_order.size();
  Figure f;
  f.name = std::move(name);
  f.width = static_cast<int>(std::max<size_t>(1, n_types)) * 420 + 100;
  f.height = 400;
  std::ostringstream s;
  s << importance_blocks(im);
  s << kCommon << kViridis << "set style fill solid 1.0 noborder\nunset grid\n"
    << "set key at screen 0.5, screen 0.015 center bottom horizontal\nset bmargin 5\n";
  s << "set cbrange [" << num(im.lo) << ":" << num(im.hi) << "]\n";
  s << "set cblabel "
    << gnuplot_string(im.method + " score" + (im.norm != "none" ? " (" + im.norm + "-normalized)" : "") +
                      (im.higher ? "" : ", lower = more important"))
    << "\n";
  s << "set multiplot layout 1," << n_types << " title "
    << gnuplot_string(r.label + ": " + im.method + " importance of each " + (im.groups ? "key/value group" : "head"))
    << "\n";
  for (size_t t = 0; t < n_types; ++t) importance_panel(s, im, t, n_heads_cfg);
  s << "unset multiplot\n";
  f.script = s.str();
  f.caption = display_text(r.label + ": " + im.method + " importance" + (im.groups ? " of key/value groups" : "") +
                           (im.any_sig_column ? "; framed: significant in the bootstrap test" : "") + " (" + r.source +
                           ")");
  return f;
}

}  // namespace

std::vector<Figure> importance_figures(const LabeledResult& r) {
  const auto& maps = need_array(r, r.json, "maps", "importance file");
  const int64_t n_heads_cfg = config_n_heads(r);
  std::vector<Figure> figs;
  std::map<std::string, int> seen;
  for (size_t mi = 0; mi < maps.size(); ++mi) {
    const ImportanceMap im = read_importance_map(r, maps[mi], "maps[" + std::to_string(mi) + "]");
    const std::string key = file_name_part(im.method) + (im.groups ? "_groups" : "");  // the name is a file name
    const std::string name = "importance_" + key + (seen[key]++ ? "_" + std::to_string(seen[key]) : "");
    figs.push_back(importance_figure(r, im, name, n_heads_cfg));
  }
  return figs;
}

// ---- pruning curves ------------------------------------------------------------------------------

Figure curve_figure(const std::vector<LabeledResult>& curves, CurveAxis axis) {
  if (curves.empty()) throw std::invalid_argument("curve figure: no curve files");
  std::string metric;
  std::vector<Block> blocks;
  std::vector<std::pair<std::string, bool>> series;  // title, dashed (fine-tuned)
  std::vector<size_t> colour;
  size_t next_colour = 0;
  std::vector<std::string> sources;
  for (const auto& r : curves) {
    const std::string m = need_string(r, r.json, "metric", "curve file");
    if (metric.empty()) metric = m;
    else if (m != metric) bad(r, "its metric is " + m + ", not " + metric + " as in " + curves.front().source +
                                     " (curves on one axis must share a metric)");
    sources.push_back(r.source);
    const auto& pts = need_array(r, r.json, "points", "curve file");
    int64_t n_heads = r.json.contains("n_heads") && r.json["n_heads"].is_number_integer()
                          ? r.json["n_heads"].get<int64_t>() : 0;
    // strategy -> (x, metric, metric_finetuned)
    std::map<std::string, std::vector<std::array<double, 3>>> by;
    std::vector<std::string> order;
    for (size_t i = 0; i < pts.size(); ++i) {
      const std::string w = "points[" + std::to_string(i) + "]";
      const std::string st = need_string(r, pts[i], "strategy", w);
      const double frac = need_number(r, pts[i], "fraction", w);
      const double pruned = need_number(r, pts[i], "n_pruned", w);
      if (n_heads == 0 && frac > 0) n_heads = static_cast<int64_t>(std::llround(pruned / frac));
      const double y = need_number(r, pts[i], "metric", w);
      const double yf = pts[i].contains("metric_finetuned") && pts[i]["metric_finetuned"].is_number()
                            ? pts[i]["metric_finetuned"].get<double>() : NAN;
      if (!by.count(st)) order.push_back(st);
      by[st].push_back({pruned, y, yf});
    }
    for (const auto& st : order) {
      auto& v = by[st];
      std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
      const std::string title = curves.size() > 1 ? r.label + ": " + st : st;
      for (int ft = 0; ft < 2; ++ft) {
        Block b{"c" + std::to_string(blocks.size())};
        bool any = false;
        for (const auto& p : v) {
          const double y = ft ? p[2] : p[1];
          if (!std::isfinite(y)) continue;
          any = true;
          const double x = axis == CurveAxis::HeadsKept ? static_cast<double>(n_heads) - p[0]
                                                        : (n_heads > 0 ? 100.0 * p[0] / static_cast<double>(n_heads) : 0.0);
          b.rows << num(x) << " " << num(y) << "\n";
        }
        if (!any) continue;
        blocks.push_back(std::move(b));
        series.push_back({title + (ft ? " (fine-tuned)" : ""), ft == 1});
        colour.push_back(next_colour);  // a strategy and its fine-tuned points share a colour
      }
      ++next_colour;
    }
  }
  Figure f;
  f.name = "curve";
  std::ostringstream s;
  for (const auto& b : blocks) s << b.text();
  s << kCommon;
  s << "set key outside right top vertical Left reverse samplen 3 spacing 1.2\n";
  s << "set title " << gnuplot_string(curves.size() > 1 ? "pruning curves" : curves.front().label + ": pruning curve") << "\n";
  if (axis == CurveAxis::HeadsKept) s << "set xlabel 'attention heads kept'\nset xrange [*:*] reverse\n";
  else s << "set xlabel 'heads pruned (% of all attention heads)'\nset xrange [0:*]\n";
  s << "set ylabel " << gnuplot_string(metric_axis(metric)) << "\n";
  if (metric == "perplexity") s << "set logscale y\n";
  s << "plot ";
  for (size_t i = 0; i < blocks.size(); ++i) {
    s << (i ? ", \\\n     " : "") << "$" << blocks[i].name << " using 1:2 with linespoints lw 2 pt " << point_type(colour[i])
      << " ps 1.1 lc rgb '" << series_colour(colour[i]) << "' dt " << (series[i].second ? 2 : 1) << " title "
      << gnuplot_string(series[i].first);
  }
  s << "\n";
  f.script = s.str();
  f.width = 860;
  std::string src;
  for (const auto& x : sources) src += (src.empty() ? "" : ", ") + x;
  f.caption = display_text(metric + " against " + (axis == CurveAxis::HeadsKept ? "heads kept" : "the share of heads pruned") +
                           " for each strategy (" + src + ")");
  return f;
}

// ---- gates ---------------------------------------------------------------------------------------

Figure gates_figure(const LabeledResult& r) {
  const auto& names = need_array(r, r.json, "heads", "gates file");
  const auto& log = need_array(r, r.json, "log", "gates file");
  if (log.empty()) bad(r, "'log' is empty (no period was logged)");
  std::vector<HeadName> heads;
  for (const auto& n : names) {
    if (!n.is_string()) bad(r, "'heads' must hold head names");
    heads.push_back(parse_head(r, n.get<std::string>()));
  }
  std::set<std::string> closed;
  if (r.json.contains("result") && r.json["result"].is_object() && r.json["result"].contains("closed"))
    for (const auto& c : r.json["result"]["closed"])
      if (c.is_string()) closed.insert(c.get<std::string>());
  // layer groups in order of appearance -> colour
  std::map<std::string, size_t> group_colour;
  std::vector<std::string> group_order;
  for (const auto& h : heads) {
    const std::string g = h.type + " L" + std::to_string(h.layer);
    if (!group_colour.count(g)) group_colour[g] = group_order.size(), group_order.push_back(g);
  }
  std::vector<Block> per_head(heads.size());
  Block expected{"expected"};
  for (size_t i = 0; i < heads.size(); ++i) per_head[i].name = "g" + std::to_string(i);
  for (size_t k = 0; k < log.size(); ++k) {
    const std::string w = "log[" + std::to_string(k) + "]";
    const double step = need_number(r, log[k], "step", w);
    const auto& p = need_array(r, log[k], "p_open", w);
    if (p.size() != heads.size())
      bad(r, w + ": 'p_open' has " + std::to_string(p.size()) + " values for " + std::to_string(heads.size()) + " heads");
    for (size_t i = 0; i < heads.size(); ++i) {
      if (!p[i].is_number()) bad(r, w + ": 'p_open' must hold numbers");
      per_head[i].rows << num(step) << " " << num(p[i].get<double>()) << "\n";
    }
    if (log[k].contains("expected_open") && log[k]["expected_open"].is_number())
      expected.rows << num(step) << " " << num(log[k]["expected_open"].get<double>()) << "\n";
  }
  double target = NAN;
  if (r.json.contains("result") && r.json["result"].is_object() && r.json["result"].contains("target_kept") &&
      r.json["result"]["target_kept"].is_number())
    target = r.json["result"]["target_kept"].get<double>();
  std::string method = "gates";
  if (r.json.contains("options") && r.json["options"].contains("method") && r.json["options"]["method"].is_string())
    method = r.json["options"]["method"].get<std::string>();
  Figure f;
  f.name = "gates";
  f.width = 860;
  f.height = 620;
  std::ostringstream s;
  for (const auto& b : per_head) s << b.text();
  if (expected.rows.str().empty()) expected.rows << "NaN NaN\n";
  s << expected.text() << kCommon;
  s << "set multiplot title " << gnuplot_string(r.label + ": " + method + " gates over training") << "\n";
  s << "set lmargin at screen 0.09\nset rmargin at screen 0.72\n";
  s << "set tmargin at screen 0.90\nset bmargin at screen 0.42\n";
  s << "set key outside right top vertical Left reverse samplen 3\n";
  s << "set ylabel 'P(gate open)'\nset yrange [-0.02:1.02]\nset format x ''\n";
  s << "plot ";
  for (size_t i = 0; i < heads.size(); ++i) {
    const std::string g = heads[i].type + " L" + std::to_string(heads[i].layer);
    const std::string id = heads[i].type + ":" + std::to_string(heads[i].layer) + ":" + std::to_string(heads[i].head);
    s << (i ? ", \\\n     " : "") << "$g" << i << " using 1:2 with lines lw 1.5 lc rgb '"
      << series_colour(group_colour[g]) << "' dt " << (closed.count(id) ? 2 : 1);
  }
  for (size_t k = 0; k < group_order.size(); ++k)
    s << ", \\\n     NaN with lines lw 2 lc rgb '" << series_colour(k) << "' title " << gnuplot_string(group_order[k]);
  if (!closed.empty()) s << ", \\\n     NaN with lines lw 1.5 dt 2 lc rgb '#555555' title 'closed at the end'";
  s << "\n";
  s << "set tmargin at screen 0.36\nset bmargin at screen 0.09\n";
  s << "set format x '%g'\nset xlabel 'training step'\nset ylabel 'gates open (expected)'\nset yrange [0:*]\n";
  s << "plot $expected using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb '#0072B2' title 'expected open'";
  if (std::isfinite(target))
    s << ", " << num(target) << " with lines lw 1.5 dt 3 lc rgb '#D55E00' title 'target (" << num(target) << ")'";
  s << "\nunset multiplot\n";
  f.script = s.str();
  f.caption = display_text(r.label + ": probability that each gate is open over " + method +
                           " training (colour: layer; dashed: closed at the end), and the expected number open (" +
                           r.source + ")");
  return f;
}

// ---- head roles ----------------------------------------------------------------------------------

Figure roles_figure(const LabeledResult& r) {
  const auto& heads = need_array(r, r.json, "heads", "roles file");
  struct Cat {
    const char* name;
    const char* colour;
  };
  const std::vector<Cat> cats = {{"none", "#E5E5E5"},      {"positional", "#E69F00"}, {"syntactic", "#0072B2"},
                                 {"rare-word", "#009E73"}, {"several", "#CC79A7"}};
  Block cells{"cells"}, text{"text"}, crossed{"pruned"};
  int64_t width = 0, layers = 0;
  std::string type;
  for (size_t i = 0; i < heads.size(); ++i) {
    const std::string w = "heads[" + std::to_string(i) + "]";
    const HeadName h = parse_head(r, need_string(r, heads[i], "head", w));
    type = h.type;
    auto flag = [&](const char* k) { return heads[i].contains(k) && heads[i][k] == true; };
    const bool pos = flag("positional"), syn = flag("syntactic"), rare = flag("rare");
    const int n = pos + syn + rare;
    const size_t c = n > 1 ? 4 : pos ? 1 : syn ? 2 : rare ? 3 : 0;
    std::string colour = cats[c].colour;
    cells.rows << h.head << " " << h.layer << " 0x" << colour.substr(1) << "\n";
    std::string label;
    if (pos && heads[i].contains("positional_offset") && heads[i]["positional_offset"].is_number()) {
      const int64_t off = heads[i]["positional_offset"].get<int64_t>();
      label = (off > 0 ? "+" : "") + std::to_string(off);
    }
    if (!label.empty()) text.rows << h.head << " " << h.layer << " \"" << label << "\"\n";
    if (flag("pruned")) crossed.rows << h.head << " " << h.layer << "\n";
    width = std::max(width, h.head + 1);
    layers = std::max(layers, h.layer + 1);
  }
  if (heads.empty()) bad(r, "'heads' is empty");
  const bool any_text = !text.rows.str().empty();  // (gnuplot 5.4 crashes on a labels plot without labels)
  if (crossed.rows.str().empty()) crossed.rows << "NaN NaN\n";
  Figure f;
  f.name = "roles";
  f.width = std::max<int>(560, static_cast<int>(width) * 60 + 260);
  f.height = std::max<int>(320, static_cast<int>(layers) * 55 + 150);
  std::ostringstream s;
  s << cells.text() << (any_text ? text.text() : "") << crossed.text() << kCommon << "unset grid\nset style fill solid 1.0 border lc rgb 'white'\n";
  s << "set title " << gnuplot_string(r.label + ": head roles (" + type + ")") << "\n";
  s << "set xlabel 'head (original id)'\nset ylabel 'layer'\n";
  s << "set xrange [-0.5:" << width - 0.5 << "]\nset yrange [-0.5:" << layers - 0.5 << "]\n";
  s << "set xtics 0,1," << width - 1 << " out\nset ytics 0,1," << layers - 1 << " out\n";
  s << "set key outside right top vertical Left reverse\n";
  s << "plot $cells using 1:2:(0.5):(0.5):3 with boxxyerror lc rgb variable, \\\n";
  if (any_text) s << "     $text using 1:2:3 with labels font ',9', \\\n";
  s << "     $pruned using 1:2 with points pt 2 ps 2.5 lw 2 lc rgb '#000000' title 'pruned'";
  for (const auto& c : cats) s << ", \\\n     NaN with boxes fs solid 1.0 lc rgb '" << c.colour << "' title '" << c.name << "'";
  s << "\n";
  f.script = s.str();
  f.caption = display_text(r.label + ": the role of each head (positional heads labelled with the offset they attend to" +
                           std::string(crossed.rows.str() != "NaN NaN\n" ? "; crossed: pruned" : "") + ") (" + r.source + ")");
  return f;
}

// ---- benchmarks ----------------------------------------------------------------------------------

namespace {

std::string short_model(const std::string& path) {
  // the last two path components: runs/x/p50/model -> p50/model
  std::string p = path;
  while (!p.empty() && p.back() == '/') p.pop_back();
  const auto a = p.rfind('/');
  if (a == std::string::npos || a == 0) return p;
  const auto b = p.rfind('/', a - 1);
  return b == std::string::npos ? p : p.substr(b + 1);
}

}  // namespace

Figure bench_figure(const LabeledResult& r) {
  const auto& recs = need_array(r, r.json, "records", "bench file");
  if (recs.empty()) bad(r, "'records' is empty");
  // (model, precision, seq) -> [(batch, ms, measured, ideal)]
  std::map<std::string, std::vector<std::array<double, 4>>> series;
  std::vector<std::string> order;
  bool several_models = false;
  std::string first_model;
  for (size_t i = 0; i < recs.size(); ++i) {
    const std::string w = "records[" + std::to_string(i) + "]";
    const std::string model = need_string(r, recs[i], "model", w);
    if (first_model.empty()) first_model = model;
    several_models |= model != first_model;
    const std::string prec = recs[i].contains("precision") && recs[i]["precision"].is_string()
                                 ? recs[i]["precision"].get<std::string>() : "fp32";
    const std::string mode = recs[i].contains("mode") && recs[i]["mode"].is_string() ? recs[i]["mode"].get<std::string>() : "";
    const std::string key = short_model(model) + " " + prec + " len " + num(need_number(r, recs[i], "seq_len", w)) +
                            (mode == "train" ? " (training step)" : "");
    if (!series.count(key)) order.push_back(key);
    const double ideal = recs[i].contains("ideal_speedup") && recs[i]["ideal_speedup"].is_number()
                             ? recs[i]["ideal_speedup"].get<double>() : NAN;
    const double measured = recs[i].contains("measured_speedup") && recs[i]["measured_speedup"].is_number()
                                ? recs[i]["measured_speedup"].get<double>() : NAN;
    series[key].push_back({need_number(r, recs[i], "batch", w), need_number(r, recs[i], "median_ms", w), measured, ideal});
  }
  Figure f;
  f.name = "bench";
  f.width = 900;
  f.height = several_models ? 640 : 420;
  std::ostringstream s;
  for (size_t i = 0; i < order.size(); ++i) {
    auto& v = series[order[i]];
    std::sort(v.begin(), v.end());
    Block b{"b" + std::to_string(i)};
    for (const auto& p : v) b.rows << num(p[0]) << " " << num(p[1]) << " " << num(p[2]) << " " << num(p[3]) << "\n";
    s << b.text();
  }
  s << kCommon << "set logscale x 2\nset key outside right top vertical Left reverse samplen 3\n";
  if (several_models) {
    s << "set multiplot title " << gnuplot_string(r.label + ": latency and speedup") << "\n";
    s << "set lmargin at screen 0.09\nset rmargin at screen 0.62\nset tmargin at screen 0.90\nset bmargin at screen 0.52\n";
    s << "set format x ''\n";
  } else {
    s << "set title " << gnuplot_string(r.label + ": latency") << "\nset xlabel 'batch size (sequences)'\n";
  }
  s << "set logscale y\nset ylabel 'median latency (ms)'\nplot ";
  for (size_t i = 0; i < order.size(); ++i)
    s << (i ? ", \\\n     " : "") << "$b" << i << " using 1:2 with linespoints lw 2 pt " << point_type(i)
      << " lc rgb '" << series_colour(i) << "' title " << gnuplot_string(order[i]);
  s << "\n";
  if (several_models) {
    s << "set tmargin at screen 0.46\nset bmargin at screen 0.09\nunset logscale y\nset format x '%g'\n"
         "set xlabel 'batch size (sequences)'\nset ylabel 'speedup over the first model'\nset yrange [0:*]\nplot ";
    for (size_t i = 0; i < order.size(); ++i)
      s << (i ? ", \\\n     " : "") << "$b" << i << " using 1:3 with linespoints lw 2 pt " << point_type(i) << " lc rgb '"
        << series_colour(i) << "', $b" << i << " using 1:4 with lines lw 1.5 dt 2 lc rgb '" << series_colour(i) << "'";
    s << ", \\\n     NaN with lines lw 1.5 dt 2 lc rgb '#555555' title 'FLOP ideal'\nunset multiplot\n";
  }
  f.script = s.str();
  f.caption = display_text(r.label + ": median latency per batch" +
                           std::string(several_models ? "; measured speedup over the first model (solid) and the FLOP ideal (dashed)" : "") +
                           " (" + r.source + ")");
  return f;
}

// ---- training history ----------------------------------------------------------------------------

Figure history_figure(const LabeledResult& r) {
  if (!r.json.is_array() || r.json.empty()) bad(r, "a training history must be a non-empty array");
  std::string metric;
  for (const char* m : {"accuracy", "bleu", "perplexity"})
    if (r.json[0].contains(m)) metric = m;
  Block b{"h"};
  for (size_t i = 0; i < r.json.size(); ++i) {
    const auto& e = r.json[i];
    const std::string w = "[" + std::to_string(i) + "]";
    auto opt = [&](const char* k) { return e.contains(k) && e[k].is_number() ? e[k].get<double>() : NAN; };
    b.rows << num(need_number(r, e, "step", w)) << " " << num(opt("train_loss")) << " " << num(opt("loss")) << " "
           << num(metric.empty() ? NAN : opt(metric.c_str())) << "\n";
  }
  Figure f;
  f.name = "history";
  f.width = 860;
  std::ostringstream s;
  s << b.text() << kCommon << "set key outside right top vertical Left reverse samplen 3\n";
  s << "set title " << gnuplot_string(r.label + ": training") << "\nset xlabel 'training step'\nset ylabel 'loss (nats per target)'\n";
  if (!metric.empty())
    s << "set y2tics\nset y2label " << gnuplot_string(metric_axis(metric)) << "\n" << (metric == "perplexity" ? "set logscale y2\n" : "");
  s << "plot $h using 1:2 with linespoints lw 2 pt 7 ps 0.7 lc rgb '#0072B2' title 'train loss', \\\n"
       "     $h using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb '#D55E00' title 'validation loss'";
  if (!metric.empty())
    s << ", \\\n     $h using 1:4 axes x1y2 with linespoints lw 2 dt 2 pt 9 ps 0.9 lc rgb '#009E73' title "
      << gnuplot_string("validation " + metric + " (right axis)");
  s << "\n";
  f.script = s.str();
  f.caption = display_text(r.label + ": training and validation loss" + (metric.empty() ? "" : " and validation " + metric) +
                           " over training (" + r.source + ")");
  return f;
}

// ---- the accuracy-latency front ------------------------------------------------------------------

std::vector<ParetoPoint> pareto_points(const LabeledResult& bench, const std::vector<LabeledResult>& runs,
                                       const ParetoOptions& opts, std::string* metric_name, ParetoOptions* used) {
  const auto& recs = need_array(bench, bench.json, "records", "bench file");
  if (recs.empty()) bad(bench, "'records' is empty");
  ParetoOptions o = opts;
  const std::string w0 = "records[0]";
  if (o.batch == 0) o.batch = static_cast<int64_t>(need_number(bench, recs[0], "batch", w0));
  if (o.seq_len == 0) o.seq_len = static_cast<int64_t>(need_number(bench, recs[0], "seq_len", w0));
  if (o.precision.empty())
    o.precision = recs[0].contains("precision") && recs[0]["precision"].is_string() ? recs[0]["precision"].get<std::string>() : "fp32";
  // the metric of each model: a run's final stage for the model it wrote, its "before" stage for its checkpoint
  struct Known {
    std::string label;
    double metric;
  };
  std::map<std::string, Known> known;
  std::string metric;
  for (const auto& r : runs) {
    const std::string m = need_string(r, r.json, "metric", "run");
    if (metric.empty()) metric = m;
    else if (m != metric) bad(r, "its metric is " + m + ", not " + metric + " as in " + runs.front().source);
    const auto& stages = need_array(r, r.json, "stages", "run");
    if (stages.empty()) bad(r, "'stages' is empty");
    const std::string ck = need_string(r, r.json, "checkpoint", "run");
    if (!known.count(ck) && need_string(r, stages[0], "stage", "stages[0]") == "before")
      known[ck] = {short_model(ck) + ", unpruned", need_number(r, stages[0], "metric", "stages[0]")};
    // The model the run wrote: its "model", or (files written before it was recorded) model/ beside the file.
    std::string model;
    if (r.json.contains("model") && r.json["model"].is_string()) model = r.json["model"].get<std::string>();
    else if (r.source.find('#') == std::string::npos) model = join_path(parent_directory(r.source), "model");
    if (!model.empty()) known[model] = {r.label, need_number(r, stages.back(), "metric", "the last stage")};
  }
  if (metric_name) *metric_name = metric;
  if (used) *used = o;
  std::vector<ParetoPoint> pts;
  std::set<std::string> matched;
  for (size_t i = 0; i < recs.size(); ++i) {
    const std::string w = "records[" + std::to_string(i) + "]";
    const auto& rec = recs[i];
    const std::string prec = rec.contains("precision") && rec["precision"].is_string() ? rec["precision"].get<std::string>() : "fp32";
    if (static_cast<int64_t>(need_number(bench, rec, "batch", w)) != o.batch ||
        static_cast<int64_t>(need_number(bench, rec, "seq_len", w)) != o.seq_len || prec != o.precision)
      continue;
    const std::string model = need_string(bench, rec, "model", w);
    auto it = known.find(model);
    if (it == known.end()) continue;
    matched.insert(model);
    ParetoPoint p;
    p.label = it->second.label;
    p.model = model;
    p.metric = it->second.metric;
    p.latency_ms = need_number(bench, rec, "median_ms", w);
    p.heads = rec.contains("heads") && rec["heads"].is_number() ? rec["heads"].get<int64_t>() : 0;
    p.params = rec.contains("params") && rec["params"].is_number() ? rec["params"].get<double>() : 0;
    pts.push_back(p);
  }
  if (pts.size() < 2) {
    std::string models;
    for (const auto& [m, k] : known) models += (models.empty() ? "" : ", ") + m;
    bad(bench, "only " + std::to_string(pts.size()) + " of its models at batch " + std::to_string(o.batch) + ", length " +
                   std::to_string(o.seq_len) + ", " + o.precision + " are models of the runs given (" +
                   (models.empty() ? std::string("none") : models) +
                   "); an accuracy-latency front needs at least two (bench the runs' checkpoint and their model/ directories)");
  }
  const bool lower = lower_is_better(metric);
  for (auto& p : pts) {
    p.front = true;
    for (const auto& q : pts) {
      const bool better_or_equal = lower ? q.metric <= p.metric : q.metric >= p.metric;
      const bool strictly = q.latency_ms < p.latency_ms || (lower ? q.metric < p.metric : q.metric > p.metric);
      if (&q != &p && q.latency_ms <= p.latency_ms && better_or_equal && strictly) p.front = false;
    }
  }
  return pts;
}

Figure pareto_figure(const LabeledResult& bench, const std::vector<LabeledResult>& runs, const ParetoOptions& opts) {
  std::string metric;
  ParetoOptions o;
  auto pts = pareto_points(bench, runs, opts, &metric, &o);
  std::sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) { return a.latency_ms < b.latency_ms; });
  // Labels go right of their point, one line above it. A label that would overprint one placed
  // before (an earlier point's label reaching this point's x, within about a label's height) takes
  // the next free line: below the point, two lines above, two below; where all four are taken, the
  // first. Widths are estimated from the characters at the figure's size.
  // A line's label positions are a datablock; their text, which comes from result files (checkpoint
  // paths, run directories, --label), is a string array of single-quoted literals beside it, indexed
  // by the row ($0): a datablock field cannot hold every text exactly, nor safely (report/escape.h).
  auto y_of = [&](const ParetoPoint& p) { return metric == "perplexity" ? std::log(p.metric) : p.metric; };  // as drawn
  double x0 = pts.front().latency_ms, x1 = pts.back().latency_ms, y0 = y_of(pts.front()), y1 = y0;
  for (const auto& p : pts) y0 = std::min(y0, y_of(p)), y1 = std::max(y1, y_of(p));
  const double per_char = std::max(x1 - x0, 1e-9) / 70, dy = std::max(y1 - y0, 1e-9) / 20;
  const std::array<const char*, 4> lines = {"0.6", "-0.9", "1.8", "-2.1"};  // offsets in character heights
  struct Placed {
    double x, y, width;
  };
  std::array<std::vector<Placed>, 4> placed;
  std::vector<Block> labels;
  std::array<std::vector<std::string>, 4> texts;
  for (size_t i = 0; i < lines.size(); ++i) labels.emplace_back("labels" + std::to_string(i));
  Block all{"pts"}, front{"front"};
  for (const auto& p : pts) {
    const std::string text = p.label + " (" + std::to_string(p.heads) + " heads)";
    auto clear = [&](size_t line) {
      for (const auto& q : placed[line])
        if (p.latency_ms - q.x < q.width && std::abs(y_of(p) - q.y) < dy) return false;
      return true;
    };
    size_t line = 0;
    while (line < lines.size() && !clear(line)) ++line;
    if (line == lines.size()) line = 0;
    placed[line].push_back({p.latency_ms, y_of(p), per_char * static_cast<double>(text.size() + 2)});
    all.rows << num(p.latency_ms) << " " << num(p.metric) << "\n";
    labels[line].rows << num(p.latency_ms) << " " << num(p.metric) << "\n";
    texts[line].push_back(text);
    if (p.front) front.rows << num(p.latency_ms) << " " << num(p.metric) << "\n";
  }
  Figure f;
  f.name = "pareto";
  f.width = 860;
  std::ostringstream s;
  s << all.text();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (texts[i].empty()) continue;  // (gnuplot 5.4 crashes on a labels plot without labels)
    const std::string& name = labels[i].name;
    s << labels[i].text() << "array " << name << "[" << texts[i].size() << "]\n";
    for (size_t k = 0; k < texts[i].size(); ++k) s << name << "[" << k + 1 << "] = " << gnuplot_string(texts[i][k]) << "\n";
  }
  s << front.text() << kCommon << "set key below horizontal\n";
  s << "set title " << gnuplot_string(bench.label + ": " + metric + " against latency") << "\n";
  s << "set xlabel " << gnuplot_string("median latency (ms), batch " + std::to_string(o.batch) + " x length " +
                                       std::to_string(o.seq_len) + ", " + o.precision) << "\n";
  s << "set ylabel " << gnuplot_string(metric_axis(metric)) << "\nset offsets graph 0.08, graph 0.25, graph 0.08, graph 0.08\n";
  if (metric == "perplexity") s << "set logscale y\n";
  s << "plot $front using 1:2 with steps lw 2 lc rgb '#0072B2' title 'Pareto front', \\\n"
       "     $pts using 1:2 with points pt 7 ps 1.4 lc rgb '#D55E00' title 'models'";
  for (size_t i = 0; i < lines.size(); ++i)
    if (!texts[i].empty())
      s << ", \\\n     $" << labels[i].name << " using 1:2:(" << labels[i].name << "[$0+1]) with labels left offset 1,"
        << lines[i] << " font ',9'";
  s << "\n";
  f.script = s.str();
  f.caption = display_text(metric + " against measured latency of each model, the non-dominated ones joined (" + bench.source +
                           " with " + std::to_string(runs.size()) + " run file" + (runs.size() == 1 ? "" : "s") + ")");
  return f;
}

// ---- rendering -----------------------------------------------------------------------------------

std::string gnuplot_program(const Figure& fig, ImageFormat format, const std::string& output) {
  std::ostringstream s;
  s << "# " << gnuplot_comment(fig.caption) << "\n# Drawn by headprune with gnuplot; edit and rerun: gnuplot THIS_FILE\n";
  switch (format) {
    case ImageFormat::Svg:
      s << "set terminal svg size " << fig.width << "," << fig.height
        << " noenhanced font 'DejaVu Sans,12' background rgb 'white'\n";
      break;
    case ImageFormat::Png:
      s << "set terminal pngcairo size " << fig.width << "," << fig.height
        << " noenhanced font 'DejaVu Sans,10' background rgb 'white'\n";
      break;
    case ImageFormat::Pdf:
      s << "set terminal pdfcairo size " << num(fig.width / 100.0) << "in," << num(fig.height / 100.0)
        << "in noenhanced font 'DejaVu Sans,9'\n";
      break;
  }
  // gnuplot reads an output that begins with '|' as a command to pipe the figure into
  s << "set output " << gnuplot_string(output.rfind('|', 0) == 0 ? "./" + output : output) << "\n" << fig.script
    << "unset output\n";
  return s.str();
}

namespace {

std::string gnuplot_program_name() {
  const char* e = std::getenv("HP_GNUPLOT");
  return e && *e ? e : "gnuplot";
}

// Runs gnuplot in directory `dir` on the script file `script_name` there; its stderr goes to err_path.
// Returns the exit status (127: not found, 126: cannot enter dir).
int run_gnuplot(const std::string& dir, const std::string& script_name, const std::string& err_path) {
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("plot: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    FILE* err = std::freopen(err_path.c_str(), "w", stderr);
    (void)err;
    FILE* out = std::freopen("/dev/null", "w", stdout);
    (void)out;
    if (chdir(dir.c_str()) != 0) {
      std::fprintf(stderr, "cannot enter %s: %s", dir.c_str(), std::strerror(errno));
      _exit(126);
    }
    const std::string prog = gnuplot_program_name();
    execlp(prog.c_str(), prog.c_str(), script_name.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "%s", std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error(std::string("plot: waitpid failed: ") + std::strerror(errno));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace

void render(const Figure& fig, ImageFormat format, const std::string& path) {
  // gnuplot runs in the figure's directory and writes a file whose name headprune makes, renamed to
  // `path` when complete: the path, which may hold any byte, never goes into the program.
  static std::atomic<unsigned> counter{0};
  const std::string dir = parent_directory(path);
  const std::string tmp_name = "figure.tmp" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  const std::string tmp = join_path(dir, tmp_name), script = tmp + ".gp", err = tmp + ".err";
  const std::string program = gnuplot_program(fig, format, tmp_name);
  // Every program is checked before it runs: text from a result that escaped its string literal would
  // be a bug in the writers above, and is refused rather than run.
  if (const std::string problem = gnuplot_program_problem(program); !problem.empty())
    throw std::runtime_error("plot: figure '" + fig.name + "': refusing to run a gnuplot program of a shape headprune " +
                             "does not write (" + problem + "); this is a bug, please report it");
  write_file_atomic(script, program);
  const int status = run_gnuplot(dir, tmp_name + ".gp", err);
  std::string message;
  {
    std::ifstream in(err);
    std::stringstream ss;
    ss << in.rdbuf();
    message = ss.str();
  }
  std::remove(script.c_str());
  std::remove(err.c_str());
  // gnuplot reports some errors only as warnings; an empty output is a failure too.
  const bool empty = !is_file(tmp) || std::ifstream(tmp, std::ios::ate).tellg() <= 0;
  if (status != 0 || empty) {
    std::remove(tmp.c_str());
    if (status == 127)
      throw std::runtime_error("plot: cannot run '" + gnuplot_program_name() + "' (" + message +
                               "): figures are drawn by gnuplot; on Debian: apt-get install gnuplot-nox");
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
    throw std::runtime_error("plot: gnuplot failed on figure '" + fig.name + "' (exit " + std::to_string(status) +
                             "): " + (message.empty() ? "no output written" : message));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("plot: cannot write " + path + ": " + std::strerror(errno));
  }
}

}  // namespace hp
