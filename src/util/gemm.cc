// fp32 linear layers through oneDNN's sgemm (see header).
#include "headprune/util/gemm.h"
#include "headprune/util/runtime.h"

#include <atomic>
#include <cstring>
#include <cstdlib>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#ifdef HP_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <mutex>
#include <unordered_map>
#endif

namespace hp::gemm {

namespace {
Fp32Gemm from_environment() {
  const char* v = std::getenv("HP_FP32_GEMM");
  const std::string s = v ? v : "";
  if (s.empty()) return onednn_built() ? Fp32Gemm::Auto : Fp32Gemm::OpenBlas;
  if (s == "openblas") return Fp32Gemm::OpenBlas;
  if (s == "onednn" || s == "auto") {
    if (!onednn_built())
      throw std::invalid_argument("HP_FP32_GEMM=" + s + ": this headprune was built without oneDNN (install "
                                  "libdnnl-dev and rebuild), use openblas or leave the variable unset");
    return s == "auto" ? Fp32Gemm::Auto : Fp32Gemm::OneDnn;
  }
  throw std::invalid_argument("HP_FP32_GEMM: expected auto, openblas or onednn, got '" + s + "'");
}

std::atomic<int> g_choice{-1};  // -1: not read yet
}  // namespace

bool onednn_built() {
#ifdef HP_HAVE_DNNL
  return true;
#else
  return false;
#endif
}

Fp32Gemm fp32_gemm() {
  int c = g_choice.load();
  if (c < 0) {
    c = static_cast<int>(from_environment());
    g_choice.store(c);
  }
  return static_cast<Fp32Gemm>(c);
}

bool uses_onednn(int64_t rows, int64_t inner) {
  switch (fp32_gemm()) {
    case Fp32Gemm::OneDnn: return true;
    case Fp32Gemm::OpenBlas: return false;
    case Fp32Gemm::Auto: return rows >= kOneDnnMinRows || inner <= kOneDnnMaxInner;
  }
  return false;
}

void set_fp32_gemm(Fp32Gemm g) {
  if (g != Fp32Gemm::OpenBlas && !onednn_built())
    throw std::invalid_argument("fp32 GEMM: this headprune was built without oneDNN");
  g_choice.store(static_cast<int>(g));
}

std::string describe() {
  const char* v = std::getenv("HP_FP32_GEMM");
  const std::string why = v && *v ? "HP_FP32_GEMM=" + std::string(v) : std::string("default");
  if (fp32_gemm() == Fp32Gemm::OneDnn)
    return "fp32 linear layers: inference on oneDNN matmul with packed weights, training on oneDNN sgemm (" + why +
           ")";
  if (fp32_gemm() == Fp32Gemm::Auto)
    return "fp32 linear layers: inference on oneDNN matmul with packed weights; training on oneDNN sgemm from " +
           std::to_string(kOneDnnMinRows) + " rows or at most " + std::to_string(kOneDnnMaxInner) +
           " inputs, else OpenBLAS (" + why + ")";
  return std::string("OpenBLAS for fp32 linear layers (") + why + (onednn_built() ? ")" : "; built without oneDNN)");
}

#ifdef HP_HAVE_DNNL
namespace {
// C[M, N] = op(A) op(B) (+ C when accumulate), row-major, through oneDNN.
void sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
           float* C, int64_t ldc, bool accumulate) {
  const auto status = dnnl_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, accumulate ? 1.0f : 0.0f, C, ldc);
  if (status != dnnl_success)
    throw std::runtime_error("oneDNN sgemm failed (status " + std::to_string(static_cast<int>(status)) + ") for [" +
                             std::to_string(M) + " x " + std::to_string(K) + "] x [" + std::to_string(K) + " x " +
                             std::to_string(N) + "]");
}

}  // namespace

at::Tensor onednn_product(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  const auto xc = x.contiguous(), wc = w.contiguous();
  const int64_t K = w.size(1), N = w.size(0), M = K > 0 ? xc.numel() / K : 0;
  auto sizes = x.sizes().vec();
  sizes.back() = N;
  auto out = at::empty(sizes, x.options());
  const bool bias = b.defined() && b.numel() > 0;
  if (M == 0 || N == 0) return out;
  if (K == 0) return bias ? out.copy_(b.expand(sizes)) : out.zero_();
  if (bias) out.view({M, N}).copy_(b.reshape({1, N}).expand({M, N}));  // C starts as the bias in every row
  sgemm('N', 'T', M, N, K, xc.data_ptr<float>(), K, wc.data_ptr<float>(), K, out.data_ptr<float>(), N, bias);
  return out;
}

namespace {

// Inference: oneDNN's matmul primitive on weights reordered once into the layout its kernel reads
// (brgemm's blocked layout on AVX-512 CPUs), kept while the weight tensor lives and is unchanged. A
// weight is identified by its TensorImpl (held weakly, so the entry cannot outlive it or be mistaken
// for a later tensor at the same address), its data pointer and its version counter (every in-place
// write bumps it: optimizer steps, loading, copy_).
struct PackedWeight {
  PackedWeight(const at::Tensor& w, int64_t version, const dnnl::memory::desc& desc)
      : owner(w.getIntrusivePtr()), data(w.data_ptr()), version(version), desc(desc) {}
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> owner;
  const void* data;
  int64_t version;
  dnnl::memory::desc desc;
  at::Tensor buffer;  // the reordered weights (bytes); undefined when the kernel reads W as it is
};

// Primitives are cached by a key of sizes, strides and flags, and the cache starts over when it
// holds kMaxPrimitives (many distinct row counts), for linear layers and attention alike.
struct KeyHash {
  size_t operator()(const std::vector<int64_t>& k) const {
    size_t h = 0;
    for (auto v : k) h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};

template <class P>
class PrimitiveCache {
 public:
  template <class Make>
  std::shared_ptr<const P> get(const std::vector<int64_t>& key, const Make& make) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) return it->second;
    if (map_.size() >= kMaxPrimitives) map_.clear();
    return map_.emplace(key, make()).first->second;
  }

 private:
  static constexpr size_t kMaxPrimitives = 512;
  std::mutex mu_;
  std::unordered_map<std::vector<int64_t>, std::shared_ptr<const P>, KeyHash> map_;
};

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Cached primitives are shared by every thread. In oneDNN's default ("library") scratchpad mode,
// built without DNNL_ENABLE_CONCURRENT_EXEC as distributions ship it, all primitives share one
// scratchpad and a primitive may not run on a thread other than the one that made it: several
// threads (the Python module releases the GIL) then overwrite each other's partial sums. So every
// primitive here is made in user mode and each execution brings its own scratchpad (issue 78).
dnnl::primitive_attr user_scratchpad(dnnl::primitive_attr attr = {}) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// This execution's scratchpad for `pd`, added to `args` (the tensor keeps it alive until it returns).
at::Tensor add_scratchpad(const dnnl::primitive_desc_base& pd, std::unordered_map<int, dnnl::memory>& args) {
  const auto desc = pd.scratchpad_desc();
  const auto bytes = static_cast<int64_t>(desc.get_size());
  if (bytes == 0) return {};
  auto buf = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
  args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(desc, cpu_engine(), buf.data_ptr());
  return buf;
}

struct LinearPrimitive {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  dnnl::memory::desc src, user_weights, bias, dst;
};

dnnl::primitive_attr epilogue_attr(Epilogue e) {
  auto attr = user_scratchpad();
  if (e == Epilogue::None) return attr;
  dnnl::algorithm alg = dnnl::algorithm::eltwise_gelu_erf;
  float alpha = 0.f;
  switch (e) {
    case Epilogue::GeluErf: alg = dnnl::algorithm::eltwise_gelu_erf; break;
    case Epilogue::GeluTanh: alg = dnnl::algorithm::eltwise_gelu_tanh; break;
    case Epilogue::Relu: alg = dnnl::algorithm::eltwise_relu; break;
    case Epilogue::Silu: alg = dnnl::algorithm::eltwise_swish, alpha = 1.f; break;  // x * sigmoid(alpha x)
    case Epilogue::None: break;
  }
  dnnl::post_ops ops;
#if DNNL_VERSION_MAJOR >= 3
  ops.append_eltwise(alg, alpha, 0.f);
#else
  ops.append_eltwise(1.f, alg, alpha, 0.f);
#endif
  attr.set_post_ops(ops);
  return attr;
}

std::shared_ptr<const LinearPrimitive> make_linear(int64_t M, int64_t K, int64_t N, bool bias, Epilogue e) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  auto p = std::make_shared<LinearPrimitive>();
  p->src = dnnl::memory::desc({M, K}, dt::f32, tag::ab);
  p->user_weights = dnnl::memory::desc({K, N}, dt::f32, tag::ba);  // W [N, K] row-major = W^T [K, N]
  p->bias = bias ? dnnl::memory::desc({1, N}, dt::f32, tag::ab) : dnnl::memory::desc();
  p->dst = dnnl::memory::desc({M, N}, dt::f32, tag::ab);
  const dnnl::memory::desc any({K, N}, dt::f32, tag::any);
  const auto attr = epilogue_attr(e);
#if DNNL_VERSION_MAJOR >= 3
  p->pd = dnnl::matmul::primitive_desc(cpu_engine(), p->src, any, p->bias, p->dst, attr);
#else
  p->pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(p->src, any, p->bias, p->dst), attr, cpu_engine());
#endif
  p->prim = dnnl::matmul(p->pd);
  return p;
}

class WeightCache {
 public:
  // The weights in the layout `desc`, reordered now if this tensor has not been seen with them.
  std::shared_ptr<const PackedWeight> get(const at::Tensor& w, const dnnl::memory::desc& user,
                                          const dnnl::memory::desc& desc) {
    auto* impl = w.unsafeGetTensorImpl();
    const int64_t version = static_cast<int64_t>(w._version());
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = weights_.find(impl);
      if (it != weights_.end()) {
        const auto& e = *it->second;
        if (!e.owner.expired() && e.data == w.data_ptr() && e.version == version && e.desc == desc) return it->second;
      }
    }
    auto e = std::make_shared<PackedWeight>(w, version, desc);
    if (!(desc == user)) {
      // Packed copies are kept beside the weights: at most an eighth of the machine's memory in all
      // (a model whose weights fill memory runs unpacked instead of being pushed into swap).
      std::lock_guard<std::mutex> lock(mu_);
      int64_t held = 0;
      for (const auto& kv : weights_)
        if (!kv.second->owner.expired() && kv.second->buffer.defined()) held += kv.second->buffer.numel();
      if (static_cast<double>(held + static_cast<int64_t>(desc.get_size())) > static_cast<double>(physical_memory_bytes()) / 8)
        return nullptr;
    }
    if (!(desc == user)) {
      e->buffer = at::empty({static_cast<int64_t>(desc.get_size())}, w.options().dtype(at::kByte));
      dnnl::memory from(user, cpu_engine(), w.data_ptr()), to(desc, cpu_engine(), e->buffer.data_ptr());
      dnnl::stream st(cpu_engine());
      dnnl::reorder(from, to).execute(st, from, to);
      st.wait();
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = weights_.begin(); it != weights_.end();)  // forget the tensors that are gone
      it = it->second->owner.expired() ? weights_.erase(it) : std::next(it);
    weights_[impl] = e;
    return e;
  }

 private:
  std::mutex mu_;
  std::unordered_map<const c10::TensorImpl*, std::shared_ptr<const PackedWeight>> weights_;
};

// fp32 CPU operands of x W^T + b with matching widths: what linear() may send to oneDNN at all.
bool fp32_cpu_operands(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return x.device().is_cpu() && w.device().is_cpu() && x.scalar_type() == at::kFloat &&
         w.scalar_type() == at::kFloat && w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1) &&
         (!b.defined() || (b.device().is_cpu() && b.scalar_type() == at::kFloat && b.dim() == 1 &&
                           b.numel() == w.size(0)));
}

// ... and what packed_product takes: a contiguous, non-inference W (the cache keys on it) and no
// empty dimension.
bool packable(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return fp32_cpu_operands(x, w, b) && w.is_contiguous() && !w.is_inference() && w.numel() > 0 && x.numel() > 0;
}

}  // namespace

at::Tensor packed_product(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, Epilogue e) {
  if (!packable(x, w, b))
    throw std::invalid_argument("fp32 GEMM: packed_product takes fp32 CPU x [..., K] and a contiguous W [N, K]");
  const auto xc = x.contiguous();
  const int64_t K = w.size(1), N = w.size(0), M = xc.numel() / K;
  const bool bias = b.defined() && b.numel() > 0;
  static PrimitiveCache<LinearPrimitive> primitives;
  static WeightCache weights;
  const auto p = primitives.get({M, K, N, bias, static_cast<int64_t>(e)}, [&] { return make_linear(M, K, N, bias, e); });
  const auto packed = weights.get(w, p->user_weights, p->pd.weights_desc());
  if (!packed) return apply_epilogue(at::linear(x, w, b), e);  // over the packing budget
  auto sizes = x.sizes().vec();
  sizes.back() = N;
  auto out = at::empty(sizes, x.options());
  const auto& eng = cpu_engine();
  void* wdata = packed->buffer.defined() ? packed->buffer.data_ptr() : w.data_ptr();
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(p->src, eng, xc.data_ptr())},
                                             {DNNL_ARG_WEIGHTS, dnnl::memory(packed->desc, eng, wdata)},
                                             {DNNL_ARG_DST, dnnl::memory(p->dst, eng, out.data_ptr())}};
  at::Tensor bc;
  if (bias) {
    bc = b.contiguous();
    args.emplace(DNNL_ARG_BIAS, dnnl::memory(p->bias, eng, bc.data_ptr()));
  }
  const auto scratch = add_scratchpad(p->pd, args);
  dnnl::stream st(eng);
  p->prim.execute(st, args);
  st.wait();
  return out;
}

namespace {

// Attention: one cached set of primitives per shape, strides and mask shape.
struct AttentionPrimitives {
  bool usable = false;      // false: oneDNN would run its reference kernels here (or refused)
  bool mask_post_op = false;  // the mask is added inside the first product, else by ATen after it
  dnnl::memory::desc q, kt, v, scores, mask, ctx;
  dnnl::matmul::primitive_desc qk_pd, pv_pd;  // their scratchpad sizes (user mode)
  dnnl::softmax_forward::primitive_desc softmax_pd;
  dnnl::matmul qk, pv;
  dnnl::softmax_forward softmax;
};

bool reference_kernel(const char* impl) { return std::string(impl).rfind("ref", 0) == 0; }

std::shared_ptr<const AttentionPrimitives> make_attention(const at::Tensor& q, const at::Tensor& k,
                                                          const at::Tensor& v, const std::vector<int64_t>& mask_dims,
                                                          float scale) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const auto& eng = cpu_engine();
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), S = k.size(2);
  auto p = std::make_shared<AttentionPrimitives>();
  p->q = dnnl::memory::desc({B, H, T, D}, dt::f32, dnnl::memory::dims(q.strides().begin(), q.strides().end()));
  p->kt = dnnl::memory::desc({B, H, D, S}, dt::f32, {k.stride(0), k.stride(1), k.stride(3), k.stride(2)});
  p->v = dnnl::memory::desc({B, H, S, D}, dt::f32, dnnl::memory::dims(v.strides().begin(), v.strides().end()));
  p->scores = dnnl::memory::desc({B, H, T, S}, dt::f32, tag::abcd);
  p->ctx = dnnl::memory::desc({B, H, T, D}, dt::f32, {T * H * D, D, H * D, 1});  // stored as [B, T, H, D]
  try {
#if DNNL_VERSION_MAJOR < 3
    auto qk_pd = [&](bool with_mask) {
      auto attr = user_scratchpad();
      attr.set_output_scales(0, {scale});
      if (with_mask) {
        dnnl::post_ops ops;
        ops.append_binary(dnnl::algorithm::binary_add, p->mask);
        attr.set_post_ops(ops);
      }
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(p->q, p->kt, p->scores), attr, eng);
    };
    auto qk = qk_pd(false);
    if (!mask_dims.empty()) {
      p->mask = dnnl::memory::desc(mask_dims, dt::f32, tag::abcd);
      auto with_mask = qk_pd(true);
      if (!reference_kernel(with_mask.impl_info_str())) {
        qk = with_mask;
        p->mask_post_op = true;
      }
    }
    const dnnl::matmul::primitive_desc pv_pd(dnnl::matmul::desc(p->scores, p->v, p->ctx), user_scratchpad(), eng);
    const dnnl::softmax_forward::primitive_desc sm_pd(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, p->scores, 3), user_scratchpad(), eng);
    if (reference_kernel(qk.impl_info_str()) || reference_kernel(pv_pd.impl_info_str()) ||
        reference_kernel(sm_pd.impl_info_str()))
      return p;
    p->qk_pd = qk;
    p->pv_pd = pv_pd;
    p->softmax_pd = sm_pd;
    p->qk = dnnl::matmul(qk);
    p->pv = dnnl::matmul(pv_pd);
    p->softmax = dnnl::softmax_forward(sm_pd);
    p->usable = true;
#endif
  } catch (const dnnl::error&) {
    p->usable = false;  // a layout oneDNN does not take: the caller's ATen path
  }
  return p;
}

bool attention_fits(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  for (const auto* t : {&q, &k, &v})
    if (!t->device().is_cpu() || t->scalar_type() != at::kFloat || t->dim() != 4 || t->stride(3) != 1 ||
        t->numel() == 0)
      return false;
  return k.sizes() == v.sizes() && q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3);
}

}  // namespace

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                     double scale, at::Tensor* probs) {
  if (fp32_gemm() == Fp32Gemm::OpenBlas || !attention_fits(q, k, v)) return {};
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), S = k.size(2);
  at::Tensor m;
  std::vector<int64_t> mask_dims;
  if (mask.defined()) {
    if (!mask.device().is_cpu() || mask.scalar_type() != at::kFloat || mask.dim() > 4) return {};
    auto sizes = mask.sizes().vec();
    sizes.insert(sizes.begin(), 4 - sizes.size(), 1);
    const std::vector<int64_t> full{B, H, T, S};
    for (size_t i = 0; i < 4; ++i)
      if (sizes[i] != 1 && sizes[i] != full[i]) return {};
    m = mask.reshape(sizes).contiguous();
    mask_dims = sizes;
  }
  std::vector<int64_t> key{B, H, T, S, D};
  for (const auto* t : {&q, &k, &v}) key.insert(key.end(), t->strides().begin(), t->strides().end());
  key.insert(key.end(), mask_dims.begin(), mask_dims.end());
  const float fscale = static_cast<float>(scale);
  int32_t scale_bits;
  std::memcpy(&scale_bits, &fscale, sizeof scale_bits);
  key.push_back(scale_bits);

  static PrimitiveCache<AttentionPrimitives> cache;
  const auto p = cache.get(key, [&] { return make_attention(q, k, v, mask_dims, fscale); });
  if (!p->usable) return {};
  const auto& eng = cpu_engine();
  auto scores = at::empty({B, H, T, S}, q.options());
  auto ctx = at::empty({B, T, H * D}, q.options());
  dnnl::memory qm(p->q, eng, q.data_ptr()), km(p->kt, eng, k.data_ptr()), vm(p->v, eng, v.data_ptr()),
      sm(p->scores, eng, scores.data_ptr()), cm(p->ctx, eng, ctx.data_ptr());
  dnnl::stream st(eng);
  std::unordered_map<int, dnnl::memory> qk_args{{DNNL_ARG_SRC, qm}, {DNNL_ARG_WEIGHTS, km}, {DNNL_ARG_DST, sm}};
  if (p->mask_post_op)
    qk_args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, dnnl::memory(p->mask, eng, m.data_ptr()));
  auto scratch = add_scratchpad(p->qk_pd, qk_args);
  p->qk.execute(st, qk_args);
  st.wait();
  if (m.defined() && !p->mask_post_op) scores.add_(m);
  std::unordered_map<int, dnnl::memory> sm_args{{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, sm}};
  const auto sm_scratch = add_scratchpad(p->softmax_pd, sm_args);
  p->softmax.execute(st, sm_args);
  std::unordered_map<int, dnnl::memory> pv_args{{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, vm}, {DNNL_ARG_DST, cm}};
  const auto pv_scratch = add_scratchpad(p->pv_pd, pv_args);
  p->pv.execute(st, pv_args);
  st.wait();
  if (probs) *probs = scores;
  return ctx;
}

namespace {

// Training: the same product with its backward through oneDNN too (dx = g W, dW = g^T x, db = sum g).
// A missing bias travels as an empty tensor (custom functions take defined tensors).
struct OneDnnLinear : public torch::autograd::Function<OneDnnLinear> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& b) {
    ctx->save_for_backward({x, w});
    return onednn_product(x, w, b);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& w = saved[1];
    const int64_t K = w.size(1), N = w.size(0);
    const auto g = grads[0].contiguous();
    const int64_t M = N > 0 ? g.numel() / N : 0;
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      dx = at::empty(x.sizes(), x.options());
      if (M > 0 && K > 0) {
        if (N == 0) {
          dx.zero_();
        } else {
          const auto wc = w.contiguous();
          sgemm('N', 'N', M, K, N, g.data_ptr<float>(), N, wc.data_ptr<float>(), K, dx.data_ptr<float>(), K, false);
        }
      }
    }
    if (ctx->needs_input_grad(1)) {
      dw = at::empty(w.sizes(), w.options());
      if (M > 0 && N > 0 && K > 0) {
        const auto xc = x.contiguous();
        sgemm('T', 'N', N, K, M, g.data_ptr<float>(), N, xc.data_ptr<float>(), K, dw.data_ptr<float>(), K, false);
      } else {
        dw.zero_();
      }
    }
    if (ctx->needs_input_grad(2)) db = g.reshape({M, N}).sum(0);
    return {dx, dw, db};
  }
};
}  // namespace
#else
at::Tensor onednn_product(const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  throw std::invalid_argument("fp32 GEMM: this headprune was built without oneDNN");
}
at::Tensor packed_product(const at::Tensor&, const at::Tensor&, const at::Tensor&, Epilogue) {
  throw std::invalid_argument("fp32 GEMM: this headprune was built without oneDNN");
}
at::Tensor attention(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, double, at::Tensor*) {
  return {};
}
#endif

at::Tensor apply_epilogue(const at::Tensor& y, Epilogue e) {
  switch (e) {
    case Epilogue::None: return y;
    case Epilogue::GeluErf: return at::gelu(y);
    case Epilogue::GeluTanh: return at::gelu(y, "tanh");
    case Epilogue::Relu: return at::relu(y);
    case Epilogue::Silu: return at::silu(y);
  }
  return y;
}

#ifdef HP_HAVE_DNNL
namespace {

// fp32 CPU operands oneDNN may take (the choice is not openblas), and whether autograd records.
bool onednn_operands(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return fp32_cpu_operands(x, w, b) && w.size(1) > 0 && fp32_gemm() != Fp32Gemm::OpenBlas;
}
bool records_grad(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return c10::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad() || (b.defined() && b.requires_grad()));
}

}  // namespace
#endif

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, Epilogue e) {
#ifdef HP_HAVE_DNNL
  if (e != Epilogue::None && onednn_operands(x, w, b) && !records_grad(x, w, b) && packable(x, w, b))
    return packed_product(x, w, b, e);
#endif
  return apply_epilogue(linear(x, w, b), e);
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
#ifdef HP_HAVE_DNNL
  if (onednn_operands(x, w, b)) {
    const bool records_grad = gemm::records_grad(x, w, b);
    if (!records_grad && packable(x, w, b)) return packed_product(x, w, b);
    if (uses_onednn(x.numel() / w.size(1), w.size(1))) {
      if (!records_grad) return onednn_product(x, w, b);
      return OneDnnLinear::apply(x, w, b.defined() ? b : at::empty({0}, w.options()));
    }
  }
#endif
  return at::linear(x, w, b);
}

}  // namespace hp::gemm
