// The evaluation and speed jobs (see header).
#include "headprune/jobs/eval_job.h"

#include <cmath>

#include <iomanip>
#include <ostream>

#include "headprune/eval/evaluate.h"
#include "headprune/io/formats.h"
#include "headprune/eval/textbook.h"
#include "headprune/io/files.h"
#include "headprune/io/outputs.h"
#include "headprune/model/precision.h"
#include "headprune/train/optimizer.h"

namespace hp {

namespace {
OutputFile hyps_output(const EvalRequest& req) {  // plain text: replaced only with --overwrite
  return {req.hyps_path, "--hyps", "translations (text)", nullptr, req.overwrite};
}
}  // namespace

EvalReport run_eval(const EvalRequest& req, const Runtime& rt, const JobEvents& events) {
  check_output_file(hyps_output(req), job_inputs(req.checkpoint, req.data));  // before any work
  DataSource data = req.data;
  data.synthetic_train = data.synthetic_split();  // the unigram baseline's synthetic train split: as large
  JobInputs in(req.checkpoint, data, rt);
  Transformer& model = in.model();
  const ModelConfig& cfg = model->config();
  const auto loaded = model->parameters().front().scalar_type();
  if (rt.precision != Precision::Float32 && loaded != torch::kFloat &&
      !(rt.precision == Precision::BFloat16 && loaded == torch::kBFloat16))
    throw std::invalid_argument("eval: --precision " + to_string(rt.precision) + " converts fp32 weights, but --dtype (or the "
                                "checkpoint) gave " + dtype_name(loaded) + "; use --dtype fp32");
  apply_precision(*model, rt.precision);
  const EvalSet& set = in.eval();
  EvalReport rep;
  nlohmann::json& out = rep.json;
  out = {{"checkpoint", req.checkpoint}, {"arch", to_string(cfg.arch)}};
  out["data"] = req.data.config.empty() ? set.name : req.data.config;  // "synthetic/valid", calibration text, ...
  out["split"] = req.data.split;
  out["precision"] = to_string(rt.precision);
  out["dtype"] = dtype_name(in.loaded.dtype);  // the weights as loaded (f16 on the CPU computes in fp32)
  EvalOptions eo;
  eo.graphs = req.graphs;
  auto r = evaluate(*model, set.examples, eo);
  if (req.graphs != GraphReplay::Off) out["graphs"] = graph_replay_name(req.graphs);
  out.update(r.to_json());
  if (!std::isfinite(r.loss)) {  // JSON has no NaN: say so instead of a bare null
    out["loss_non_finite"] = std::isnan(r.loss) ? "nan" : "inf";
    events.say("eval", "warning: the loss is " + std::string(std::isnan(r.loss) ? "NaN" : "infinite") +
                           " (the model produces non-finite values on this data)");
  }
  std::string& line = rep.line;
  line = std::to_string(r.n_examples) + " examples | loss " + std::to_string(r.loss);
  if (r.classification) {
    line += " | accuracy " + std::to_string(r.classification->accuracy) + " | f1 " +
            std::to_string(r.classification->f1) + " | mcc " + std::to_string(r.classification->mcc);
  } else {
    line += " | perplexity " + std::to_string(r.perplexity);
  }
  if (cfg.arch == Arch::DecoderLM && req.unigram_baseline) {
    out["unigram_perplexity"] = unigram_perplexity(in.load_split("train", 0).examples, set.examples, cfg.vocab_size);
    line += " | unigram perplexity " + std::to_string(out["unigram_perplexity"].get<double>());
  }
  if (cfg.arch == Arch::EncoderDecoder) {
    nlohmann::json bleu = nlohmann::json::object();
    for (int64_t beam : req.beams) {
      DecodeOptions d;
      d.beam_size = beam;
      d.length_penalty = req.length_penalty;
      TranslationEval te;
      if (in.loaded.tokenizer && !set.texts.empty()) {
        const std::string phase = "decode beam " + std::to_string(beam);
        te = evaluate_translation(*model, *in.loaded.tokenizer, set.texts, d, 4096, [&](int64_t done, int64_t total) {
          events.report({phase, done, total, "sent"});
        });
      } else {
        te = evaluate_synthetic_translation(*model, set.examples, d);
      }
      bleu["beam" + std::to_string(beam)] = {{"score", te.bleu.score}, {"signature", te.bleu.signature},
                                             {"brevity_penalty", te.bleu.brevity_penalty},
                                             {"precisions", te.bleu.precisions}, {"seconds", te.seconds}};
      line += " | BLEU beam " + std::to_string(beam) + " " + std::to_string(te.bleu.score);
      if (!req.hyps_path.empty() && beam == req.beams.back()) {
        std::string all;
        for (const auto& h : te.hypotheses) all += h + "\n";
        write_output_file(hyps_output(req), all);
      }
    }
    out["bleu"] = bleu;
  }
  events.say("eval", line);
  return rep;
}

nlohmann::json BenchReport::to_json() const {
  nlohmann::json jr = nlohmann::json::array();
  for (const auto& r : records) jr.push_back(r.to_json());
  nlohmann::json j = {{"environment", environment}, {"warmup", warmup}, {"reps", reps}, {"records", jr}};
  stamp_format(j, ResultKind::Bench);
  return j;
}

void BenchReport::print(std::ostream& out) const {
  const auto& env = environment;
  out << "threads " << env["threads"] << ", " << env["blas"].get<std::string>() << ", int8 engine "
      << env["int8_engine"].get<std::string>() << ", LibTorch " << env["torch"].get<std::string>() << "; " << reps
      << " repetitions after " << warmup << " warm-up, models interleaved\n";
  out << env["blas_kernels"].get<std::string>() << "\n";
  if (env.contains("fp32_gemm")) out << env["fp32_gemm"].get<std::string>() << "\n";
  const double peak = env.value("gemm_peak_gflop_per_s", 0.0);
  if (peak > 0) out << "fp32 GEMM probe (1536^3, best of 8, these threads): " << fmt(peak, 1) << " GFLOP/s\n";
  if (!records.empty() && records.front().graphs != "off")
    out << "forward passes replayed per shape (--graphs " << records.front().graphs << "; recorded untimed)\n";
  out << std::left << std::setw(34) << "model" << std::right << std::setw(6) << "batch" << std::setw(5) << "seq"
      << std::setw(7) << "heads" << std::setw(11) << "median ms" << std::setw(19) << "p10-p90 ms" << std::setw(10)
      << "ex/s" << std::setw(11) << "tok/s" << std::setw(9) << "GFLOP" << std::setw(8) << "ideal" << std::setw(10)
      << "measured" << std::setw(8) << "paired" << std::setw(9) << "GFLOP/s" << std::setw(7) << "peak" << "\n";
  for (const auto& r : records) {
    // Generation rows name their part: "prompt", or "decode +N" (N new tokens after seq tokens).
    const std::string part = r.mode == "prompt"   ? "prompt "
                             : r.mode == "decode" ? "decode +" + std::to_string(r.new_tokens) + " "
                                                  : "";
    const size_t room = 30 - part.size();  // part is at most 16 characters
    const std::string name =
        part + (part.size() + r.model.size() > 33 ? "..." + r.model.substr(r.model.size() - std::min(room, r.model.size())) : r.model);
    out << std::left << std::setw(34) << name << std::right << std::setw(6) << r.batch << std::setw(5) << r.seq_len
        << std::setw(7) << r.heads << std::setw(11) << fmt(r.median_ms, 2) << std::setw(19)
        << (fmt(r.p10_ms, 2) + "-" + fmt(r.p90_ms, 2)) << std::setw(10) << fmt(r.examples_per_s, 1) << std::setw(11)
        << fmt(r.tokens_per_s, 0) << std::setw(9) << fmt(r.gflops, 2) << std::setw(8) << ("x" + fmt(r.ideal_speedup, 2))
        << std::setw(10) << ("x" + fmt(r.measured_speedup, 2)) << std::setw(8) << ("x" + fmt(r.paired_speedup, 2))
        << std::setw(9) << fmt(r.gflop_per_s, 1) << std::setw(7) << (peak > 0 ? fmt(100 * r.peak_share, 0) + "%" : "-")
        << "\n";
  }
  for (const auto& r : records)
    if (r.device_peak_bytes > 0)
      out << "GPU memory, peak: " << fmt(static_cast<double>(r.device_peak_bytes) / (1024.0 * 1024.0), 1) << " MiB  "
          << r.model << " batch " << r.batch << " seq " << r.seq_len << "\n";
  for (const auto& r : records)
    if (r.mode == "decode")
      out << "key/value cache after decoding: " << fmt(static_cast<double>(r.kv_cache_bytes) / (1024.0 * 1024.0), 1)
          << " MiB  " << r.model << " batch " << r.batch << ", " << r.seq_len + r.new_tokens << " positions\n";
  out << "peak resident memory " << env["peak_rss_kb"].get<int64_t>() / 1024 << " MiB (whole process)\n";
}

OutputFile bench_json_output(const std::string& path) {
  return {path, "--json", "a benchmark result (JSON)", json_format_is(format_tag(ResultKind::Bench))};
}

BenchReport run_bench(const BenchRequest& req, const Runtime& rt, const JobEvents& events) {
  {  // the outputs, before any work (io/outputs.h)
    std::vector<NamedPath> inputs;
    for (const auto& c : req.checkpoints) inputs.push_back({c, "the checkpoint"});
    const OutputFile files[] = {bench_json_output(req.json_path), bench_io_output(req.bench.io_path),
                                bench_profile_output(req.bench.profile_path)};
    std::vector<NamedPath> outputs;
    for (const auto& f : files) {
      check_output_file(f, inputs);
      outputs.push_back({f.path, f.what});
    }
    check_outputs_apart(outputs, {});
  }
  std::vector<BenchModel> models;
  for (const auto& c : req.checkpoints) {
    for (auto p : req.precisions) {
      BenchModel m{c, open_model(c, rt.device, load_options(rt)).model};  // in --dtype
      m.model->eval();
      const auto loaded = m.model->parameters().front().scalar_type();
      // --precision converts fp32 weights (bf16 weights are already bf16); weights loaded in another
      // dtype by --dtype are refused by name rather than converted twice.
      if (p != Precision::Float32 && loaded != torch::kFloat && !(p == Precision::BFloat16 && loaded == torch::kBFloat16))
        throw std::invalid_argument("bench: --precision " + to_string(p) + " converts fp32 weights, but --dtype loaded " + c +
                                    " as " + dtype_name(loaded) + "; use --dtype fp32 (or auto for an fp32 checkpoint)");
      apply_precision(*m.model, p);
      // fp32 runs the weights as loaded: the record names their dtype (f16 on the CPU computes in fp32).
      m.precision = p == Precision::Float32 ? dtype_name(loaded) : to_string(p);
      if (p == Precision::Float32 && rt.dtype == torch::kHalf && loaded == torch::kFloat) m.precision = "f16 (fp32 compute)";
      if (req.precisions.size() > 1) m.name += " [" + m.precision + "]";
      models.push_back(m);
    }
    if (req.textbook && c == req.checkpoints.front()) {
      // The first checkpoint again, through the plain-LibTorch forward (fp32).
      BenchModel m{"textbook nn::Linear", open_model(c, rt.device).model};
      m.model->eval();
      auto tb = TextbookClassifier(*m.model);
      tb->to(rt.device);
      tb->eval();
      m.run = [tb](const Batch& b) mutable { return tb->forward(b); };
      models.push_back(m);
    }
  }
  if (req.bench.train) {
    // One training step as `train` runs it: forward, loss, backward, AdamW (learning rate fixed).
    for (auto& m : models) {
      if (m.run) throw std::invalid_argument("bench --train: the textbook baseline has no training step");
      if (m.precision != "fp32") throw std::invalid_argument("bench --train: training runs in fp32 (bf16 via autocast in train)");
      auto model = m.model;
      auto opt = std::make_shared<AdamW>(*model, AdamWOptions{});
      m.run = [model, opt](const Batch& b) mutable {
        auto loss = model->loss(model->forward(b), b);
        loss.backward();
        opt->step(1e-4);
        opt->zero_grad();
        return loss;
      };
    }
  }
  const auto total = static_cast<int64_t>(req.bench.batch_sizes.size() * req.bench.seq_lens.size());
  BenchReport rep;
  rep.warmup = req.bench.warmup;
  rep.reps = req.bench.reps;
  double peak = 0;
  rep.records = bench_models(
      models, req.bench, [&](int64_t done, int64_t) { events.report({"bench", done, total, "shape"}); }, &peak);
  rep.environment = bench_environment();  // after the runs: peak memory included
  if (req.bench.gemm_probe) rep.environment["gemm_peak_gflop_per_s"] = peak;
  rep.environment["device"] = rt.device.str();
  if (!req.json_path.empty()) write_output_file(bench_json_output(req.json_path), rep.to_json().dump(2) + "\n");
  return rep;
}

}  // namespace hp
