// A way for whoever runs a long job to stop it soon: a check (the Python module's: Ctrl-C) set for
// the thread that runs the job, run by interruption_point() at most every 100 ms. Every attention and
// feed-forward layer calls it (model/attention.cc, model/layers.cc), so a job stops within about one
// layer's work of the request, whichever path it computes by; the check stops the job by throwing.
#pragma once

#include <functional>

namespace hp {

// Sets this thread's check while it lives (the one before comes back after it).
class InterruptCheck {
 public:
  explicit InterruptCheck(std::function<void()> check);
  ~InterruptCheck();
  InterruptCheck(const InterruptCheck&) = delete;
  InterruptCheck& operator=(const InterruptCheck&) = delete;

 private:
  std::function<void()> previous_;
};

// Runs this thread's check when one is set and 100 ms have passed since it last ran.
void interruption_point();

}  // namespace hp
