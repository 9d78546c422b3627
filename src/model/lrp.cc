// Relevance-carrying autograd functions (see header). Each backward receives the relevance of
// its output as the incoming "gradient" and returns the relevance of its inputs.
#include "headprune/model/lrp.h"

#include <stdexcept>

namespace hp::lrp {
namespace {

thread_local bool g_active = false;
thread_local Rules g_rules;

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

torch::Tensor plus_part(const torch::Tensor& t) { return t.clamp_min(0); }
torch::Tensor minus_part(const torch::Tensor& t) { return t.clamp_max(0); }

// alpha R / (z+ + eps) and beta R / (z- - eps): the per-output shares of positive and
// negative contributions.
// The rules are stored in the autograd context at forward time, so backward does not depend on
// which thread runs it or on the scope still being open.
void keep_rules(AutogradContext* ctx) {
  ctx->saved_data["alpha"] = g_rules.alpha;
  ctx->saved_data["beta"] = g_rules.beta;
  ctx->saved_data["eps"] = g_rules.eps;
}

std::pair<torch::Tensor, torch::Tensor> shares(AutogradContext* ctx, const torch::Tensor& R,
                                               const torch::Tensor& zp, const torch::Tensor& zn) {
  const double alpha = ctx->saved_data["alpha"].toDouble();
  const double beta = ctx->saved_data["beta"].toDouble();
  const double eps = ctx->saved_data["eps"].toDouble();
  // Where one side has no contributions at all, the other side takes the whole relevance, so
  // that sum_i R_i = sum_j R_j holds (up to eps and bias) even for two-input sums.
  const auto a = alpha + beta * zn.eq(0).to(R.scalar_type());
  const auto b = beta + alpha * zp.eq(0).to(R.scalar_type());
  return {a * R / (zp + eps), b * R / (zn - eps)};
}

struct LinearFn : torch::autograd::Function<LinearFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b) {
    keep_rules(ctx);
    ctx->save_for_backward({x, w, b});
    return torch::linear(x, w, b);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1], &b = saved[2];
    const auto R = grads[0];
    const auto xp = plus_part(x), xn = minus_part(x), wp = plus_part(w), wn = minus_part(w);
    auto zp = torch::linear(xp, wp) + torch::linear(xn, wn);  // sum of positive contributions
    auto zn = torch::linear(xp, wn) + torch::linear(xn, wp);  // sum of negative contributions
    if (b.defined()) {
      zp = zp + plus_part(b);
      zn = zn + minus_part(b);
    }
    auto [sp, sn] = shares(ctx, R, zp, zn);
    auto Rx = xp * (torch::matmul(sp, wp) + torch::matmul(sn, wn)) + xn * (torch::matmul(sp, wn) + torch::matmul(sn, wp));
    return {Rx, torch::Tensor(), torch::Tensor()};
  }
};

struct AddFn : torch::autograd::Function<AddFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& a, const torch::Tensor& b) {
    keep_rules(ctx);
    ctx->save_for_backward({a, b});
    return a + b;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &a = saved[0], &b = saved[1];
    auto [sp, sn] = shares(ctx, grads[0], plus_part(a) + plus_part(b), minus_part(a) + minus_part(b));
    return {plus_part(a) * sp + minus_part(a) * sn, plus_part(b) * sp + minus_part(b) * sn};
  }
};

struct MixFn : torch::autograd::Function<MixFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& p, const torch::Tensor& v) {
    keep_rules(ctx);
    ctx->save_for_backward({p, v});
    return torch::matmul(p, v);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &p = saved[0], &v = saved[1];
    const auto vp = plus_part(v), vn = minus_part(v);
    auto [sp, sn] = shares(ctx, grads[0], torch::matmul(p, vp), torch::matmul(p, vn));  // p >= 0
    const auto pt = p.transpose(-2, -1);
    return {torch::Tensor(), vp * torch::matmul(pt, sp) + vn * torch::matmul(pt, sn)};
  }
};

}  // namespace

Scope::Scope(const Rules& rules) {
  if (g_active) throw std::logic_error("lrp::Scope: scopes do not nest");
  g_active = true;
  g_rules = rules;
}

Scope::~Scope() { g_active = false; }

bool active() { return g_active; }

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  if (!g_active) return torch::linear(x, w, b);
  // Custom functions take defined tensors only: a missing bias is a zero bias.
  return LinearFn::apply(x, w.detach(), b.defined() ? b.detach() : torch::zeros({w.size(0)}, w.options()));
}

torch::Tensor add(const torch::Tensor& a, const torch::Tensor& b) {
  if (!g_active) return a + b;
  const auto shape = at::infer_size(a.sizes(), b.sizes());
  return AddFn::apply(a.expand(shape), b.expand(shape));
}

torch::Tensor elementwise(const torch::Tensor& y, const torch::Tensor& x) {
  if (!g_active) return y;
  return x + (y - x).detach();
}

torch::Tensor mix(const torch::Tensor& probs, const torch::Tensor& v) {
  if (!g_active) return torch::matmul(probs, v);
  return MixFn::apply(probs.detach(), v);
}

torch::Tensor probe(const torch::Tensor& ctx, const torch::Tensor& p) {
  // In the context's dtype (an fp32 probe on a bf16 model would turn o_proj's input into fp32); the
  // probe's gradient comes back through the cast in its own dtype.
  if (!g_active) return ctx * (p.scalar_type() == ctx.scalar_type() ? p : p.to(ctx.scalar_type()));
  const auto held = p.detach();
  return ctx * held + (p - held).expand(ctx.sizes());
}

}  // namespace hp::lrp
