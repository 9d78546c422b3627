// This thread's interrupt check (see header).
#include "headprune/util/interrupt.h"

#include <chrono>
#include <utility>

namespace hp {
namespace {
thread_local std::function<void()> t_interrupt_check;
thread_local std::chrono::steady_clock::time_point t_interrupt_last;
}  // namespace

InterruptCheck::InterruptCheck(std::function<void()> check) : previous_(std::move(t_interrupt_check)) { t_interrupt_check = std::move(check); }

InterruptCheck::~InterruptCheck() { t_interrupt_check = std::move(previous_); }

void interruption_point() {
  if (!t_interrupt_check) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - t_interrupt_last < std::chrono::milliseconds(100)) return;
  t_interrupt_last = now;
  t_interrupt_check();
}

}  // namespace hp
