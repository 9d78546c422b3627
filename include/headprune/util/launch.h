// Starts one data-parallel job of several processes on this machine, as `torchrun --nproc_per_node N`
// does, for users without Python: each child gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT (util/dist.h reads them). If one child fails (non-zero exit, or killed
// by a signal), the others are stopped (SIGTERM, then SIGKILL after a grace period) and its status is
// returned; children also receive SIGTERM when the launcher itself dies.
//
// One machine only: the children meet through a file store (HP_DIST_STORE_FILE) in a directory the
// launcher creates for the run (mode 0700, a unique name under $TMPDIR or /tmp) and removes when the
// run ends, and their Gloo connections listen on master_addr alone (loopback by default): nothing
// listens on another interface.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace hp {

struct LaunchOptions {
  int nproc = 2;
  std::string master_addr = "127.0.0.1";  // where the children's connections listen
  int master_port = 0;            // 0: a free port of this machine
  std::vector<std::string> argv;  // the program (found on PATH unless it contains '/') and its arguments
  double grace_s = 10;            // from SIGTERM to SIGKILL when the others are stopped
  std::function<void(const std::string&)> note;  // status lines (which child failed and how); optional
};

// Runs the children to the end. Returns 0 when every child exited with 0, else the first failure's
// exit code (128 + signal number for a child killed by a signal). Bad options are
// std::invalid_argument; a child that cannot be started is std::runtime_error.
int launch(const LaunchOptions& opts);

// A TCP port on 127.0.0.1 that nothing listens on now (the kernel's choice).
int free_local_port();

}  // namespace hp
