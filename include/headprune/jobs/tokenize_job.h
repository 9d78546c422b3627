// `headprune tokenize`: a tokenizer run over a file of texts, one JSON line per input line, so a user
// can check that text is read the way HF (or sentencepiece) reads it.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace hp {

struct TokenizeRequest {
  std::string dir;    // a model directory (headprune checkpoint or HF) or a folder with tokenizer files
  std::string file;   // one text per line (read_lines: '\n' separated, a trailing '\r' dropped)
  bool special_tokens = true;  // frame each line as the tokenizer's reference does (Tokenizer::frame)
  bool decode = false;         // the lines are JSON arrays of ids; print the decoded texts
};

// Writes one line per input line: a JSON array of ids, or with `decode` a JSON string (special ids
// left out; bytes that are not UTF-8 shown as U+FFFD). Returns the number of lines. A directory
// without a tokenizer, or a decode line that is not an array of known ids, is std::runtime_error
// naming the directory or FILE:LINE.
int64_t run_tokenize(const TokenizeRequest& req, std::ostream& out);

}  // namespace hp
