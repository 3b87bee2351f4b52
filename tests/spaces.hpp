#pragma once
// Kernel tests on every enabled execution space, in the way of Cabana and Kokkos' own tests: a typed test suite
// over attnphys::test::Spaces runs once per space that this Kokkos build enables (Serial, OpenMP, Threads, Cuda,
// HIP). CTest names each instance by its space (`operators.LayersOnSpace.SoftmaxRowsSumToOneAndGradient<Kokkos::Cuda>`;
// GoogleTest itself prints `LayersOnSpace/2.` with `# TypeParam = Kokkos::Cuda`). Data is made on the host, copied
// into the space's memory with on_space<Space>, and read back with host_values.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "attnphys/core/spaces.hpp"
#include "attnphys/core/views.hpp"

namespace attnphys::test {

namespace detail {
#if defined(KOKKOS_ENABLE_SERIAL)
using SerialList = std::tuple<Kokkos::Serial>;
#else
using SerialList = std::tuple<>;
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
using OpenMPList = std::tuple<Kokkos::OpenMP>;
#else
using OpenMPList = std::tuple<>;
#endif
#if defined(KOKKOS_ENABLE_THREADS)
using ThreadsList = std::tuple<Kokkos::Threads>;
#else
using ThreadsList = std::tuple<>;
#endif
#if defined(KOKKOS_ENABLE_CUDA)
using CudaList = std::tuple<Kokkos::Cuda>;
#else
using CudaList = std::tuple<>;
#endif
#if defined(KOKKOS_ENABLE_HIP) && KOKKOS_VERSION >= 40000
using HipList = std::tuple<Kokkos::HIP>;
#else
using HipList = std::tuple<>;
#endif
using All = decltype(std::tuple_cat(std::declval<SerialList>(), std::declval<OpenMPList>(),
                                    std::declval<ThreadsList>(), std::declval<CudaList>(), std::declval<HipList>()));
template <class L>
struct ToGtest;
template <class... S>
struct ToGtest<std::tuple<S...>> {
  using type = ::testing::Types<S...>;
};
}  // namespace detail

// The enabled execution spaces, in the order above (the same list as ATTNPHYS_FOR_EACH_SPACE).
using Spaces = detail::ToGtest<detail::All>::type;
constexpr std::size_t kSpaceCount = std::tuple_size<detail::All>::value;

// A [rows, cols] view in Space's memory holding v (row-major).
template <class Space, class T>
Kokkos::View<T**, Kokkos::LayoutRight, typename Space::memory_space> on_space(const std::vector<T>& v, long rows,
                                                                                long cols) {
  Kokkos::View<T**, Kokkos::LayoutRight, typename Space::memory_space> d("test", rows, cols);
  Kokkos::deep_copy(d, HostView2<const T>(v.data(), rows, cols));
  return d;
}

// A host vector of any view's values (row-major).
template <class V>
std::vector<double> host_values(const V& v) {
  auto h = to_host(v);
  return std::vector<double>(h.data(), h.data() + h.span());
}

}  // namespace attnphys::test
