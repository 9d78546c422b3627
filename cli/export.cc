// `headprune export CHECKPOINT --hf DIR [--native DIR]`: write a (pruned) model in HuggingFace's
// layout (config.json with pruned_heads, model.safetensors with HF names) and/or as a plain headprune
// checkpoint. CHECKPOINT may itself be an HF directory (its config supplies the fields headprune does
// not model, such as id2label and token ids).
#include <memory>
#include <ostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app.h"
#include "common.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/hf.h"

namespace hp::cli {
namespace {

struct ExportOptions {
  std::string checkpoint, hf_dir, native_dir;
};

void run_export(const ExportOptions& o, Context& ctx) {
  if (o.hf_dir.empty() && o.native_dir.empty()) throw std::invalid_argument("export: give --hf DIR and/or --native DIR");
  Transformer model{nullptr};
  nlohmann::json base = nlohmann::json::object();
  if (is_hf_dir(o.checkpoint)) {
    auto hf = import_hf(o.checkpoint);
    model = hf.model;
    base = hf.config;
  } else {
    model = load_checkpoint(o.checkpoint);
  }
  if (!o.hf_dir.empty()) {
    export_hf(o.hf_dir, *model, base);
    for (const auto& [name, bytes] : tokenizer_extras(o.checkpoint))  // an HF tokenizer goes along
      if (name != kTokenizerFile) write_file_atomic(join_path(o.hf_dir, name), bytes);
    const auto cfg = nlohmann::json::parse(read_file(join_path(o.hf_dir, kConfigFile)));
    ctx.out << "wrote " << o.hf_dir << " (" << cfg.at("model_type").get<std::string>()
            << ", pruned_heads " << cfg.at("pruned_heads").dump() << ")\n";
  }
  if (!o.native_dir.empty()) {
    save_checkpoint(o.native_dir, *model, tokenizer_extras(o.checkpoint));
    ctx.out << "wrote " << o.native_dir << " (headprune checkpoint)\n";
  }
}

}  // namespace

void register_export(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<ExportOptions>();
  auto* sub = app.add_subcommand("export", "Write a model in HuggingFace's BERT / GPT-2 layout (and/or natively)");
  sub->add_option("checkpoint", o->checkpoint, "headprune checkpoint or HF directory")->required();
  sub->add_option("--hf", o->hf_dir, "HF output directory (config.json with pruned_heads, model.safetensors)");
  sub->add_option("--native", o->native_dir, "headprune checkpoint output directory");
  sub->callback([&ctx, o] {
    apply_globals(ctx);
    run_export(*o, ctx);
  });
}

}  // namespace hp::cli
