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

}  // namespace
}  // namespace hp
