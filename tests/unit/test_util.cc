// The unit tests' shared helpers of test_util.h: seeded random models and batches, running the CLI in
// process, scratch directories, the device to test on and the path of ../shared/data.
#include "test_util.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

#include <unistd.h>

#include "app.h"
#include "headprune/io/files.h"
#include "headprune/util/runtime.h"

namespace hp::test {

Transformer make_model(const ModelConfig& cfg, uint64_t seed, torch::ScalarType dtype) {
  Transformer m(cfg);
  randomize_parameters(*m, seed);
  m->to(dtype);
  m->eval();
  return m;
}

Transformer make_model(Arch arch, uint64_t seed, torch::ScalarType dtype) {
  return make_model(tiny_config(arch), seed, dtype);
}

ModelConfig config_of(Fam f) { return f == Fam::Llama ? tiny_llama_config() : tiny_config(arch_of(f)); }

std::string name_of(Fam f) { return f == Fam::Llama ? "llama" : to_string(arch_of(f)); }

Transformer make_model(Fam fam, uint64_t seed, torch::ScalarType dtype) { return make_model(config_of(fam), seed, dtype); }

Batch make_batch(const ModelConfig& cfg, uint64_t seed, int64_t batch_size) {
  return synthetic_batch(cfg, batch_size, 3, 12, seed);
}

CliResult run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "headprune");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int code = cli::run(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

ClassifierWithTokenizer tiny_classifier_with_tokenizer() {
  TokenizerTrainOptions to;
  to.vocab_size = 60;
  auto tok = Tokenizer::train({"the dog chased cats .", "do n't run quickly", "the cats run"}, to);
  ModelConfig cfg = tiny_config(Arch::EncoderClassifier);
  cfg.vocab_size = tok.vocab_size();
  cfg.finalize();
  return {std::move(tok), make_model(cfg)};
}

TempDir::TempDir() {
  // mkdtemp: a new directory of its own, atomically (no name two runs or tests could share).
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/headprune-test-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("TempDir: mkdtemp(" + pattern + ") failed: " + std::strerror(errno));
  path = pattern;
}

TempDir::~TempDir() { remove_tree(path); }

void copy_tree(const std::string& src, const std::string& dst) {
  make_directories(dst);
  walk_directory(src, [&](const DirEntry& e) {
    std::string rel = e.path.substr(src.size());
    if (rel.empty() || rel[0] != '/') rel = "/" + rel;
    const std::string to = dst + rel;
    if (e.is_dir) make_directories(to);
    if (e.is_file) write_file_atomic(to, read_file(e.path));
    return true;
  });
}

std::string hf_fixture(const std::string& name) { return std::string(HP_FIXTURES_DIR) + "/hf/" + name; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

torch::Device device() {
  static const torch::Device d = [] {
    const char* env = std::getenv("HP_TEST_DEVICE");
    const torch::Device d = env && *env ? parse_device(env) : torch::Device(torch::kCPU);
    // On a GPU, atomics make some kernels (embedding backward ...) differ in the last bits between
    // two identical runs; the bit-for-bit tests (resume) ask for LibTorch's deterministic kernels
    // (with CUBLAS_WORKSPACE_CONFIG set, as scripts/gpu.sh does).
    if (d.is_cuda()) at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
    return d;
  }();
  return d;
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kCPU, torch::kDouble) - b.to(torch::kCPU, torch::kDouble)).abs().max().item<double>();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.flush();
  if (!f) throw std::runtime_error("test::write: cannot write " + path);
}

torch::Tensor logits(TransformerImpl& m, const Batch& b) {
  torch::NoGradGuard no_grad;
  return m.forward(b).logits;
}

EvalSet synthetic_set(const ModelConfig& cfg, int64_t n, uint64_t seed) {
  EvalSet s;
  s.name = "synthetic";
  s.examples = synthetic_examples(cfg, n, 3, 10, seed);
  return s;
}

std::string shared_data() {
  const char* env = std::getenv("HP_SHARED_DATA");
  return env && *env ? env : "../shared/data";
}

GgufVocab tiny_gguf_vocab(int64_t n) {
  GgufVocab v;
  v.model = "llama";
  for (int64_t i = 0; i < n; ++i) {
    v.tokens.push_back("t" + std::to_string(i));
    v.scores.push_back(-static_cast<double>(i));
    v.types.push_back(i < 3 ? 3 : 1);
  }
  v.bos = 1, v.eos = 2;
  return v;
}

}  // namespace hp::test
