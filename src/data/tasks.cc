// Data specs -> tokenized examples (see header).
#include "headprune/data/tasks.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

#include "headprune/data/readers.h"
#include "headprune/data/synthetic.h"
#include "headprune/util/log.h"
#include "headprune/util/json_fields.h"
#include "headprune/util/runtime.h"

namespace hp {
namespace {

const std::set<std::string> kSpecKeys = {"kind", "n_train", "n_valid", "n_test", "min_len", "max_len", "train", "valid",
                                         "test", "text_a", "text_b", "label", "valid_fraction", "test_fraction", "vocab_size",
                                         "tokenizer", "max_train", "labels"};

std::string shortest(double v) {  // 0.05, not std::to_string's 0.050000
  std::ostringstream o;
  o << v;
  return o.str();
}

// The data spec's fields (errors: "data spec: field 'k' must be an integer, got ...").
JsonFields spec_fields(const nlohmann::json& spec) {
  return JsonFields(spec, "data spec",
                    JsonStyle{"field", "is missing", JsonStyle::Nulls::Invalid, JsonStyle::Error::InvalidArgument});
}

bool wants(const std::vector<std::string>& splits, const char* s) {
  return std::find(splits.begin(), splits.end(), s) != splits.end();
}

std::vector<int64_t> truncate(std::vector<int64_t> v, int64_t n) {
  if (n > 0 && static_cast<int64_t>(v.size()) > n) v.resize(n);
  return v;
}

Tokenizer train_tokenizer(const std::vector<std::string>& sentences, const nlohmann::json& spec, uint64_t seed) {
  TokenizerTrainOptions o;
  const JsonFields f = spec_fields(spec);
  o.vocab_size = f.opt_int("vocab_size", 8000);
  o.kind = f.opt_str("tokenizer", "bpe");
  o.seed = seed;
  log_info("data", "training a " + o.kind + " vocabulary of " + std::to_string(o.vocab_size) + " on " +
                       std::to_string(sentences.size()) + " sentences");
  return Tokenizer::train(sentences, o);
}

// Rows of a training file held out for checkpoint selection: a fixed pseudo-random sample of
// round(fraction * n) rows, the same on every machine and for every run seed (a job with another
// --seed must not mix the selection split into training). Returns (kept, held out), each in file order.
template <typename T>
std::pair<std::vector<T>, std::vector<T>> hold_out(std::vector<T> rows, double fraction) {
  const size_t n = rows.size();
  const auto n_held = static_cast<size_t>(std::llround(fraction * static_cast<double>(n)));
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(0x5e1ec7);  // fixed: the split belongs to the data spec, not to the run
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng() % i]);  // Fisher-Yates, portable
  std::vector<char> held(n, 0);
  for (size_t i = 0; i < n_held; ++i) held[order[i]] = 1;
  std::pair<std::vector<T>, std::vector<T>> out;
  for (size_t i = 0; i < n; ++i) (held[i] ? out.second : out.first).push_back(std::move(rows[i]));
  return out;
}

}  // namespace

nlohmann::json synthetic_data_spec(int64_t n_train, int64_t n_valid, int64_t n_test) {
  return {{"kind", "synthetic"}, {"n_train", n_train}, {"n_valid", n_valid}, {"n_test", n_test},
          {"min_len", 4},        {"max_len", 20}};
}

bool is_synthetic(const nlohmann::json& spec) { return spec.value("kind", "synthetic") == "synthetic"; }

std::string resolve_data_path(const std::string& data_root, const std::string& path) {
  if (path.empty() || path[0] == '/' || data_root.empty()) return path;
  return data_root + "/" + path;
}

Example classification_example(const Tokenizer& tok, const std::string& a, const std::string& b, int64_t label,
                               int64_t max_len) {
  Example e;
  auto ta = tok.encode(a);
  std::vector<int64_t> tb;
  if (!b.empty()) tb = tok.encode(b);
  // Keep [bos] a [eos] (b [eos]) within max_len by trimming the longer side first.
  const int64_t special = b.empty() ? 2 : 3;
  while (max_len > 0 && static_cast<int64_t>(ta.size() + tb.size()) + special > max_len) {
    if (ta.size() >= tb.size()) ta.pop_back();
    else tb.pop_back();
  }
  e.src.push_back(tok.specials().bos);
  e.src.insert(e.src.end(), ta.begin(), ta.end());
  e.src.push_back(tok.specials().eos);
  e.segments.assign(e.src.size(), 0);
  if (!b.empty()) {
    e.src.insert(e.src.end(), tb.begin(), tb.end());
    e.src.push_back(tok.specials().eos);
    e.segments.resize(e.src.size(), 1);
  }
  e.label = label;
  return e;
}

Example translation_source(const Tokenizer& tok, const std::string& src, int64_t max_len) {
  Example e;
  e.src = truncate(tok.encode(src), max_len > 0 ? max_len - 1 : 0);
  e.src.push_back(tok.specials().eos);
  return e;
}

Example translation_example(const Tokenizer& tok, const std::string& src, const std::string& tgt, int64_t max_len) {
  Example e = translation_source(tok, src, max_len);
  e.tgt.push_back(tok.specials().bos);
  auto t = truncate(tok.encode(tgt), max_len > 0 ? max_len - 1 : 0);
  e.tgt.insert(e.tgt.end(), t.begin(), t.end());
  e.tgt.push_back(tok.specials().eos);
  return e;
}

std::vector<Example> lm_blocks(const Tokenizer& tok, const std::vector<std::string>& lines, int64_t block_size) {
  if (block_size < 2) throw std::invalid_argument("lm_blocks: block_size must be >= 2");
  std::vector<int64_t> stream;
  for (const auto& l : lines) {
    auto ids = tok.encode(l);
    stream.insert(stream.end(), ids.begin(), ids.end());
    stream.push_back(tok.specials().eos);  // line boundary
  }
  std::vector<Example> out;
  // Blocks overlap by one token so every token after the first is predicted exactly once.
  for (size_t start = 0; start + 1 < stream.size(); start += static_cast<size_t>(block_size - 1)) {
    Example e;
    const size_t end = std::min(stream.size(), start + static_cast<size_t>(block_size));
    e.src.assign(stream.begin() + static_cast<std::ptrdiff_t>(start), stream.begin() + static_cast<std::ptrdiff_t>(end));
    if (e.src.size() >= 2) out.push_back(std::move(e));
  }
  return out;
}

std::vector<Example> calibration_blocks(const std::optional<Tokenizer>& tok, const std::string& source, int64_t vocab,
                                        int64_t length, int64_t count, uint64_t seed) {
  if (length < 2 || count < 1)
    throw std::invalid_argument("calibration: --calibration-length must be >= 2 and --calibration-samples >= 1");
  // The examples' ids (8 bytes each, twice while the text's stream is cut) against the machine, before
  // any is made: 2^20 samples x 2^20 tokens lie inside both flags' ranges.
  check_memory(2.0 * 8.0 * static_cast<double>(length) * static_cast<double>(count), torch::kCPU,
               "calibration: " + std::to_string(count) + " samples x " + std::to_string(length) + " tokens",
               "lower --calibration-samples or --calibration-length");
  std::vector<Example> out;
  if (source == "random") {
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<int64_t> id(0, vocab - 1);
    for (int64_t i = 0; i < count; ++i) {
      Example e;
      for (int64_t t = 0; t < length; ++t) e.src.push_back(id(gen));
      out.push_back(std::move(e));
    }
    return out;
  }
  if (!tok) throw std::invalid_argument("calibration: " + source + " is text, but the model has no tokenizer to read it");
  std::vector<int64_t> stream;
  const auto need = static_cast<size_t>(length * count);
  for (const auto& line : read_lines(source)) {
    // Each line as the tokenizer frames one text (HF's tokenizer(text): a Llama <s> first; headprune's
    // own BPE adds nothing), then eos unless the frame ends with it: documents packed as HF packs them.
    const auto ids = tok->encode(line, /*add_special_tokens=*/true);
    stream.insert(stream.end(), ids.begin(), ids.end());
    if (ids.empty() || ids.back() != tok->specials().eos) stream.push_back(tok->specials().eos);
    if (stream.size() >= need) break;
  }
  if (stream.size() < need)
    throw std::invalid_argument("calibration: " + source + " gives " + std::to_string(stream.size()) + " tokens, fewer than " +
                                std::to_string(count) + " samples x " + std::to_string(length) + " tokens");
  for (int64_t i = 0; i < count; ++i) {
    Example e;
    e.src.assign(stream.begin() + i * length, stream.begin() + (i + 1) * length);
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

// What every kind of data spec is read with: the spec, the model, where its files are, which splits
// to build, and the vocabulary given (else one is trained with `seed`).
struct TaskRequest {
  const nlohmann::json& spec;
  const ModelConfig& model;
  const std::string& data_root;
  const std::optional<Tokenizer>& tokenizer;
  const std::vector<std::string>& splits;
  uint64_t seed;

  std::string path(const std::string& p) const { return resolve_data_path(data_root, p); }
  bool wants(const char* split) const { return hp::wants(splits, split); }
};

void check_spec_keys(const nlohmann::json& spec) {
  if (!spec.is_object()) throw std::invalid_argument("data spec: expected a JSON object");
  for (auto it = spec.begin(); it != spec.end(); ++it)
    if (!kSpecKeys.count(it.key())) throw std::invalid_argument("data spec: '" + it.key() + "' is not a known key");
}

// max_len (the model's max_positions unless given), at most max_positions.
int64_t spec_max_len(const nlohmann::json& spec, const ModelConfig& model) {
  const int64_t max_len = spec_fields(spec).opt_int("max_len", model.max_positions);
  if (max_len > model.max_positions)
    throw std::invalid_argument("data spec: max_len " + std::to_string(max_len) + " exceeds the model's max_positions " +
                                std::to_string(model.max_positions));
  return max_len;
}

TaskData synthetic_task(const TaskRequest& r) {
  TaskData d;
  const JsonFields f = spec_fields(r.spec);
  const int64_t lo = f.opt_int("min_len", 3), hi = f.opt_int("max_len", 24);
  if (r.wants("train")) d.train = synthetic_examples(r.model, f.opt_int("n_train", 4000), lo, hi, r.seed);
  if (r.wants("valid")) d.valid = synthetic_examples(r.model, f.opt_int("n_valid", 500), lo, hi, r.seed + 1);
  if (r.wants("test")) d.test = synthetic_examples(r.model, f.opt_int("n_test", 500), lo, hi, r.seed + 2);
  return d;
}

// The given vocabulary, else one trained on the train split's texts (`texts` adds a row's).
template <typename Row, typename Texts>
Tokenizer task_tokenizer(const TaskRequest& r, const std::map<std::string, std::vector<Row>>& raw, Texts texts) {
  if (r.tokenizer) return *r.tokenizer;
  const auto train = raw.find("train");
  if (train == raw.end()) throw std::invalid_argument("data spec: a vocabulary needs the train split");
  std::vector<std::string> text;
  for (const auto& row : train->second) texts(row, text);
  return train_tokenizer(text, r.spec, r.seed);
}

// ---- tsv: sentence classification -----------------------------------------------------------------

// 'labels': the class names, one per class of the model, none twice.
std::vector<std::string> label_names(const nlohmann::json& names, const ModelConfig& model) {
  if (!names.is_array() || names.empty())
    throw std::invalid_argument("data spec: 'labels' must be a non-empty array of class names");
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& n : names) {
    if (!n.is_string() || n.get<std::string>().empty())
      throw std::invalid_argument("data spec: 'labels' must hold non-empty strings, got " + n.dump());
    if (!seen.insert(n.get<std::string>()).second)
      throw std::invalid_argument("data spec: 'labels' names '" + n.get<std::string>() + "' twice");
    out.push_back(n.get<std::string>());
  }
  if (static_cast<int64_t>(out.size()) != model.n_classes)
    throw std::invalid_argument("data spec: 'labels' names " + std::to_string(out.size()) +
                                " classes, the model has n_classes " + std::to_string(model.n_classes));
  return out;
}

TsvColumns tsv_columns(const nlohmann::json& spec, const ModelConfig& model) {
  TsvColumns cols;
  cols.text_a = spec_fields(spec).opt_str("text_a", "sentence");
  cols.text_b = spec_fields(spec).opt_str("text_b", "");
  cols.label = spec_fields(spec).opt_str("label", "label");
  if (spec.contains("labels")) cols.label_names = label_names(spec.at("labels"), model);
  return cols;
}

// The rows of the splits wanted, by split, and the file each came from.
struct TsvSplits {
  std::map<std::string, std::vector<TextExample>> raw;
  std::map<std::string, std::string> files;
};

// valid_fraction: the valid split is a held-out part of the train file (for checkpoint selection), so
// that the file's own dev set can be the reported test split.
TsvSplits read_tsv_splits(const TaskRequest& r, const TsvColumns& cols) {
  const auto& spec = r.spec;
  const bool held_out = spec.contains("valid_fraction");
  if (held_out && spec.contains("valid"))
    throw std::invalid_argument("data spec: give 'valid' (a file) or 'valid_fraction' (held out of train), not both");
  const double frac = spec_fields(spec).opt_num("valid_fraction", 0.0);
  if (held_out && (frac <= 0 || frac >= 1)) throw std::invalid_argument("data spec: valid_fraction must be in (0, 1)");
  TsvSplits s;
  for (const char* split : {"train", "valid", "test"})
    if (r.wants(split) && spec.contains(split)) {
      s.files[split] = r.path(spec.at(split).get<std::string>());
      s.raw[split] = read_tsv_classification(s.files[split], cols);
    }
  if (held_out && (r.wants("valid") || r.wants("train"))) {
    if (!spec.contains("train")) throw std::invalid_argument("data spec: valid_fraction needs 'train'");
    s.files["train"] = s.files["valid"] = r.path(spec.at("train").get<std::string>());
    auto parts = hold_out(
        s.raw.count("train") ? std::move(s.raw["train"]) : read_tsv_classification(s.files["train"], cols), frac);
    if (parts.first.empty() || parts.second.empty())
      throw std::invalid_argument("data spec: valid_fraction " + std::to_string(frac) + " of " + s.files["train"] +
                                  "'s rows leaves an empty split");
    s.raw.erase("train");
    if (r.wants("train") || !r.tokenizer) s.raw["train"] = std::move(parts.first);  // the vocabulary's too
    if (r.wants("valid")) s.raw["valid"] = std::move(parts.second);
  }
  return s;
}

// The rows of `file` as examples; a label outside the model's classes is an error naming the row.
std::vector<Example> classification_examples(const std::vector<TextExample>& rows, const std::string& file,
                                             const Tokenizer& tok, const ModelConfig& model, int64_t max_len) {
  std::vector<Example> ex;
  for (const auto& e : rows) {
    if (e.label < 0 || e.label >= model.n_classes)
      throw std::invalid_argument(file + ":" + std::to_string(e.line) + ": label " + std::to_string(e.label) +
                                  " is outside the model's " + std::to_string(model.n_classes) + " classes [0, " +
                                  std::to_string(model.n_classes) + ")");
    ex.push_back(classification_example(tok, e.text_a, e.text_b, e.label, max_len));
  }
  return ex;
}

TaskData tsv_task(const TaskRequest& r, int64_t max_len) {
  if (r.model.arch != Arch::EncoderClassifier) throw std::invalid_argument("data spec: kind tsv needs encoder_classifier");
  const TsvColumns cols = tsv_columns(r.spec, r.model);
  TsvSplits s = read_tsv_splits(r, cols);
  TaskData d;
  d.tokenizer = task_tokenizer(r, s.raw, [](const TextExample& e, std::vector<std::string>& text) {
    text.push_back(e.text_a);
    if (!e.text_b.empty()) text.push_back(e.text_b);
  });
  for (auto& kv : s.raw) {
    auto ex = classification_examples(kv.second, s.files[kv.first], *d.tokenizer, r.model, max_len);
    (kv.first == "train" ? d.train : kv.first == "valid" ? d.valid : d.test) = std::move(ex);
  }
  return d;
}

// ---- parallel: translation ------------------------------------------------------------------------

using SentencePairs = std::vector<std::pair<std::string, std::string>>;

// Pairs as examples: an over-long training pair is dropped, an over-long evaluation pair truncated.
std::vector<Example> translation_examples(const SentencePairs& pairs, bool train, const Tokenizer& tok, int64_t max_len) {
  std::vector<Example> ex;
  for (const auto& p : pairs) {
    Example e = translation_example(tok, p.first, p.second, 0);
    const bool too_long = static_cast<int64_t>(std::max(e.src.size(), e.tgt.size())) > max_len;
    if (too_long && train) continue;  // drop over-long training pairs
    if (too_long) e = translation_example(tok, p.first, p.second, max_len);
    ex.push_back(std::move(e));
  }
  return ex;
}

TaskData parallel_task(const TaskRequest& r, int64_t max_len) {
  if (r.model.arch != Arch::EncoderDecoder) throw std::invalid_argument("data spec: kind parallel needs encoder_decoder");
  std::map<std::string, SentencePairs> raw;
  for (const char* s : {"train", "valid", "test"}) {
    if (!r.wants(s) || !r.spec.contains(s)) continue;
    const auto& pair = r.spec.at(s);
    if (!pair.is_array() || pair.size() != 2)
      throw std::invalid_argument(std::string("data spec: '") + s + "' must be [source file, target file]");
    raw[s] = read_parallel(r.path(pair[0].get<std::string>()), r.path(pair[1].get<std::string>()));
  }
  TaskData d;
  d.tokenizer = task_tokenizer(r, raw, [](const auto& p, std::vector<std::string>& text) {
    text.push_back(p.first);  // one joint vocabulary for both languages
    text.push_back(p.second);
  });
  for (auto& kv : raw) {
    auto ex = translation_examples(kv.second, kv.first == "train", *d.tokenizer, max_len);
    if (kv.first == "train") d.train = std::move(ex);
    else if (kv.first == "valid") {
      d.valid = std::move(ex);
      d.valid_text = kv.second;
    } else {
      d.test = std::move(ex);
      d.test_text = kv.second;
    }
  }
  return d;
}

// ---- text: language modelling ---------------------------------------------------------------------

// A text file cut in order: train, then valid_fraction of its lines (checkpoint selection), then
// test_fraction (the split reported), so the held-out text is contiguous and never trained on.
struct TextSplits {
  std::vector<std::string> train, valid, test;
  bool test_held_out = false;  // test_fraction given
};

TextSplits cut_text(const std::vector<std::string>& lines, const nlohmann::json& spec, const std::string& file) {
  const double frac = spec_fields(spec).opt_num("valid_fraction", 0.1);
  if (frac <= 0 || frac >= 1) throw std::invalid_argument("data spec: valid_fraction must be in (0, 1)");
  TextSplits s;
  s.test_held_out = spec.contains("test_fraction");
  if (s.test_held_out && spec.contains("test"))
    throw std::invalid_argument("data spec: give 'test' (a file) or 'test_fraction' (held out of train), not both");
  const double test_frac = spec_fields(spec).opt_num("test_fraction", 0.0);
  if (s.test_held_out && (test_frac <= 0 || frac + test_frac >= 1))
    throw std::invalid_argument("data spec: test_fraction must be > 0 and valid_fraction + test_fraction < 1");
  const auto n = static_cast<double>(lines.size());
  const auto cut = static_cast<size_t>(n * (1.0 - frac - test_frac));
  const auto test_cut = static_cast<size_t>(n * (1.0 - test_frac));
  if (cut == 0 || test_cut <= cut || (s.test_held_out && test_cut >= lines.size()))
    throw std::invalid_argument("data spec: valid_fraction " + shortest(frac) +
                                (s.test_held_out ? " and test_fraction " + shortest(test_frac) : "") + " of " + file +
                                "'s " + std::to_string(lines.size()) + " lines leave an empty split");
  s.train.assign(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(cut));
  s.valid.assign(lines.begin() + static_cast<std::ptrdiff_t>(cut), lines.begin() + static_cast<std::ptrdiff_t>(test_cut));
  s.test.assign(lines.begin() + static_cast<std::ptrdiff_t>(test_cut), lines.end());
  return s;
}

TaskData text_task(const TaskRequest& r, int64_t max_len) {
  if (r.model.arch != Arch::DecoderLM) throw std::invalid_argument("data spec: kind text needs decoder_lm");
  if (!r.spec.contains("train")) throw std::invalid_argument("data spec: kind text needs 'train'");
  const std::string file = r.spec.at("train").get<std::string>();
  const TextSplits s = cut_text(read_lines(r.path(file)), r.spec, file);
  TaskData d;
  d.tokenizer = r.tokenizer ? *r.tokenizer : train_tokenizer(s.train, r.spec, r.seed);
  if (r.wants("train")) d.train = lm_blocks(*d.tokenizer, s.train, max_len);
  if (r.wants("valid")) d.valid = lm_blocks(*d.tokenizer, s.valid, max_len);
  if (r.wants("test") && s.test_held_out) d.test = lm_blocks(*d.tokenizer, s.test, max_len);
  if (r.wants("test") && r.spec.contains("test"))
    d.test = lm_blocks(*d.tokenizer, read_lines(r.path(r.spec.at("test").get<std::string>())), max_len);
  return d;
}

}  // namespace

TaskData load_task(const nlohmann::json& spec, const ModelConfig& model, const std::string& data_root,
                   const std::optional<Tokenizer>& tokenizer, const std::vector<std::string>& splits, uint64_t seed) {
  check_spec_keys(spec);
  const std::string kind = spec_fields(spec).opt_str("kind", "synthetic");
  const int64_t max_train = spec_fields(spec).opt_int("max_train", 0);
  const TaskRequest r{spec, model, data_root, tokenizer, splits, seed};
  if (kind == "synthetic") return synthetic_task(r);
  const int64_t max_len = spec_max_len(spec, model);
  TaskData d;
  if (kind == "tsv") d = tsv_task(r, max_len);
  else if (kind == "parallel") d = parallel_task(r, max_len);
  else if (kind == "text") d = text_task(r, max_len);
  else throw std::invalid_argument("data spec: unknown kind '" + kind + "' (expected synthetic, tsv, parallel or text)");
  if (max_train > 0 && static_cast<int64_t>(d.train.size()) > max_train) d.train.resize(max_train);  // max_train caps training
  return d;
}

}  // namespace hp
