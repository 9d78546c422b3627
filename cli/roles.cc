// `headprune roles CHECKPOINT`: positional, syntactic and rare-word heads (Voita et al.) on a
// CoNLL-U treebank, joined with importance scores and with whether each head survived a pruning
// plan; prints the per-head table, the relation table (best head vs. baseline) and the share of
// each role among kept and pruned heads; writes roles.json and roles.csv.
#include <iomanip>
#include <memory>
#include <ostream>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app.h"
#include "common.h"
#include "headprune/data/tasks.h"
#include "headprune/io/files.h"
#include "headprune/prune/plan.h"
#include "headprune/score/head_scores.h"
#include "headprune/score/roles.h"

namespace hp::cli {
namespace {

struct RolesCliOptions {
  std::string checkpoint, conllu = "ud_english_ewt/en_ewt-ud-dev.conllu.gz",
                          freq_conllu = "ud_english_ewt/en_ewt-ud-train.conllu.gz", data_root = "../shared/data",
                          importance, plan, out_dir;
  int64_t max_sentences = 2000;
  RoleOptions roles;
};

std::string pct(double v) { return fmt(100.0 * v, 1) + "%"; }

void run_roles(const RolesCliOptions& o, Context& ctx) {
  LoadedModel lm = open_model(o.checkpoint);
  if (!lm.tokenizer)
    throw std::invalid_argument(o.checkpoint + ": no tokenizer (tokenizer.json, or an HF vocab.txt / vocab.json + merges.txt; roles need a model trained on text, not the "
                                               "synthetic task)");
  const std::string conllu = resolve_data_path(o.data_root, o.conllu);
  const auto sentences = read_conllu(conllu, o.max_sentences);
  const auto freq = word_frequencies(read_conllu(resolve_data_path(o.data_root, o.freq_conllu)));
  PhaseProgress progress;
  const auto mp = head_pointers(*lm.model, *lm.tokenizer, sentences, 32, [&](int64_t d, int64_t n) {
    progress("attention", d, n);
  });
  if (mp.sentences.empty()) throw std::invalid_argument(conllu + ": no sentence fits the model's positions");
  const auto rarest = rarest_words(mp.sentences, freq);

  std::vector<HeadScores> maps;
  if (!o.importance.empty()) maps = read_maps(o.importance);
  std::set<HeadId> pruned;
  if (!o.plan.empty())
    for (const auto& h : read_plan(o.plan).heads) pruned.insert(h);

  std::vector<HeadRoles> roles;
  for (const auto& [head, ptr] : mp.heads) roles.push_back(classify_head(head, ptr, mp.sentences, rarest, o.roles));

  // Per-head table.
  ctx.out << mp.sentences.size() << " sentences of " << conllu << " (" << sentences.size() - mp.sentences.size()
          << " too long skipped); " << to_string(mp.type) << " heads\n";
  ctx.out << std::left << std::setw(18) << "head" << std::right << std::setw(12) << "positional" << std::setw(9)
          << "rare" << std::setw(24) << "best relation" << std::setw(14) << "acc/baseline" << std::setw(6) << "role";
  for (const auto& m : maps) ctx.out << std::setw(12) << m.method;
  if (!o.plan.empty()) ctx.out << std::setw(8) << "plan";
  ctx.out << "\n";
  nlohmann::json jheads = nlohmann::json::array();
  std::ostringstream csv;
  csv << "attn_type,layer,head,positional,positional_offset,positional_share,rare,rare_share,syntactic,"
         "best_relation,best_accuracy,best_baseline";
  for (const auto& m : maps) csv << ",importance_" << m.method;
  csv << ",pruned\n";
  for (const auto& r : roles) {
    const RelationScore* best = nullptr;
    for (const auto& s : r.relations)
      if (s.pairs > 0 && (!best || s.accuracy - s.baseline > best->accuracy - best->baseline)) best = &s;
    std::string tag = std::string(r.positional.is_role ? "P" : "") + (r.syntactic ? "S" : "") + (r.rare.is_role ? "R" : "");
    ctx.out << std::left << std::setw(18) << to_string(r.head) << std::right << std::setw(12)
            << (pct(r.positional.share) + "@" + std::to_string(r.positional.offset)) << std::setw(9)
            << pct(r.rare.share) << std::setw(24) << (best ? best->relation + " " + best->direction : "-")
            << std::setw(14) << (best ? pct(best->accuracy) + "/" + pct(best->baseline) : "-") << std::setw(6)
            << (tag.empty() ? "-" : tag);
    auto j = r.to_json();
    for (const auto& m : maps) {
      const bool has = m.has(r.head);
      ctx.out << std::setw(12) << (has ? fmt(m.at(r.head)) : "-");
      if (has) j["importance"][m.method] = m.at(r.head);
    }
    const bool is_pruned = pruned.count(r.head) > 0;
    if (!o.plan.empty()) {
      ctx.out << std::setw(8) << (is_pruned ? "pruned" : "kept");
      j["pruned"] = is_pruned;
    }
    ctx.out << "\n";
    jheads.push_back(j);
    csv << to_string(r.head.type) << "," << r.head.layer << "," << r.head.head << "," << r.positional.is_role << ","
        << r.positional.offset << "," << r.positional.share << "," << r.rare.is_role << "," << r.rare.share << ","
        << r.syntactic << "," << (best ? best->relation + " " + best->direction : "") << ","
        << (best ? best->accuracy : 0.0) << "," << (best ? best->baseline : 0.0);
    for (const auto& m : maps) csv << "," << (m.has(r.head) ? std::to_string(m.at(r.head)) : "");
    csv << "," << (o.plan.empty() ? "" : (is_pruned ? "1" : "0")) << "\n";
  }

  // Relation table (Voita's Table): the best head per relation and direction against the baseline.
  ctx.out << "\n" << std::left << std::setw(10) << "relation" << std::setw(11) << "direction" << std::right
          << std::setw(7) << "pairs" << std::setw(18) << "baseline (offset)" << std::setw(18) << "best head"
          << std::setw(10) << "accuracy" << "\n";
  nlohmann::json jrel = nlohmann::json::array();
  for (size_t k = 0; !roles.empty() && k < roles.front().relations.size(); ++k) {
    const HeadRoles* bh = nullptr;
    for (const auto& r : roles)
      if (!bh || r.relations[k].accuracy > bh->relations[k].accuracy) bh = &r;
    const auto& s = bh->relations[k];
    ctx.out << std::left << std::setw(10) << s.relation << std::setw(11) << s.direction << std::right << std::setw(7)
            << s.pairs << std::setw(18) << (pct(s.baseline) + " (" + std::to_string(s.baseline_offset) + ")")
            << std::setw(18) << to_string(bh->head) << std::setw(10) << pct(s.accuracy) << "\n";
    jrel.push_back({{"relation", s.relation},    {"direction", s.direction}, {"pairs", s.pairs},
                    {"baseline", s.baseline},    {"baseline_offset", s.baseline_offset},
                    {"best_head", to_string(bh->head)}, {"best_accuracy", s.accuracy}});
  }

  // Roles among kept and pruned heads.
  nlohmann::json jshare = nullptr;
  if (!o.plan.empty()) {
    struct Count {
      int64_t n = 0, pos = 0, syn = 0, rare = 0, any = 0;
    } kept, gone;
    for (const auto& r : roles) {
      Count& c = pruned.count(r.head) ? gone : kept;
      ++c.n;
      c.pos += r.positional.is_role;
      c.syn += r.syntactic;
      c.rare += r.rare.is_role;
      c.any += r.positional.is_role || r.syntactic || r.rare.is_role;
    }
    auto share = [](int64_t k, int64_t n) { return n > 0 ? static_cast<double>(k) / static_cast<double>(n) : 0.0; };
    ctx.out << "\nroles among heads (" << o.plan << "):\n";
    jshare = nlohmann::json::object();
    for (const auto& [name, c] : {std::pair<std::string, Count>{"kept", kept}, {"pruned", gone}}) {
      ctx.out << "  " << std::left << std::setw(7) << name << std::right << std::setw(4) << c.n << " heads: positional "
              << pct(share(c.pos, c.n)) << ", syntactic " << pct(share(c.syn, c.n)) << ", rare "
              << pct(share(c.rare, c.n)) << ", any role " << pct(share(c.any, c.n)) << "\n";
      jshare[name] = {{"heads", c.n},
                      {"positional", share(c.pos, c.n)},
                      {"syntactic", share(c.syn, c.n)},
                      {"rare", share(c.rare, c.n)},
                      {"any", share(c.any, c.n)}};
    }
  }
  if (!o.out_dir.empty()) {
    make_directories(o.out_dir);
    nlohmann::json out = {{"checkpoint", o.checkpoint},
                          {"conllu", conllu},
                          {"sentences", mp.sentences.size()},
                          {"attn_type", to_string(mp.type)},
                          {"thresholds",
                           {{"positional_share", o.roles.positional_share},
                            {"syntactic_margin", o.roles.syntactic_margin},
                            {"rare_share", o.roles.rare_share}}},
                          {"heads", jheads},
                          {"relations", jrel},
                          {"plan", o.plan.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.plan)},
                          {"shares", jshare}};
    write_file_atomic(o.out_dir + "/roles.json", out.dump(1) + "\n");
    write_file_atomic(o.out_dir + "/roles.csv", csv.str());
    ctx.err << "[roles] wrote " << o.out_dir << "/roles.json and roles.csv\n";
  }
}

}  // namespace

void register_roles(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<RolesCliOptions>();
  auto* sub = app.add_subcommand("roles", "Positional, syntactic and rare-word heads on a CoNLL-U treebank");
  sub->add_option("checkpoint", o->checkpoint, "checkpoint directory (with a tokenizer)")->required();
  sub->add_option("--conllu", o->conllu, "dependency-annotated sentences (relative paths start at --data-root)")
      ->capture_default_str();
  sub->add_option("--freq-conllu", o->freq_conllu, "corpus whose word counts decide the rarest word")
      ->capture_default_str();
  sub->add_option("--data-root", o->data_root, "directory that relative data paths start from")->capture_default_str();
  sub->add_option("--max-sentences", o->max_sentences, "use the first N sentences (0 = all)")->capture_default_str();
  sub->add_option("--importance", o->importance, "importance.json (from headprune importance) to join");
  sub->add_option("--plan", o->plan, "plan.json (from prune or gates): mark heads kept or pruned, role shares");
  sub->add_option("--positional-share", o->roles.positional_share, "positional: share of one relative position")
      ->capture_default_str();
  sub->add_option("--syntactic-margin", o->roles.syntactic_margin, "syntactic: accuracy above the baseline")
      ->capture_default_str();
  sub->add_option("--rare-share", o->roles.rare_share, "rare: share pointing at the rarest word")->capture_default_str();
  sub->add_option("--out", o->out_dir, "write roles.json and roles.csv here");
  sub->callback([&ctx, o] {
    apply_globals(ctx);
    run_roles(*o, ctx);
  });
}

}  // namespace hp::cli
