// Readers: plain and gzipped line files, GLUE-style TSV and parallel corpora, with the errors for
// malformed input (Readers), and the shipped data sets when present (ReadersData; set
// HP_SHARED_DATA, default ../shared/data).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <gtest/gtest.h>
#include <zlib.h>

#include "headprune/data/readers.h"
#include "test_util.h"

namespace hp {
namespace {
namespace fs = std::filesystem;

using Scratch = test::TempDir;  // a fresh temporary directory, removed afterwards

std::string write_plain(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  return path;
}

std::string write_gz(const std::string& path, const std::string& content) {
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  if (!content.empty()) {
    EXPECT_EQ(gzwrite(f, content.data(), static_cast<unsigned>(content.size())), static_cast<int>(content.size()));
  }
  EXPECT_EQ(gzclose(f), Z_OK);
  return path;
}

// The message of the std::runtime_error that `f` throws ("" if none).
template <typename F>
std::string runtime_error_of(F f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Readers, LinesPlain) {
  Scratch d;
  using V = std::vector<std::string>;
  EXPECT_EQ(read_lines(write_plain(d / "a.txt", "a\r\nb\n\nc")), (V{"a", "b", "", "c"}));
  EXPECT_EQ(read_lines(write_plain(d / "b.txt", "x\ny\n")), (V{"x", "y"}));  // no line after the last '\n'
  EXPECT_EQ(read_lines(write_plain(d / "c.txt", "")), V{});
  EXPECT_EQ(read_lines(write_plain(d / "d.txt", "\n")), V{""});
  EXPECT_EQ(read_lines(write_plain(d / "e.txt", "\xEF\xBB\xBFhead\ttab\n")), V{"head\ttab"});  // BOM dropped
}

TEST(Readers, LinesGzipped) {
  Scratch d;
  EXPECT_EQ(read_lines(write_gz(d / "a.txt.gz", "a\r\nb\n\nc\n")), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_TRUE(read_lines(write_gz(d / "empty.gz", "")).empty());
  // More than one read buffer, lines crossing buffer boundaries.
  std::string big;
  for (int i = 0; i < 20000; ++i) big += "line number " + std::to_string(i) + "\n";
  const auto lines = read_lines(write_gz(d / "big.gz", big));
  ASSERT_EQ(lines.size(), 20000u);
  EXPECT_EQ(lines[12345], "line number 12345");
  EXPECT_EQ(lines.back(), "line number 19999");
}

TEST(Readers, LinesErrorsNameThePath) {
  Scratch d;
  EXPECT_TRUE(contains(runtime_error_of([&] { read_lines(d / "missing.txt"); }), d / "missing.txt"));
  EXPECT_TRUE(contains(runtime_error_of([&] { read_lines(d / "missing.gz"); }), d / "missing.gz"));
  EXPECT_TRUE(contains(runtime_error_of([&] { read_lines(d.path); }), "directory"));
  // Plain text under a .gz name is not silently read as text.
  const std::string fake = write_plain(d / "fake.gz", "not gzip\n");
  EXPECT_TRUE(contains(runtime_error_of([&] { read_lines(fake); }), fake + ": not gzip data"));
  // A gzip stream cut in half.
  std::string big;
  for (int i = 0; i < 5000; ++i) big += std::to_string(i * 7919 % 10007) + " words\n";
  write_gz(d / "full.gz", big);
  std::ifstream in(d / "full.gz", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = write_plain(d / "cut.gz", bytes.substr(0, bytes.size() / 2));
  EXPECT_TRUE(contains(runtime_error_of([&] { read_lines(cut); }), cut + ": corrupt or truncated gzip"));
}

TEST(Readers, TsvSingleSentences) {
  Scratch d;
  // SST-2 style: a space before the tab, quotes inside the text, label last.
  const std::string p = write_gz(d / "dev.tsv.gz",
                                 "sentence\tlabel\n"
                                 "it 's a \"charming\" journey . \t1\n"
                                 "\"bad\t0\n"
                                 "fine\t 1 \r\n");
  const auto ex = read_tsv_classification(p);
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_EQ(ex[0].text_a, "it 's a \"charming\" journey . ");
  EXPECT_EQ(ex[0].label, 1);
  EXPECT_EQ(ex[1].text_a, "\"bad");
  EXPECT_EQ(ex[1].label, 0);
  EXPECT_TRUE(ex[1].text_b.empty());
  EXPECT_EQ(ex[2].label, 1);
}

TEST(Readers, TsvPairsByHeaderName) {
  Scratch d;
  const std::string p = write_plain(d / "pairs.tsv",
                                    "index\tquestion\tsentence\tlabel\n"
                                    "0\tWho?\tHe did.\t0\n"
                                    "1\tWhen?\tAt noon.\t1\n");
  TsvColumns cols;
  cols.text_a = "question";
  cols.text_b = "sentence";
  const auto ex = read_tsv_classification(p, cols);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[1].text_a, "When?");
  EXPECT_EQ(ex[1].text_b, "At noon.");
  EXPECT_EQ(ex[1].label, 1);
  // Unlabelled files: no label column needed when columns.label is empty.
  const std::string u = write_plain(d / "test.tsv", "index\tsentence\n0\thello\n");
  TsvColumns unlabelled;
  unlabelled.label = "";
  const auto t = read_tsv_classification(u, unlabelled);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].text_a, "hello");
  EXPECT_EQ(t[0].label, -1);
  // Header only: no examples.
  EXPECT_TRUE(read_tsv_classification(write_plain(d / "h.tsv", "sentence\tlabel\n")).empty());
}

TEST(Readers, TsvStringLabels) {
  Scratch d;
  // RTE, QNLI and MNLI name their classes: class i is label_names[i]; spaces around are ignored
  const std::string p = write_plain(d / "rte.tsv", "sentence\tlabel\na\tnot_entailment\nb\t entailment \n");
  TsvColumns cols;
  cols.label_names = {"entailment", "not_entailment"};
  const auto ex = read_tsv_classification(p, cols);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].label, 1);
  EXPECT_EQ(ex[1].label, 0);
  const std::string q = write_plain(d / "bad.tsv", "sentence\tlabel\na\tneutral\n");
  EXPECT_EQ(runtime_error_of([&] { read_tsv_classification(q, cols); }),
            q + ":2: label 'neutral' in column 'label' is not one of the data spec's labels ['entailment', 'not_entailment']");
  // numbers are not names: a file with class numbers and a spec with names disagree
  const std::string n = write_plain(d / "num.tsv", "sentence\tlabel\na\t0\n");
  EXPECT_TRUE(contains(runtime_error_of([&] { read_tsv_classification(n, cols); }), "label '0'"));
}

TEST(Readers, TsvMalformed) {
  Scratch d;
  const std::string fields = write_plain(d / "fields.tsv", "sentence\tlabel\na\t0\nb\tc\t1\n");
  EXPECT_EQ(runtime_error_of([&] { read_tsv_classification(fields); }),
            fields + ":3: expected 2 tab-separated fields, got 3");
  const std::string blank = write_plain(d / "blank.tsv", "sentence\tlabel\na\t0\n\nb\t1\n");
  EXPECT_EQ(runtime_error_of([&] { read_tsv_classification(blank); }),
            blank + ":3: expected 2 tab-separated fields, got 1");

  const std::string header = write_plain(d / "header.tsv", "sentence\tgold\na\t0\n");
  const std::string msg = runtime_error_of([&] { read_tsv_classification(header); });
  EXPECT_TRUE(contains(msg, header + ":1: expected a column 'label'")) << msg;
  EXPECT_TRUE(contains(msg, "'sentence', 'gold'")) << msg;
  TsvColumns pair;
  pair.text_b = "hypothesis";
  EXPECT_TRUE(contains(runtime_error_of([&] { read_tsv_classification(header, pair); }), "'hypothesis'"));

  for (const std::string bad : {"positive", "1.0", "-1", "", "2x", "99999999999999999999"}) {
    const std::string p = write_plain(d / "label.tsv", "sentence\tlabel\nok\t1\nbad\t" + bad + "\n");
    EXPECT_EQ(runtime_error_of([&] { read_tsv_classification(p); }),
              p + ":3: expected a non-negative integer label in column 'label', got '" + bad +
                  "' (for classes named by strings, list them in the data spec: \"labels\": [...])");
  }
  const std::string empty = write_plain(d / "empty.tsv", "");
  EXPECT_TRUE(contains(runtime_error_of([&] { read_tsv_classification(empty); }), empty + ": empty file"));
  EXPECT_TRUE(contains(runtime_error_of([&] { read_tsv_classification(d / "nope.tsv"); }), d / "nope.tsv"));
  TsvColumns no_text;
  no_text.text_a = "";
  EXPECT_THROW(read_tsv_classification(fields, no_text), std::invalid_argument);
}

TEST(Readers, Parallel) {
  Scratch d;
  const std::string en = write_gz(d / "x.en.gz", "A man .\nTwo dogs\r\n");
  const std::string de = write_plain(d / "x.de", "Ein Mann .\nZwei Hunde\n");
  const auto pairs = read_parallel(en, de);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0], (std::pair<std::string, std::string>{"A man .", "Ein Mann ."}));
  EXPECT_EQ(pairs[1].first, "Two dogs");
  EXPECT_EQ(pairs[1].second, "Zwei Hunde");
}

TEST(Readers, ParallelMalformed) {
  Scratch d;
  const std::string src = write_plain(d / "s.txt", "a\nb\nc\n");
  const std::string tgt = write_plain(d / "t.txt", "x\ny\n");
  const std::string msg = runtime_error_of([&] { read_parallel(src, tgt); });
  EXPECT_TRUE(contains(msg, "3 in " + src) && contains(msg, "2 in " + tgt)) << msg;

  const std::string gap = write_plain(d / "gap.txt", "x\n\nz\n");
  EXPECT_EQ(runtime_error_of([&] { read_parallel(src, gap); }), gap + ":2: empty sentence");
  const std::string spaces = write_plain(d / "spaces.txt", " \t \nb\nc\n");
  EXPECT_EQ(runtime_error_of([&] { read_parallel(spaces, src); }), spaces + ":1: empty sentence");
  EXPECT_TRUE(contains(runtime_error_of([&] { read_parallel(src, d / "missing.de"); }), d / "missing.de"));
}

// --- the shipped data sets ---------------------------------------------------------------------

using test::shared_data;

#define HP_REQUIRE_SHARED_DATA(dir)                                                              \
  const std::string dir = shared_data();                                                         \
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no shared data at '" << dir << "' (set HP_SHARED_DATA)"

TEST(ReadersData, Sst2) {
  HP_REQUIRE_SHARED_DATA(root);
  struct Split {
    const char* name;
    size_t rows;
    int zeros, ones;
  };
  for (const Split& s : {Split{"dev", 872, 428, 444}, Split{"train", 67349, 29780, 37569}}) {
    const auto ex = read_tsv_classification(root + "/glue/SST-2/" + s.name + ".tsv.gz");
    ASSERT_EQ(ex.size(), s.rows) << s.name;
    std::map<int64_t, int> counts;
    for (const auto& e : ex) {
      ++counts[e.label];
      ASSERT_FALSE(e.text_a.empty());
    }
    EXPECT_EQ(counts.size(), 2u) << s.name;
    EXPECT_EQ(counts[0], s.zeros) << s.name;
    EXPECT_EQ(counts[1], s.ones) << s.name;
  }
}

TEST(ReadersData, Multi30k) {
  HP_REQUIRE_SHARED_DATA(root);
  const auto pairs =
      read_parallel(root + "/multi30k/test_2016_flickr.en.gz", root + "/multi30k/test_2016_flickr.de.gz");
  EXPECT_EQ(pairs.size(), 1000u);
  const auto val = read_parallel(root + "/multi30k/val.en.gz", root + "/multi30k/val.de.gz");
  EXPECT_EQ(val.size(), 1014u);
}

TEST(ReadersData, LanguageModelText) {
  HP_REQUIRE_SHARED_DATA(root);
  EXPECT_EQ(read_lines(root + "/lm/wikitext-2-raw/wiki.valid.raw.gz").size(), 3760u);
  EXPECT_EQ(read_lines(root + "/lm/tinyshakespeare/input.txt.gz").size(), 40000u);
}

TEST(ReadersData, UdEnglishEwt) {
  HP_REQUIRE_SHARED_DATA(root);
  struct Split {
    const char* name;
    size_t sentences;
    int64_t nsubj;
  };
  for (const Split& s : {Split{"dev", 2001, 2137}, Split{"test", 2077, 2074}, Split{"train", 12544, 17377}}) {
    const auto sents = read_conllu(root + "/ud_english_ewt/en_ewt-ud-" + s.name + ".conllu.gz");
    EXPECT_EQ(sents.size(), s.sentences) << s.name;
    int64_t nsubj = 0;  // labels starting with nsubj (nsubj, nsubj:pass, nsubj:outer ...)
    for (const auto& x : sents)
      for (const auto& w : x.words) {
        nsubj += w.deprel.rfind("nsubj", 0) == 0;
        ASSERT_LE(w.head, static_cast<int64_t>(x.words.size()));
      }
    EXPECT_EQ(nsubj, s.nsubj) << s.name;
  }
}

}  // namespace
}  // namespace hp
