#include "attnphys/operators/transformer_block.hpp"

namespace attnphys::ops {

namespace {
template <class T>
void alloc2(View2<T>& v, long a, long b) {
  if (long(v.extent(0)) != a || long(v.extent(1)) != b)
    v = View2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("attnphys::block")), a, b);
}
template <class T>
void alloc1(View1<T>& v, long a) {
  if (long(v.extent(0)) != a)
    v = View1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("attnphys::block")), a);
}
}  // namespace

template <class T>
void BlockCache<T>::ensure(long tokens, long d, long d_ff) {
  alloc2(h1, tokens, d);
  alloc2(attn_out, tokens, d);
  alloc2(x1, tokens, d);
  alloc2(h2, tokens, d);
  alloc2(f, tokens, d_ff);
  alloc2(g, tokens, d_ff);
  alloc2(dh, tokens, d);
  alloc2(dg, tokens, d_ff);
  alloc1(mean1, tokens);
  alloc1(rstd1, tokens);
  alloc1(mean2, tokens);
  alloc1(rstd2, tokens);
}

template <class T>
TransformerBlock<T>::TransformerBlock(AttentionOptions attention, long d_ff, std::string prefix, T ln_eps)
    : attn_(attention, prefix + "self_attn."), d_ff_(d_ff), prefix_(std::move(prefix)), eps_(ln_eps) {
  require(d_ff > 0, "transformer block: d_ff = ", d_ff, " must be positive");
}

template <class T>
void TransformerBlock<T>::declare(ParameterBuffer<T>& buf, InitPlan& plan) const {
  const long d = attn_.options().d_model;
  declare_layernorm(buf, plan, prefix_ + "norm1.", d);
  attn_.declare(buf, plan);
  declare_layernorm(buf, plan, prefix_ + "norm2.", d);
  declare_linear(buf, plan, prefix_ + "linear1.", d_ff_, d);
  declare_linear(buf, plan, prefix_ + "linear2.", d, d_ff_);
}

template <class T>
void TransformerBlock<T>::forward(const Mat<T>& y, BlockCache<T>& c, const ConstMat<T>& x, long batch, long len,
                                  const ParameterBuffer<T>& params, const IntMask& key_mask,
                                  AttentionScratch<T>& ws) const {
  ScopedRegion region("attnphys::block_forward");
  const long d = attn_.options().d_model, tokens = batch * len;
  c.ensure(tokens, d, d_ff_);
  const auto& p = prefix_;
  layernorm_forward<T>(c.h1, c.mean1, c.rstd1, x, params.view1(p + "norm1.weight"), params.view1(p + "norm1.bias"),
                       eps_);
  attn_.forward(c.attn_out, c.attn, c.h1, batch, len, params, key_mask, ws);
  residual_forward<T>(c.x1, x, c.attn_out);
  layernorm_forward<T>(c.h2, c.mean2, c.rstd2, c.x1, params.view1(p + "norm2.weight"),
                       params.view1(p + "norm2.bias"), eps_);
  linear_forward<T>(c.f, c.h2, params.view2(p + "linear1.weight"), ConstVec<T>());  // bias in the GELU pass
  bias_gelu_forward<T>(c.f, c.g, params.view1(p + "linear1.bias"));
  linear_forward<T>(y, c.g, params.view2(p + "linear2.weight"), params.view1(p + "linear2.bias"));
  add_inplace<T>(y, c.x1);
}

template <class T>
void TransformerBlock<T>::backward(const Mat<T>& dres, BlockCache<T>& c, const ConstMat<T>& x,
                                   const ParameterBuffer<T>& params, AttentionScratch<T>& ws) const {
  ScopedRegion region("attnphys::block_backward");
  const auto& p = prefix_;
  // Feed-forward branch: dres is dL/dy = dL/d(ffn out); its input gradient joins dres through norm2.
  linear_backward<T>(c.dg, params.view2(p + "linear2.weight", Slot::Grads),
                     params.view1(p + "linear2.bias", Slot::Grads), dres, c.g, params.view2(p + "linear2.weight"));
  gelu_backward<T>(c.dg, c.dg, c.f);
  linear_backward<T>(c.dh, params.view2(p + "linear1.weight", Slot::Grads),
                     params.view1(p + "linear1.bias", Slot::Grads), c.dg, c.h2, params.view2(p + "linear1.weight"));
  layernorm_backward<T>(dres, params.view1(p + "norm2.weight", Slot::Grads),
                        params.view1(p + "norm2.bias", Slot::Grads), c.dh, c.x1, params.view1(p + "norm2.weight"),
                        c.mean2, c.rstd2);
  // Attention branch: dres is now dL/dx1.
  attn_.backward(c.dh, c.attn, dres, c.h1, params, ws);
  layernorm_backward<T>(dres, params.view1(p + "norm1.weight", Slot::Grads),
                        params.view1(p + "norm1.bias", Slot::Grads), c.dh, x, params.view1(p + "norm1.weight"),
                        c.mean1, c.rstd1);
}

template struct BlockCache<float>;
template struct BlockCache<double>;
template class TransformerBlock<float>;
template class TransformerBlock<double>;

}  // namespace attnphys::ops
