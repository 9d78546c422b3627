// Readers for the raw text corpora: plain or gzipped line files, GLUE-style TSV classification
// files and line-aligned parallel corpora. Errors are std::runtime_error naming the file, and the
// line where there is one ("PATH:LINE: what was expected, what was found").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hp {

// Whole text file as lines (without '\n', a trailing '\r' stripped, a leading UTF-8 byte order mark
// dropped); a final newline does not start another line. "*.gz" files are decompressed with zlib
// (a .gz file that is not gzip data, or a truncated one, is an error).
std::vector<std::string> read_lines(const std::string& path);

struct TextExample {
  std::string text_a, text_b;  // text_b empty for single sentences
  int64_t label = -1;
  int64_t line = 0;  // 1-based line of the file it was read from (0 when not from a file)
};

struct TsvColumns {
  std::string text_a = "sentence", text_b = "", label = "label";  // header names; "" = not used
  // The classes by name, class i = label_names[i] (RTE's "entailment", "not_entailment"); empty: the
  // label column holds class numbers.
  std::vector<std::string> label_names;
};

// GLUE-style TSV with a header row, split on '\t' only (NO quote handling: SST-2 text contains '"').
// Columns are found by header name. A missing column, a row with the wrong number of fields or a
// label that is not a non-negative integer (or, with label_names, not one of them) is an error, e.g.
// "PATH:LINE: expected 2 tab-separated fields, got 3". Text fields are kept verbatim; the label
// may have surrounding spaces. With columns.label empty the label stays -1.
std::vector<TextExample> read_tsv_classification(const std::string& path, const TsvColumns& columns = {});

// Parallel corpus: line i of src pairs with line i of tgt. Different line counts are an error naming
// both files and counts; an empty (or all-whitespace) line on either side is "PATH:LINE: empty sentence".
std::vector<std::pair<std::string, std::string>> read_parallel(const std::string& src_path,
                                                               const std::string& tgt_path);

// A sentence of a CoNLL-U treebank (Universal Dependencies): its syntactic words in order.
struct UdWord {
  std::string form;
  int64_t head = 0;    // 1-based index of the head word, 0 for the root
  std::string deprel;  // e.g. "nsubj", "obl:tmod"
};
struct UdSentence {
  std::string id;  // "# sent_id = ..." (empty if absent)
  std::vector<UdWord> words;
};

// CoNLL-U (plain or .gz): comment lines (#) are read for sent_id; multiword-token ranges ("3-4")
// and empty nodes ("5.1") are skipped; a blank line ends a sentence. Errors name PATH:LINE: a line
// without 10 tab-separated fields, an ID that is not the next word number, a HEAD that is not an
// integer in [0, words in the sentence]. max_sentences > 0 stops after that many.
std::vector<UdSentence> read_conllu(const std::string& path, int64_t max_sentences = 0);

}  // namespace hp
