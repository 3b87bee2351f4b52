#include "attnphys/operators/transformer_block.hpp"

namespace attnphys::ops {

template <class T>
void BlockCache<T>::ensure(long tokens, long d, long d_ff) {
  for (View2<T>* v : {&h1, &attn_out, &x1, &h2, &dh}) grow_view(*v, "attnphys::block", tokens, d);
  for (View2<T>* v : {&f, &g, &dg}) grow_view(*v, "attnphys::block", tokens, d_ff);
  for (View1<T>* v : {&mean1, &rstd1, &mean2, &rstd2}) grow_view(*v, "attnphys::block", tokens);
}

template <class T>
TransformerBlock<T>::TransformerBlock(AttentionOptions attention, long d_ff, std::string prefix, T ln_eps)
    : attn_(attention, prefix + "self_attn."), d_ff_(d_ff), prefix_(std::move(prefix)), eps_(ln_eps) {
  require(d_ff > 0, "transformer block: d_ff = ", d_ff, " must be positive");
}

template <class T>
void TransformerBlock<T>::declare(ParameterBuffer<T>& buf, InitPlan& plan) {
  const long d = attn_.options().d_model;
  declare_layernorm(buf, plan, prefix_ + "norm1.", d);
  attn_.declare(buf, plan);
  declare_layernorm(buf, plan, prefix_ + "norm2.", d);
  declare_linear(buf, plan, prefix_ + "linear1.", d_ff_, d);
  declare_linear(buf, plan, prefix_ + "linear2.", d, d_ff_);
  const auto& p = prefix_;
  t_ = Tensors{buf.ref(p + "norm1.weight"),   buf.ref(p + "norm1.bias"),   buf.ref(p + "norm2.weight"),
               buf.ref(p + "norm2.bias"),     buf.ref(p + "linear1.weight"), buf.ref(p + "linear1.bias"),
               buf.ref(p + "linear2.weight"), buf.ref(p + "linear2.bias")};
}

template <class T>
void TransformerBlock<T>::forward(const Mat<T>& y, BlockCache<T>& c, const ConstMat<T>& x, long batch, long len,
                                  const ParameterBuffer<T>& params, const IntMask& key_mask,
                                  AttentionScratch<T>& ws) const {
  ScopedRegion region("attnphys::block_forward");
  const long d = attn_.options().d_model, tokens = batch * len;
  c.ensure(tokens, d, d_ff_);
  layernorm_forward<T>(c.h1, c.mean1, c.rstd1, x, params.view1(t_.norm1_w), params.view1(t_.norm1_b), eps_);
  attn_.forward(c.attn_out, c.attn, c.h1, batch, len, params, key_mask, ws);
  residual_forward<T>(c.x1, x, c.attn_out);
  layernorm_forward<T>(c.h2, c.mean2, c.rstd2, c.x1, params.view1(t_.norm2_w), params.view1(t_.norm2_b), eps_);
  linear_forward<T>(c.f, c.h2, params.view2(t_.linear1_w), ConstVec<T>());  // bias in the GELU pass
  bias_gelu_forward<T>(c.f, c.g, params.view1(t_.linear1_b));
  linear_forward<T>(y, c.g, params.view2(t_.linear2_w), params.view1(t_.linear2_b));
  add_inplace<T>(y, c.x1);
}

template <class T>
void TransformerBlock<T>::backward(const Mat<T>& dres, BlockCache<T>& c, const ConstMat<T>& x,
                                   const ParameterBuffer<T>& params, AttentionScratch<T>& ws) const {
  ScopedRegion region("attnphys::block_backward");
  const Slot g = Slot::Grads;
  // Feed-forward branch: dres is dL/dy = dL/d(ffn out); its input gradient joins dres through norm2.
  linear_backward<T>(c.dg, params.view2(t_.linear2_w, g), params.view1(t_.linear2_b, g), dres, c.g,
                     params.view2(t_.linear2_w));
  gelu_backward<T>(c.dg, c.dg, c.f);
  linear_backward<T>(c.dh, params.view2(t_.linear1_w, g), params.view1(t_.linear1_b, g), c.dg, c.h2,
                     params.view2(t_.linear1_w));
  layernorm_backward<T>(dres, params.view1(t_.norm2_w, g), params.view1(t_.norm2_b, g), c.dh, c.x1,
                        params.view1(t_.norm2_w), c.mean2, c.rstd2);
  // Attention branch: dres is now dL/dx1.
  attn_.backward(c.dh, c.attn, dres, c.h1, params, ws);
  layernorm_backward<T>(dres, params.view1(t_.norm1_w, g), params.view1(t_.norm1_b, g), c.dh, x,
                        params.view1(t_.norm1_w), c.mean1, c.rstd1);
}

template struct BlockCache<float>;
template struct BlockCache<double>;
template class TransformerBlock<float>;
template class TransformerBlock<double>;

}  // namespace attnphys::ops
