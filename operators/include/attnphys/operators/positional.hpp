#pragma once
// Absolute positional information added to the token matrix x [B*N, d] (token t = b*N + n).
//
//   sinusoidal: fixed PE(n, 2i) = sin(n / 10000^(2i/d)), PE(n, 2i+1) = cos(n / 10000^(2i/d)) (Vaswani et al.);
//   learned:    a trained table [max_len, d], row n added to token n;
//   coords:     physical positions c [Bc*N, coord_dim] (Bc = B or 1, shared by the batch) mapped through random
//               Fourier features phi(c) = [cos(2π F c), sin(2π F c)], F [m, coord_dim] ~ N(0, sigma²) fixed by a
//               seed, then a trained linear map 2m -> d. Because only positions enter, a model trained on one grid
//               can be evaluated on another grid or on scattered points.
// Relative information (score bias, factored attention) lives in attention.hpp.
#include "attnphys/operators/layers.hpp"

namespace attnphys::ops {

// x += PE for every sample.
template <class T>
void sinusoidal_forward(const Mat<T>& x, long batch, long len);
// x[b*N + n] += table[n] (table has at least N rows).
template <class T>
void broadcast_add_forward(const Mat<T>& x, const ConstMat<T>& table, long batch, long len);
// dtable[n] += Σ_b dx[b*N + n].
template <class T>
void broadcast_add_backward(const Mat<T>& dtable, const ConstMat<T>& dx, long batch, long len);
// phi [M, 2m] = [cos(2π c Fᵀ), sin(2π c Fᵀ)] for coords c [M, coord_dim], frequencies F [m, coord_dim].
template <class T>
void fourier_features(const Mat<T>& phi, const ConstMat<T>& coords, const ConstMat<T>& freqs);

}  // namespace attnphys::ops
