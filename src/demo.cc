// The built-in demo (see header).
#include "headprune/demo.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "headprune/data/synthetic.h"
#include "headprune/io/checkpoint.h"
#include "headprune/model/transformer.h"
#include "headprune/prune/remove_heads.h"
#include "headprune/util/log.h"

namespace hp {
namespace {

ModelConfig demo_config(Arch arch) {
  ModelConfig c = tiny_config(arch);
  c.d_model = 64;
  c.d_ff = 128;
  c.n_heads = 8;
  c.head_dim = 0;
  c.vocab_size = 64;
  if (arch == Arch::EncoderDecoder) c.tgt_vocab_size = 64;
  c.max_positions = 64;
  if (c.n_encoder_layers) c.n_encoder_layers = 4;
  if (c.n_decoder_layers) c.n_decoder_layers = 4;
  for (AttnType t : kAllAttnTypes) c.heads(t).clear();
  c.finalize();
  return c;
}

double median_forward_ms(TransformerImpl& model, const Batch& batch, int reps) {
  c10::InferenceMode guard;
  model.forward(batch);  // warm-up
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    model.forward(batch);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::string fmt(double v, int prec = 4) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << v;
  return o.str();
}

std::string per_layer_counts(const ModelConfig& c, AttnType t) {
  std::string s = "[";
  for (size_t l = 0; l < c.heads(t).size(); ++l) s += (l ? ", " : "") + std::to_string(c.heads(t)[l].size());
  return s + "]";
}

}  // namespace

nlohmann::json run_demo(const DemoOptions& opts, std::ostream& out) {
  nlohmann::json report = nlohmann::json::array();
  for (Arch arch : opts.families) {
    torch::manual_seed(opts.seed);
    ModelConfig cfg = demo_config(arch);
    Transformer model(cfg);
    model->eval();
    Batch batch = synthetic_batch(cfg, opts.batch_size, 6, 24, opts.seed + 1);
    out << "== " << to_string(arch) << " ==\n";
    out << "model: " << model->n_parameters() << " parameters, " << cfg.n_heads << " heads per attention layer";
    for (AttnType t : cfg.attn_types()) out << ", " << to_string(t) << " " << cfg.n_layers(t) << " layers";
    out << " (random init: training comes with `headprune train`)\n";

    // Michel et al.'s head importance signal: |d loss / d gate| from one backward pass.
    model->set_gates_requires_grad(true);
    auto base_out = model->forward(batch);
    auto base_loss = model->loss(base_out, batch);
    base_loss.backward();
    struct Scored { HeadId id; double score; };
    std::vector<Scored> scored;
    // Per-layer L2 normalization (Michel et al.'s default) makes layers and attention types
    // comparable; raw encoder gradients are orders of magnitude below decoder ones.
    out << "|dL/dgate| per head (one backward pass), L2-normalized per layer:\n";
    for (auto& g : model->gates()) {
      auto grad = g.gate.grad().abs().to(torch::kDouble);
      grad = grad / grad.norm().clamp_min(1e-20);
      out << "  " << std::left << std::setw(13) << to_string(g.type) << " L" << g.layer << ":";
      for (size_t i = 0; i < g.heads.size(); ++i) {
        scored.push_back({{g.type, g.layer, g.heads[i]}, grad[i].item<double>()});
        out << " " << fmt(scored.back().score, 2);
      }
      out << "\n";
    }
    model->set_gates_requires_grad(false);

    // Mask the weakest heads, plus every head of the last layer of the first attention type
    // (that layer then skips attention after physical removal).
    std::sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) { return a.score < b.score; });
    const AttnType first = cfg.attn_types().front();
    const int64_t empty_layer = cfg.n_layers(first) - 1;
    std::vector<HeadId> drop;
    for (int64_t h : cfg.heads(first)[empty_layer]) drop.push_back({first, empty_layer, h});
    const size_t n_weak = static_cast<size_t>(std::lround(opts.prune_fraction * scored.size()));
    for (size_t i = 0; i < scored.size() && drop.size() < n_weak + cfg.n_heads; ++i) {
      const auto& id = scored[i].id;
      if (!(id.type == first && id.layer == empty_layer)) drop.push_back(id);
    }
    torch::NoGradGuard no_grad;
    model->mask_heads(drop);
    auto masked_out = model->forward(batch);
    const double masked_loss = model->loss(masked_out, batch).item<double>();

    Transformer pruned = remove_heads(*model, drop);
    auto pruned_out = pruned->forward(batch);
    const double pruned_loss = pruned->loss(pruned_out, batch).item<double>();
    const double max_diff = (masked_out.logits - pruned_out.logits).abs().max().item<double>();
    const int64_t params_before = model->n_parameters(), params_after = pruned->n_parameters();
    model->reset_gates();
    const double ms_before = median_forward_ms(*model, batch, 5);
    const double ms_after = median_forward_ms(*pruned, batch, 5);

    const std::string dir = opts.out_dir + "/" + to_string(arch);
    save_checkpoint(dir, *pruned);
    Transformer reloaded = load_checkpoint(dir);
    const double reload_diff = (reloaded->forward(batch).logits - pruned_out.logits).abs().max().item<double>();

    const int64_t total_heads = static_cast<int64_t>(scored.size());
    out << "removed " << drop.size() << " of " << total_heads << " heads: the " << drop.size() - cfg.n_heads
        << " with the smallest |dL/dgate| and all " << cfg.n_heads << " of " << to_string(first) << " layer "
        << empty_layer << "\n";
    out << "  loss          " << fmt(base_loss.item<double>()) << " -> " << fmt(masked_loss) << " masked, "
        << fmt(pruned_loss) << " physically pruned\n";
    out << "  max |masked - pruned| logits " << std::scientific << std::setprecision(2) << max_diff
        << std::defaultfloat << "\n";
    out << "  parameters    " << params_before << " -> " << params_after << " ("
        << fmt(100.0 * (params_after - params_before) / params_before, 1) << "%)\n";
    for (AttnType t : cfg.attn_types())
      out << "  " << std::left << std::setw(13) << to_string(t) << " heads per layer " << per_layer_counts(cfg, t)
          << " -> " << per_layer_counts(pruned->config(), t) << "\n";
    out << "  forward (batch " << opts.batch_size << ") " << fmt(ms_before, 2) << " ms -> " << fmt(ms_after, 2)
        << " ms (median of 5, noisy at this size)\n";
    out << "  saved " << dir << "; reloaded outputs differ by " << std::scientific << std::setprecision(1)
        << reload_diff << std::defaultfloat << "\n\n";

    nlohmann::json heads_removed = nlohmann::json::array();
    for (const auto& h : drop) heads_removed.push_back(to_string(h));
    nlohmann::json kept = nlohmann::json::object();
    for (AttnType t : cfg.attn_types()) kept[to_string(t)] = pruned->config().heads(t);
    report.push_back({{"family", to_string(arch)},
                      {"heads_total", total_heads},
                      {"heads_removed", heads_removed},
                      {"kept_heads", kept},
                      {"loss_full", base_loss.item<double>()},
                      {"loss_masked", masked_loss},
                      {"loss_pruned", pruned_loss},
                      {"max_abs_diff_masked_vs_pruned", max_diff},
                      {"max_abs_diff_reloaded", reload_diff},
                      {"parameters_before", params_before},
                      {"parameters_after", params_after},
                      {"forward_ms_before", ms_before},
                      {"forward_ms_after", ms_after},
                      {"checkpoint", dir}});
  }
  return report;
}

}  // namespace hp
