// HuggingFace interop: parity with golden outputs of the reference implementation
// (tests/fixtures/hf/make_hf_fixtures.py), pruned_heads, export -> re-import round trips, bad input.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "headprune/data/hf_tokenizers.h"
#include "headprune/data/tasks.h"
#include "headprune/data/model_dir.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/hf.h"
#include "headprune/io/safetensors.h"
#include "headprune/jobs/export_job.h"
#include "headprune/jobs/tokenize_job.h"
#include "headprune/model/remove_heads.h"
#include "test_util.h"

namespace hp {
namespace {

namespace fs = std::filesystem;

TensorMap golden(const std::string& name) { return read_safetensors(test::hf_fixture(name) + "/golden.safetensors").tensors; }

Batch golden_batch(const TensorMap& g) {
  Batch b;
  b.input_ids = g.at("input_ids");
  b.attention_mask = g.at("attention_mask");
  if (g.count("token_type_ids")) b.segment_ids = g.at("token_type_ids");
  return b;
}

torch::Tensor bert_hidden(TransformerImpl& m, const Batch& b) {
  torch::NoGradGuard ng;
  return m.encode(b);
}

using test::logits;

TEST(HfImport, BertMatchesTheReferenceOutputs) {
  for (const char* name : {"bert", "bert_pruned"}) {
    SCOPED_TRACE(name);
    auto hf = import_hf(test::hf_fixture(name));
    EXPECT_EQ(hf.model_type, "bert");
    EXPECT_TRUE(hf.initialized.empty());
    const auto g = golden(name);
    const auto b = golden_batch(g);
    EXPECT_LT(test::max_abs_diff(bert_hidden(*hf.model, b), g.at("last_hidden_state")), 1e-5);
    EXPECT_LT(test::max_abs_diff(logits(*hf.model, b), g.at("logits")), 1e-5);
  }
  // pruned_heads {"0": [1], "1": [0, 3]} is honoured with original ids.
  const auto cfg = import_hf(test::hf_fixture("bert_pruned")).model->config();
  EXPECT_EQ(cfg.encoder_self_heads, (std::vector<std::vector<int64_t>>{{0, 2, 3}, {1, 2}}));
  // BERT has no dropout between the intermediate activation and the output dense; neither has GPT-2.
  EXPECT_GT(cfg.dropout, 0.0);
  EXPECT_EQ(cfg.ffn_dropout(), 0.0);
  EXPECT_EQ(import_hf(test::hf_fixture("gpt2_pruned")).model->config().ffn_dropout(), 0.0);
}

TEST(HfImport, BertModelWithoutClassifierGetsAFreshOne) {
  auto hf = import_hf(test::hf_fixture("bert_base_model"));  // no "bert." prefix, no classifier
  EXPECT_EQ(hf.initialized, (std::vector<std::string>{"classifier.weight", "classifier.bias"}));
  EXPECT_EQ(hf.model->config().n_classes, 3);  // from id2label
  const auto g = golden("bert_base_model");
  EXPECT_LT(test::max_abs_diff(bert_hidden(*hf.model, golden_batch(g)), g.at("last_hidden_state")), 1e-5);
}

TEST(HfImport, Gpt2MatchesTheReferenceOutputs) {
  for (const char* name : {"gpt2", "gpt2_pruned"}) {
    SCOPED_TRACE(name);
    auto hf = import_hf(test::hf_fixture(name));
    EXPECT_EQ(hf.model_type, "gpt2");
    EXPECT_TRUE(hf.model->config().tie_embeddings);
    const auto g = golden(name);
    EXPECT_LT(test::max_abs_diff(logits(*hf.model, golden_batch(g)), g.at("logits")), 1e-5);
  }
  EXPECT_EQ(import_hf(test::hf_fixture("gpt2_pruned")).model->config().decoder_self_heads,
            (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {0, 1, 3}}));
  // Every command's loader takes the HF directory directly.
  EXPECT_EQ(load_checkpoint(test::hf_fixture("gpt2"))->config().arch, Arch::DecoderLM);
}

TEST(HfRoundTrip, PruneExportReimportMatchesTheMaskedModel) {
  for (const char* name : {"bert", "gpt2_pruned"}) {
    SCOPED_TRACE(name);
    auto hf = import_hf(test::hf_fixture(name));
    const auto b = golden_batch(golden(name));
    const AttnType t = hf.model_type == "bert" ? AttnType::EncoderSelf : AttnType::DecoderSelf;
    const std::vector<HeadId> drop = {{t, 0, 1}, {t, 0, 3}, {t, 1, 0}};
    hf.model->mask_heads(drop);
    const auto masked = logits(*hf.model, b);
    test::TempDir dir;
    export_hf(dir / "out", *hf.model, hf.config, HfLayout::PrunedHeads);  // masked heads leave physically
    const auto cfg = nlohmann::json::parse(read_file(dir / "out/config.json"));
    EXPECT_EQ(cfg.at("model_type"), hf.model_type);
    EXPECT_EQ(cfg.at(hf.model_type == "bert" ? "num_attention_heads" : "n_head"), 4);  // unchanged (HF v4)
    auto again = import_hf(dir / "out");
    EXPECT_LT(test::max_abs_diff(logits(*again.model, b), masked), 1e-5);
    EXPECT_EQ(again.model->config().heads(t)[0], (std::vector<int64_t>{0, 2}));
    // A native checkpoint of the imported model loads back the same way.
    save_checkpoint(dir / "native", *again.model);
    EXPECT_LT(test::max_abs_diff(logits(*load_checkpoint(dir / "native"), b), masked), 1e-5);
  }
  if (true) {
    // pruned_heads accumulate: the existing {"1": [2]} plus the new ones, as original ids.
    auto hf = import_hf(test::hf_fixture("gpt2_pruned"));
    hf.model->mask_heads({{AttnType::DecoderSelf, 1, 0}});
    const auto e = to_hf(*hf.model, hf.config, HfLayout::PrunedHeads);
    EXPECT_EQ(e.config.at("pruned_heads"), nlohmann::json::parse(R"({"1": [0, 2]})"));
    // Auto is dense for GPT-2 (transformers v5 ignores pruned_heads): no pruned_heads, every head count.
    const auto d = to_hf(*hf.model, hf.config);
    EXPECT_FALSE(d.config.contains("pruned_heads"));
    EXPECT_EQ(d.tensors.at("transformer.h.1.attn.c_attn.weight").shape, (std::vector<int64_t>{16, 48}));
    EXPECT_EQ(e.tensors.at("transformer.h.1.attn.c_attn.weight").shape, (std::vector<int64_t>{16, 24}));
  }
}

// The dense layout (what transformers v5 loads): the config's head counts in every layer, no
// pruned_heads, removed heads zero, a masked head's output scaled by its mask; re-imported it
// computes what the pruned and masked model computes.
TEST(HfRoundTrip, DenseExportKeepsEveryHeadCountAndTheMaskedModelsOutputs) {
  for (const char* name : {"bert_pruned", "gpt2_pruned"}) {
    SCOPED_TRACE(name);
    auto hf = import_hf(test::hf_fixture(name));
    const auto b = golden_batch(golden(name));
    const AttnType t = hf.model_type == "bert" ? AttnType::EncoderSelf : AttnType::DecoderSelf;
    hf.model->mask_heads({{t, 0, 2}});
    hf.model->set_head_mask({t, 1, 1}, 0.5);  // a gate between 0 and 1 is kept as a scale
    const auto masked = logits(*hf.model, b);
    test::TempDir dir;
    export_hf(dir / "out", *hf.model, hf.config, HfLayout::Dense);
    const auto cfg = nlohmann::json::parse(read_file(dir / "out/config.json"));
    EXPECT_FALSE(cfg.contains("pruned_heads")) << cfg.at("pruned_heads").dump();
    auto again = import_hf(dir / "out");
    for (int64_t l = 0; l < 2; ++l)
      EXPECT_EQ(again.model->config().heads(t)[static_cast<size_t>(l)], (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_TRUE(again.model->masked_heads().empty());
    EXPECT_LT(test::max_abs_diff(logits(*again.model, b), masked), 1e-5);
    EXPECT_GT(test::max_abs_diff(logits(*import_hf(test::hf_fixture(name)).model, b), masked), 1e-4) << "masking changed nothing";
  }
  EXPECT_EQ(parse_hf_layout("dense"), HfLayout::Dense);
  EXPECT_EQ(parse_hf_layout("pruned_heads"), HfLayout::PrunedHeads);
  EXPECT_NE(test::error_of([] { parse_hf_layout("sliced"); }).find("auto, native, dense or pruned_heads"), std::string::npos);
  auto llama = import_hf(test::hf_fixture("llama_gqa"));
  EXPECT_NE(test::error_of([&] { to_hf(*llama.model, llama.config, HfLayout::PrunedHeads); }).find("dense"),
            std::string::npos);
}

TEST(HfRoundTrip, HeadpruneModelsExportWhenHfCanExpressThem) {
  // A BERT-shaped classifier trained here exports; an encoder-decoder does not.
  ModelConfig c = tiny_config(Arch::EncoderClassifier);
  auto m = test::make_model(c);
  const auto e = to_hf(*m);
  EXPECT_EQ(e.config.at("model_type"), "bert");
  test::TempDir dir;
  export_hf(dir / "bert", *m);
  const auto b = test::make_batch(m->config());
  EXPECT_LT(test::max_abs_diff(logits(*import_hf(dir / "bert").model, b), logits(*m, b)), 1e-5);
  auto ed = test::make_model(Arch::EncoderDecoder);
  EXPECT_THROW(to_hf(*ed), std::invalid_argument);
}

// Export is as strict as import: a config field the family cannot say is refused by name (its allow-list:
// a GPT-2-shaped LM with a logits bias exported as GPT-2 without it, exit 0, once), and behind it a model
// tensor the file has no place for; head masks are never written (masked heads are removed or zero first),
// empty tensors neither, and a table tied under two names is written once.
TEST(HfRoundTrip, ExportFailsNamingAModelTensorItCannotWrite) {
  ModelConfig c = tiny_config(Arch::DecoderLM);
  c.logits_bias = true;
  c.finalize();
  auto m = test::make_model(c);
  EXPECT_NE(test::error_of([&] { to_hf(*m); }).find("HF export (gpt2): the model's logits_bias (true) has no form"),
            std::string::npos);
  const auto table = torch::ones({2, 3});
  const TensorMap state = {{"a.weight", table}, {"b.weight", torch::ones({3})}, {"a.tied", table},
                           {"layers.0.head_mask", torch::ones({4})}, {"empty.weight", torch::ones({0, 3})}};
  EXPECT_NE(test::error_of([&] { check_every_tensor_written(state, {"a.weight"}, "HF export: x"); })
                .find("b.weight"),
            std::string::npos);
  EXPECT_NO_THROW(check_every_tensor_written(state, {"a.weight", "b.weight"}, "HF export: x"));
  c.logits_bias = false;
  auto plain = test::make_model(c);
  plain->set_head_mask({AttnType::DecoderSelf, 0, 1}, 0.0);
  EXPECT_NO_THROW(to_hf(*plain));
}

// A fixture copied into `dir`, so that tokenizer files can be added beside it.
fs::path copy_fixture(const fs::path& dir, const std::string& name) {
  const fs::path d = dir / name;
  fs::create_directories(d);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(test::hf_fixture(name) + "/" + f, d / f);
  return d;
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

// open_model(dir) fails with a message containing `what`.
void expect_open_error(const fs::path& dir, const std::string& what) {
  try {
    open_model(dir.string());
    ADD_FAILURE() << "expected an error containing: " << what;
  } catch (const std::runtime_error& err) {
    EXPECT_NE(std::string(err.what()).find(what), std::string::npos) << err.what();
  }
}

TEST(HfText, BertDirectoryReadsTextThroughItsWordPieceVocabulary) {
  test::TempDir dir;
  const fs::path d = copy_fixture(dir.path, "bert");
  std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "movie", "##s", "great", "!"};
  while (vocab.size() < 40) vocab.push_back("[unused" + std::to_string(vocab.size()) + "]");  // the model's 40
  std::string text;
  for (const auto& v : vocab) text += v + "\n";
  write_text(d / "vocab.txt", text);
  write_text(d / "tokenizer_config.json", R"({"do_lower_case": true, "cls_token": {"content": "[CLS]"}})");
  LoadedModel lm = open_model(d.string());
  ASSERT_TRUE(lm.tokenizer);
  EXPECT_EQ(lm.tokenizer->kind(), "wordpiece");
  const auto sp = lm.tokenizer->specials();
  EXPECT_EQ(std::vector<int64_t>({sp.pad, sp.bos, sp.eos, sp.unk}), std::vector<int64_t>({0, 2, 3, 1}));
  // [CLS] the movie ##s [UNK] great ! [SEP]: framing uses the vocabulary's own specials.
  const Example e = classification_example(*lm.tokenizer, "The movies WERE great!", "", 1, 0);
  EXPECT_EQ(e.src, (std::vector<int64_t>{2, 4, 5, 6, 1, 7, 8, 3}));
  EXPECT_EQ(lm.tokenizer->decode(e.src), "the movies [UNK] great !");
  {
    torch::NoGradGuard ng;
    Batch b;
    b.input_ids = torch::tensor(e.src).unsqueeze(0);
    b.attention_mask = torch::ones_like(b.input_ids);
    b.segment_ids = torch::zeros_like(b.input_ids);
    EXPECT_EQ(lm.model->forward(b).logits.sizes(), (std::vector<int64_t>{1, 3}));
  }
  // A vocabulary larger than the model's embedding table is refused, naming the directory.
  write_text(d / "vocab.txt", text + "extra\n");
  expect_open_error(d, "41 entries but the model's vocabulary only 40");
  // The same rule, said as early by `info` and `tokenize` (not only by the jobs that open the model).
  EXPECT_NE(test::error_of([&] { info_text(d.string()); }).find("41 entries but the model's vocabulary only 40"),
            std::string::npos);
  write_text(d / "line.txt", "the movie\n");
  std::ostringstream ids;
  EXPECT_NE(test::error_of([&] { run_tokenize({d.string(), (d / "line.txt").string()}, ids); })
                .find("41 entries but the model's vocabulary only 40"),
            std::string::npos);
  // A special token the vocabulary lacks is named.
  write_text(d / "vocab.txt", text);
  write_text(d / "tokenizer_config.json", R"({"sep_token": "[END]"})");
  expect_open_error(d, "'[END]' is not in the vocabulary");
}

TEST(HfText, Gpt2DirectoryReadsTextThroughItsByteLevelBpe) {
  test::TempDir dir;
  const fs::path d = copy_fixture(dir.path, "gpt2");
  // "\u0120" (Ġ) is the byte-level symbol of a space.
  write_text(d / "vocab.json", R"({"h": 0, "e": 1, "l": 2, "o": 3, "\u0120": 4, "w": 5, "r": 6, "d": 7, "he": 8,
    "ll": 9, "hell": 10, "hello": 11, "\u0120w": 12, "or": 13, "\u0120wor": 14, "ld": 15, "\u0120world": 16,
    "<|endoftext|>": 49})");
  write_text(d / "merges.txt", "#version: 0.2\nh e\nl l\nhe ll\nhell o\n\u0120 w\no r\n\u0120w or\nl d\n\u0120wor ld\n");
  const LoadedModel lm = open_model(d.string());
  ASSERT_TRUE(lm.tokenizer);
  EXPECT_EQ(lm.tokenizer->kind(), "byte-level-bpe");
  EXPECT_EQ(lm.tokenizer->specials().eos, 49);
  EXPECT_EQ(lm.tokenizer->encode("hello world"), (std::vector<int64_t>{11, 16}));
  // Lines end with <|endoftext|>, GPT-2's document separator.
  const auto blocks = lm_blocks(*lm.tokenizer, {"hello world", "hello"}, 8);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].src, (std::vector<int64_t>{11, 16, 49, 11, 49}));
  EXPECT_EQ(lm.tokenizer->decode(blocks[0].src), "hello worldhello");
  // Only one of the two files is an error naming what is missing.
  fs::remove(d / "merges.txt");
  expect_open_error(d, "needs both vocab.json and merges.txt");
}

TEST(HfImport, BadInputIsAClearError) {
  test::TempDir dir;
  auto copy_fixture = [&](const std::string& name) {
    const std::string d = dir / name;
    fs::create_directories(d);
    fs::copy(test::hf_fixture(name) + "/config.json", d + "/config.json");
    fs::copy(test::hf_fixture(name) + "/model.safetensors", d + "/model.safetensors");
    return d;
  };
  auto expect_error = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "expected an error containing '" << needle << "'";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::string d = copy_fixture("bert");
  auto cfg = nlohmann::json::parse(read_file(d + "/config.json"));
  const auto tensors = read_safetensors(d + "/model.safetensors").tensors;
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto c = cfg;
    edit(c);
    return c;
  };
  expect_error([&] { import_hf(with([](auto& c) { c.erase("hidden_size"); }), tensors, "x"); }, "'hidden_size' is missing");
  expect_error([&] { import_hf(with([](auto& c) { c["model_type"] = "bart"; }), tensors, "x"); },
               "model_type 'bart' is not supported");
  expect_error([&] { import_hf(with([](auto& c) { c["pruned_heads"] = {{"0", {7}}}; }), tensors, "x"); },
               "pruned_heads['0']: head 7 is not in [0, 4)");
  expect_error([&] { import_hf(with([](auto& c) { c["pruned_heads"] = {{"9", {0}}}; }), tensors, "x"); },
               "pruned_heads: layer '9'");
  auto missing = tensors;
  missing.erase("bert.encoder.layer.1.attention.self.key.bias");
  expect_error([&] { import_hf(cfg, missing, "x"); }, "missing tensor 'encoder.layer.1.attention.self.key.bias'");
  auto misshaped = tensors;
  misshaped["bert.encoder.layer.0.attention.self.query.weight"] = torch::zeros({12, 16});
  expect_error([&] { import_hf(cfg, misshaped, "x"); },
               "tensor 'bert.encoder.layer.0.attention.self.query.weight' has shape [12, 16], expected [16, 16]");
  auto extra = tensors;
  extra["bert.encoder.layer.0.attention.self.rotary"] = torch::zeros({2});
  expect_error([&] { import_hf(cfg, extra, "x"); }, "unexpected tensor 'bert.encoder.layer.0.attention.self.rotary'");
  // Only a pickled state dict: say how to convert it.
  fs::rename(d + "/model.safetensors", d + "/pytorch_model.bin");
  expect_error([&] { import_hf(d); }, "has only pytorch_model.bin");
  expect_error([&] { load_checkpoint(d); }, "save_file(torch.load('pytorch_model.bin', weights_only=True), 'model.safetensors')");
}

}  // namespace
}  // namespace hp
