// Global options and the single place where errors become exit codes.
#include "app.h"

#include <cstdlib>
#include <iostream>
#include <new>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include "common.h"
#include "headprune/util/blas.h"
#include "headprune/util/dist.h"
#include "headprune/util/gemm.h"
#include "headprune/util/log.h"
#include "headprune/version.h"

namespace hp::cli {

Runtime start(const Context& ctx) {
  set_log_level(parse_log_level(ctx.log_level));
  // Several processes (torchrun, headprune launch): join the group; rank 0 alone reports at info level.
  const dist::Env env = dist::env_from_environment();
  if (env.rank != 0) {
    set_log_prefix("rank " + std::to_string(env.rank) + ": ");
    if (log_level() > LogLevel::Warn) set_log_level(LogLevel::Warn);
  }
  dist::init(env, std::chrono::milliseconds(static_cast<int64_t>(ctx.dist_timeout * 1000)));
  Runtime rt;
  rt.device = parse_device(ctx.device);
  rt.dtype = parse_dtype(ctx.dtype);
  // The cores are shared by the processes of this machine unless --threads says otherwise.
  rt.threads = ctx.threads > 0 || env.local_world_size <= 1 ? ctx.threads
                                                            : std::max(1, hardware_threads() / env.local_world_size);
  rt.seed = ctx.seed;
  const int threads = apply_runtime(rt);
  const BlasKernels blas = inspect_blas_kernels();
  log_info("blas", blas.reason + "; " + std::to_string(threads) + " threads");
  if (dist::active())
    log_info("dist", std::to_string(dist::world_size()) + " processes (Gloo, " +
                         (env.store_file.empty() ? env.master_addr + ":" + std::to_string(env.master_port)
                                                 : "on " + env.master_addr + ", rendezvous in " + env.store_file) +
                         "); this is rank 0");
  log_info("gemm", gemm::describe());  // also refuses a bad HP_FP32_GEMM before any work
  if (blas.should_switch()) log_warn("blas", blas.reason);
  if (!allocator_info().empty()) log_info("memory", allocator_info());  // HP_BLAS_AUTO=0 or a failed restart
  return rt;
}

namespace {
// Where the results of ranks other than 0 go: they are rank 0's too (util/dist.h).
struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
};

// The bytes of LibTorch's "you tried to allocate N bytes", or -1.
double tried_to_allocate(const std::string& msg) {
  const std::string key = "tried to allocate ";
  const auto at = msg.find(key);
  if (at == std::string::npos) return -1;
  char* end = nullptr;
  const double n = std::strtod(msg.c_str() + at + key.size(), &end);
  return end != msg.c_str() + at + key.size() && std::string(end).rfind(" bytes", 0) == 0 ? n : -1;
}

// Usage errors that CLI11 words for the programmer: no subcommand, or a word that is none.
std::string usage_text(CLI::App& app, const CLI::ParseError& e) {
  if (!app.get_subcommands().empty()) return e.what();
  std::string names;
  for (const auto* s : app.get_subcommands([](const CLI::App*) { return true; }))
    names += (names.empty() ? "" : ", ") + s->get_name();
  for (const auto& w : app.remaining())
    if (!w.empty() && w[0] != '-') return "unknown subcommand '" + w + "'; expected one of: " + names;
  if (dynamic_cast<const CLI::RequiredError*>(&e)) return "a subcommand is required; expected one of: " + names;
  return e.what();
}
}  // namespace

std::string error_text(const std::exception& e, const std::string& subcommand) {
  const std::string during = subcommand.empty() ? "" : " while running '" + subcommand + "'";
  if (dynamic_cast<const std::bad_alloc*>(&e))
    return "out of memory" + during + " (an allocation failed; try smaller inputs: batch, length, examples, beam)";
  const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
  const std::string msg = error_message(e);
  const bool oom = msg.find("can't allocate memory") != std::string::npos || msg.find("out of memory") != std::string::npos;
  if (torch_error && oom) {
    const double bytes = tried_to_allocate(msg);
    return "out of memory" + during + (bytes > 0 ? ": an allocation of " + format_gib(bytes) + " failed" : ": " + msg);
  }
  return msg;
}

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  static NullBuffer null_buffer;
  static std::ostream null_out(&null_buffer);
  Context ctx{is_secondary_rank() ? null_out : out, err};
  CLI::App app{"headprune: find which attention heads of a Transformer matter, remove the rest, measure the trade-off"};
  app.set_version_flag("--version", "headprune " HP_VERSION_STRING);
  app.add_option("--threads", ctx.threads, "CPU threads for tensor math (0 = all cores)")
      ->check(int_range(0, 4 * hardware_threads()));  // more only slows ATen and OpenBLAS down
  app.add_option("--seed", ctx.seed, "random seed")->check(at_least(0));
  app.add_option("--device", ctx.device, "where models run: cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--dtype", ctx.dtype, "weights as loaded: auto (as the files store them), fp32, bf16 or f16")
      ->check(CLI::IsMember({"auto", "fp32", "bf16", "f16"}))
      ->capture_default_str();
  app.add_option("--dist-timeout", ctx.dist_timeout,
                 "seconds a process of a multi-process run waits for the others (joining, and each exchange)")
      ->check(real_range(0, 1e6, true))  // longer overflows the millisecond count
      ->capture_default_str();
  app.add_option("--log-level", ctx.log_level, "error, warn, info or debug")
      ->check(CLI::IsMember({"error", "warn", "info", "debug"}));
  app.require_subcommand(1);
  app.fallthrough();  // global options may also follow the subcommand
  register_demo(app, ctx);
  register_info(app, ctx);
  register_train(app, ctx);
  register_eval(app, ctx);
  register_generate(app, ctx);
  register_importance(app, ctx);
  register_prune(app, ctx);
  register_gates(app, ctx);
  register_roles(app, ctx);
  register_tokenize(app, ctx);
  register_plot(app, ctx);
  register_report(app, ctx);
  register_launch(app, ctx);
  try {
    app.parse(argc, argv);
    return 0;
  } catch (const ExitCode& e) {
    return e.code;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e, out, err);  // --help (of the subcommand), --version
    err << "error: " << usage_text(app, e) << "\nRun with --help for usage.\n";
    return 2;
  } catch (const std::exception& e) {
    const auto subs = app.get_subcommands();
    err << "error: " << error_text(e, subs.empty() ? "" : subs.front()->get_name()) << "\n";
    return 1;
  }
}

}  // namespace hp::cli
