// `headprune tokenize` (see header).
#include "headprune/jobs/tokenize_job.h"

#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "headprune/data/model_dir.h"
#include "headprune/data/readers.h"
#include "headprune/io/files.h"

namespace hp {

int64_t run_tokenize(const TokenizeRequest& req, std::ostream& out) {
  const auto tok = load_tokenizer(req.dir);
  if (!tok)
    throw std::runtime_error(req.dir + ": no tokenizer (tokenizer.json, tokenizer.model, source.spm + vocab.json, vocab.txt, "
                                       "or vocab.json + merges.txt)");
  // A model directory, or a tokenizer folder beside its model's config.json: the tokenizer must fit the
  // model's vocabulary (check_tokenizer_fits, the rule every job that opens the model applies).
  const std::string config = join_path(req.dir, "config.json");
  if (is_file(config)) {
    const auto j = read_json_file(config, /*allow_comments=*/false);
    if (j.is_object() && j.contains("vocab_size") && j["vocab_size"].is_number_integer())
      check_tokenizer_fits(*tok, j["vocab_size"].get<int64_t>(), req.dir);
  }
  const auto lines = read_lines(req.file);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!req.decode) {
      out << nlohmann::json(tok->encode(lines[i], req.special_tokens)).dump() << "\n";
      continue;
    }
    const std::string where = req.file + ":" + std::to_string(i + 1);
    std::vector<int64_t> ids;
    try {
      const auto j = parse_json(lines[i], where);
      // Integers only: get<int64_t> would read 1.5 as id 1.
      if (!j.is_array() || !std::all_of(j.begin(), j.end(), [](const nlohmann::json& v) { return v.is_number_integer(); }))
        throw std::invalid_argument("not integers");
      ids = j.get<std::vector<int64_t>>();
    } catch (const std::exception&) {
      throw std::runtime_error(where + ": expected a JSON array of token ids, got '" + lines[i].substr(0, 80) + "'");
    }
    try {
      out << nlohmann::json(tok->decode(ids)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(where + ": " + e.what());
    }
  }
  return static_cast<int64_t>(lines.size());
}

}  // namespace hp
