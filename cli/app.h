// The headprune command line: global options, subcommand registration, error handling.
// Each subcommand file binds its options to a library request struct, calls the one job function
// (include/headprune/jobs/) and prints its result.
#pragma once

#include <cstdint>
#include <exception>
#include <iosfwd>
#include <string>

#include "headprune/util/runtime.h"

namespace CLI {
class App;
}

namespace hp::cli {

struct Context {
  std::ostream& out;  // results (tables, JSON)
  std::ostream& err;  // messages
  int threads = 0;    // 0 = all cores
  uint64_t seed = 1234;
  std::string device = "cpu";
  std::string dtype = "auto";
  std::string log_level = "info";
  double dist_timeout = 300;  // seconds: rendezvous and each collective of a multi-process run
};

// Thrown by a subcommand whose result is an exit status of its own (launch: a child's).
struct ExitCode {
  int code;
};

// Whether this process is a rank other than 0 of a multi-process run (read from the launch
// variables, so it holds before the process group is joined): its results and progress are rank 0's.
bool is_secondary_rank();

// Parses argv and runs the chosen subcommand; returns the process exit code. Never throws:
// errors are printed as "error: ..." on ctx.err with exit code 1 (2 for usage errors).
int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// An error's message as the user reads it (after "error: "): LibTorch's errors cut to their first
// line (no C++ stack frames); a failed allocation (std::bad_alloc, LibTorch's "can't allocate
// memory") as "out of memory while running 'SUBCOMMAND'" with the size it asked for.
std::string error_text(const std::exception& e, const std::string& subcommand);

// Called once per subcommand (defined in the subcommand's own file).
void register_demo(CLI::App& app, Context& ctx);
void register_info(CLI::App& app, Context& ctx);        // info, export
void register_train(CLI::App& app, Context& ctx);       // train, init
void register_eval(CLI::App& app, Context& ctx);        // eval, bench
void register_generate(CLI::App& app, Context& ctx);    // generate
void register_importance(CLI::App& app, Context& ctx);  // importance, agreement
void register_prune(CLI::App& app, Context& ctx);       // prune, curve
void register_gates(CLI::App& app, Context& ctx);
void register_roles(CLI::App& app, Context& ctx);
void register_tokenize(CLI::App& app, Context& ctx);    // tokenize
void register_launch(CLI::App& app, Context& ctx);      // launch
void register_plot(CLI::App& app, Context& ctx);        // plot
void register_report(CLI::App& app, Context& ctx);      // report

// Applies --threads, --seed, --device and --log-level; every subcommand calls it first and passes
// the Runtime to its job.
Runtime start(const Context& ctx);

}  // namespace hp::cli
