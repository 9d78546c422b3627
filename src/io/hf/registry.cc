// The HF family registry (src/io/hf/family.h): the rows of families.def, looked up by model_type for
// import and by a model's shape for export.
#include <algorithm>
#include <stdexcept>

#include "family.h"

namespace hp {

#define HP_HF_FAMILY(name) \
  namespace hf::name {         \
  const HfFamily& family();    \
  }
#include "families.def"
#undef HP_HF_FAMILY

const std::vector<const HfFamily*>& hf_families() {
  static const std::vector<const HfFamily*> all = [] {
    std::vector<const HfFamily*> v = {
#define HP_HF_FAMILY(name) &hf::name::family(),
#include "families.def"
#undef HP_HF_FAMILY
    };
    std::sort(v.begin(), v.end(), [](const HfFamily* a, const HfFamily* b) { return a->model_type < b->model_type; });
    return v;
  }();
  return all;
}

namespace {

std::string supported() {
  std::string out;
  for (const auto* f : hf_families()) out += (out.empty() ? "" : ", ") + f->model_type;
  return out;
}

const HfFamily* find(const std::string& model_type) {
  for (const auto* f : hf_families())
    if (f->model_type == model_type) return f;
  return nullptr;
}

}  // namespace

std::string hf_families_summary() {
  std::string native, pruned, dense;
  for (const auto* f : hf_families()) {
    auto& list = hf_native_heads(*f) ? native : f->pruned_heads ? pruned : dense;
    list += (list.empty() ? "" : ", ") + f->model_type;
  }
  return native + " (native or dense); " + pruned + " (dense or pruned_heads); " + dense + " (dense only)";
}

const HfFamily& hf_family(const std::string& model_type, const std::string& source) {
  if (const auto* f = find(model_type)) return *f;
  throw std::runtime_error(source + ": model_type '" + model_type + "' is not supported (" + supported() + ")");
}

const HfFamily& hf_family_for(const ModelConfig& cfg, const nlohmann::json& base_config) {
  const auto* named = base_config.is_object() && base_config.contains("model_type") &&
                              base_config.at("model_type").is_string()
                          ? find(base_config.at("model_type").get<std::string>())
                          : nullptr;
  if (named && named->fits(cfg)) return *named;
  for (const auto* f : hf_families())
    if (f->fits(cfg) && f->guess(cfg)) return *f;
  // The families choose by architecture and positions (`fits`): the error names those fields.
  throw std::invalid_argument("HF export: none of the HF families (" + supported() + ") holds this " +
                              to_string(cfg.arch) + " model (arch " + to_string(cfg.arch) + ", positional " +
                              to_string(cfg.positional) +
                              (cfg.positional == Positional::Sinusoidal
                                   ? std::string(", split_sinusoid ") + (cfg.split_sinusoid ? "true" : "false")
                                   : "") +
                              ")");
}

}  // namespace hp
