// OpenBLAS kernel inspection and selection (see header).
#include "headprune/util/blas.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <map>
#include <sstream>

namespace hp {

namespace {

// Instruction-set level of OpenBLAS 0.3.21's x86-64 kernel sets (DYNAMIC_ARCH core names).
int core_level(const std::string& core) {
  static const std::map<std::string, int> levels = {
      {"Prescott", 1},   {"Core2", 1},      {"Penryn", 1},     {"Dunnington", 1}, {"Nehalem", 1},
      {"Atom", 1},       {"Opteron", 1},    {"Opteron_SSE3", 1}, {"Barcelona", 1}, {"Bobcat", 1},
      {"Nano", 1},       {"Sandybridge", 2}, {"Bulldozer", 2}, {"Piledriver", 2}, {"Steamroller", 2},
      {"Excavator", 2},  {"Haswell", 3},    {"Zen", 3},        {"SkylakeX", 4},   {"Cooperlake", 4},
      {"SapphireRapids", 4}};
  const auto it = levels.find(core);
  return it == levels.end() ? 0 : it->second;
}

const char* level_name(int level) {
  switch (level) {
    case 1: return "sse3";
    case 2: return "avx";
    case 3: return "avx2";
    case 4: return "avx512";
  }
  return "unknown";
}

int level_of_name(const std::string& name) {
  for (int l = 1; l <= 4; ++l)
    if (name == level_name(l)) return l;
  return 0;
}

// The best kernel set of each level, by measurement (docs/benchmarks.md, "BLAS kernels").
const char* best_core(int level) {
  switch (level) {
    case 2: return "Sandybridge";
    case 3: return "Haswell";
    case 4: return "SkylakeX";
  }
  return "";
}

int cpu_level() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  // libgcc checks that the OS saves the wider registers too (XCR0), not only the CPUID bits.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return 4;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 3;
  if (__builtin_cpu_supports("avx")) return 2;
  if (__builtin_cpu_supports("sse3")) return 1;
#endif
  return 0;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The Debian BLAS alternative LibTorch links, when this process has loaded it (not loading it).
void* loaded_blas() { return ::dlopen("libblas.so.3", RTLD_NOW | RTLD_NOLOAD); }

// OpenBLAS's corename function: in the global scope (a program linked with LibTorch, the launcher), or
// in libblas.so.3 loaded as a dependency of a library opened with RTLD_LOCAL (Python's extensions),
// which a global lookup does not see.
using StrFn = char* (*)();
StrFn openblas_corename() {
  if (void* f = ::dlsym(RTLD_DEFAULT, "openblas_get_corename")) return reinterpret_cast<StrFn>(f);
  void* h = loaded_blas();
  if (!h) return nullptr;
  void* f = ::dlsym(h, "openblas_get_corename");
  ::dlclose(h);  // RTLD_NOLOAD took a reference; the library stays loaded
  return reinterpret_cast<StrFn>(f);
}

constexpr const char* kChoiceVars[] = {"OPENBLAS_CORETYPE", "HP_BLAS_CHOSEN_TO", "HP_BLAS_CHOSEN_FROM"};

}  // namespace

std::string recommended_blas_core(const std::string& loaded, const std::string& cpu) {
  const int have = core_level(loaded), can = level_of_name(cpu);
  if (have == 0 || can == 0 || have >= can) return "";
  return best_core(can);
}

BlasKernels inspect_blas_kernels() {
  BlasKernels k;
  const StrFn core = openblas_corename();
  k.cpu_level = level_name(cpu_level());
  const std::string var = env("OPENBLAS_CORETYPE"), chosen_to = env("HP_BLAS_CHOSEN_TO");
  if (!var.empty() && var == chosen_to) {
    k.chosen_from = env("HP_BLAS_CHOSEN_FROM");
  } else if (env("HP_BLAS_TREAT_AS_DETECTED") != "1") {
    // (HP_BLAS_TREAT_AS_DETECTED=1, for tests only: a preset OPENBLAS_CORETYPE stands for OpenBLAS's
    // own detection, so that the restart can be tested on any CPU.)
    k.user_setting = var;
  }
  if (!core) {
    k.reason = "the loaded BLAS is not OpenBLAS; its kernels are its own choice";
    return k;
  }
  k.openblas = true;
  k.loaded = core();
  const std::string better = recommended_blas_core(k.loaded, k.cpu_level);
  k.recommended = better.empty() ? k.loaded : better;
  if (!k.user_setting.empty()) {
    k.reason = "OpenBLAS runs " + k.loaded + " kernels: OPENBLAS_CORETYPE=" + k.user_setting + " was set by the user";
  } else if (!k.chosen_from.empty()) {
    k.reason = "OpenBLAS runs " + k.loaded + " kernels, chosen by headprune: OpenBLAS picked " + k.chosen_from +
               " on this CPU (" + k.cpu_level + "; set OPENBLAS_CORETYPE to choose yourself)";
  } else if (better.empty()) {
    k.reason = "OpenBLAS runs " + k.loaded + " kernels, its own choice for this CPU (" + k.cpu_level + ")";
  } else {
    // With HP_BLAS_AUTO=0 the user turned the choice off: only setting the variable helps then.
    const std::string how = env("HP_BLAS_AUTO") == "0" ? "; HP_BLAS_AUTO=0 keeps headprune from choosing"
                                                        : "; in Python, import headprune before torch";
    k.reason = "OpenBLAS runs " + k.loaded + " kernels on a CPU with " + k.cpu_level + "; " + better +
               " would be faster (set OPENBLAS_CORETYPE=" + better + " before the program starts" + how + ")";
  }
  return k;
}

bool choose_blas_kernels() {
  if (env("HP_BLAS_AUTO") == "0") return false;
  const BlasKernels k = inspect_blas_kernels();
  if (!k.should_switch()) return false;
  if (::setenv("OPENBLAS_CORETYPE", k.recommended.c_str(), 1) == 0 &&
      ::setenv("HP_BLAS_CHOSEN_TO", k.recommended.c_str(), 1) == 0 &&
      ::setenv("HP_BLAS_CHOSEN_FROM", k.loaded.c_str(), 1) == 0)
    return true;
  for (const char* v : kChoiceVars) ::unsetenv(v);
  return false;
}

void use_best_blas_kernels(char** argv) {
  if (!choose_blas_kernels()) return;
  ::execv("/proc/self/exe", argv);
  // exec failed (no /proc?): go on with the kernels we have, and do not pretend otherwise.
  for (const char* v : kChoiceVars) ::unsetenv(v);
}

namespace {

// The child of blas_choice_for_later_load: loads OpenBLAS, chooses, writes "NAME=value" lines, exits.
[[noreturn]] void choose_in_child(int fd) {
  std::string out;
  if (::dlopen("libblas.so.3", RTLD_NOW | RTLD_GLOBAL) != nullptr && choose_blas_kernels())
    for (const char* v : kChoiceVars) out += std::string(v) + "=" + env(v) + "\n";
  for (size_t at = 0; at < out.size();) {
    const ssize_t n = ::write(fd, out.data() + at, out.size() - at);
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
  ::_exit(0);
}

// What the child wrote, until it closes its end or the deadline passes ("" then, and *late = true).
std::string read_until_closed(int fd, std::chrono::milliseconds limit, bool* late) {
  std::string got;
  const auto end = std::chrono::steady_clock::now() + limit;
  char buf[256];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) {
      *late = true;
      return "";
    }
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return got;
    got.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> blas_choice_for_later_load() {
  std::vector<std::pair<std::string, std::string>> vars;
  if (env("HP_BLAS_AUTO") == "0") return vars;
  if (void* h = loaded_blas()) {  // too late: its kernels are chosen (inspect_blas_kernels says which)
    ::dlclose(h);
    return vars;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return vars;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    choose_in_child(fds[1]);
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return vars;
  }
  // A process with other threads may have forked while one of them held a lock the child needs
  // (the loader's, malloc's): the child is then given up on, and nothing is chosen.
  bool late = false;
  const std::string got = read_until_closed(fds[0], std::chrono::seconds(10), &late);
  ::close(fds[0]);
  if (late) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::istringstream lines(got);
  for (std::string line; std::getline(lines, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos && eq > 0) vars.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return vars;
}

}  // namespace hp
