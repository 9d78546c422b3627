// class Model of the Python module: a loaded model directory (data/model_dir.h's open_model: a
// headprune checkpoint or an HF directory, with its tokenizer), its heads, masks, physical removal
// (model/remove_heads.h), forward passes and saving (io/checkpoint.h under the output policy).
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bridge.h"
#include "headprune/data/model_dir.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/outputs.h"
#include "headprune/model/remove_heads.h"
#include "headprune/model/state.h"
#include "headprune/util/mapped_files.h"
#include "headprune/prune/plan.h"

namespace hp::python {

namespace {

using HeadTuple = std::tuple<std::string, int64_t, int64_t>;  // (attention type, layer, original head id)

std::vector<HeadTuple> tuples(const std::vector<HeadId>& heads) {
  std::vector<HeadTuple> out;
  for (const auto& h : heads) out.emplace_back(to_string(h.type), h.layer, h.head);
  return out;
}

// The heads a Python argument names, through the library's parser of `prune --heads`:
// "TYPE:LAYER:HEAD,..." or HF's {"layer": [heads]} of one attention type (hf_type, "" = the model's
// first); checked against the model (plan_manual: heads it has, none removed, none twice).
std::vector<HeadId> named_heads(const Model& m, const std::string& spec, const std::string& hf_type) {
  std::optional<AttnType> type;
  if (!hf_type.empty()) type = parse_attn_type(hf_type);
  return plan_manual(spec, m.config(), type).heads;
}

Model open(const std::string& path, const std::string& device, const std::string& dtype) {
  LoadOptions lo;
  lo.dtype = parse_dtype(dtype);
  const torch::Device dev = parse_device(device);
  Model m;
  py::gil_scoped_release release;
  m.loaded = open_model(path, dev, lo);
  return m;
}

// Kept heads by original id: [(type, layer, [heads])] in model order.
std::vector<std::tuple<std::string, int64_t, std::vector<int64_t>>> kept(const Model& m) {
  std::vector<std::tuple<std::string, int64_t, std::vector<int64_t>>> out;
  const ModelConfig& cfg = m.config();
  for (AttnType t : cfg.attn_types())
    for (int64_t l = 0; l < cfg.n_layers(t); ++l) out.emplace_back(to_string(t), l, cfg.heads(t)[static_cast<size_t>(l)]);
  return out;
}

// Removes the named heads (none named: the masked ones) physically; the model is replaced by the
// smaller one, which holds the untouched tensors of the old one (no copy).
void remove(Model& m, const std::string& spec, const std::string& hf_type) {
  const std::vector<HeadId> heads = spec.empty() ? m.impl().masked_heads() : named_heads(m, spec, hf_type);
  py::gil_scoped_release release;
  Transformer pruned = remove_heads(m.impl(), heads, /*share_untouched=*/true);
  pruned->eval();
  m.loaded.model = pruned;
}

// Writes a headprune checkpoint (config.json, model.safetensors, the tokenizer files) as `export
// --native` does: an output directory of kind "checkpoint", never the directory the model was read
// from (its weights may be mapped from there).
void save(Model& m, const std::string& dir, bool overwrite) {
  OutputDir::Options o("checkpoint", overwrite, false, {{m.loaded.dir, "the model's own directory"}}, "save(path)",
                       "overwrite=True");
  py::gil_scoped_release release;
  OutputDir out(dir, o);
  save_checkpoint(out.path(), m.impl(), m.loaded.tokenizer_files);
  out.commit();
}

// A tensor Python may keep: the result itself when it owns its storage alone (contiguous, from
// offset 0, as large as its storage), else a copy, so no returned tensor is a view into a buffer
// that the model or a later call holds.
torch::Tensor own(const torch::Tensor& t) {
  const bool alone = t.is_contiguous() && t.storage_offset() == 0 &&
                     t.storage().nbytes() == static_cast<size_t>(t.numel()) * t.element_size();
  return alone ? t : t.clone();
}

struct ForwardArgs {
  torch::Tensor input_ids;
  std::optional<torch::Tensor> attention_mask, segment_ids, decoder_input_ids, decoder_attention_mask;
  bool return_attention = false;
};

// The family's forward pass without gradients on the model's device: (logits, attention or None);
// attention is {type: [per layer [B, H, T, S] of the kept heads]}.
namespace {
std::string shape_of(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

// A [B, T] tensor of integers in [0, hi), shaped as `like` when given: else ValueError naming `name`.
void check_ids(const std::string& name, const torch::Tensor& t, int64_t hi, const std::string& range,
               const torch::Tensor* like = nullptr, const std::string& like_name = "") {
  if (t.dim() != 2) throw std::invalid_argument(name + ": expected a [batch, length] tensor, got shape " + shape_of(t));
  if (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type()))
    throw std::invalid_argument(name + ": expected integers, got a " + std::string(c10::toString(t.scalar_type())) +
                                " tensor");
  if (like && t.sizes() != like->sizes())
    throw std::invalid_argument(name + ": shape " + shape_of(t) + " differs from " + like_name + "'s " + shape_of(*like));
  if (t.numel() == 0) throw std::invalid_argument(name + ": empty (shape " + shape_of(t) + ")");
  const int64_t lo = t.min().item<int64_t>(), top = t.max().item<int64_t>();
  if (lo < 0 || top >= hi)
    throw std::invalid_argument(name + ": " + std::to_string(lo < 0 ? lo : top) + " is outside " + range);
}
}  // namespace

py::tuple forward(Model& m, const ForwardArgs& a) {
  // Checked here, naming the argument (an id past the vocabulary was a bare IndexError from the embedding).
  const auto& cfg = m.config();
  const std::string vocab = "the model's vocabulary [0, " + std::to_string(cfg.vocab_size) + ")";
  check_ids("input_ids", a.input_ids, cfg.vocab_size, vocab);
  if (a.attention_mask) check_ids("attention_mask", *a.attention_mask, 2, "{0, 1}", &a.input_ids, "input_ids");
  if (a.segment_ids) {
    if (cfg.n_segments == 0) throw std::invalid_argument("segment_ids: this model has no segment embeddings");
    check_ids("segment_ids", *a.segment_ids, cfg.n_segments,
              "the model's segments [0, " + std::to_string(cfg.n_segments) + ")", &a.input_ids, "input_ids");
  }
  if (a.decoder_input_ids)
    check_ids("decoder_input_ids", *a.decoder_input_ids, cfg.effective_tgt_vocab(),
              "the model's target vocabulary [0, " + std::to_string(cfg.effective_tgt_vocab()) + ")");
  if (a.decoder_attention_mask) {
    if (!a.decoder_input_ids) throw std::invalid_argument("decoder_attention_mask: given without decoder_input_ids");
    check_ids("decoder_attention_mask", *a.decoder_attention_mask, 2, "{0, 1}", &*a.decoder_input_ids, "decoder_input_ids");
  }
  Batch b;
  b.input_ids = a.input_ids;
  if (a.attention_mask) b.attention_mask = *a.attention_mask;
  if (a.segment_ids) b.segment_ids = *a.segment_ids;
  if (a.decoder_input_ids) b.decoder_input_ids = *a.decoder_input_ids;
  if (a.decoder_attention_mask) b.decoder_attention_mask = *a.decoder_attention_mask;
  ForwardOptions opts;
  opts.return_attention = a.return_attention;
  ModelOutput out;
  {
    py::gil_scoped_release release;
    torch::NoGradGuard no_grad;
    out = m.impl().forward(b.to(m.device()), opts);
  }
  check_mapped_files();  // weights read from a file truncated meanwhile: an error, not logits
  if (!a.return_attention) return py::make_tuple(own(out.logits), py::none());
  py::dict attention;
  for (const auto& [type, layers] : out.attention) {
    py::list per_layer;
    for (const auto& p : layers) per_layer.append(p.defined() ? py::cast(own(p)) : py::none());
    attention[py::str(to_string(type))] = per_layer;
  }
  return py::make_tuple(own(out.logits), attention);
}

const Tokenizer& tokenizer(const Model& m) {
  if (!m.loaded.tokenizer) throw std::invalid_argument(m.loaded.dir + " has no tokenizer");
  return *m.loaded.tokenizer;
}

std::vector<std::vector<int64_t>> encode(const Model& m, const std::vector<std::string>& texts, bool special) {
  const Tokenizer& tok = tokenizer(m);
  std::vector<std::vector<int64_t>> out;
  for (const auto& t : texts) out.push_back(tok.encode(t, special));
  return out;
}

void bind_heads(py::class_<Model>& c) {
  c.def("heads", &kept, "kept heads by original id: [(type, layer, [heads])]");
  c.def("masked_heads", [](Model& m) { return tuples(m.impl().masked_heads()); });
  c.def("resolve_heads", [](const Model& m, const std::string& spec, const std::string& hf_type) {
    return tuples(named_heads(m, spec, hf_type));
  });
  c.def("mask_heads", [](Model& m, const std::string& spec, const std::string& hf_type) {
    m.impl().mask_heads(named_heads(m, spec, hf_type));
  });
  c.def("unmask_all", [](Model& m) { m.impl().unmask_all(); });
  c.def("remove_heads", &remove, py::arg("spec"), py::arg("hf_type"));
  c.def("n_active_heads", [](Model& m) { return m.impl().n_active_heads(); });
}

void bind_tensors(py::class_<Model>& c) {
  c.def(
      "forward",
      [](Model& m, const torch::Tensor& ids, std::optional<torch::Tensor> mask, std::optional<torch::Tensor> segments,
         std::optional<torch::Tensor> dec, std::optional<torch::Tensor> dec_mask, bool attention) {
        return forward(m, ForwardArgs{ids, std::move(mask), std::move(segments), std::move(dec), std::move(dec_mask),
                                      attention});
      },
      py::arg("input_ids"), py::arg("attention_mask"), py::arg("segment_ids"), py::arg("decoder_input_ids"),
      py::arg("decoder_attention_mask"), py::arg("return_attention"));
  // Parameters and head-mask buffers by module path, sharing storage with the model (a weight mapped
  // from its file stays mapped as long as a tensor holds it).
  c.def("state_dict", [](Model& m) {
    std::map<std::string, torch::Tensor> out;
    for (const auto& [name, t] : state_dict(m.impl())) out.emplace(name, t);
    return out;
  });
  c.def("n_parameters", [](Model& m) { return m.impl().n_parameters(); });
}

}  // namespace

void register_model(py::module_& m) {
  py::class_<Model> c(m, "Model", "A loaded model directory (use headprune.load)");
  c.def_static("open", &open, py::arg("path"), py::arg("device"), py::arg("dtype"));
  c.def_property_readonly("dir", [](const Model& x) { return x.loaded.dir; });
  c.def_property_readonly("device", [](Model& x) { return x.device().str(); });
  c.def("config_json", [](const Model& x) { return dump_json(x.config().to_json()); });
  c.def("describe", [](const Model& x) { return describe(x.config()); });
  bind_heads(c);
  bind_tensors(c);
  c.def("save", &save, py::arg("path"), py::arg("overwrite"));
  c.def("has_tokenizer", [](const Model& x) { return x.loaded.tokenizer.has_value(); });
  c.def("encode", &encode, py::arg("texts"), py::arg("add_special_tokens"));
  c.def("decode", [](const Model& x, const std::vector<int64_t>& ids) { return tokenizer(x).decode(ids); });
}

}  // namespace hp::python
