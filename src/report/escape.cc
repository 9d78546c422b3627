// Text on its way into gnuplot programs, SVG and HTML (display_text, gnuplot_string, xml_text, ...),
// and the structure check that refuses a gnuplot program holding anything but the commands headprune
// writes (gnuplot_program_problem); see the header for why datablocks carry no text.
#include "headprune/report/escape.h"

#include <cstdint>
#include <set>
#include <vector>

namespace hp {

namespace {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The code point of the well-formed UTF-8 sequence at s[i] (Unicode's table 3-7: no overlong form,
// no surrogate, nothing above U+10FFFF) and its length in `len`; -1 when there is none.
int64_t decode_utf8(std::string_view s, size_t i, size_t* len) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return *len = 1, c;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return -1;
  if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return -1;
  uint32_t cp = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < n; ++k) {
    if (k > 1 && (b(i + k) & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  *len = n;
  return cp;
}

}  // namespace

std::string display_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = 1;
    int64_t cp = decode_utf8(s, i, &len);
    if (cp < 0) cp = 0xFFFD, len = 1;  // one replacement character per byte that starts no character
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) cp = ' ';
    else if (cp == 0xFFFE || cp == 0xFFFF) cp = 0xFFFD;
    if (cp == '>' && out.size() >= 2 && out.compare(out.size() - 2, 2, "]]") == 0) append_utf8(out, 0x200B);
    append_utf8(out, static_cast<uint32_t>(cp));  // a well-formed character comes back as the same bytes
    i += len;
  }
  return out;
}

std::string gnuplot_string(std::string_view s) {
  // gnuplot 5.4's scanner takes '' for a quote only after another character of the literal: a quote
  // that opens the text or follows another quote would end the literal there, so it gets an
  // invisible U+200B before it (the way display_text parts "]]>").
  std::string out = "'";
  char before = '\'';  // the character before the next one, in the text: first the opening quote
  for (char c : display_text(s)) {
    if (c == '\'') {
      if (before == '\'') append_utf8(out, 0x200B);
      out += "''";
    } else {
      out += c;
    }
    before = c;
  }
  return out + "'";
}

std::string gnuplot_comment(std::string_view s) {
  std::string out = display_text(s);
  while (!out.empty() && (out.back() == '\\' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string xml_text(std::string_view s) {
  std::string out;
  for (char c : display_text(s)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string file_name_part(std::string_view s) {
  std::string out;
  for (char c : s) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    out += keep ? c : '_';
  }
  return out;
}

// ---- the structure check ---------------------------------------------------------------------------

namespace {

struct Token {
  enum Kind { Word, Number, Literal, Block, Punct } kind;
  std::string text;  // the word, number, punctuation, datablock name, or a literal's contents
};

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Words that run a command, read or write a file, or evaluate a string as code: none of them is in a
// program headprune writes, so a program holding one (outside a literal) is refused.
const std::set<std::string> kForbiddenWords = {
    "system", "eval", "evaluate", "load", "call", "shell", "cd", "save", "print", "printerr", "table",
    "exit", "quit", "pause", "reread", "import", "fit", "update", "history", "pipe", "loadpath", "fontpath",
    "datafile", "macros", "bind", "replot", "refresh", "if", "do", "while", "for"};

bool is_datablock_header(std::string_view line) {
  if (line.size() < 9 || line[0] != '$' || !is_alpha(line[1])) return false;
  size_t i = 2;
  while (i < line.size() && (is_alpha(line[i]) || is_digit(line[i]))) ++i;
  return line.substr(i) == " << EOD";
}

std::vector<std::string_view> split_lines(std::string_view program) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < program.size();) {
    size_t end = program.find('\n', start);
    if (end == std::string_view::npos) end = program.size();
    lines.push_back(program.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// "line N: ", before a problem of the line with index i.
std::string at(size_t i) { return "line " + std::to_string(i + 1) + ": "; }

// A row inside a datablock (not its EOD): its skeleton, the quoted fields emptied, appended to skel;
// "" or the problem.
std::string datablock_row_problem(std::string_view line, std::string& skel) {
  if (line.find('\\') != std::string_view::npos) return "a backslash in a datablock row";
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted, skel += c;
    else if (!quoted) skel += c;
  }
  if (quoted) return "a quoted field of a datablock row does not end";
  skel += '\n';
  return "";
}

// The end of the string literal whose opening quote is at l[k], as gnuplot 5.4's scanner reads it: the
// literal ends at the first quote, except that a character followed by two quotes takes them in (an
// escaped quote). Its contents go to `text`; `end` when it does not end before `end`.
size_t literal_end(std::string_view l, size_t k, size_t end, std::string& text) {
  size_t j = k + 1;
  for (; j < end && l[j] != '\''; ++j) {
    text += l[j];
    if (j + 2 < end && l[j + 1] == '\'' && l[j + 2] == '\'') text += '\'', j += 2;
  }
  return j;
}

// The end of the number at l[k] (digits, '.', an exponent with its sign).
size_t number_end(std::string_view l, size_t k, size_t end) {
  size_t j = k;
  while (j < end && (is_digit(l[j]) || l[j] == '.' || l[j] == 'e' || l[j] == 'E' ||
                     ((l[j] == '-' || l[j] == '+') && (l[j - 1] == 'e' || l[j - 1] == 'E'))))
    ++j;
  return j;
}

// The end of the name (letters, digits, '_') that goes on at l[k].
size_t name_end(std::string_view l, size_t k, size_t end) {
  while (k < end && (is_alpha(l[k]) || is_digit(l[k]))) ++k;
  return k;
}

// The tokens of one program line (a continuation backslash left out: `continued`) appended to
// `tokens`, its skeleton to skel; "" or the problem.
std::string scan_line(std::string_view l, bool continued, std::vector<Token>& tokens, std::string& skel) {
  const size_t end = continued ? l.size() - 1 : l.size();
  for (size_t k = 0; k < end;) {
    const char c = l[k];
    size_t j = k + 1;  // where the token ends
    if (c == ' ') {
      skel += c;
    } else if (c == '\'') {
      std::string text;
      j = literal_end(l, k, end, text);
      if (j >= end) return "a string literal does not end on its line";
      if (continued && j + 1 == end) return "a string literal ends at a line continuation";
      tokens.push_back({Token::Literal, text});
      skel += "''";
      ++j;
    } else if (c == '#') {
      if (continued) return "a comment ends in a backslash (gnuplot would join the next line to it)";
      skel += '#';
      j = end;
    } else if (c == '"' || c == '`' || c == '@' || c == ';' || c == '!') {
      return "'" + std::string(1, c) + "' outside a string literal";
    } else if (c == '$' && k + 1 < end && is_alpha(l[k + 1])) {
      j = name_end(l, k + 1, end);
      tokens.push_back({Token::Block, std::string(l.substr(k + 1, j - k - 1))});
      skel.append(l.substr(k, j - k));
    } else if (is_digit(c) || (c == '.' && k + 1 < end && is_digit(l[k + 1]))) {
      j = number_end(l, k, end);
      tokens.push_back({Token::Number, std::string(l.substr(k, j - k))});
      skel.append(l.substr(k, j - k));
    } else if (is_alpha(c)) {
      j = name_end(l, k, end);
      const std::string word(l.substr(k, j - k));
      if (kForbiddenWords.count(word)) return "'" + word + "' outside a string literal";
      tokens.push_back({Token::Word, word});
      skel += word;
    } else {
      tokens.push_back({Token::Punct, std::string(1, c)});
      skel += c;
    }
    k = j;
  }
  if (continued) skel += "\\";
  skel += '\n';
  return "";
}

// One command: lines[i] and, while a line ends in a backslash, the next (gnuplot joins them); i ends at
// its last line. "" or the problem, naming its line.
std::string scan_command(const std::vector<std::string_view>& lines, size_t& i, std::vector<Token>& tokens,
                         std::string& skel) {
  for (;; ++i) {
    const std::string_view l = lines[i];
    const bool continued = !l.empty() && l.back() == '\\';
    if (auto problem = scan_line(l, continued, tokens, skel); !problem.empty()) return at(i) + problem;
    if (!continued) return "";
    if (i + 1 >= lines.size()) return at(i) + "the program ends in a backslash";
  }
}

// A plot: every element (split at the commas outside brackets) begins with what it draws.
std::string plot_problem(const std::vector<Token>& tokens) {
  int depth = 0;
  bool element_start = true;
  for (size_t k = 1; k < tokens.size(); ++k) {
    const Token& t = tokens[k];
    if (element_start) {
      const bool ok = t.kind == Token::Block || t.kind == Token::Number || (t.kind == Token::Word && t.text == "NaN") ||
                      (t.kind == Token::Punct && t.text == "-" && k + 1 < tokens.size() && tokens[k + 1].kind == Token::Number);
      if (!ok) return "a plot element that reads no datablock, NaN or number";
      element_start = false;
    }
    if (t.kind != Token::Punct) continue;
    if (t.text == "(" || t.text == "[" || t.text == "{") ++depth;
    else if (t.text == ")" || t.text == "]" || t.text == "}") --depth;
    else if (t.text == "," && depth == 0) element_start = true;
  }
  return element_start ? "a plot ends without an element" : "";
}

// Whether a command (at least one token) is one headprune writes: set, unset, array, plot, or
// NAME[INDEX] = 'literal'. "" or the problem.
std::string command_problem(const std::vector<Token>& tokens) {
  const auto is = [&](size_t k, Token::Kind kind, const std::string& text) {
    return k < tokens.size() && tokens[k].kind == kind && tokens[k].text == text;
  };
  const std::string& command = tokens[0].text;
  if (tokens[0].kind == Token::Word && (command == "set" || command == "unset" || command == "array")) {
    if (command == "set" && is(1, Token::Word, "output") &&
        (tokens.size() != 3 || tokens[2].kind != Token::Literal || tokens[2].text.empty() || tokens[2].text[0] == '|'))
      return "the output is not a file name";
    return "";
  }
  if (tokens[0].kind == Token::Word && command == "plot") return plot_problem(tokens);
  if (tokens.size() == 6 && tokens[0].kind == Token::Word && is(1, Token::Punct, "[") && tokens[2].kind == Token::Number &&
      is(3, Token::Punct, "]") && is(4, Token::Punct, "=") && tokens[5].kind == Token::Literal)
    return "";
  return "not a command headprune writes ('" + command + "')";
}

}  // namespace

std::string gnuplot_program_problem(std::string_view program, std::string* skeleton) {
  const std::vector<std::string_view> lines = split_lines(program);
  for (size_t i = 0; i < lines.size(); ++i)
    if (display_text(lines[i]) != lines[i])
      return at(i) + "a control character, a byte that is no UTF-8, or \"]]>\"";
  std::string skel;
  bool in_block = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (in_block && line.substr(0, 3) == "EOD") {  // gnuplot ends a datablock at the first line beginning so
      if (line != "EOD") return at(i) + "a datablock row begins with EOD";
      in_block = false;
      skel += "EOD\n";
    } else if (in_block) {
      if (auto problem = datablock_row_problem(line, skel); !problem.empty()) return at(i) + problem;
    } else if (is_datablock_header(line)) {
      in_block = true;
      skel.append(line.data(), line.size()) += '\n';
    } else {
      std::vector<Token> tokens;
      const size_t first = i;
      if (auto problem = scan_command(lines, i, tokens, skel); !problem.empty()) return problem;
      if (tokens.empty()) continue;  // a comment or a blank line
      if (auto problem = command_problem(tokens); !problem.empty()) return at(first) + problem;
    }
  }
  if (in_block) return "the program ends inside a datablock";
  if (skeleton) *skeleton = std::move(skel);
  return "";
}

}  // namespace hp
