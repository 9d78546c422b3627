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

template <typename T>
T opt(const nlohmann::json& j, const char* key, T fallback) {
  if (!j.contains(key)) return fallback;
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(std::string("data spec: '") + key + "' has the wrong type: " + j.at(key).dump());
  }
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
  o.vocab_size = opt<int64_t>(spec, "vocab_size", 8000);
  o.model_type = opt<std::string>(spec, "tokenizer", "bpe");
  o.seed = seed;
  log_info("data", "training a " + o.model_type + " vocabulary of " + std::to_string(o.vocab_size) + " on " +
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
    const auto ids = tok->encode(line);
    stream.insert(stream.end(), ids.begin(), ids.end());
    stream.push_back(tok->specials().eos);
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

TaskData load_task(const nlohmann::json& spec, const ModelConfig& model, const std::string& data_root,
                   const std::optional<Tokenizer>& tokenizer, const std::vector<std::string>& splits, uint64_t seed) {
  if (!spec.is_object()) throw std::invalid_argument("data spec: expected a JSON object");
  for (auto it = spec.begin(); it != spec.end(); ++it)
    if (!kSpecKeys.count(it.key())) throw std::invalid_argument("data spec: '" + it.key() + "' is not a known key");
  const std::string kind = opt<std::string>(spec, "kind", "synthetic");
  const int64_t max_train = opt<int64_t>(spec, "max_train", 0);
  TaskData d;
  auto path = [&](const std::string& p) { return resolve_data_path(data_root, p); };
  auto cap = [&](std::vector<Example>& v) {
    if (max_train > 0 && static_cast<int64_t>(v.size()) > max_train) v.resize(max_train);
  };

  if (kind == "synthetic") {
    const int64_t lo = opt<int64_t>(spec, "min_len", 3), hi = opt<int64_t>(spec, "max_len", 24);
    if (wants(splits, "train")) d.train = synthetic_examples(model, opt<int64_t>(spec, "n_train", 4000), lo, hi, seed);
    if (wants(splits, "valid")) d.valid = synthetic_examples(model, opt<int64_t>(spec, "n_valid", 500), lo, hi, seed + 1);
    if (wants(splits, "test")) d.test = synthetic_examples(model, opt<int64_t>(spec, "n_test", 500), lo, hi, seed + 2);
    return d;
  }
  const int64_t max_len = opt<int64_t>(spec, "max_len", model.max_positions);
  if (max_len > model.max_positions)
    throw std::invalid_argument("data spec: max_len " + std::to_string(max_len) + " exceeds the model's max_positions " +
                                std::to_string(model.max_positions));

  if (kind == "tsv") {
    if (model.arch != Arch::EncoderClassifier) throw std::invalid_argument("data spec: kind tsv needs encoder_classifier");
    TsvColumns cols;
    cols.text_a = opt<std::string>(spec, "text_a", "sentence");
    cols.text_b = opt<std::string>(spec, "text_b", "");
    cols.label = opt<std::string>(spec, "label", "label");
    if (spec.contains("labels")) {
      const auto& names = spec.at("labels");
      if (!names.is_array() || names.empty())
        throw std::invalid_argument("data spec: 'labels' must be a non-empty array of class names");
      std::set<std::string> seen;
      for (const auto& n : names) {
        if (!n.is_string() || n.get<std::string>().empty())
          throw std::invalid_argument("data spec: 'labels' must hold non-empty strings, got " + n.dump());
        if (!seen.insert(n.get<std::string>()).second)
          throw std::invalid_argument("data spec: 'labels' names '" + n.get<std::string>() + "' twice");
        cols.label_names.push_back(n.get<std::string>());
      }
      if (static_cast<int64_t>(cols.label_names.size()) != model.n_classes)
        throw std::invalid_argument("data spec: 'labels' names " + std::to_string(cols.label_names.size()) +
                                    " classes, the model has n_classes " + std::to_string(model.n_classes));
    }
    // valid_fraction: the valid split is a held-out part of the train file (for checkpoint
    // selection), so that the file's own dev set can be the reported test split.
    const bool held_out = spec.contains("valid_fraction");
    if (held_out && spec.contains("valid"))
      throw std::invalid_argument("data spec: give 'valid' (a file) or 'valid_fraction' (held out of train), not both");
    const double frac = opt<double>(spec, "valid_fraction", 0.0);
    if (held_out && (frac <= 0 || frac >= 1)) throw std::invalid_argument("data spec: valid_fraction must be in (0, 1)");
    std::map<std::string, std::vector<TextExample>> raw;
    std::map<std::string, std::string> files;
    for (const char* s : {"train", "valid", "test"})
      if (wants(splits, s) && spec.contains(s)) {
        files[s] = path(spec.at(s).get<std::string>());
        raw[s] = read_tsv_classification(files[s], cols);
      }
    if (held_out && (wants(splits, "valid") || wants(splits, "train"))) {
      if (!spec.contains("train")) throw std::invalid_argument("data spec: valid_fraction needs 'train'");
      files["train"] = files["valid"] = path(spec.at("train").get<std::string>());
      auto parts = hold_out(raw.count("train") ? std::move(raw["train"]) : read_tsv_classification(files["train"], cols),
                            frac);
      if (parts.first.empty() || parts.second.empty())
        throw std::invalid_argument("data spec: valid_fraction " + std::to_string(frac) + " of " + files["train"] +
                                    "'s rows leaves an empty split");
      raw.erase("train");
      if (wants(splits, "train") || !tokenizer) raw["train"] = std::move(parts.first);  // the vocabulary's too
      if (wants(splits, "valid")) raw["valid"] = std::move(parts.second);
    }
    if (tokenizer) {
      d.tokenizer = tokenizer;
    } else {
      if (!raw.count("train")) throw std::invalid_argument("data spec: a vocabulary needs the train split");
      std::vector<std::string> text;
      for (const auto& e : raw["train"]) {
        text.push_back(e.text_a);
        if (!e.text_b.empty()) text.push_back(e.text_b);
      }
      d.tokenizer = train_tokenizer(text, spec, seed);
    }
    for (auto& kv : raw) {
      std::vector<Example> ex;
      for (const auto& e : kv.second) {
        if (e.label < 0 || e.label >= model.n_classes)
          throw std::invalid_argument(files[kv.first] + ":" + std::to_string(e.line) + ": label " +
                                      std::to_string(e.label) + " is outside the model's " +
                                      std::to_string(model.n_classes) + " classes [0, " +
                                      std::to_string(model.n_classes) + ")");
        ex.push_back(classification_example(*d.tokenizer, e.text_a, e.text_b, e.label, max_len));
      }
      (kv.first == "train" ? d.train : kv.first == "valid" ? d.valid : d.test) = std::move(ex);
    }
    cap(d.train);
    return d;
  }

  if (kind == "parallel") {
    if (model.arch != Arch::EncoderDecoder) throw std::invalid_argument("data spec: kind parallel needs encoder_decoder");
    std::map<std::string, std::vector<std::pair<std::string, std::string>>> raw;
    for (const char* s : {"train", "valid", "test"}) {
      if (!wants(splits, s) || !spec.contains(s)) continue;
      const auto& pair = spec.at(s);
      if (!pair.is_array() || pair.size() != 2)
        throw std::invalid_argument(std::string("data spec: '") + s + "' must be [source file, target file]");
      raw[s] = read_parallel(path(pair[0].get<std::string>()), path(pair[1].get<std::string>()));
    }
    if (tokenizer) {
      d.tokenizer = tokenizer;
    } else {
      if (!raw.count("train")) throw std::invalid_argument("data spec: a vocabulary needs the train split");
      std::vector<std::string> text;  // one joint vocabulary for both languages
      for (const auto& p : raw["train"]) {
        text.push_back(p.first);
        text.push_back(p.second);
      }
      d.tokenizer = train_tokenizer(text, spec, seed);
    }
    for (auto& kv : raw) {
      std::vector<Example> ex;
      for (const auto& p : kv.second) {
        Example e = translation_example(*d.tokenizer, p.first, p.second, 0);
        const bool too_long = static_cast<int64_t>(std::max(e.src.size(), e.tgt.size())) > max_len;
        if (too_long && kv.first == "train") continue;  // drop over-long training pairs
        if (too_long) e = translation_example(*d.tokenizer, p.first, p.second, max_len);
        ex.push_back(std::move(e));
      }
      if (kv.first == "train") d.train = std::move(ex);
      else if (kv.first == "valid") {
        d.valid = std::move(ex);
        d.valid_text = kv.second;
      } else {
        d.test = std::move(ex);
        d.test_text = kv.second;
      }
    }
    cap(d.train);
    return d;
  }

  if (kind == "text") {
    if (model.arch != Arch::DecoderLM) throw std::invalid_argument("data spec: kind text needs decoder_lm");
    if (!spec.contains("train")) throw std::invalid_argument("data spec: kind text needs 'train'");
    const std::string file = spec.at("train").get<std::string>();
    auto lines = read_lines(path(file));
    // The file is cut in order: train, then valid_fraction of its lines (checkpoint selection), then
    // test_fraction (the split reported), so the held-out text is contiguous and never trained on.
    const double frac = opt<double>(spec, "valid_fraction", 0.1);
    if (frac <= 0 || frac >= 1) throw std::invalid_argument("data spec: valid_fraction must be in (0, 1)");
    const bool test_held_out = spec.contains("test_fraction");
    if (test_held_out && spec.contains("test"))
      throw std::invalid_argument("data spec: give 'test' (a file) or 'test_fraction' (held out of train), not both");
    const double test_frac = opt<double>(spec, "test_fraction", 0.0);
    if (test_held_out && (test_frac <= 0 || frac + test_frac >= 1))
      throw std::invalid_argument("data spec: test_fraction must be > 0 and valid_fraction + test_fraction < 1");
    const auto n = static_cast<double>(lines.size());
    const auto cut = static_cast<size_t>(n * (1.0 - frac - test_frac));
    const auto test_cut = static_cast<size_t>(n * (1.0 - test_frac));
    if (cut == 0 || test_cut <= cut || (test_held_out && test_cut >= lines.size()))
      throw std::invalid_argument("data spec: valid_fraction " + shortest(frac) +
                                  (test_held_out ? " and test_fraction " + shortest(test_frac) : "") + " of " + file +
                                  "'s " + std::to_string(lines.size()) + " lines leave an empty split");
    std::vector<std::string> train(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(cut));
    std::vector<std::string> valid(lines.begin() + static_cast<std::ptrdiff_t>(cut),
                                   lines.begin() + static_cast<std::ptrdiff_t>(test_cut));
    std::vector<std::string> test(lines.begin() + static_cast<std::ptrdiff_t>(test_cut), lines.end());
    d.tokenizer = tokenizer ? *tokenizer : train_tokenizer(train, spec, seed);
    if (wants(splits, "train")) d.train = lm_blocks(*d.tokenizer, train, max_len);
    if (wants(splits, "valid")) d.valid = lm_blocks(*d.tokenizer, valid, max_len);
    if (wants(splits, "test") && test_held_out) d.test = lm_blocks(*d.tokenizer, test, max_len);
    if (wants(splits, "test") && spec.contains("test"))
      d.test = lm_blocks(*d.tokenizer, read_lines(path(spec.at("test").get<std::string>())), max_len);
    cap(d.train);
    return d;
  }
  throw std::invalid_argument("data spec: unknown kind '" + kind + "' (expected synthetic, tsv, parallel or text)");
}

}  // namespace hp
