// AdamW (decoupled weight decay) with a state that saves and restores exactly, plus the
// learning-rate schedules. Head masks are buffers, not parameters: the optimizer never
// touches them, so masked heads stay masked while the rest of the model trains.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "headprune/model/state.h"

namespace hp {

enum class LrSchedule { Constant, Linear, InverseSqrt };
LrSchedule parse_lr_schedule(const std::string& s);  // constant | linear | inverse_sqrt
std::string to_string(LrSchedule s);

// Learning rate for update number `step` (1-based): linear warm-up over `warmup` steps, then
// constant, linear decay to 0 at max_steps, or peak * sqrt(warmup / step).
double lr_at(int64_t step, double peak, int64_t warmup, int64_t max_steps, LrSchedule schedule);

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.98, eps = 1e-8, weight_decay = 0.01;
};

class AdamW {
 public:
  // Biases and LayerNorm weights get no weight decay.
  AdamW(std::vector<std::pair<std::string, torch::Tensor>> params, AdamWOptions opts);
  // Every parameter of a module, by its name there.
  AdamW(const torch::nn::Module& module, AdamWOptions opts);
  void step(double lr);
  void zero_grad();
  int64_t steps() const { return steps_; }
  // "<param>.exp_avg", "<param>.exp_avg_sq" and "step".
  TensorMap state() const;
  void load_state(const TensorMap& state, const std::string& source);
  std::vector<torch::Tensor> parameters() const;

 private:
  struct Slot {
    std::string name;
    torch::Tensor param, exp_avg, exp_avg_sq;
    bool decay;
  };
  std::vector<Slot> slots_;
  AdamWOptions opts_;
  int64_t steps_ = 0;
};

}  // namespace hp
