// A SIGBUS from a truncated mapping, turned into an error (see header).
#include "headprune/util/mapped_files.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

namespace hp {
namespace {

// The signal handler reads only these atomics (no locks, no allocation); the paths are read outside it.
constexpr size_t kMappedSlots = 4096;
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<size_t> len{0};
  std::atomic<bool> truncated{false};
};
std::array<Slot, kMappedSlots> g_mapped_slots;
std::array<std::string, kMappedSlots> g_mapped_paths;  // guarded by g_mapped_mu
std::mutex g_mapped_mu;
struct sigaction g_previous_sigbus {};
std::atomic<uintptr_t> g_mapped_page{4096};

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto a = reinterpret_cast<uintptr_t>(info->si_addr);
  for (auto& s : g_mapped_slots) {
    const uintptr_t b = s.begin.load(std::memory_order_acquire);
    const size_t n = s.len.load(std::memory_order_acquire);
    if (b == 0 || a < b || a >= b + n) continue;
    const uintptr_t p = a / g_mapped_page.load() * g_mapped_page.load();
    // Zero pages from the faulting one to the mapping's end: the file ends before them now.
    if (::mmap(reinterpret_cast<void*>(p), b + n - p, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
               -1, 0) != MAP_FAILED) {
      s.truncated.store(true);
      return;  // the read is done again, on the zero pages
    }
    break;
  }
  // Not a mapping of ours: what was there before (the default ends the process with "Bus error").
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) && g_previous_sigbus.sa_sigaction != nullptr) {
    g_previous_sigbus.sa_sigaction(sig, info, context);
  } else if (g_previous_sigbus.sa_handler != SIG_IGN && g_previous_sigbus.sa_handler != SIG_DFL && g_previous_sigbus.sa_handler != nullptr) {
    g_previous_sigbus.sa_handler(sig);
  } else {
    ::signal(SIGBUS, SIG_DFL);  // returning faults again, now with the default action
  }
}

void install_sigbus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_mapped_page.store(static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE)));
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous_sigbus);
  });
}

}  // namespace

int register_mapping(const void* addr, size_t len, const std::string& path) {
  install_sigbus_handler();
  std::lock_guard<std::mutex> lock(g_mapped_mu);
  for (size_t i = 0; i < kMappedSlots; ++i) {
    if (g_mapped_slots[i].begin.load() != 0) continue;
    g_mapped_paths[i] = path;
    g_mapped_slots[i].truncated.store(false);
    g_mapped_slots[i].len.store(len);
    g_mapped_slots[i].begin.store(reinterpret_cast<uintptr_t>(addr), std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;
}

void unregister_mapping(int slot) {
  if (slot < 0 || static_cast<size_t>(slot) >= kMappedSlots) return;
  std::lock_guard<std::mutex> lock(g_mapped_mu);
  g_mapped_slots[slot].begin.store(0, std::memory_order_release);
  g_mapped_slots[slot].len.store(0);
  g_mapped_paths[slot].clear();
}

void check_mapped_files() {
  std::string files;
  {
    std::lock_guard<std::mutex> lock(g_mapped_mu);
    for (size_t i = 0; i < kMappedSlots; ++i)
      if (g_mapped_slots[i].begin.load() != 0 && g_mapped_slots[i].truncated.load()) files += (files.empty() ? "" : ", ") + g_mapped_paths[i];
  }
  if (!files.empty())
    throw std::runtime_error(files + ": the file was truncated while headprune had it mapped (re-saved in place?); "
                             "the weights read from it since are not valid: load the model again");
}

}  // namespace hp
