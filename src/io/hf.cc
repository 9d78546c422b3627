// HuggingFace import and export (see header): the files of a checkpoint directory, and the family
// registry (io/hf_family.h) for everything that depends on the architecture.
#include "headprune/io/hf.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>
#include <stdexcept>

#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/safetensors.h"
#include "headprune/util/mapped_files.h"
#include "hf/family.h"
#include "hf/tensors.h"

namespace hp {

bool is_hf_dir(const std::string& dir) {
  const std::string path = join_path(dir, kConfigFile);
  if (!is_file(path)) return false;
  try {
    const auto j = read_json_file(path);
    return j.is_object() && j.contains("model_type") && !j.contains("format");
  } catch (const std::runtime_error&) {
    return false;
  }
}

HfModel import_hf(const nlohmann::json& config, const TensorMap& tensors, const std::string& source,
                  const std::string& config_source, const LoadOptions& lo) {
  if (!config.is_object() || !config.contains("model_type") || !config.at("model_type").is_string())
    hf_detail::fail(config_source, "no model_type (a string such as \"bert\" or \"llama\")");
  const auto& family = hf_family(config.at("model_type").get<std::string>(), config_source);
  return import_family(family, config, tensors, source, config_source, lo);
}

HfModel import_hf(const std::string& dir, const LoadOptions& lo) {
  const std::string cpath = join_path(dir, kConfigFile);
  if (!is_file(cpath)) throw std::runtime_error("HF checkpoint '" + dir + "': missing config.json");
  const nlohmann::json config = read_json_file(cpath);
  const std::string wpath = join_path(dir, kWeightsFile);
  const std::string index = join_path(dir, kWeightsIndexFile);
  if (!is_file(wpath) && is_file(index)) {
    auto m = import_hf(config, read_sharded_safetensors(index), index, cpath, lo);
    check_mapped_files();  // a shard truncated while it was read is an error here, not a SIGBUS
    return m;
  }
  if (!is_file(wpath)) {
    if (is_file(join_path(dir, "pytorch_model.bin")))
      throw std::runtime_error(
          "HF checkpoint '" + dir + "' has only pytorch_model.bin: headprune reads safetensors only (LibTorch "
          "cannot unpickle HF's state dict from C++, and unpickling runs code). Convert it once in Python: "
          "from safetensors.torch import save_file; import torch; "
          "save_file(torch.load('pytorch_model.bin', weights_only=True), 'model.safetensors') "
          "(weights_only=True: never unpickle a downloaded file without it)");
    throw std::runtime_error("HF checkpoint '" + dir + "': missing model.safetensors");
  }
  // Errors name the file at fault: config.json for its fields, model.safetensors for its tensors.
  auto m = import_hf(config, read_safetensors(wpath).tensors, wpath, cpath, lo);
  check_mapped_files();
  return m;
}

TensorMap read_sharded_safetensors(const std::string& index_path) {
  const auto index = read_json_file(index_path);
  if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object())
    hf_detail::fail(index_path, "expected an object with \"weight_map\": {tensor: shard file}");
  const std::string dir = std::filesystem::path(index_path).parent_path().string();
  std::map<std::string, std::set<std::string>> by_shard;  // shard file -> tensors the index puts there
  for (auto it = index.at("weight_map").begin(); it != index.at("weight_map").end(); ++it) {
    if (!it.value().is_string()) hf_detail::fail(index_path, "weight_map['" + it.key() + "'] must be a file name");
    const std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard.rfind("..", 0) == 0)
      hf_detail::fail(index_path, "weight_map['" + it.key() + "']: '" + shard + "' is not a file name in this directory");
    by_shard[shard].insert(it.key());
  }
  if (by_shard.empty()) hf_detail::fail(index_path, "weight_map lists no tensors");
  TensorMap all;
  for (const auto& [shard, names] : by_shard) {
    const std::string path = join_path(dir, shard);
    if (!is_file(path)) hf_detail::fail(index_path, "shard '" + shard + "' is missing (" + std::to_string(names.size()) + " tensors)");
    auto file = read_safetensors(path);
    for (const auto& name : names)
      if (!file.tensors.count(name)) hf_detail::fail(path, "tensor '" + name + "' is named in " + index_path + " but absent here");
    for (auto& [name, t] : file.tensors) {
      if (!names.count(name)) hf_detail::fail(path, "tensor '" + name + "' is not listed for this shard in " + index_path);
      all.emplace(name, std::move(t));
    }
  }
  return all;
}

HfLayout parse_hf_layout(const std::string& s) {
  if (s == "auto") return HfLayout::Auto;
  if (s == "pruned_heads") return HfLayout::PrunedHeads;
  if (s == "dense") return HfLayout::Dense;
  if (s == "native") return HfLayout::Native;
  throw std::invalid_argument("unknown HF layout '" + s + "' (expected auto, native, dense or pruned_heads)");
}

HfExport to_hf(TransformerImpl& model, const nlohmann::json& base_config, HfLayout layout) {
  return export_family(hf_family_for(model.config(), base_config), model, base_config, layout);
}

HfLayout export_hf(const std::string& dir, TransformerImpl& model, const nlohmann::json& base_config, HfLayout layout) {
  auto e = to_hf(model, base_config, layout);
  // torch_dtype says what the weights are (a model loaded in another dtype than its base config's
  // is written in the one it holds); an fp32 model without one in its base config gets none.
  const auto dtype = model.parameters().front().scalar_type();
  if (e.config.is_object() && (e.config.contains("torch_dtype") || dtype != torch::kFloat))
    e.config["torch_dtype"] = dtype == torch::kBFloat16 ? "bfloat16" : dtype == torch::kHalf ? "float16" : "float32";
  make_directories(dir);
  write_safetensors_sharded(dir, "model", e.tensors, {{"format", "pt"}});  // HF's shards past 5 GiB
  write_json_file(join_path(dir, kConfigFile), e.config);
  return e.layout;
}

}  // namespace hp
