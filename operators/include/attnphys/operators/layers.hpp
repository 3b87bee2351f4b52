#pragma once
// Elementary layers as forward/backward pairs (llm.c style).
//
// Argument order: outputs, saved values, inputs, sizes. Activations are row-major [rows, features] matrices: a
// batch of B sequences of N tokens is one [B*N, d] matrix, so a linear layer is a single gemm over all tokens.
// Accumulation rule: parameter gradients are ADDED (+=) so that several uses and several samples sum;
// activation gradients are WRITTEN (=), except where a function says it sits on the residual stream.
// All views are non-owning (managed views convert implicitly); T is float or double.
#include <cstring>

#include "attnphys/core/gemm.hpp"
#include "attnphys/core/views.hpp"

namespace attnphys::ops {

template <class T>
using Vec = Kokkos::View<T*, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T>
using ConstVec = Kokkos::View<const T*, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
// Vectors in the memory of any enabled execution space (core/spaces.hpp). Every layer below takes its Space as a
// second template argument, ExecSpace by default, and is instantiated for each enabled space (T float or double).
template <class T, class Space>
using VecOn =
    Kokkos::View<T*, Kokkos::LayoutRight, typename Space::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T, class Space>
using ConstVecOn =
    Kokkos::View<const T*, Kokkos::LayoutRight, typename Space::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// y[M, out] = x[M, in] · wᵀ + b, with w [out, in] as in PyTorch; b may be an empty view (no bias).
template <class T, class Space = ExecSpace>
void linear_forward(const MatOn<T, Space>& y, const ConstMatOn<T, Space>& x, const ConstMatOn<T, Space>& w,
                    const ConstVecOn<T, Space>& b);
// dx = dy · w (or dx += when accumulate_dx; skipped when dx is empty), dw += dyᵀ · x, db += column sums of dy
// (skipped when db is empty).
template <class T, class Space = ExecSpace>
void linear_backward(const MatOn<T, Space>& dx, const MatOn<T, Space>& dw, const VecOn<T, Space>& db,
                     const ConstMatOn<T, Space>& dy, const ConstMatOn<T, Space>& x, const ConstMatOn<T, Space>& w,
                     bool accumulate_dx = false);

// Row-wise layer normalisation y = (x - mean) * rstd * w + b (biased variance, as torch.nn.LayerNorm).
// mean and rstd [M] are saved for the backward.
template <class T, class Space = ExecSpace>
void layernorm_forward(const MatOn<T, Space>& y, const VecOn<T, Space>& mean, const VecOn<T, Space>& rstd,
                       const ConstMatOn<T, Space>& x, const ConstVecOn<T, Space>& w, const ConstVecOn<T, Space>& b,
                       T eps = T(1e-5));
// Residual stream: dx += (the input of a pre-LN sub-layer is the residual stream). dw, db +=.
template <class T, class Space = ExecSpace>
void layernorm_backward(const MatOn<T, Space>& dx, const VecOn<T, Space>& dw, const VecOn<T, Space>& db,
                        const ConstMatOn<T, Space>& dy, const ConstMatOn<T, Space>& x, const ConstVecOn<T, Space>& w,
                        const ConstVecOn<T, Space>& mean, const ConstVecOn<T, Space>& rstd);

// Exact GELU x·Φ(x) (torch.nn.GELU() default, erf form), elementwise over all entries of x.
template <class T, class Space = ExecSpace>
void gelu_forward(const MatOn<T, Space>& y, const ConstMatOn<T, Space>& x);
template <class T, class Space = ExecSpace>
void gelu_backward(const MatOn<T, Space>& dx, const ConstMatOn<T, Space>& dy, const ConstMatOn<T, Space>& x);
// Fused bias + GELU (the feed-forward's first layer after a bias-free gemm): f += b (row broadcast, f keeps the
// pre-activation for gelu_backward), g = gelu(f); one pass over f instead of three.
template <class T, class Space = ExecSpace>
void bias_gelu_forward(const MatOn<T, Space>& f, const MatOn<T, Space>& g, const ConstVecOn<T, Space>& b);

// Row-wise softmax; the backward uses the saved output y.
template <class T, class Space = ExecSpace>
void softmax_forward(const MatOn<T, Space>& y, const ConstMatOn<T, Space>& x);
template <class T, class Space = ExecSpace>
void softmax_backward(const MatOn<T, Space>& dx, const ConstMatOn<T, Space>& dy, const ConstMatOn<T, Space>& y);

// y = a + b (y may alias a). Its backward is the identity on both inputs.
template <class T, class Space = ExecSpace>
void residual_forward(const MatOn<T, Space>& y, const ConstMatOn<T, Space>& a, const ConstMatOn<T, Space>& b);
// y += x.
template <class T, class Space = ExecSpace>
void add_inplace(const MatOn<T, Space>& y, const ConstMatOn<T, Space>& x);

// exp for the softmax kernels: float uses a branch-free polynomial the compiler can vectorise (relative error
// <= 3e-7 for x <= 88; exactly 0 below about -87.3; meant for softmax arguments x - max in [-1e6, 0]); double uses
// the library exp so that double-precision gradient checks stay exact.
// fast_exp_poly is that polynomial for any F whose arithmetic is float's: float itself, or a vector of floats (the
// fused attention kernels, attention_core.cpp, instantiate it on whole vectors). FastExpInt<F> names the integer type
// of the same width and the rounding-free conversion; it is specialised for float here and for vectors where they
// are used.
template <class F>
struct FastExpInt;
template <>
struct FastExpInt<float> {
  typedef int type;
  KOKKOS_INLINE_FUNCTION static int convert(float x) { return int(x); }
};
template <class F>
KOKKOS_INLINE_FUNCTION F fast_exp_poly(F x) {
  typedef typename FastExpInt<F>::type I;
  // Below -104, exp is 0 in float anyway: clamping x keeps kf in int range (a score of -1e13, from inputs of 1e30,
  // made the conversion undefined; found by fuzz_arrays). kf is clamped too, NaN-safe (a NaN x gives -128 there and
  // a NaN result through r), so that the conversion never sees NaN or infinity.
  x = x < -104.0f ? F{} - 104.0f : x;
  const F t = x * 1.4426950408889634f;
  F kf = (t + 12582912.0f) - 12582912.0f;  // round to nearest without a branch (1.5 * 2^23)
  kf = kf > -128.0f ? kf : F{} - 128.0f;
  kf = kf < 128.0f ? kf : F{} + 128.0f;
  I n = FastExpInt<F>::convert(kf);
  n = n < -127 ? I{} - 127 : n;  // integer clamps: 2^-127 is encoded as 0, so deep underflow gives exactly 0
  n = n > 127 ? I{} + 127 : n;
  const F r = (x - kf * 0.693145751953125f) - kf * 1.428606765330187e-06f;  // x - kf ln2, two-part ln2
  F p = F{} + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const I bits = (n + 127) << 23;
  F scale;
  memcpy(&scale, &bits, sizeof(F));
  return p * scale;
}
KOKKOS_INLINE_FUNCTION double fast_exp(double x) { return math::exp(x); }
KOKKOS_INLINE_FUNCTION float fast_exp(float x) { return fast_exp_poly(x); }

// Views of a contiguous [rows, cols] block starting at p: used to re-view one buffer under another shape.
template <class T>
Mat<T> as_mat(T* p, long rows, long cols) {
  return Mat<T>(p, rows, cols);
}
template <class T>
ConstMat<T> as_cmat(const T* p, long rows, long cols) {
  return ConstMat<T>(p, rows, cols);
}

}  // namespace attnphys::ops
