// Text from result files, directory names and arguments on its way into what `plot` and `report`
// write: gnuplot programs (kept as NAME.gp, "edit and rerun"), the SVG gnuplot draws from them, and
// HTML pages. One function per target language, used by every writer, so that text stays text: a
// label can never end a string, a comment or a datablock and go on as a command (issue 50).
//
// Datablocks ($NAME << EOD ... EOD) carry numbers and headprune's own short tokens only, never text
// from a file: gnuplot 5.4 has no escape for '"' in a datablock's quoted field (the field ends at the
// next '"' whatever precedes it) and reads backslash escapes in some places and not in others, so no
// escaping keeps such text exact, and a line break in it ends the row. Text goes in as single-quoted
// string literals instead (gnuplot_string), where gnuplot substitutes nothing.
#pragma once

#include <string>
#include <string_view>

namespace hp {

// Text that every writer may show as it is: valid UTF-8 (each byte of a malformed sequence becomes
// U+FFFD), no control characters (C0, DEL and C1 become a space: a line break would end a program
// line, and XML allows none of C0 but tab and line breaks), no U+FFFE or U+FFFF (no XML characters
// either), and no "]]>": a U+200B ZERO WIDTH SPACE goes between "]]" and ">" (gnuplot's SVG terminal
// writes text as character data escaping only '<' and '&', and "]]>" may not occur there). Text that
// is all of these already (ordinary labels, accents and other UTF-8 included) comes back unchanged.
std::string display_text(std::string_view s);

// display_text(s) as a gnuplot string literal: single-quoted, where gnuplot reads no backslash
// escape and expands no `command` and no @macro; a quote is written twice (the only escape there).
std::string gnuplot_string(std::string_view s);

// display_text(s) for the rest of a gnuplot comment line ("# " + it): no line break, and no trailing
// backslash, which would join the next line to the comment.
std::string gnuplot_comment(std::string_view s);

// display_text(s) as HTML or XML text or attribute value (in double or single quotes): & < > " ' as
// character references.
std::string xml_text(std::string_view s);

// s as part of a file name: ASCII letters, digits, '-' and '_' kept, every other byte '_' (no '/',
// no "..": a figure named after a method in a result file stays inside its output directory).
std::string file_name_part(std::string_view s);

// Checks a gnuplot program against the shapes headprune's figure writers produce; "" when it holds,
// else the first problem, naming its line. render() refuses to run a program with a problem, and the
// tests and the figures fuzzer apply it to every program they build. The shapes:
//  - every line is display text (no control character but the line ends, valid UTF-8, no "]]>");
//  - a datablock opens with a line "$NAME << EOD" and ends with the first line that begins with EOD,
//    which is exactly "EOD"; its rows hold no backslash, and each quoted field ends on its row;
//  - every other line is a `set`, `unset`, `plot` or `array` command or an assignment of a string
//    literal to an array element; string literals are single-quoted and end on their line; a
//    comment does not end in a backslash; no backquote, '@', ';', '!' or double quote outside
//    literals, no word that runs or reads something (system, load, call, eval, shell, print, ...);
//    each element of a plot reads a datablock, NaN or a number (never a file or a '<command'); the
//    output is no '|pipe'.
// With `skeleton`, the program with the contents of string literals, comments and quoted datablock
// fields removed: two programs whose labels differ only in their text have the same skeleton.
std::string gnuplot_program_problem(std::string_view program, std::string* skeleton = nullptr);

}  // namespace hp
