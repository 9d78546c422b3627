// The head-roles job (Voita et al. §5, score/roles.h): positional, syntactic and rare-word heads of a
// checkpoint on a CoNLL-U treebank, joined with importance maps and with whether each head survived a
// pruning plan. Writes OUT/roles.json and OUT/roles.csv; prints the per-head table, the relation
// table (best head against the baseline) and the share of each role among kept and pruned heads.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headprune/jobs/job.h"
#include "headprune/score/head_scores.h"
#include "headprune/score/roles.h"

namespace hp {

struct RolesRequest {
  std::string checkpoint;  // with a tokenizer (a model trained on text)
  std::string conllu = "ud_english_ewt/en_ewt-ud-dev.conllu.gz";         // relative paths start at data_root
  std::string freq_conllu = "ud_english_ewt/en_ewt-ud-train.conllu.gz";  // word counts for the rarest word
  std::string data_root = "../shared/data";
  std::string importance;  // importance.json to join ("" = none)
  std::string plan;        // plan.json: mark heads kept or pruned ("" = none)
  std::string out_dir;     // roles.json, roles.csv ("" = print only)
  bool overwrite = false;  // replace a non-empty output directory (refused otherwise)
  int64_t max_sentences = 2000;
  RoleOptions roles;
};

struct RolesResult {
  std::string checkpoint, conllu, plan;
  std::string dtype;  // the weights as loaded (--dtype, or as stored)
  RoleOptions thresholds;
  int64_t sentences_read = 0, sentences_used = 0;
  AttnType type = AttnType::EncoderSelf;
  std::vector<HeadRoles> heads;
  std::vector<HeadScores> maps;
  std::set<HeadId> pruned;
  nlohmann::json to_json() const;  // roles.json
  std::string to_csv() const;      // roles.csv
  void print(std::ostream& out) const;
};

RolesResult run_roles(const RolesRequest& req, const Runtime& rt, const JobEvents& events = {});

}  // namespace hp
