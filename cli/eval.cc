// `headprune eval`, `headprune bench` and `headprune generate`: options -> EvalRequest / BenchRequest ->
// jobs/eval_job.h, GenerateRequest -> jobs/generate_job.h.
#include <memory>
#include <ostream>

#include "common.h"
#include "headprune/jobs/eval_job.h"
#include "headprune/jobs/generate_job.h"

namespace hp::cli {

void register_eval(CLI::App& app, Context& ctx) {
  auto r = std::make_shared<EvalRequest>();
  auto precision = std::make_shared<Precision>(Precision::Float32);
  auto* sub = app.add_subcommand("eval", "Evaluate a checkpoint: loss, accuracy/F1/MCC, perplexity or BLEU");
  sub->add_option("checkpoint", r->checkpoint, "checkpoint directory")->required();
  add_data_options(sub, r->data);
  add_parsed(sub, "--precision", *precision, parse_precision, "fp32, bf16 or int8 (dynamic int8 linear layers)", "fp32");
  sub->add_option("--beam", r->beams, "beam sizes for translation BLEU (1 = greedy)")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--length-penalty", r->length_penalty, "beam score / length^penalty")
      ->check(finite_real())
      ->capture_default_str();
  sub->add_option("--hyps", r->hyps_path, "write the translations of the last beam size to this file");
  sub->add_flag("--overwrite", r->overwrite, "replace an existing --hyps file (refused without it)");
  sub->add_flag("--unigram-baseline", r->unigram_baseline, "LM: also report a unigram model's perplexity");
  add_parsed(sub, "--graphs", r->graphs, parse_graph_replay,
             "off, cuda (the loss's forward passes replayed from CUDA graphs, batches padded to power-of-two "
             "buckets; --device cuda) or emulate (the same buckets and static buffers without a recording, any "
             "device: a check)",
             "off");
  sub->callback([&ctx, r, precision] {
    Runtime rt = start(ctx);
    rt.precision = *precision;
    ctx.out << run_eval(*r, rt, stderr_events(ctx)).json.dump(2) << "\n";
  });

  auto b = std::make_shared<BenchRequest>();
  auto* bs = app.add_subcommand("bench", "Inference latency and throughput of checkpoints, side by side");
  bs->add_option("checkpoints", b->checkpoints, "checkpoint directories (speedups are against the first)")->required();
  add_options(bs, b->bench, bench_option_table());
  add_parsed_list(bs, "--precision", b->precisions, parse_precision,
                  "fp32, bf16 and/or int8 (dynamic int8 linear layers): each checkpoint runs in each", "[fp32]");
  bs->add_flag("--textbook", b->textbook,
               "also time the first checkpoint through a plain-LibTorch forward (torch::nn::Linear modules; "
               "unpruned BERT-style classifiers)");
  bs->add_option("--json", b->json_path, "also write the records and the environment as JSON");
  bs->callback([&ctx, b] { run_bench(*b, start(ctx), stderr_events(ctx)).print(ctx.out); });
}

void register_generate(CLI::App& app, Context& ctx) {
  auto r = std::make_shared<GenerateRequest>();
  r->decode.max_len = 40;
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("generate", "Continue a prompt with a decoder LM (greedy, beam search or sampling), or translate it with an "
                                 "encoder-decoder (MarianMT, headprune's own)");
  sub->add_option("checkpoint", r->checkpoint, "checkpoint directory (headprune or HF)")->required();
  sub->add_option("--prompt", r->prompt, "prompt text (through the checkpoint's tokenizer)");
  sub->add_option("--ids", r->prompt_ids, "prompt as token ids instead")->check(at_least(0));
  sub->add_flag("!--no-bos", r->add_bos, "do not put the start token (bos; eos for headprune's own tokenizer) before a text prompt");
  sub->add_option("--max-new", r->decode.max_len, "new tokens at most")->check(at_least(1))->capture_default_str();
  sub->add_option("--beam", r->decode.beam_size, "beam size (1 = greedy; at most the vocabulary)")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_flag("--sample", r->decode.sample, "sample instead of searching");
  sub->add_option("--temperature", r->decode.temperature, "sampling temperature")
      ->check(positive_real())
      ->capture_default_str();
  sub->add_option("--top-k", r->decode.top_k, "sample from the k most likely tokens (0 = all)")
      ->check(at_least(0))
      ->capture_default_str();
  sub->add_option("--top-p", r->decode.top_p, "sample from the smallest set with this probability")
      ->check(real_range(0, 1, true))
      ->capture_default_str();
  add_parsed(sub, "--graphs", r->decode.graphs, parse_graph_replay,
             "decoder LMs: off, cuda (each decoding step after the prompt replayed from a CUDA graph, on key/value "
             "caches of fixed size; --device cuda) or emulate (the same caches without a recording, any device: a "
             "check)",
             "off");
  sub->add_flag("--json", *json, "print ids, text and speed as JSON");
  sub->callback([&ctx, r, json] {
    Runtime rt = start(ctx);
    r->decode.seed = rt.seed;
    if (r->prompt.empty() && r->prompt_ids.empty()) throw std::invalid_argument("generate: give --prompt TEXT or --ids");
    const auto res = run_generate(*r, rt, stderr_events(ctx));
    if (*json) {
      ctx.out << res.to_json().dump(2) << "\n";
    } else {
      res.print(ctx.out);
    }
  });
}

}  // namespace hp::cli
