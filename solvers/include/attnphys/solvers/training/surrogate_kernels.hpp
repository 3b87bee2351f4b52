#pragma once
// The grid kernels of the heat surrogate (heat_surrogate.hpp) on a regular grid of tokens (x fastest, then y, z;
// batch-major): the stencil features of a field and their adjoint, and the conditioned local stencil term with its
// backward. Each takes its execution space as a template argument (ExecSpace by default) and is instantiated for
// every enabled space (core/spaces.hpp), with every view in that space's memory: the surrogate calls them on the
// default space, and the tests run them once per space (solvers.SurrogateKernelsOnSpace.*).
#include <vector>

#include "attnphys/core/gemm.hpp"
#include "attnphys/operators/layers.hpp"
#include "attnphys/solvers/training/heat_surrogate.hpp"

namespace attnphys::training {

// Per-axis lengths (1 on unused axes), captured by value in kernels.
struct AxisLengths {
  double v[3] = {1.0, 1.0, 1.0};
  KOKKOS_INLINE_FUNCTION double operator[](long a) const { return v[a]; }
};
inline AxisLengths axis_lengths(const std::vector<double>& l) {
  AxisLengths a;
  for (std::size_t i = 0; i < l.size() && i < 3; ++i) a.v[i] = l[i];
  return a;
}

// Columns col0.. of f [B*len, ...]: for each field (û, then the C channels of extra; from first_field on) and axis a,
// ℓ_a (f_p − f_m)/(2h_a) and ℓ_a² (f_p − 2f + f_m)/h_a² with ℓ_a = L_a/64 (neighbours wrapped on periodic axes, the
// edge value repeated on the others). u may be empty when first_field = 1.
template <class T, class Space = ExecSpace>
void stencil_features(const MatOn<T, Space>& f, long col0, const ops::ConstVecOn<T, Space>& u,
                      const ConstMatOn<T, Space>& extra, long C, long len, int dim, const SurrogateGrid& g,
                      AxisLengths lengths, long first_field = 0);
// du += the adjoint of the stencil columns of û (field 0) at col0.. of df.
template <class T, class Space = ExecSpace>
void stencil_input_gradient(const ops::VecOn<T, Space>& du, const ConstMatOn<T, Space>& df, long col0, long len,
                            int dim, const SurrogateGrid& g, AxisLengths lengths);

// model.channel_window: columns col0.. of f get, for each channel c of extra and each offset s of {−w..w}^dim but the
// centre (x fastest), the channel's value at the neighbour (wrapped on periodic axes, the cell mirrored across the
// edge face on the others): column col0 + c·(S − 1) + (s, skipping the centre), S = (2w+1)^dim.
template <class T, class Space = ExecSpace>
void channel_window_features(const MatOn<T, Space>& f, long col0, const ConstMatOn<T, Space>& extra, long C,
                             long len, long w, int dim, const SurrogateGrid& g);

// The conditioned local term: fout(t) += Σ_s w(t, s) σ(t, s) fin(nb(t, s)) over the offsets s ∈ {−r..r}^dim (index
// ((sz + rz)(2ry + 1) + sy + ry)(2r + 1) + sx + r, x fastest), nb the grid neighbour (wrapped on periodic axes; beyond
// a non-periodic edge as `edge` says: the edge cell, or the cell mirrored across the edge face) and σ = −1 per odd
// reflection, else 1.
template <class T, class Space = ExecSpace>
void local_forward(const ops::VecOn<T, Space>& fout, const ConstMatOn<T, Space>& w,
                   const ops::ConstVecOn<T, Space>& fin, long len, long r, int dim, const SurrogateGrid& g,
                   LocalEdge edge);
// Its backward: dw(t, s) = g(t) σ(t, s) fin(nb(t, s)) (=), du(n) += Σ_{t, s: nb(t, s) = n} σ(t, s) w(t, s) g(t).
template <class T, class Space = ExecSpace>
void local_backward(const MatOn<T, Space>& dw, const ops::VecOn<T, Space>& du, const ConstMatOn<T, Space>& w,
                    const ops::ConstVecOn<T, Space>& fin, const ops::ConstVecOn<T, Space>& g, long len, long r,
                    int dim, const SurrogateGrid& grid, LocalEdge edge);

}  // namespace attnphys::training
