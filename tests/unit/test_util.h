// Shared helpers for the unit tests: seeded models with random (non-zero) weights, and
// scratch directories.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "headprune/config.h"
#include "headprune/data/tokenizer.h"
#include "headprune/data/synthetic.h"
#include "headprune/eval/task_eval.h"
#include "headprune/io/gguf_model.h"
#include "headprune/model/transformer.h"

namespace hp::test {

// The model families the parameterized suites run on: the three architectures of tiny_config and
// the LLaMA-style decoder of tiny_llama_config (rotary, RMSNorm, SwiGLU, grouped-query attention).
enum class Fam { EncoderClassifier, DecoderLM, EncoderDecoder, Llama };
ModelConfig config_of(Fam f);
inline Arch arch_of(Fam f) { return f == Fam::Llama ? Arch::DecoderLM : static_cast<Arch>(static_cast<int>(f)); }
std::string name_of(Fam f);  // encoder_classifier, decoder_lm, encoder_decoder, llama
#define HP_ALL_FAMILIES                                                                                      \
  ::testing::Values(::hp::test::Fam::EncoderClassifier, ::hp::test::Fam::DecoderLM,                            \
                    ::hp::test::Fam::EncoderDecoder, ::hp::test::Fam::Llama),                                  \
      [](const auto& info) { return ::hp::test::name_of(info.param); }

// A tiny model of the family with random weights and biases, in eval mode (no dropout).
Transformer make_model(Arch arch, uint64_t seed = 7, torch::ScalarType dtype = torch::kFloat);
Transformer make_model(Fam fam, uint64_t seed = 7, torch::ScalarType dtype = torch::kFloat);
Transformer make_model(const ModelConfig& cfg, uint64_t seed = 7, torch::ScalarType dtype = torch::kFloat);
Batch make_batch(const ModelConfig& cfg, uint64_t seed = 11, int64_t batch_size = 4);

// The CLI run in this process (cli::run), with what it printed.
struct CliResult {
  int code;
  std::string out, err;
};
CliResult run_cli(std::vector<std::string> args);  // args without the program name

// A tiny encoder classifier with a tokenizer trained on the fly (60 pieces) and sized to it.
struct ClassifierWithTokenizer {
  Tokenizer tok;
  Transformer model;
};
ClassifierWithTokenizer tiny_classifier_with_tokenizer();

// A fresh, empty directory under the system temp dir; removed by the destructor.
struct TempDir {
  TempDir();
  ~TempDir();
  std::string path;
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

// Copies the files and subdirectories of src into dst (created if missing), by io/files.h's walker
// (not std::filesystem::copy, whose recursion a PyTorch 2.x libtorch replaces: see remove_tree).
void copy_tree(const std::string& src, const std::string& dst);

// Where the device-aware tests run: the CPU, or the device HP_TEST_DEVICE names ("cuda", "cuda:1").
// A device that is not there is an error (the test fails), never a silent fall-back to the CPU.
// The suites that follow it: PruneEquivalence, CheckpointRoundTrip, GradientImportance,
// TrainerResume, InferencePathFamilies, Runtime.AutocastScopesNestAndRestore (docs/gpu.md).
torch::Device device();

// Compares on the host, whatever devices a and b are on.
double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b);

// tests/fixtures/hf/<name>: the small HF checkpoints written by tests/fixtures/hf/make_*.py.
std::string hf_fixture(const std::string& name);

// A llama-model GGUF vocabulary of n pieces "t0".. (ids 0-2 control, bos 1, eos 2).
GgufVocab tiny_gguf_vocab(int64_t n);

// The message of what `f` throws (a test failure when it does not throw).
std::string error_of(const std::function<void()>& f);

// Writes `text` to `path` byte for byte (binary mode); throws when the file cannot be written.
void write(const std::string& path, const std::string& text);

// A model's logits on a batch, without autograd, in the model's current mode.
torch::Tensor logits(TransformerImpl& m, const Batch& b);

// n examples of the model's built-in synthetic task (lengths 3..10), named "synthetic".
EvalSet synthetic_set(const ModelConfig& cfg, int64_t n, uint64_t seed = 21);

// The shipped data sets: $HP_SHARED_DATA when set and not empty, else ../shared/data.
std::string shared_data();

}  // namespace hp::test
