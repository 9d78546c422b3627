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

}  // namespace

std::string gnuplot_program_problem(std::string_view program, std::string* skeleton) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < program.size();) {
    size_t end = program.find('\n', start);
    if (end == std::string_view::npos) end = program.size();
    lines.push_back(program.substr(start, end - start));
    start = end + 1;
  }
  std::string skel;
  auto at = [](size_t i) { return "line " + std::to_string(i + 1) + ": "; };
  for (size_t i = 0; i < lines.size(); ++i)
    if (display_text(lines[i]) != lines[i])
      return at(i) + "a control character, a byte that is no UTF-8, or \"]]>\"";
  bool in_block = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (in_block) {
      if (line.substr(0, 3) == "EOD") {  // gnuplot ends a datablock at the first line beginning so
        if (line != "EOD") return at(i) + "a datablock row begins with EOD";
        in_block = false;
        skel += "EOD\n";
        continue;
      }
      if (line.find('\\') != std::string_view::npos) return at(i) + "a backslash in a datablock row";
      bool quoted = false;
      for (char c : line) {
        if (c == '"') quoted = !quoted, skel += c;
        else if (!quoted) skel += c;
      }
      if (quoted) return at(i) + "a quoted field of a datablock row does not end";
      skel += '\n';
      continue;
    }
    if (is_datablock_header(line)) {
      in_block = true;
      skel.append(line.data(), line.size()) += '\n';
      continue;
    }
    // One command: this line and, while a line ends in a backslash, the next (gnuplot joins them).
    std::vector<Token> tokens;
    const size_t first = i;
    for (;; ++i) {
      const std::string_view l = lines[i];
      size_t end = l.size();
      const bool continued = end > 0 && l[end - 1] == '\\';
      if (continued) --end;
      for (size_t k = 0; k < end;) {
        const char c = l[k];
        if (c == ' ') {
          skel += c, ++k;
        } else if (c == '\'') {
          // As gnuplot 5.4's scanner reads it: the literal ends at the first quote, except that a
          // character followed by two quotes takes them in (an escaped quote).
          std::string text;
          size_t j = k + 1;
          for (; j < end && l[j] != '\''; ++j) {
            text += l[j];
            if (j + 2 < end && l[j + 1] == '\'' && l[j + 2] == '\'') text += '\'', j += 2;
          }
          if (j >= end) return at(i) + "a string literal does not end on its line";
          if (continued && j + 1 == end) return at(i) + "a string literal ends at a line continuation";
          tokens.push_back({Token::Literal, text});
          skel += "''";
          k = j + 1;
        } else if (c == '#') {
          if (continued) return at(i) + "a comment ends in a backslash (gnuplot would join the next line to it)";
          skel += '#';
          k = end;
        } else if (c == '"' || c == '`' || c == '@' || c == ';' || c == '!') {
          return at(i) + "'" + std::string(1, c) + "' outside a string literal";
        } else if (c == '$' && k + 1 < end && is_alpha(l[k + 1])) {
          size_t j = k + 1;
          while (j < end && (is_alpha(l[j]) || is_digit(l[j]))) ++j;
          tokens.push_back({Token::Block, std::string(l.substr(k + 1, j - k - 1))});
          skel.append(l.substr(k, j - k));
          k = j;
        } else if (is_digit(c) || (c == '.' && k + 1 < end && is_digit(l[k + 1]))) {
          size_t j = k;
          while (j < end && (is_digit(l[j]) || l[j] == '.' || l[j] == 'e' || l[j] == 'E' ||
                             ((l[j] == '-' || l[j] == '+') && (l[j - 1] == 'e' || l[j - 1] == 'E'))))
            ++j;
          tokens.push_back({Token::Number, std::string(l.substr(k, j - k))});
          skel.append(l.substr(k, j - k));
          k = j;
        } else if (is_alpha(c)) {
          size_t j = k;
          while (j < end && (is_alpha(l[j]) || is_digit(l[j]))) ++j;
          const std::string word(l.substr(k, j - k));
          if (kForbiddenWords.count(word)) return at(i) + "'" + word + "' outside a string literal";
          tokens.push_back({Token::Word, word});
          skel += word;
          k = j;
        } else {
          tokens.push_back({Token::Punct, std::string(1, c)});
          skel += c, ++k;
        }
      }
      if (continued) skel += "\\";
      skel += '\n';
      if (!continued) break;
      if (i + 1 >= lines.size()) return at(i) + "the program ends in a backslash";
    }
    if (tokens.empty()) continue;  // a comment or a blank line
    const auto is = [&](size_t k, Token::Kind kind, const std::string& text) {
      return k < tokens.size() && tokens[k].kind == kind && tokens[k].text == text;
    };
    const std::string& command = tokens[0].text;
    if (tokens[0].kind == Token::Word && (command == "set" || command == "unset" || command == "array")) {
      if (command == "set" && is(1, Token::Word, "output") &&
          (tokens.size() != 3 || tokens[2].kind != Token::Literal || tokens[2].text.empty() || tokens[2].text[0] == '|'))
        return at(first) + "the output is not a file name";
      continue;
    }
    if (tokens[0].kind == Token::Word && command == "plot") {
      // Every element (split at the commas outside brackets) begins with what it draws.
      int depth = 0;
      bool element_start = true;
      for (size_t k = 1; k < tokens.size(); ++k) {
        const Token& t = tokens[k];
        if (element_start) {
          const bool ok = t.kind == Token::Block || t.kind == Token::Number || (t.kind == Token::Word && t.text == "NaN") ||
                          (t.kind == Token::Punct && t.text == "-" && k + 1 < tokens.size() && tokens[k + 1].kind == Token::Number);
          if (!ok) return at(first) + "a plot element that reads no datablock, NaN or number";
          element_start = false;
        }
        if (t.kind != Token::Punct) continue;
        if (t.text == "(" || t.text == "[" || t.text == "{") ++depth;
        else if (t.text == ")" || t.text == "]" || t.text == "}") --depth;
        else if (t.text == "," && depth == 0) element_start = true;
      }
      if (element_start) return at(first) + "a plot ends without an element";
      continue;
    }
    // NAME[INDEX] = 'literal'
    if (tokens.size() == 6 && tokens[0].kind == Token::Word && is(1, Token::Punct, "[") && tokens[2].kind == Token::Number &&
        is(3, Token::Punct, "]") && is(4, Token::Punct, "=") && tokens[5].kind == Token::Literal)
      continue;
    return at(first) + "not a command headprune writes ('" + command + "')";
  }
  if (in_block) return "the program ends inside a datablock";
  if (skeleton) *skeleton = std::move(skel);
  return "";
}

}  // namespace hp
