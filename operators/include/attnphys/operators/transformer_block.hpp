#pragma once
// Pre-LayerNorm transformer block (torch.nn.TransformerEncoderLayer with norm_first=True, GELU, no dropout):
//   x1 = x + attn(norm1(x)),   y = x1 + linear2(gelu(linear1(norm2(x1))))
// Parameter names under the block prefix follow PyTorch: norm1.*, self_attn.*, norm2.*, linear1.*, linear2.*.
#include "attnphys/operators/attention.hpp"

namespace attnphys::ops {

template <class T>
struct BlockCache {
  View2<T> h1, attn_out, x1, h2, f, g;  // saved activations [B*N, d] ([B*N, d_ff] for f, g)
  View1<T> mean1, rstd1, mean2, rstd2;
  View2<T> dh, dg;                      // gradient buffers
  AttentionCache<T> attn;
  void ensure(long tokens, long d, long d_ff);
};

template <class T>
class TransformerBlock {
 public:
  TransformerBlock() = default;
  TransformerBlock(AttentionOptions attention, long d_ff, std::string prefix, T ln_eps = T(1e-5));
  const MultiHeadAttention<T>& attention() const { return attn_; }
  long d_ff() const { return d_ff_; }

  // Adds the block's parameters to buf and resolves the block's own ones (norms, feed-forward) for forward/backward.
  void declare(ParameterBuffer<T>& buf, InitPlan& plan);
  // y [B*N, d] (must not alias x); x is kept by the caller until backward.
  void forward(const Mat<T>& y, BlockCache<T>& cache, const ConstMat<T>& x, long batch, long len,
               const ParameterBuffer<T>& params, const IntMask& key_mask, AttentionScratch<T>& ws) const;
  // Residual stream in place: dres holds dL/dy on entry and dL/dx on exit. Parameter gradients +=.
  void backward(const Mat<T>& dres, BlockCache<T>& cache, const ConstMat<T>& x, const ParameterBuffer<T>& params,
                AttentionScratch<T>& ws) const;

 private:
  MultiHeadAttention<T> attn_;
  long d_ff_ = 0;
  std::string prefix_;
  T eps_ = T(1e-5);
  // Resolved once in declare(): forward and backward build their views from these, with no name lookups.
  struct Tensors {
    ParamRef norm1_w, norm1_b, norm2_w, norm2_b;
    ParamRef linear1_w, linear1_b, linear2_w, linear2_b;
  } t_;
};

extern template class TransformerBlock<float>;
extern template class TransformerBlock<double>;

}  // namespace attnphys::ops
