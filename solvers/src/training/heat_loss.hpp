#pragma once
// Loss of the heat surrogate on denormalised fields (private to solvers/training).
//   relative L2:  ℓ_b = ‖p_b − t_b‖ / ‖t_b‖,  L = mean_b ℓ_b
//   relative H1:  the same for forward differences along each axis (within the nx × ny (× nz) grid, x fastest), weighted
//                 by h1_weight.
// p = σ ŷ + μ and t = σ y* + μ, so ∂L/∂ŷ = σ ∂L/∂p. Writes dŷ into dout and returns L.
// mean_over > 0 divides the sum over these `batch` samples by mean_over instead of batch (a shard of a larger
// batch of mean_over samples: the shards' losses and gradients then add up to those of the whole batch).
#include "attnphys/core/views.hpp"

namespace attnphys::training {

template <class T>
double relative_loss(const Kokkos::View<T*, Kokkos::LayoutRight, MemSpace>& dout,
                     const Kokkos::View<const T*, Kokkos::LayoutRight, MemSpace>& pred,
                     const Kokkos::View<const T*, Kokkos::LayoutRight, MemSpace>& target, long batch, long points,
                     long nx, long ny, int dim, double mu, double sigma, double h1_weight,
                     long mean_over = 0);

}  // namespace attnphys::training
