// Applying a plan: mask, remove, fine-tune, save and check (see the header).
#include "headprune/jobs/apply_plan.h"

#include <algorithm>
#include <iomanip>
#include <ostream>

#include "headprune/data/dataset.h"
#include "headprune/io/checkpoint.h"
#include "headprune/io/files.h"
#include "headprune/io/safetensors.h"
#include "headprune/model/precision.h"
#include "headprune/model/remove_heads.h"
#include "headprune/prune/pruning.h"
#include "headprune/util/runtime.h"

namespace hp {

namespace {

// The first examples of a set, collated on the model's device, for the output checks.
Batch check_batch(const EvalSet& set, TransformerImpl& model) {
  const size_t n = std::min<size_t>(64, set.examples.size());
  const std::vector<Example> head(set.examples.begin(), set.examples.begin() + static_cast<std::ptrdiff_t>(n));
  return collate(head, model.config().arch, model.config().pad_id).to(model.parameters().front().device());
}

// A model's logits on a batch in eval mode (its mode restored), as fp32.
torch::Tensor logits_of(TransformerImpl& m, const Batch& batch) {
  torch::NoGradGuard no_grad;
  const bool training = m.is_training();
  m.eval();
  auto l = m.forward(batch).logits.to(torch::kFloat);
  m.train(training);
  return l;
}

}  // namespace

nlohmann::json PlanChecks::to_json() const {
  return {{"masked_vs_removed_max_abs_diff", masked_vs_removed ? nlohmann::json(*masked_vs_removed) : nlohmann::json(nullptr)},
          {"reloaded_max_abs_diff", reloaded}};
}

void PlanChecks::print(std::ostream& out) const {
  out << "checks: ";
  if (masked_vs_removed) out << "masked vs removed max |diff| " << std::scientific << std::setprecision(1) << *masked_vs_removed << "; ";
  out << "reloaded max |diff| " << std::scientific << std::setprecision(1) << reloaded << std::defaultfloat << "\n";
}

namespace {
// A model loaded in f16 that computes in fp32 (the CPU: model/precision.h) is saved in f16 again, as it
// came: its weights rounded back to fp16 first (exact unless fine-tuned), so that the logits checked
// after saving are the saved model's. Returns the dtype to save in (none: as held).
std::optional<torch::ScalarType> round_to_f16_as_loaded(torch::ScalarType loaded, TransformerImpl& result) {
  if (loaded != torch::kHalf || result.parameters().front().scalar_type() != torch::kFloat) return std::nullopt;
  torch::NoGradGuard no_grad;
  for (auto& t : result.parameters()) t.set_data(t.detach().to(torch::kHalf).to(torch::kFloat));
  return torch::kHalf;
}
}  // namespace

PlanChecks apply_plan(JobInputs& in, const PruningPlan& plan, const std::string& dir, const EvalSet& set,
                      const PlanApplication& how, StageTable& stages) {
  PlanChecks checks;
  auto& model = *in.model();
  model.eval();
  const bool distill = how.finetune.distills();
  if (distill && how.mask_only)
    throw std::invalid_argument("distillation needs the unpruned model beside the pruned one: remove the heads "
                                "(without --mask-only) to fine-tune with --distill-weight or --distill-hidden");
  std::vector<torch::Tensor> masks_before;  // the teacher's masks: the model as loaded
  if (distill)
    for (auto& g : model.head_masks()) masks_before.push_back(g.mask.detach().clone());
  model.mask_heads(plan.heads);
  stages.record("masked", model, set, how.measure);
  Transformer result{nullptr};
  if (how.mask_only) {
    result = in.model();
  } else {
    // Heads masked before the plan keep their mask. Without fine-tuning the pruned model holds the
    // untouched tensors of the loaded one (views into its mapped files): no second copy of the weights,
    // and each layer's replaced attention weights leave memory as soon as they are sliced (the loaded
    // model is not used again: its masked logits are taken first).
    const Batch check = check_batch(set, model);
    const torch::Tensor masked_logits = logits_of(model, check);
    const bool share = how.finetune.steps == 0;
    const ReplacedFn release = [](const std::vector<torch::Tensor>& old) {
      for (const auto& t : old) release_mapped_pages(t);
    };
    result = remove_heads(model, plan.heads, share, share ? release : ReplacedFn());
    if (!distill) in.loaded.model = Transformer{nullptr};  // `model` is gone from here on (unless it teaches)
    stages.record("removed", *result, set, how.measure);
    checks.masked_vs_removed = (logits_of(*result, check) - masked_logits).abs().max().item<double>();
  }
  const auto& extras = in.loaded.tokenizer_files;  // the tokenizer travels with the pruned model
  if (how.finetune.steps > 0) {
    // Budhraja et al.: how the kept heads' importance shifts with fine-tuning (unnormalized gradient
    // importance before and after, on the scoring data).
    ScoreOptions raw = how.score;
    raw.normalize = Normalization::None;
    raw.progress = nullptr;
    HeadScores before;
    if (how.compensation) before = score_heads(*result, in.score_set(), ScoreMethod::Gradient, raw);
    TrainOptions to = in.finetune_options(how.finetune);
    if (distill) {  // the unpruned model as loaded teaches the pruned one
      torch::NoGradGuard no_grad;
      size_t i = 0;
      for (auto& g : in.loaded.model->head_masks()) g.mask.copy_(masks_before[i++]);
      to.teacher = in.loaded.model.ptr();
    }
    train_model(result, in.train_data(), to, join_path(dir, "finetune"), extras);
    to.teacher.reset();
    in.loaded.model = Transformer{nullptr};
    result->eval();
    stages.record("fine-tuned", *result, set, how.measure);
    if (how.compensation) checks.compensation = compensation(before, score_heads(*result, in.score_set(), ScoreMethod::Gradient, raw));
  }
  // The saved model's logits on the check batch, taken before it is saved; then the loaded model goes
  // (the weights it maps stay resident only while something uses them), and the checkpoint just
  // written is read back and compared: memory holds one model's weights at a time.
  const std::optional<torch::ScalarType> save_as = round_to_f16_as_loaded(in.loaded.dtype, *result);
  const Batch check = check_batch(set, *result);
  const torch::Tensor expected = logits_of(*result, check);
  save_checkpoint(join_path(dir, "model"), *result, extras, save_as);
  save_plan(join_path(dir, "plan.json"), plan);
  result = Transformer{nullptr};
  in.loaded.model = Transformer{nullptr};
  trim_heap();  // the sliced layers' memory goes back before the checkpoint is mapped again
  LoadOptions reload;
  reload.check_finite = false;  // the weights were checked when loaded; the logits below check the file
  Transformer reloaded = load_checkpoint(join_path(dir, "model"), reload);
  reloaded->to(in.runtime().device);
  widen_f16_on_cpu(*reloaded);
  checks.reloaded = (logits_of(*reloaded, check) - expected).abs().max().item<double>();
  return checks;
}

}  // namespace hp
