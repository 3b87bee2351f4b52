#pragma once
// View aliases, the profiling region helper, and portable device math used by every component.
//
// Memory lives in the default execution space's memory space unless a name says Host. Layouts are LayoutRight
// (row-major, the numpy and HDF5 order) everywhere, so host mirrors map to numpy without a transpose.
#include <Kokkos_Core.hpp>
#include <string>

#include "attnphys/core/error.hpp"

namespace attnphys {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemSpace = ExecSpace::memory_space;
using HostExecSpace = Kokkos::DefaultHostExecutionSpace;
using HostSpace = Kokkos::HostSpace;

template <class T>
using View1 = Kokkos::View<T*, Kokkos::LayoutRight, MemSpace>;
template <class T>
using View2 = Kokkos::View<T**, Kokkos::LayoutRight, MemSpace>;
template <class T>
using View3 = Kokkos::View<T***, Kokkos::LayoutRight, MemSpace>;
template <class T>
using View4 = Kokkos::View<T****, Kokkos::LayoutRight, MemSpace>;

template <class T>
using HostView1 = Kokkos::View<T*, Kokkos::LayoutRight, HostSpace>;
template <class T>
using HostView2 = Kokkos::View<T**, Kokkos::LayoutRight, HostSpace>;
template <class T>
using HostView3 = Kokkos::View<T***, Kokkos::LayoutRight, HostSpace>;

// Non-owning views over memory owned elsewhere (sub-blocks of a ParameterBuffer, reshaped activations).
template <class T>
using Unmanaged1 = Kokkos::View<T*, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T>
using Unmanaged2 = Kokkos::View<T**, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T>
using Unmanaged3 = Kokkos::View<T***, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// RAII profiling region; the label is also the label of the kernels inside ("attnphys::layernorm_forward").
class ScopedRegion {
 public:
  explicit ScopedRegion(const std::string& name) { Kokkos::Profiling::pushRegion(name); }
  ~ScopedRegion() { Kokkos::Profiling::popRegion(); }
  ScopedRegion(const ScopedRegion&) = delete;
  ScopedRegion& operator=(const ScopedRegion&) = delete;
};

// Device-callable math: Kokkos 3.4 keeps these in Kokkos::Experimental, Kokkos >= 3.7 in Kokkos.
namespace math {
#if KOKKOS_VERSION >= 30700
using Kokkos::abs;
using Kokkos::cos;
using Kokkos::cosh;
using Kokkos::erf;
using Kokkos::exp;
using Kokkos::expm1;
using Kokkos::fmax;
using Kokkos::fmin;
using Kokkos::isfinite;
using Kokkos::isnan;
using Kokkos::log;
using Kokkos::log1p;
using Kokkos::pow;
using Kokkos::sin;
using Kokkos::sqrt;
using Kokkos::tanh;
#else
using Kokkos::Experimental::cos;
using Kokkos::Experimental::cosh;
using Kokkos::Experimental::erf;
using Kokkos::Experimental::exp;
using Kokkos::Experimental::expm1;
using Kokkos::Experimental::fabs;
using Kokkos::Experimental::fmax;
using Kokkos::Experimental::fmin;
using Kokkos::Experimental::isfinite;
using Kokkos::Experimental::isnan;
using Kokkos::Experimental::log;
using Kokkos::Experimental::log1p;
using Kokkos::Experimental::pow;
using Kokkos::Experimental::sin;
using Kokkos::Experimental::sqrt;
using Kokkos::Experimental::tanh;
template <class T>
KOKKOS_INLINE_FUNCTION T abs(T x) {
  return x < T(0) ? -x : x;
}
#endif
}  // namespace math

// A host copy of a view (the view itself when it already lives in host memory). I/O boundaries only.
template <class V>
auto to_host(const V& v) {
  auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), v);
  Kokkos::deep_copy(h, v);
  return h;
}

// Grow-only work buffers: v is reallocated (uninitialised, with this label) only when its extents differ from
// n..., so buffers sized once are reused while the shapes repeat.
template <class V, class... I>
void grow_view(V& v, const char* label, I... n) {
  static_assert(sizeof...(I) == V::rank, "grow_view: one extent per dimension of the view");
  const long want[] = {static_cast<long>(n)...};
  bool same = true;
  for (unsigned r = 0; r < V::rank; ++r) same = same && static_cast<long>(v.extent(r)) == want[r];
  if (!same) v = V(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), static_cast<std::size_t>(n)...);
}

}  // namespace attnphys
