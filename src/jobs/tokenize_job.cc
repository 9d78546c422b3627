// `headprune tokenize` (see header).
#include "headprune/jobs/tokenize_job.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "headprune/data/model_dir.h"
#include "headprune/data/readers.h"

namespace hp {

int64_t run_tokenize(const TokenizeRequest& req, std::ostream& out) {
  const auto tok = load_tokenizer(req.dir);
  if (!tok)
    throw std::runtime_error(req.dir + ": no tokenizer (tokenizer.json, tokenizer.model, source.spm + vocab.json, vocab.txt, "
                                       "or vocab.json + merges.txt)");
  const auto lines = read_lines(req.file);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!req.decode) {
      out << nlohmann::json(tok->encode(lines[i], req.special_tokens)).dump() << "\n";
      continue;
    }
    const std::string where = req.file + ":" + std::to_string(i + 1);
    std::vector<int64_t> ids;
    try {
      ids = nlohmann::json::parse(lines[i]).get<std::vector<int64_t>>();
    } catch (const nlohmann::json::exception&) {
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
