// `headprune launch --nproc N -- SUBCOMMAND ...`: options -> LaunchOptions -> util/launch.h.
#include <climits>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <unistd.h>

#include "common.h"
#include "headprune/util/launch.h"

namespace hp::cli {
namespace {
// This program's own path, so the children run the same build.
std::string own_executable() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("launch: cannot find this program's path (/proc/self/exe)");
  return std::string(buf, static_cast<size_t>(n));
}
}  // namespace

void register_launch(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<LaunchOptions>();
  auto command = std::make_shared<std::vector<std::string>>();
  auto* sub = app.add_subcommand(
      "launch", "Run a subcommand as N processes of one data-parallel job on this machine (like torchrun)");
  sub->add_option("--nproc", o->nproc, "processes to start")->check(int_range(1, 1024))->capture_default_str();
  sub->add_option("--master-addr", o->master_addr, "address of rank 0's rendezvous")->capture_default_str();
  sub->add_option("--master-port", o->master_port, "its port (0 = a free one)")
      ->check(int_range(0, 65535))
      ->capture_default_str();
  sub->add_option("--grace", o->grace_s, "seconds between SIGTERM and SIGKILL when the others are stopped")
      ->check(real_range(0, 86400))
      ->capture_default_str();
  sub->add_option("command", *command, "the headprune subcommand and its options, after --")->required();
  sub->footer("Example: headprune launch --nproc 2 -- train --config configs/sst2.json --out runs/sst2\n"
              "Each process gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT; "
              "if one fails, the others are stopped and its exit status is returned.");
  sub->callback([&ctx, o, command] {
    o->argv = {own_executable()};
    o->argv.insert(o->argv.end(), command->begin(), command->end());
    std::ostream* err = &ctx.err;
    o->note = [err](const std::string& line) { *err << "[launch] " << line << "\n"; };
    const int rc = launch(*o);
    if (rc != 0) throw ExitCode{rc};
  });
}

}  // namespace hp::cli
