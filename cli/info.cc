// `headprune info` and `headprune export`: options -> jobs/export_job.h.
#include <memory>
#include <ostream>

#include "common.h"
#include "headprune/io/hf_family.h"
#include "headprune/jobs/export_job.h"

namespace hp::cli {

void register_info(CLI::App& app, Context& ctx) {
  auto checkpoint = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("info", "Print a checkpoint's architecture and the heads kept per layer");
  sub->add_option("checkpoint", *checkpoint, "checkpoint directory")->required();
  sub->add_flag("--json", *json, "print JSON instead of text");
  sub->callback([&ctx, checkpoint, json] {
    start(ctx);
    if (*json) ctx.out << info_json(*checkpoint).dump(2) << "\n";
    else ctx.out << info_text(*checkpoint);
  });

  auto e = std::make_shared<ExportRequest>();
  auto* ex = app.add_subcommand("export", "Write a model in HuggingFace's layout (" + hf_families_summary() +
                                                  "), as GGUF for llama.cpp, as ONNX and/or natively");
  ex->add_option("checkpoint", e->checkpoint, "headprune checkpoint or HF directory")->required();
  ex->add_option("--hf", e->hf_dir, "HF output directory (config.json, model.safetensors)");
  add_parsed(ex, "--hf-layout", e->hf_layout, parse_hf_layout,
             "auto, pruned_heads (HF v4's pruned_heads, sliced weights: transformers v4) or dense (every head count as "
             "configured, removed heads zero: every transformers version); auto is pruned_heads where the family has it: " +
                 hf_families_summary(),
             "auto");
  ex->add_option("--native", e->native_dir, "headprune checkpoint output directory");
  ex->add_option("--gguf", e->gguf_path,
                 "GGUF file for llama.cpp (LLaMA family; uneven head counts per layer as arch deci; the tokenizer "
                 "inside)");
  ex->add_option("--dtype", e->gguf_dtype, "GGUF weights: f32, f16 or bf16 (norms and biases stay f32)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  ex->add_option("--onnx", e->onnx_path,
                 "ONNX file (encoder classifiers and decoder LMs, per-layer heads, dynamic batch and length)");
  ex->add_option("--onnx-attention", e->onnx_attention,
                 "auto (ONNX Runtime's fused com.microsoft Attention where a layer allows it, else standard ops), "
                 "fused (refused where a layer does not allow it) or standard (default-domain ops only: any ONNX runtime)")
      ->check(CLI::IsMember({"auto", "fused", "standard"}))
      ->capture_default_str();
  ex->add_flag("--overwrite", e->overwrite, "replace non-empty output directories as a whole (refused without it)");
  ex->callback([&ctx, e] {
    start(ctx);
    ctx.out << run_export(*e);
  });
}

}  // namespace hp::cli
