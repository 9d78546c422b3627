// The head-roles job (see header).
#include "headprune/jobs/roles_job.h"

#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "headprune/data/readers.h"
#include "headprune/data/tasks.h"
#include "headprune/io/files.h"
#include "headprune/io/formats.h"
#include "headprune/prune/plan.h"

namespace hp {
namespace {

std::string pct(double v) { return fmt(100.0 * v, 1) + "%"; }

// The relation and direction where the head beats the baseline by most (nullptr: no pairs at all).
const RelationScore* best_relation(const HeadRoles& r) {
  const RelationScore* best = nullptr;
  for (const auto& s : r.relations)
    if (s.pairs > 0 && (!best || s.accuracy - s.baseline > best->accuracy - best->baseline)) best = &s;
  return best;
}

std::string role_tag(const HeadRoles& r) {
  return std::string(r.positional.is_role ? "P" : "") + (r.syntactic ? "S" : "") + (r.rare.is_role ? "R" : "");
}

// Per relation and direction (Voita's table): the head with the highest accuracy.
std::vector<std::pair<const HeadRoles*, const RelationScore*>> best_heads(const std::vector<HeadRoles>& heads) {
  std::vector<std::pair<const HeadRoles*, const RelationScore*>> out;
  for (size_t k = 0; !heads.empty() && k < heads.front().relations.size(); ++k) {
    const HeadRoles* bh = nullptr;
    for (const auto& r : heads)
      if (!bh || r.relations[k].accuracy > bh->relations[k].accuracy) bh = &r;
    out.push_back({bh, &bh->relations[k]});
  }
  return out;
}

struct RoleCount {
  int64_t n = 0, pos = 0, syn = 0, rare = 0, any = 0;
  double share(int64_t k) const { return n > 0 ? static_cast<double>(k) / static_cast<double>(n) : 0.0; }
};

std::pair<RoleCount, RoleCount> count_roles(const std::vector<HeadRoles>& heads, const std::set<HeadId>& pruned) {
  RoleCount kept, gone;
  for (const auto& r : heads) {
    RoleCount& c = pruned.count(r.head) ? gone : kept;
    ++c.n;
    c.pos += r.positional.is_role;
    c.syn += r.syntactic;
    c.rare += r.rare.is_role;
    c.any += r.positional.is_role || r.syntactic || r.rare.is_role;
  }
  return {kept, gone};
}

std::vector<NamedPath> roles_inputs(const RolesRequest& req) {
  const auto at_root = [&](const std::string& p) { return p.empty() || p.front() == '/' ? p : join_path(req.data_root, p); };
  return {{req.checkpoint, "the checkpoint"}, {at_root(req.conllu), "--conllu"}, {at_root(req.freq_conllu), "the word counts"},
          {req.importance, "--importance"}, {req.plan, "--plan"}};
}

}  // namespace

void RolesResult::print(std::ostream& out) const {
  out << sentences_used << " sentences of " << conllu << " (" << sentences_read - sentences_used
      << " too long skipped); " << to_string(type) << " heads\n";
  out << std::left << std::setw(18) << "head" << std::right << std::setw(12) << "positional" << std::setw(9) << "rare"
      << std::setw(24) << "best relation" << std::setw(14) << "acc/baseline" << std::setw(6) << "role";
  for (const auto& m : maps) out << std::setw(12) << m.method;
  if (!plan.empty()) out << std::setw(8) << "plan";
  out << "\n";
  for (const auto& r : heads) {
    const RelationScore* best = best_relation(r);
    const std::string tag = role_tag(r);
    out << std::left << std::setw(18) << to_string(r.head) << std::right << std::setw(12)
        << (pct(r.positional.share) + "@" + std::to_string(r.positional.offset)) << std::setw(9) << pct(r.rare.share)
        << std::setw(24) << (best ? best->relation + " " + best->direction : "-") << std::setw(14)
        << (best ? pct(best->accuracy) + "/" + pct(best->baseline) : "-") << std::setw(6) << (tag.empty() ? "-" : tag);
    for (const auto& m : maps) out << std::setw(12) << (m.has(r.head) ? fmt(m.at(r.head)) : "-");
    if (!plan.empty()) out << std::setw(8) << (pruned.count(r.head) ? "pruned" : "kept");
    out << "\n";
  }
  out << "\n" << std::left << std::setw(10) << "relation" << std::setw(11) << "direction" << std::right << std::setw(7)
      << "pairs" << std::setw(18) << "baseline (offset)" << std::setw(18) << "best head" << std::setw(10) << "accuracy"
      << "\n";
  for (const auto& [bh, s] : best_heads(heads))
    out << std::left << std::setw(10) << s->relation << std::setw(11) << s->direction << std::right << std::setw(7)
        << s->pairs << std::setw(18) << (pct(s->baseline) + " (" + std::to_string(s->baseline_offset) + ")")
        << std::setw(18) << to_string(bh->head) << std::setw(10) << pct(s->accuracy) << "\n";
  if (plan.empty()) return;
  const auto [kept, gone] = count_roles(heads, pruned);
  out << "\nroles among heads (" << plan << "):\n";
  for (const auto& [name, c] : {std::pair<std::string, RoleCount>{"kept", kept}, {"pruned", gone}})
    out << "  " << std::left << std::setw(7) << name << std::right << std::setw(4) << c.n << " heads: positional "
        << pct(c.share(c.pos)) << ", syntactic " << pct(c.share(c.syn)) << ", rare " << pct(c.share(c.rare))
        << ", any role " << pct(c.share(c.any)) << "\n";
}

nlohmann::json RolesResult::to_json() const {
  nlohmann::json jheads = nlohmann::json::array();
  for (const auto& r : heads) {
    auto j = r.to_json();
    for (const auto& m : maps)
      if (m.has(r.head)) j["importance"][m.method] = m.at(r.head);
    if (!plan.empty()) j["pruned"] = pruned.count(r.head) > 0;
    jheads.push_back(j);
  }
  nlohmann::json jrel = nlohmann::json::array();
  for (const auto& [bh, s] : best_heads(heads))
    jrel.push_back({{"relation", s->relation},        {"direction", s->direction}, {"pairs", s->pairs},
                    {"baseline", s->baseline},        {"baseline_offset", s->baseline_offset},
                    {"best_head", to_string(bh->head)}, {"best_accuracy", s->accuracy}});
  nlohmann::json jshare = nullptr;
  if (!plan.empty()) {
    const auto [kept, gone] = count_roles(heads, pruned);
    jshare = nlohmann::json::object();
    for (const auto& [name, c] : {std::pair<std::string, RoleCount>{"kept", kept}, {"pruned", gone}})
      jshare[name] = {{"heads", c.n},
                      {"positional", c.share(c.pos)},
                      {"syntactic", c.share(c.syn)},
                      {"rare", c.share(c.rare)},
                      {"any", c.share(c.any)}};
  }
  nlohmann::json j = {{"checkpoint", checkpoint},
          {"dtype", dtype},
          {"conllu", conllu},
          {"sentences", sentences_used},
          {"attn_type", to_string(type)},
          {"thresholds",
           {{"positional_share", thresholds.positional_share},
            {"syntactic_margin", thresholds.syntactic_margin},
            {"rare_share", thresholds.rare_share}}},
          {"heads", jheads},
          {"relations", jrel},
          {"plan", plan.empty() ? nlohmann::json(nullptr) : nlohmann::json(plan)},
          {"shares", jshare}};
  stamp_format(j, ResultKind::Roles);
  return j;
}

std::string RolesResult::to_csv() const {
  std::ostringstream csv;
  csv << "attn_type,layer,head,positional,positional_offset,positional_share,rare,rare_share,syntactic,"
         "best_relation,best_accuracy,best_baseline";
  for (const auto& m : maps) csv << ",importance_" << m.method;
  csv << ",pruned\n";
  for (const auto& r : heads) {
    const RelationScore* best = best_relation(r);
    csv << to_string(r.head.type) << "," << r.head.layer << "," << r.head.head << "," << r.positional.is_role << ","
        << r.positional.offset << "," << r.positional.share << "," << r.rare.is_role << "," << r.rare.share << ","
        << r.syntactic << "," << (best ? best->relation + " " + best->direction : "") << ","
        << (best ? best->accuracy : 0.0) << "," << (best ? best->baseline : 0.0);
    for (const auto& m : maps) csv << "," << (m.has(r.head) ? std::to_string(m.at(r.head)) : "");
    csv << "," << (plan.empty() ? "" : (pruned.count(r.head) ? "1" : "0")) << "\n";
  }
  return csv.str();
}

RolesResult run_roles(const RolesRequest& req, const Runtime& rt, const JobEvents& events) {
  std::optional<OutputDir> out;  // refused before any work (io/outputs.h)
  if (!req.out_dir.empty())
    out.emplace(req.out_dir, OutputDir::Options{"roles", req.overwrite, false, roles_inputs(req)});
  LoadedModel lm = open_model(req.checkpoint, rt.device, load_options(rt));  // in --dtype
  if (!lm.tokenizer)
    throw std::invalid_argument(req.checkpoint +
                                ": no tokenizer (tokenizer.json, or an HF vocab.txt / vocab.json + merges.txt; roles "
                                "need a model trained on text, not the synthetic task)");
  RolesResult res;
  res.checkpoint = req.checkpoint;
  res.dtype = dtype_name(lm.dtype);
  res.thresholds = req.roles;
  res.plan = req.plan;
  res.conllu = resolve_data_path(req.data_root, req.conllu);
  const auto sentences = read_conllu(res.conllu, req.max_sentences);
  const auto freq = word_frequencies(read_conllu(resolve_data_path(req.data_root, req.freq_conllu)));
  const auto mp = head_pointers(*lm.model, *lm.tokenizer, sentences, 32, [&](int64_t d, int64_t n) {
    events.report({"attention", d, n});
  });
  if (mp.sentences.empty()) throw std::invalid_argument(res.conllu + ": no sentence fits the model's positions");
  res.sentences_read = static_cast<int64_t>(sentences.size());
  res.sentences_used = static_cast<int64_t>(mp.sentences.size());
  res.type = mp.type;
  const auto rarest = rarest_words(mp.sentences, freq);
  if (!req.importance.empty()) res.maps = read_maps(req.importance);
  if (!req.plan.empty())
    for (const auto& h : read_plan(req.plan).heads) res.pruned.insert(h);
  for (const auto& [head, ptr] : mp.heads) res.heads.push_back(classify_head(head, ptr, mp.sentences, rarest, req.roles));
  if (out) {
    write_json_file(join_path(out->path(), "roles.json"), res.to_json(), 1);
    write_file_atomic(join_path(out->path(), "roles.csv"), res.to_csv());
    out->commit();
    events.say("roles", "wrote " + req.out_dir + "/roles.json and roles.csv");
  }
  return res;
}

}  // namespace hp
