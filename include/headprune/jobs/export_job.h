// Checkpoint jobs without data.
//   run_export  write a (pruned) model in HuggingFace's layout (config.json and model.safetensors
//               with HF names, pruned heads as v4's pruned_heads or dense and zero: io/hf.h) and/or as
//               a plain headprune checkpoint; the tokenizer files go along. And/or as one GGUF file
//               for llama.cpp (the LLaMA family; per-layer head counts as arch deci; the tokenizer
//               inside: io/gguf_model.h, data/gguf_vocab.h). And/or as one ONNX file (encoder
//               classifiers and decoder LMs; per-layer heads; ONNX Runtime's fused Attention where it
//               applies: io/onnx_model.h). And/or as an ONNX folder that transformers.js and optimum
//               read (config.json, generation_config.json, the tokenizer files, onnx/model.onnx; a
//               decoder LM with optimum's key/value cache inputs and outputs).
//   run_info    a checkpoint's architecture, heads kept per layer and attention type, masked heads.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "headprune/io/hf.h"
#include "headprune/util/options.h"
#include "headprune/util/runtime.h"

namespace hp {

struct ExportRequest {
  std::string checkpoint;  // headprune checkpoint or HF directory (its config supplies HF-only fields)
  std::string hf_dir;      // "" = no HF export
  std::string native_dir;  // "" = no headprune checkpoint
  bool overwrite = false;  // replace a non-empty output directory (refused otherwise)
  HfLayout hf_layout = HfLayout::Auto;
  std::string gguf_path;    // "" = no GGUF file
  std::string gguf_dtype = "f32";  // f32, f16, bf16, q8_0 or q4_0 (the 2-D weights)
  std::string gguf_output_dtype = "auto";  // the output projection's: auto (default_gguf_output_type) or a dtype
  std::string onnx_path;    // "" = no ONNX file
  std::string onnx_attention = "auto";  // auto, fused or standard (io/onnx_model.h)
  std::string onnx_dir;     // "" = no ONNX folder (decoder LMs with a key/value cache)
  bool onnx_external_data = false;  // weights beside the .onnx file (always past protobuf's 2 GiB)
};

// ExportRequest's outputs and their forms (util/options.h); the checkpoint and --overwrite are the
// request's own.
const OptionTable<ExportRequest>& export_request_table();

// One line per output written ("wrote DIR (gpt2, pruned_heads {...})", "wrote DIR (llama, dense)",
// "wrote FILE (gguf deci, f32: query heads per layer [...], key/value heads [...])").
// The model is loaded in rt.dtype (--dtype; unset = as stored) and written in it: HF's safetensors and
// config's torch_dtype, the native checkpoint (GGUF has its own gguf_dtype; ONNX is fp32). An
// export needs no device: a CUDA rt.device is refused.
std::string run_export(const ExportRequest& req, const Runtime& rt = {});

// JSON: the config plus n_parameters, heads_per_layer and masked_heads; text: the summary of
// describe() (io/checkpoint.h) with parameters and masked heads.
nlohmann::json info_json(const std::string& checkpoint);
std::string info_text(const std::string& checkpoint);

}  // namespace hp
