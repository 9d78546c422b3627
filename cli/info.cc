// `headprune info` and `headprune export`: options -> jobs/export_job.h.
#include <memory>
#include <ostream>

#include "common.h"
#include "headprune/io/hf.h"
#include "headprune/jobs/export_job.h"

namespace hp::cli {

void register_info(CLI::App& app, Context& ctx) {
  auto checkpoint = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("info", "Print a checkpoint's architecture and the heads kept per layer");
  sub->add_option("checkpoint", *checkpoint, "checkpoint directory")->required();
  sub->add_flag("--json", *json, "print JSON instead of text");
  sub->callback([&ctx, checkpoint, json] {
    const Runtime rt = start(ctx);
    if (rt.dtype)  // info reads the config and head masks only
      throw std::invalid_argument("info: --dtype " + dtype_name(*rt.dtype) + " does not apply (info reads the config and "
                                  "the head masks, not the weights); leave --dtype auto");
    if (*json) ctx.out << info_json(*checkpoint).dump(2) << "\n";
    else ctx.out << info_text(*checkpoint);
  });

  auto e = std::make_shared<ExportRequest>();
  auto* ex = app.add_subcommand("export", "Write a model in HuggingFace's layout (" + hf_families_summary() +
                                                  "), as GGUF for llama.cpp, as ONNX and/or natively");
  ex->add_option("checkpoint", e->checkpoint, "headprune checkpoint or HF directory")->required();
  add_options(ex, *e, export_request_table());
  ex->add_flag("--overwrite", e->overwrite, "replace non-empty output directories as a whole (refused without it)");
  ex->callback([&ctx, e] {
    const Runtime rt = start(ctx);
    ctx.out << run_export(*e, rt);
  });
}

}  // namespace hp::cli
