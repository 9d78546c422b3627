// `headprune info CHECKPOINT`: architecture and heads kept per layer and attention type.
#include <memory>
#include <ostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app.h"
#include "headprune/io/checkpoint.h"

namespace hp::cli {

namespace {
struct InfoOptions {
  std::string checkpoint;
  bool json = false;
};

void run_info(const InfoOptions& o, Context& ctx) {
  Transformer model = load_checkpoint(o.checkpoint);  // validates config and weights strictly
  const ModelConfig& cfg = model->config();
  const auto masked = model->masked_heads();
  if (o.json) {
    nlohmann::json j = cfg.to_json();
    j["n_parameters"] = model->n_parameters();
    nlohmann::json kept = nlohmann::json::object();
    for (AttnType t : cfg.attn_types()) {
      nlohmann::json counts = nlohmann::json::array();
      for (const auto& l : cfg.heads(t)) counts.push_back(l.size());
      kept[to_string(t)] = counts;
    }
    j["heads_per_layer"] = kept;
    nlohmann::json m = nlohmann::json::array();
    for (const auto& h : masked) m.push_back(to_string(h));
    j["masked_heads"] = m;
    ctx.out << j.dump(2) << "\n";
    return;
  }
  ctx.out << "checkpoint          " << o.checkpoint << "\n" << describe(cfg);
  ctx.out << "parameters          " << model->n_parameters() << "\n";
  ctx.out << "masked heads        " << masked.size();
  for (size_t i = 0; i < masked.size(); ++i) ctx.out << (i ? ", " : " (") << to_string(masked[i]);
  ctx.out << (masked.empty() ? "" : ")") << "\n";
}
}  // namespace

void register_info(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<InfoOptions>();
  auto* sub = app.add_subcommand("info", "Print a checkpoint's architecture and the heads kept per layer");
  sub->add_option("checkpoint", opts->checkpoint, "checkpoint directory")->required();
  sub->add_flag("--json", opts->json, "print JSON instead of text");
  sub->callback([&ctx, opts] {
    apply_globals(ctx);
    run_info(*opts, ctx);
  });
}

}  // namespace hp::cli
