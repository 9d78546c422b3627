// Launching the processes of a data-parallel job (see header). POSIX and Linux (PR_SET_PDEATHSIG).
#include "headprune/util/launch.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <thread>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "headprune/util/dist.h"

extern char** environ;

namespace hp {
namespace {

volatile std::sig_atomic_t g_forward = 0;  // a signal the launcher received, to pass on to the children
void remember_signal(int sig) { g_forward = sig; }

std::string describe(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

int exit_code(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

// The run's private directory for the children's file store: created with mode 0700 under a unique
// name (mkdtemp), removed with what is in it (the store file; no subdirectories) when the run ends.
class StoreDir {
 public:
  StoreDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/headprune-launch-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("launch: cannot create a directory for the rendezvous in " +
                               pattern.substr(0, pattern.rfind('/')) + " (" + std::strerror(errno) +
                               "); set TMPDIR to a writable directory");
    path_ = pattern;
  }
  ~StoreDir() {
    if (DIR* d = ::opendir(path_.c_str())) {
      while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") ::unlink((path_ + "/" + name).c_str());
      }
      ::closedir(d);
    }
    ::rmdir(path_.c_str());
  }
  StoreDir(const StoreDir&) = delete;
  StoreDir& operator=(const StoreDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("launch: cannot open a socket (") + std::strerror(errno) + ")");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("launch: cannot find a free port (" + why + ")");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

namespace {

void validate(const LaunchOptions& opts) {
  if (opts.nproc < 1) throw std::invalid_argument("launch: --nproc must be at least 1");
  if (opts.argv.empty()) throw std::invalid_argument("launch: no command to run (put it after --)");
  if (opts.master_port < 0 || opts.master_port > 65535) throw std::invalid_argument("launch: --master-port must be in [0, 65535]");
  if (opts.grace_s < 0) throw std::invalid_argument("launch: the grace period must be >= 0");
}

// Set in every child to the launcher's process id (a launch inside a child is refused while it runs).
constexpr const char* kLauncherVariable = "HP_LAUNCHED_BY";

// The command and each child's environment, built before the first fork: between fork and exec a
// child only calls async-signal-safe functions. The pointers point into the strings held here.
class ChildCommands {
 public:
  ChildCommands(const LaunchOptions& opts, int port, const std::string& store_file)
      : envs_(static_cast<size_t>(opts.nproc)), env_ptrs_(static_cast<size_t>(opts.nproc)) {
    std::vector<std::string> base_env;  // ours replaced
    const std::vector<std::string> ours = {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "MASTER_ADDR=",
                                           "MASTER_PORT=", "GROUP_RANK=", std::string(dist::kStoreFileVariable) + "=",
                                           std::string(kLauncherVariable) + "="};
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      bool replaced = false;
      for (const auto& k : ours) replaced = replaced || kv.rfind(k, 0) == 0;
      if (!replaced) base_env.push_back(kv);
    }
    for (const auto& a : opts.argv) args_.push_back(const_cast<char*>(a.c_str()));
    args_.push_back(nullptr);
    for (int r = 0; r < opts.nproc; ++r) {
      auto& e = envs_[static_cast<size_t>(r)];
      e = base_env;
      e.push_back("RANK=" + std::to_string(r));
      e.push_back("LOCAL_RANK=" + std::to_string(r));
      e.push_back("GROUP_RANK=0");
      e.push_back("WORLD_SIZE=" + std::to_string(opts.nproc));
      e.push_back("LOCAL_WORLD_SIZE=" + std::to_string(opts.nproc));
      e.push_back("MASTER_ADDR=" + opts.master_addr);
      e.push_back("MASTER_PORT=" + std::to_string(port));
      e.push_back(std::string(dist::kStoreFileVariable) + "=" + store_file);
      e.push_back(std::string(kLauncherVariable) + "=" + std::to_string(::getpid()));
      for (auto& s : e) env_ptrs_[static_cast<size_t>(r)].push_back(s.data());
      env_ptrs_[static_cast<size_t>(r)].push_back(nullptr);
    }
  }
  ChildCommands(const ChildCommands&) = delete;
  ChildCommands& operator=(const ChildCommands&) = delete;

  // In the child after fork: exec the command as rank r (never returns).
  [[noreturn]] void exec(int r, pid_t parent) const {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);  // the launcher died before prctl took effect
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execvpe(args_[0], args_.data(), env_ptrs_[static_cast<size_t>(r)].data());
    const char msg[] = "launch: cannot execute the command\n";
    if (::write(2, msg, sizeof msg - 1) < 0) { /* nothing more to do */ }
    ::_exit(127);
  }

 private:
  std::vector<char*> args_;
  std::vector<std::vector<std::string>> envs_;
  std::vector<std::vector<char*>> env_ptrs_;
};

// SIGINT and SIGTERM are remembered (g_forward) while it lives, to be passed on to the children.
class SignalCatcher {
 public:
  SignalCatcher() {
    struct sigaction sa {};
    sa.sa_handler = remember_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
    g_forward = 0;
  }
  ~SignalCatcher() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  SignalCatcher(const SignalCatcher&) = delete;
  SignalCatcher& operator=(const SignalCatcher&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

using Running = std::map<pid_t, int>;  // pid -> rank

void signal_all(const Running& running, int sig) {
  for (const auto& [pid, rank] : running) ::kill(pid, sig);
}

// Forks every child; if one cannot be started, the ones that were are killed and reaped.
Running start_children(const ChildCommands& commands, int nproc) {
  const pid_t parent = ::getpid();
  Running running;
  for (int r = 0; r < nproc; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      const std::string why = std::strerror(errno);
      signal_all(running, SIGKILL);
      for (const auto& kv : running) ::waitpid(kv.first, nullptr, 0);
      throw std::runtime_error("launch: cannot start process " + std::to_string(r) + " (" + why + ")");
    }
    if (pid == 0) commands.exec(r, parent);
    running[pid] = r;
  }
  return running;
}

// Waits for every child. The first failure (or a signal to the launcher) stops the others: SIGTERM,
// then SIGKILL after the grace period. Returns 0, or the first failure's exit code.
int supervise(Running& running, const LaunchOptions& opts, const std::function<void(const std::string&)>& note) {
  using clock = std::chrono::steady_clock;
  const auto grace = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(opts.grace_s));
  clock::time_point kill_at{};
  bool terminating = false, failed = false;
  int result = 0;
  while (!running.empty()) {
    if (g_forward && !terminating) {
      note("received signal " + std::to_string(static_cast<int>(g_forward)) + "; stopping the processes");
      signal_all(running, static_cast<int>(g_forward));
      terminating = true;
      kill_at = clock::now() + grace;
      if (!failed) {
        failed = true;
        result = 128 + static_cast<int>(g_forward);
      }
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      const auto it = running.find(pid);
      if (it == running.end()) continue;
      const int rank = it->second;
      running.erase(it);
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && !failed) {
        failed = true;
        result = exit_code(status);
        note("process " + std::to_string(rank) + " (pid " + std::to_string(pid) + ") " + describe(status) +
             (running.empty() ? "" : "; stopping the other " + std::to_string(running.size())));
      }
      if (failed && !terminating && !running.empty()) {
        signal_all(running, SIGTERM);
        terminating = true;
        kill_at = clock::now() + grace;
      }
      continue;
    }
    if (pid < 0 && errno != EINTR && errno != ECHILD) break;
    if (terminating && clock::now() >= kill_at) {
      signal_all(running, SIGKILL);
      kill_at = clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return result;
}

}  // namespace

int launch(const LaunchOptions& opts) {
  validate(opts);
  // Inside a launch already (a launcher that is still running started this process or an ancestor):
  // the inner launch would start its processes in every one of the outer's, each job run that many
  // times over (issue 78). A variable merely inherited from a launcher that has ended is no reason.
  const char* launcher = std::getenv(kLauncherVariable);
  const long outer = launcher ? std::strtol(launcher, nullptr, 10) : 0;
  if (outer > 0 && (::kill(static_cast<pid_t>(outer), 0) == 0 || errno == EPERM)) {
    const char* rank = std::getenv("RANK");
    const char* world = std::getenv("WORLD_SIZE");
    throw std::invalid_argument(std::string("launch: this process is already rank ") + (rank ? rank : "?") + " of " +
                                (world ? world : "?") + " started by launch; a launch inside it would run every job "
                                "once per outer process: give the command without the inner launch");
  }
  auto note = [&](const std::string& s) {
    if (opts.note) opts.note(s);
  };
  const int port = opts.master_port > 0 ? opts.master_port : free_local_port();
  const StoreDir store_dir;  // removed on every way out of this function
  const ChildCommands commands(opts, port, store_dir.path() + "/store");
  const SignalCatcher signals;  // the handlers are put back on every way out
  Running running = start_children(commands, opts.nproc);
  note("started " + std::to_string(opts.nproc) + " processes (rendezvous in " + store_dir.path() +
       ", connections on " + opts.master_addr + ")");
  return supervise(running, opts, note);
}

}  // namespace hp
