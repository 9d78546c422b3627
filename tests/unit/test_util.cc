#include "test_util.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include <gtest/gtest.h>

#include <unistd.h>

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

TempDir::TempDir() {
  static std::atomic<int> n{0};
  path = (std::filesystem::temp_directory_path() /
          ("headprune-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++)))
             .string();
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

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
    return env && *env ? parse_device(env) : torch::Device(torch::kCPU);
  }();
  return d;
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kCPU, torch::kDouble) - b.to(torch::kCPU, torch::kDouble)).abs().max().item<double>();
}

}  // namespace hp::test
