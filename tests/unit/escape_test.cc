// A result file is data, never a program (issue 50): the labels, names and paths that result files,
// directory names and arguments carry reach gnuplot programs and the HTML report only as text. The
// fixtures are hostile on purpose: quotes, newlines, a line "EOD" that would end a datablock, gnuplot's
// system(), "]]>" (which ends XML character data), <script>, backslashes and bytes that are no UTF-8.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <tuple>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "app.h"
#include "headprune/io/files.h"
#include "headprune/io/formats.h"
#include "headprune/report/escape.h"
#include "headprune/report/figures.h"
#include "headprune/report/report.h"
#include "test_util.h"

namespace hp {
namespace {

// ---- the escaping functions ---------------------------------------------------------------------

// Bytes that are no UTF-8, control characters and noncharacters become U+FFFD or a space; "]]>" gets
// an invisible U+200B; ordinary text, accents and other scripts included, is left alone.
TEST(GnuplotEscape, DisplayTextKeepsOrdinaryTextAndRepairsTheRest) {
  for (const std::string ok : {"SST-2 PASS 16 heads", "gradient 50%, fine-tuned", "naïve Ünïcödé — 日本語 ✓ 😀",
                               "a\\b 'q' \"dq\" `bt` @m $d # << EOD ]] >", ""})
    EXPECT_EQ(display_text(ok), ok);
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(display_text(std::string("a\nb\rc\td") + std::string(1, '\0') + "\x01\x1f\x7f" + "e"), "a b c d    e");
  EXPECT_EQ(display_text("\xc2\x85" "next line, \xc2\x9f"), " next line,  ");  // C1 controls too
  EXPECT_EQ(display_text("\xff" "x"), fffd + "x");
  EXPECT_EQ(display_text("\xc3\x28"), fffd + "(");                         // a lead byte without its continuation
  EXPECT_EQ(display_text("\xc0\xaf"), fffd + fffd);                        // overlong '/'
  EXPECT_EQ(display_text("\xed\xa0\x80"), fffd + fffd + fffd);             // a surrogate
  EXPECT_EQ(display_text("\xf4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // above U+10FFFF
  EXPECT_EQ(display_text("\xe6\x97"), fffd + fffd);                        // cut short
  EXPECT_EQ(display_text("\xef\xbf\xbe \xef\xbf\xbf"), fffd + " " + fffd);  // no XML characters
  EXPECT_EQ(display_text("a]]>b ]]]> ]] >"), "a]]\u200b>b ]]]\u200b> ]] >");
  for (const std::string s : {"a]]>b", "\xff]]>\n", "x\xe2\x80\x8b"})
    EXPECT_EQ(display_text(display_text(s)), display_text(s)) << s;  // idempotent
}

TEST(GnuplotEscape, LiteralsCommentsMarkupAndFileNames) {
  EXPECT_EQ(gnuplot_string("it's"), "'it''s'");
  EXPECT_EQ(gnuplot_string("'a''"), "'\u200b''a''\u200b'''");  // gnuplot reads '' only after another character
  EXPECT_EQ(gnuplot_string("a\\b `c` @d \"e\""), "'a\\b `c` @d \"e\"'");  // nothing is special inside '...'
  EXPECT_EQ(gnuplot_string("x'\nsystem('y')\n'"), "'x'' system(''y'') '''");
  EXPECT_EQ(gnuplot_comment("caption (a\nb) \\"), "caption (a b)");  // no line break, no trailing backslash
  EXPECT_EQ(xml_text("<script>&\"'é]]>"), "&lt;script&gt;&amp;&quot;&#39;é]]\u200b&gt;");
  EXPECT_EQ(file_name_part("importance_gradient-2"), "importance_gradient-2");
  EXPECT_EQ(file_name_part("../x y/é"), "___x_y___");
}

std::string without_zwsp(std::string s) {
  for (size_t at; (at = s.find("\u200b")) != std::string::npos;) s.erase(at, 3);
  return s;
}

// What gnuplot 5.4 itself reads from gnuplot_string: the text (as display text, and but for
// invisible U+200B), whatever quotes, backslashes, backquotes, macros or datablock syntax it holds.
// gnuplot's scanner reads '' as a quote only after another character: "'a", "''" and "a''b" need
// the U+200B before the quote.
TEST(GnuplotEscape, GnuplotReadsTheLiteralAsTheText) {
  test::TempDir tmp;
  const std::vector<std::string> texts = {"plain", "it's ''quoted''", "'", "''", "'''", "'a", "a'", "''a''b'",
                                          "back\\slash \\n \\", "`touch x` @foo $d",
                                          "\"dq\" \\\" EOD", "$junk << EOD", "# not a comment", "naïve 日本",
                                          "a]]>b", "line\nbreak", std::string("nul") + std::string(1, '\0') + "x"};
  std::string program = "set print '" + tmp / "printed.txt" + "'\n";
  for (const auto& t : texts) program += "print " + gnuplot_string(t) + "\n";
  std::ofstream(tmp / "p.gp") << program;
  const std::string cmd = "cd '" + tmp.path + "' && gnuplot p.gp > err.txt 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_file(tmp / "err.txt");
  std::istringstream printed(read_file(tmp / "printed.txt"));
  std::string line;
  for (const auto& t : texts) {
    ASSERT_TRUE(std::getline(printed, line)) << t;
    EXPECT_EQ(without_zwsp(line), without_zwsp(display_text(t))) << t;
  }
  EXPECT_FALSE(is_file(tmp / "x"));
}

TEST(GnuplotEscape, ProgramCheckRefusesWhatEscapedText) {
  EXPECT_EQ(gnuplot_program_problem("# a caption\nset title 'x'' y'\n$a << EOD\n1 2 \"0.5\"\nEOD\n"
                                    "array l[1]\nl[1] = 'a (8 heads)'\n"
                                    "plot $a using 1:2:(l[$0+1]) with labels offset 1,-0.9 font ',9', \\\n"
                                    "     NaN with lines title 'k', 0.5 with lines\nunset output\n"),
            "");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"$a << EOD\n1 2 \"x\"\nEOD\nsystem(\"touch m\")\n", "line 4: 'system'"},
      {"$a << EOD\n1 2 \"x\nEOD\n", "line 2: a quoted field"},
      {"$a << EOD\n1 2 \"a\\\"\"\nEOD\n", "line 2: a backslash"},
      {"$a << EOD\nEODX\nEOD\n", "line 2: a datablock row begins with EOD"},
      {"$a << EOD\n1 2\n", "ends inside a datablock"},
      {"set title 'x'\nsystem('touch m')\n", "line 2: 'system'"},
      {"set title system('touch m')\n", "line 1: 'system'"},
      {"set title \"x\"\n", "line 1: '\"' outside"},
      {"set title 'x\nset xlabel 'y'\n", "line 1: a string literal does not end"},
      {"# caption \\\nset title 'x'\n", "line 1: a comment ends in a backslash"},
      {"set title `touch m`\n", "'`' outside"},
      {"set title @m\n", "'@' outside"},
      {"set title 'a'; unset key\n", "';' outside"},
      {"!touch m\n", "'!' outside"},
      {"plot '<touch m' using 1:2\n", "a plot element that reads no datablock"},
      {"plot $a using 1:2, 'data.txt'\n", "a plot element that reads no datablock"},
      {"set output '|touch m'\n", "the output is not a file name"},
      {"foo = 'x'\n", "not a command headprune writes"},
      {"set title 'a\x01'\n", "line 1: a control character"},
      {"set title 'a]]>'\n", "line 1: a control character"},
      {"set title '\xff'\n", "line 1: a control character"}};
  for (const auto& [program, problem] : bad) {
    const std::string said = gnuplot_program_problem(program);
    EXPECT_NE(said.find(problem), std::string::npos) << program << "\n -> " << said;
  }
}

// Every figure of the committed study results passes the check, in every format.
TEST(GnuplotEscape, ProgramCheckPassesTheFiguresOfTheStudies) {
  const std::string results = std::string(HP_FIXTURES_DIR) + "/../../bench/results";
  int checked = 0;
  for (const char* study : {"sst2_study.json", "llama_gqa.json"}) {
    const std::string path = results + "/" + study;
    ASSERT_TRUE(is_file(path)) << path;
    const nlohmann::json j = read_json_file(path);
    std::vector<LabeledResult> rs;
    for (const char* key : {"importance", "curve", "curve_finetuned", "passconc", "bench", "prune_50", "roles"})
      if (j.contains(key)) rs.push_back({std::string(study) + " " + key, path + "#/" + key, j[key]});
    for (const auto& f : figures_for(rs, {}))
      for (ImageFormat fmt : {ImageFormat::Svg, ImageFormat::Png, ImageFormat::Pdf}) {
        EXPECT_EQ(gnuplot_program_problem(gnuplot_program(f, fmt, f.name + "." + extension(fmt))), "") << f.name;
        ++checked;
      }
  }
  EXPECT_GT(checked, 30);
}

// ---- hostile result files, run through plot and report ---------------------------------------

// gnuplot code that creates `marker`, written without a slash (a directory name cannot hold one):
// gnuplot's double-quoted strings read \057 as '/'.
std::string touch(const std::string& marker) {
  std::string octal;
  for (char c : marker) octal += c == '/' ? std::string("\\057") : std::string(1, c);
  return "system(\"touch " + octal + "\")";
}
// Breaks out of a datablock row: closes the quoted label, ends the block, runs the command, and opens
// a block that swallows the rest of the row so the program stays valid and the attack unnoticed.
std::string out_of_datablock(const std::string& marker) {
  return "\"\nEOD\n" + touch(marker) + "\n$junk << EOD\n";
}
// Breaks out of a comment line (the caption at the top of a program) or a single-quoted string. (No
// '#': a result's path with one reads as PATH#/json/pointer.)
std::string out_of_line(const std::string& marker) { return "'\n" + touch(marker) + "\n'"; }

nlohmann::json two_stages() {
  return {{{"stage", "before"}, {"heads", 8}, {"params", 1000.0}, {"loss", 0.5}, {"metric", 0.9}},
          {{"stage", "removed"}, {"heads", 4}, {"params", 600.0}, {"loss", 0.6}, {"metric", 0.85}}};
}

// Every SVG in `dir` (NAME.svg) or inside the HTML page `file` (data: URIs) parsed by Python's XML
// parser (expat); "" when all are well-formed, else what Python said.
std::string xml_problems(const std::string& scratch, const std::string& target) {
  const std::string script = scratch + "/check_xml.py", out = scratch + "/check_xml.out";
  std::ofstream(script) << R"(import base64, os, re, sys
import xml.etree.ElementTree as ET
target, bad, n = sys.argv[1], [], 0
if os.path.isdir(target):
    docs = [(f, open(os.path.join(target, f), 'rb').read()) for f in sorted(os.listdir(target)) if f.endswith('.svg')]
else:
    page = open(target, 'rb').read()
    docs = [('figure %d' % i, base64.b64decode(m))
            for i, m in enumerate(re.findall(rb'data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)', page))]
for name, d in docs:
    try:
        ET.fromstring(d)
        n += 1
    except ET.ParseError as e:
        bad.append('%s: %s' % (name, e))
if not docs:
    bad.append('no SVG in ' + target)
print('; '.join(bad) if bad else 'ok %d' % n)
)";
  const std::string cmd = "python3 '" + script + "' '" + target + "' > '" + out + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::string said = read_file(out);
  while (!said.empty() && said.back() == '\n') said.pop_back();
  if (rc != 0) return "python3 failed (" + std::to_string(rc) + "): " + said;
  return said.rfind("ok ", 0) == 0 ? "" : said;
}

struct HostileRun {
  std::string dir;                   // the run directory
  std::vector<std::string> markers;  // files a successful attack would create
};

// A run directory whose prune summary and bench file would each run a command in the programs that
// `plot` and `report` wrote before issue 50; with `hostile_name`, the directory's own name would too
// (a label in the figures, and a part of every caption and source path).
HostileRun hostile_run(const test::TempDir& tmp, bool hostile_name) {
  HostileRun h;
  for (const char* m : {"ran_checkpoint", "ran_model", "ran_dirname"}) h.markers.push_back(tmp / m);
  h.dir = tmp / "run";
  if (hostile_name) {
    h.dir = tmp / ("run" + out_of_line(h.markers[2]) + out_of_datablock(h.markers[2]) + " \\\"]]> <b>\xff\xfe\\");
    try {
      make_directories(h.dir);
    } catch (const std::exception&) {
      h.dir = tmp / "run";  // a file system that refuses such names: the file contents still attack
    }
  }
  make_directories(h.dir);
  // The starting checkpoint is drawn as "<checkpoint's last two path components>, unpruned". (JSON
  // text is UTF-8 by definition: bytes that are no UTF-8 come through the directory name.)
  const std::string checkpoint = "runs/base" + out_of_datablock(h.markers[0]) + "]]> <script>alert(1)</script> é" +
                                 "\x01\x1b[31m\xef\xbf\xbf";
  const std::string model = "pruned'model" + out_of_datablock(h.markers[1]) + out_of_line(h.markers[1]);
  nlohmann::json summary = {{"checkpoint", checkpoint}, {"metric", "accuracy"}, {"plan", nlohmann::json::object()},
                            {"stages", two_stages()}, {"model", model}};
  stamp_format(summary, ResultKind::Summary);
  write_json_file(h.dir + "/summary.json", summary);
  nlohmann::json bench = {{"environment", {{"host", "x\nEOD\n" + touch(h.markers[1]) + std::string(1, '\0') + "<b>"}}},
                          {"records", nlohmann::json::array()}};
  for (int batch : {1, 2})
    for (const auto& [m, ms, heads] : {std::tuple<std::string, double, int>{checkpoint, 10.0, 8}, {model, 6.0, 4}})
      bench["records"].push_back({{"model", m}, {"batch", batch}, {"seq_len", 32}, {"precision", "fp32"},
                                  {"median_ms", ms * batch}, {"heads", heads}, {"params", 1000},
                                  {"measured_speedup", 10.0 / ms}, {"ideal_speedup", 8.0 / heads}});
  stamp_format(bench, ResultKind::Bench);
  write_json_file(h.dir + "/bench.json", bench);
  return h;
}

void expect_no_marker(const HostileRun& h, const std::string& when) {
  for (const auto& m : h.markers) EXPECT_FALSE(is_file(m)) << when << " ran a command from a result file: " << m;
}

std::string error_of_call(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// `plot` of `inputs` (with `labels`, when given) into out_dir; "" or the error it threw.
std::string plot_error(const std::vector<std::string>& inputs, const std::string& out_dir,
                       const std::vector<ImageFormat>& formats = {ImageFormat::Svg},
                       const std::vector<std::string>& labels = {}) {
  PlotRequest plot;
  plot.inputs = inputs;
  plot.labels = labels;
  plot.out_dir = out_dir;
  plot.formats = formats;
  return error_of_call([&] { run_plot(plot); });
}

// `plot` of the run's files, and gnuplot on the saved programs ("edit and rerun").
void plot_and_rerun(const test::TempDir& tmp, const HostileRun& h, const std::string& out) {
  EXPECT_EQ(plot_error({h.dir + "/bench.json", h.dir + "/summary.json"}, out, {ImageFormat::Svg, ImageFormat::Png}), "");
  expect_no_marker(h, "plot");
  ASSERT_TRUE(is_file(out + "/pareto.svg"));
  EXPECT_TRUE(is_file(out + "/pareto.png"));
  EXPECT_EQ(xml_problems(tmp.path, out), "");
  int programs = 0;
  for (const auto& e : list_directory(out)) {
    if (e.name.size() < 3 || e.name.substr(e.name.size() - 3) != ".gp") continue;
    ++programs;
    EXPECT_EQ(gnuplot_program_problem(read_file(e.path)), "") << e.name;
    const std::string cmd = "cd '" + out + "' && gnuplot '" + e.name + "' > /dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << e.name;
  }
  EXPECT_EQ(programs, 2);  // bench and pareto
  expect_no_marker(h, "gnuplot on a saved NAME.gp");
  EXPECT_EQ(xml_problems(tmp.path, out), "");
}

void report_and_check(const test::TempDir& tmp, const HostileRun& h) {
  ReportRequest report;
  report.runs = {h.dir};
  report.out = tmp / "report.html";
  report.title = "report <script>" + out_of_line(h.markers[2]);
  EXPECT_EQ(error_of_call([&] { run_report(report); }), "");
  expect_no_marker(h, "report");
  ASSERT_TRUE(is_file(report.out));
  EXPECT_EQ(xml_problems(tmp.path, report.out), "");
  const std::string html = read_file(report.out);
  EXPECT_NE(html.find("data-figure=\""), std::string::npos);
  EXPECT_EQ(html.find("<script>"), html.rfind("<script>"));  // the page's own script; the labels' are text
  EXPECT_EQ(html.find("<b>"), std::string::npos);
}

TEST(HostileLabels, PlotRunsNoCommandFromAResultFile) {
  test::TempDir tmp;
  const HostileRun h = hostile_run(tmp, false);
  plot_and_rerun(tmp, h, tmp / "plot");
}

TEST(HostileLabels, ReportRunsNoCommandFromAResultFile) {
  test::TempDir tmp;
  report_and_check(tmp, hostile_run(tmp, false));
}

TEST(HostileLabels, RunDirectoryNameRunsNoCommand) {
  test::TempDir tmp;
  const HostileRun h = hostile_run(tmp, true);
  EXPECT_NE(h.dir, tmp / "run") << "this file system refuses the hostile name: only the file contents were tried";
  plot_and_rerun(tmp, h, tmp / "plot");
  report_and_check(tmp, h);
}

// gnuplot's SVG terminal escapes '<' and '&' in text but not '>', nor control characters: a "]]>"
// (which may not occur in XML character data), a C0 control or U+FFFF in a label made the SVG
// unreadable, and the HTML report's figure with it (issue 50, 7a).
TEST(HostileLabels, LabelsKeepTheSvgValidXml) {
  test::TempDir tmp;
  nlohmann::json history = nlohmann::json::array();
  for (int step = 1; step <= 2; ++step)
    history.push_back({{"step", step}, {"train_loss", 2.0 / step}, {"loss", 2.1 / step}, {"accuracy", 0.5 + 0.1 * step}});
  make_directories(tmp / "run");
  write_json_file(tmp / "run/history.json", history);
  const std::string label = "a ]]> b <c> & d \x01\x1b[31m \xef\xbf\xbf é";
  EXPECT_EQ(plot_error({tmp / "run/history.json"}, tmp / "plot", {ImageFormat::Svg}, {label}), "");
  EXPECT_EQ(xml_problems(tmp.path, tmp / "plot"), "");
  // the text is drawn as it was, but for the invisible space that parts "]]" from ">"
  const std::string svg = is_file(tmp / "plot/history.svg") ? read_file(tmp / "plot/history.svg") : "";
  EXPECT_NE(svg.find("a ]]\u200b> b &lt;c> &amp; d"), std::string::npos) << svg;
  EXPECT_NE(svg.find("\xef\xbf\xbd é: training"), std::string::npos);  // U+FFFF, no XML character, became U+FFFD

  ReportRequest report;
  report.runs = {tmp / "run"};
  report.labels = {label};
  report.out = tmp / "report.html";
  EXPECT_EQ(error_of_call([&] { run_report(report); }), "");
  EXPECT_EQ(xml_problems(tmp.path, report.out), "");
}

// A figure is named after what it draws (an importance map after its method): a method from a
// result file becomes a file-name part, so "../" cannot put a figure outside the output directory.
TEST(HostileLabels, FigureNamesStayInsideTheOutput) {
  test::TempDir tmp;
  nlohmann::json heads = nlohmann::json::array();
  for (int h = 0; h < 2; ++h) heads.push_back({{"attn_type", "encoder_self"}, {"layer", 0}, {"head", h}, {"score", 0.5 * h}});
  nlohmann::json imp = {{"maps", {{{"method", "../../escaped"}, {"heads", heads}}}}};
  stamp_format(imp, ResultKind::Importance);
  make_directories(tmp / "a/b");
  write_json_file(tmp / "a/b/importance.json", imp);
  EXPECT_EQ(plot_error({tmp / "a/b/importance.json"}, tmp / "a/b/plot"), "");
  EXPECT_TRUE(is_file(tmp / "a/b/plot/importance_______escaped.svg"));
  EXPECT_FALSE(is_file(tmp / "a/escaped.svg"));
  EXPECT_FALSE(is_file(tmp / "escaped.svg"));
}

// A NUL ends a line for gnuplot (it reads lines as C strings): the rest of the line, the closing
// quote and a continuation backslash with it, was lost, and the next line read as a command.
TEST(HostileLabels, NulInATextKeepsTheProgramWhole) {
  test::TempDir tmp;
  nlohmann::json curve = {{"metric", "accuracy"}, {"n_heads", 8}, {"points", nlohmann::json::array()}};
  for (const std::string& st : {std::string("a") + std::string(1, '\0') + "b", std::string("c\r\n\t\x7f\xc2\x85" "d")})
    for (int k = 1; k <= 2; ++k)
      curve["points"].push_back({{"strategy", st}, {"fraction", k / 8.0}, {"n_pruned", k}, {"metric", 0.9 - 0.1 * k}});
  stamp_format(curve, ResultKind::Curve);
  write_json_file(tmp / "curve.json", curve);
  EXPECT_EQ(plot_error({tmp / "curve.json"}, tmp / "plot"), "");
  EXPECT_EQ(xml_problems(tmp.path, tmp / "plot"), "");
  const std::string svg = is_file(tmp / "plot/curve.svg") ? read_file(tmp / "plot/curve.svg") : "";
  EXPECT_NE(svg.find("a b"), std::string::npos);  // each control character drawn as a space
  EXPECT_NE(svg.find("c     d"), std::string::npos);
}

TEST(HostileLabels, CommandLineLabelsRunNoCommand) {
  test::TempDir tmp;
  const HostileRun h = hostile_run(tmp, false);
  const std::string label = "cli" + out_of_datablock(h.markers[2]) + out_of_line(h.markers[2]) + "\xc3\x28";
  std::vector<std::string> args = {"headprune", "plot", h.dir + "/bench.json", h.dir + "/summary.json", "--label",
                                   label, "--label", label + "2", "--format", "svg", "--out", tmp / "cli"};
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  EXPECT_EQ(cli::run(static_cast<int>(argv.size()), argv.data(), out, err), 0) << err.str();
  expect_no_marker(h, "headprune plot");
  EXPECT_TRUE(is_file(tmp / "cli/pareto.svg"));
  EXPECT_EQ(xml_problems(tmp.path, tmp / "cli"), "");
}

// `report` draws its figures into a scratch directory of its own beside the page
// (.OUT.headprune-figures.PID.RANDOM), never into the system's temp directory, where a killed report
// left them (issue 50, 7b; tests/e2e/report_killed.sh kills one); a killed report's is removed by the
// next, and a user's OUT.partial is never touched.
TEST(ReportScratch, BesideThePageAndRemovedByTheNextReport) {
  test::TempDir tmp;
  nlohmann::json history = nlohmann::json::array();
  for (int step = 1; step <= 2; ++step) history.push_back({{"step", step}, {"train_loss", 1.0 / step}, {"loss", 1.1 / step}});
  make_directories(tmp / "run");
  write_json_file(tmp / "run/history.json", history);
  make_directories(tmp / "report.html.partial");
  write_file_atomic(tmp / "report.html.partial/mine.txt", "a user's file");
  const pid_t child = ::fork();  // a process that is gone, as a killed report's
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::string stale = tmp / (".report.html.headprune-figures." + std::to_string(child) + ".0123abcd");
  make_directories(stale);
  write_file_atomic(stale + "/.headprune-output", "{\"kind\": \"scratch\"}");
  write_file_atomic(stale + "/stale.svg", "from a killed report");
  // a "gnuplot" that says where it was run, then draws
  std::ofstream(tmp / "gnuplot.sh") << "#!/bin/sh\npwd >> '" << tmp / "where.txt" << "'\nexec gnuplot \"$@\"\n";
  ASSERT_EQ(::chmod((tmp / "gnuplot.sh").c_str(), 0755), 0);
  make_directories(tmp / "systmp");
  const char* old_tmpdir = std::getenv("TMPDIR");
  const std::string saved = old_tmpdir ? old_tmpdir : "";
  ::setenv("TMPDIR", (tmp / "systmp").c_str(), 1);
  ::setenv("HP_GNUPLOT", (tmp / "gnuplot.sh").c_str(), 1);
  ReportRequest report;
  report.runs = {tmp / "run"};
  report.out = tmp / "report.html";
  const std::string error = error_of_call([&] { run_report(report); });
  ::unsetenv("HP_GNUPLOT");
  if (old_tmpdir) ::setenv("TMPDIR", saved.c_str(), 1);
  else ::unsetenv("TMPDIR");
  EXPECT_EQ(error, "");
  EXPECT_TRUE(is_file(report.out));
  const std::string where = read_file(tmp / "where.txt");
  EXPECT_EQ(where.rfind(tmp.path + "/.report.html.headprune-figures." + std::to_string(::getpid()) + ".", 0), 0u) << where;
  EXPECT_FALSE(is_directory(stale));
  EXPECT_EQ(read_file(tmp / "report.html.partial/mine.txt"), "a user's file");
  for (const auto& e : list_directory(tmp.path))  // nothing of the report's left beside the page
    EXPECT_EQ(e.name.find("headprune"), std::string::npos) << e.name;
  EXPECT_TRUE(list_directory(tmp / "systmp").empty());
}

}  // namespace
}  // namespace hp
