// Line, TSV and parallel-corpus readers (see header). Gzipped files go through zlib's gz*
// functions; everything else is read whole with read_file.
#include "headprune/data/readers.h"

#include <cerrno>
#include <functional>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <zlib.h>

#include "headprune/io/files.h"

namespace hp {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "PATH:LINE" with a 1-based line number.
std::string where(const std::string& path, size_t line_index) {
  return path + ":" + std::to_string(line_index + 1);
}

// The decompressed bytes of a .gz file, piece by piece, at most kMaxTextFileBytes (a small file can
// inflate a thousandfold).
void gzip_chunks(const std::string& path, const std::function<void(const char*, size_t)>& sink) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  struct Closer {
    gzFile f;
    ~Closer() {
      if (f) gzclose(f);
    }
  } closer{f};
  if (gzdirect(f) == 1) throw std::runtime_error(path + ": not gzip data (expected a gzip stream for a .gz name)");
  std::vector<char> buf(1 << 16);
  uint64_t total = 0;
  for (;;) {
    const int n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
    if (n <= 0) break;  // end of data, or an error that gzerror reports below
    total += static_cast<uint64_t>(n);
    if (total > kMaxTextFileBytes)
      throw std::runtime_error(path + ": decompresses to more than " + std::to_string(kMaxTextFileBytes) +
                               " bytes, more than this reader accepts (not the file you meant?)");
    sink(buf.data(), static_cast<size_t>(n));
  }
  int code = Z_OK;
  const char* msg = gzerror(f, &code);
  if (code != Z_OK)
    throw std::runtime_error(path + ": corrupt or truncated gzip data (" + (code == Z_ERRNO ? std::strerror(errno) : msg) + ")");
  closer.f = nullptr;
  if (gzclose(f) != Z_OK) throw std::runtime_error(path + ": corrupt or truncated gzip data (gzclose failed)");
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
    out.push_back(line.substr(start, tab - start));
  out.push_back(line.substr(start));
  return out;
}

bool is_blank(const std::string& s) {
  return s.find_first_not_of(" \t\v\f\r") == std::string::npos;
}

// A non-negative decimal integer, optionally surrounded by spaces; false otherwise.
// The class of a label named by a string: its index in `names` (surrounding spaces ignored), or -1.
int64_t label_index(const std::string& field, const std::vector<std::string>& names) {
  const size_t b = field.find_first_not_of(' ');
  const std::string v = b == std::string::npos ? std::string() : field.substr(b, field.find_last_not_of(' ') + 1 - b);
  for (size_t k = 0; k < names.size(); ++k)
    if (names[k] == v) return static_cast<int64_t>(k);
  return -1;
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string s = "[";
  for (size_t k = 0; k < names.size(); ++k) s += (k ? ", '" : "'") + names[k] + "'";
  return s + "]";
}

bool parse_label(const std::string& field, int64_t* out) {
  const size_t b = field.find_first_not_of(' ');
  if (b == std::string::npos) return false;
  const size_t e = field.find_last_not_of(' ') + 1;
  int64_t v = 0;
  for (size_t i = b; i < e; ++i) {
    const char c = field[i];
    if (c < '0' || c > '9') return false;
    if (v > (std::numeric_limits<int64_t>::max() - (c - '0')) / 10) return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

std::vector<std::string> read_lines(const std::string& path) {
  if (is_directory(path)) throw std::runtime_error(path + ": is a directory, expected a text file");
  // Line by line while reading: a line longer than kMaxLineBytes stops the read there (a device such as
  // /dev/zero, or a file that is one huge line, is refused after 16 MiB, not after 1 GiB).
  std::vector<std::string> lines;
  std::string line;
  bool first = true;
  const auto sink = [&](const char* p, size_t n) {
    for (const char* end = p + n; p < end;) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
      const char* stop = nl ? nl : end;
      if (line.size() + static_cast<size_t>(stop - p) > kMaxLineBytes)
        throw std::runtime_error(where(path, lines.size()) + ": a line longer than " + std::to_string(kMaxLineBytes) +
                                 " bytes (a text file has lines; not the file you meant?)");
      line.append(p, stop);
      p = stop;
      if (!nl) break;
      ++p;
      if (first && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
      first = false;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(std::move(line));
      line.clear();
    }
  };
  if (ends_with(path, ".gz"))
    gzip_chunks(path, sink);
  else
    read_chunks(path, sink);
  if (first && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
  if (!line.empty()) {  // a last line without its newline
    if (line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

std::vector<TextExample> read_tsv_classification(const std::string& path, const TsvColumns& columns) {
  if (columns.text_a.empty())
    throw std::invalid_argument("read_tsv_classification: columns.text_a must name a header column");
  const auto lines = read_lines(path);
  if (lines.empty()) throw std::runtime_error(path + ": empty file, expected a header row");
  const auto header = split_tabs(lines[0]);
  auto column = [&](const std::string& name) -> int64_t {
    if (name.empty()) return -1;
    int64_t found = -1;
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] != name) continue;
      if (found >= 0)
        throw std::runtime_error(path + ":1: column '" + name + "' appears more than once in the header");
      found = static_cast<int64_t>(i);
    }
    if (found < 0) {
      std::string names;
      for (const auto& h : header) names += (names.empty() ? "'" : ", '") + h + "'";
      throw std::runtime_error(path + ":1: expected a column '" + name + "' in the header, got " + names);
    }
    return found;
  };
  const int64_t col_a = column(columns.text_a), col_b = column(columns.text_b), col_label = column(columns.label);

  std::vector<TextExample> out;
  out.reserve(lines.size() - 1);
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto fields = split_tabs(lines[i]);
    if (fields.size() != header.size())
      throw std::runtime_error(where(path, i) + ": expected " + std::to_string(header.size()) +
                               " tab-separated fields, got " + std::to_string(fields.size()));
    TextExample e;
    e.line = static_cast<int64_t>(i) + 1;
    e.text_a = fields[col_a];
    if (col_b >= 0) e.text_b = fields[col_b];
    if (col_label >= 0 && !columns.label_names.empty()) {
      e.label = label_index(fields[col_label], columns.label_names);
      if (e.label < 0)
        throw std::runtime_error(where(path, i) + ": label '" + fields[col_label] + "' in column '" + columns.label +
                                 "' is not one of the data spec's labels " + quoted_list(columns.label_names));
    } else if (col_label >= 0 && !parse_label(fields[col_label], &e.label)) {
      throw std::runtime_error(where(path, i) + ": expected a non-negative integer label in column '" +
                               columns.label + "', got '" + fields[col_label] +
                               "' (for classes named by strings, list them in the data spec: \"labels\": [...])");
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> read_parallel(const std::string& src_path,
                                                               const std::string& tgt_path) {
  auto src = read_lines(src_path);
  auto tgt = read_lines(tgt_path);
  if (src.size() != tgt.size())
    throw std::runtime_error("parallel corpus: expected the same number of lines, got " +
                             std::to_string(src.size()) + " in " + src_path + " and " + std::to_string(tgt.size()) +
                             " in " + tgt_path);
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (is_blank(src[i])) throw std::runtime_error(where(src_path, i) + ": empty sentence");
    if (is_blank(tgt[i])) throw std::runtime_error(where(tgt_path, i) + ": empty sentence");
    out.emplace_back(std::move(src[i]), std::move(tgt[i]));
  }
  return out;
}

std::vector<UdSentence> read_conllu(const std::string& path, int64_t max_sentences) {
  const auto lines = read_lines(path);
  std::vector<UdSentence> out;
  UdSentence cur;
  std::vector<size_t> head_lines;  // line of each word, for errors found at the sentence's end
  auto finish = [&]() {
    const auto n = static_cast<int64_t>(cur.words.size());
    for (size_t i = 0; i < cur.words.size(); ++i)
      if (cur.words[i].head > n)
        throw std::runtime_error(where(path, head_lines[i]) + ": HEAD " + std::to_string(cur.words[i].head) +
                                 " is beyond the sentence's " + std::to_string(n) + " words");
    if (!cur.words.empty()) out.push_back(std::move(cur));
    cur = UdSentence();
    head_lines.clear();
  };
  for (size_t li = 0; li < lines.size(); ++li) {
    if (max_sentences > 0 && static_cast<int64_t>(out.size()) >= max_sentences) break;
    const std::string& line = lines[li];
    if (is_blank(line)) {
      finish();
      continue;
    }
    if (line[0] == '#') {
      const std::string key = "# sent_id = ";
      if (line.compare(0, key.size(), key) == 0) cur.id = line.substr(key.size());
      continue;
    }
    const auto f = split_tabs(line);
    if (f.size() != 10)
      throw std::runtime_error(where(path, li) + ": expected 10 tab-separated CoNLL-U fields, got " +
                               std::to_string(f.size()));
    if (f[0].find_first_of("-.") != std::string::npos) continue;  // multiword token or empty node
    const std::string expected = std::to_string(cur.words.size() + 1);
    if (f[0] != expected)
      throw std::runtime_error(where(path, li) + ": expected word ID " + expected + ", got '" + f[0] + "'");
    int64_t head = 0;
    if (!parse_label(f[6], &head))
      throw std::runtime_error(where(path, li) + ": HEAD must be a non-negative integer, got '" + f[6] + "'");
    cur.words.push_back({f[1], head, f[7]});
    head_lines.push_back(li);
  }
  if (max_sentences <= 0 || static_cast<int64_t>(out.size()) < max_sentences) finish();
  if (out.empty()) throw std::runtime_error(path + ": no sentences (expected CoNLL-U)");
  return out;
}

}  // namespace hp
