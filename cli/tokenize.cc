// `headprune tokenize`: options -> TokenizeRequest -> jobs/tokenize_job.h.
#include <memory>

#include "common.h"
#include "headprune/jobs/tokenize_job.h"

namespace hp::cli {

void register_tokenize(CLI::App& app, Context& ctx) {
  auto r = std::make_shared<TokenizeRequest>();
  auto* sub = app.add_subcommand("tokenize", "Token ids of each line of a text file, as the model's tokenizer reads it "
                                             "(or --decode: ids back to text)");
  sub->add_option("dir", r->dir, "model directory or tokenizer folder (tokenizer.json, tokenizer.model, "
                                 "source.spm + vocab.json, vocab.txt, vocab.json + merges.txt)")
      ->required();
  sub->add_option("--file", r->file, "one text per line (with --decode: one JSON array of ids per line)")->required();
  auto* plain = sub->add_flag("--no-special-tokens", "leave out the special ids the tokenizer adds around a text "
                                                     "(<s>, </s>, [CLS] ... [SEP])");
  sub->add_flag("--decode", r->decode, "read JSON arrays of ids and print the texts (JSON strings), special ids left out");
  sub->callback([&ctx, r, plain] {
    start(ctx);
    r->special_tokens = plain->count() == 0;
    run_tokenize(*r, ctx.out);
  });
}

}  // namespace hp::cli
