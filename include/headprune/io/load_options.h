// How a checkpoint (headprune's or HF's) is loaded: its weights are mapped from their files and used
// in place, in their stored dtype, unless asked otherwise.
#pragma once

#include <optional>

#include <torch/torch.h>

#include "headprune/model/state.h"

namespace hp {

struct LoadOptions {
  std::optional<torch::ScalarType> dtype;  // every floating weight in this dtype (a copy); unset: as stored
  bool check_finite = true;                // refuse NaN/Inf weights (reads every weight once; `info` skips it)

  LoadStateOptions state() const {  // what load_state_strict is given: the mapped tensors themselves
    LoadStateOptions o;
    o.share = true;
    o.check_finite = check_finite;
    o.dtype = dtype;
    return o;
  }
};

}  // namespace hp
