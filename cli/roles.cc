// `headprune roles`: options -> RolesRequest -> jobs/roles_job.h.
#include <memory>
#include <ostream>

#include "common.h"
#include "headprune/jobs/roles_job.h"

namespace hp::cli {

void register_roles(CLI::App& app, Context& ctx) {
  auto r = std::make_shared<RolesRequest>();
  auto* sub = app.add_subcommand("roles", "Positional, syntactic and rare-word heads on a CoNLL-U treebank");
  sub->add_option("checkpoint", r->checkpoint, "checkpoint directory (with a tokenizer)")->required();
  sub->add_option("--conllu", r->conllu, "dependency-annotated sentences (relative paths start at --data-root)")
      ->capture_default_str();
  sub->add_option("--freq-conllu", r->freq_conllu, "corpus whose word counts decide the rarest word")
      ->capture_default_str();
  sub->add_option("--data-root", r->data_root, "directory that relative data paths start from")->capture_default_str();
  sub->add_option("--max-sentences", r->max_sentences, "use the first N sentences (0 = all)")
      ->check(at_least(0))
      ->capture_default_str();
  sub->add_option("--importance", r->importance, "importance.json (from headprune importance) to join");
  sub->add_option("--plan", r->plan, "plan.json (from prune or gates): mark heads kept or pruned, role shares");
  sub->add_option("--positional-share", r->roles.positional_share, "positional: share of one relative position")
      ->check(real_range(0, 1))
      ->capture_default_str();
  sub->add_option("--syntactic-margin", r->roles.syntactic_margin, "syntactic: accuracy above the baseline")
      ->check(real_range(-1, 1))
      ->capture_default_str();
  sub->add_option("--rare-share", r->roles.rare_share, "rare: share pointing at the rarest word")
      ->check(real_range(0, 1))
      ->capture_default_str();
  add_out_option(sub, r->out_dir, r->overwrite, "write roles.json and roles.csv here");
  sub->callback([&ctx, r] { run_roles(*r, start(ctx), stderr_events(ctx)).print(ctx.out); });
}

}  // namespace hp::cli
