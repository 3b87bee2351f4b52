#pragma once
// The execution spaces this Kokkos build enables, for kernels that run on any of them and for the tests that run
// each kernel on every one (tests/spaces.hpp).
//
// The library's own pipelines run on ExecSpace (Kokkos' default execution space, views.hpp). The kernel building
// blocks that take a Space template argument (attnphys::parallel_for, gemm_on, the layers of operators/layers.hpp)
// are instantiated for every space below, with views in that space's memory space (MatOn<T, Space>, gemm.hpp), so
// that a CUDA build's tests run them on Cuda, on the host backend (OpenMP) and on Serial alike.
#include <Kokkos_Core.hpp>
#include <type_traits>

// ATTNPHYS_FOR_EACH_SPACE(M) expands to M(Space) once per enabled execution space (for explicit instantiations).
#if defined(KOKKOS_ENABLE_SERIAL)
#define ATTNPHYS_SPACE_SERIAL_(M) M(Kokkos::Serial)
#else
#define ATTNPHYS_SPACE_SERIAL_(M)
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
#define ATTNPHYS_SPACE_OPENMP_(M) M(Kokkos::OpenMP)
#else
#define ATTNPHYS_SPACE_OPENMP_(M)
#endif
#if defined(KOKKOS_ENABLE_THREADS)
#define ATTNPHYS_SPACE_THREADS_(M) M(Kokkos::Threads)
#else
#define ATTNPHYS_SPACE_THREADS_(M)
#endif
#if defined(KOKKOS_ENABLE_CUDA)
#define ATTNPHYS_SPACE_CUDA_(M) M(Kokkos::Cuda)
#else
#define ATTNPHYS_SPACE_CUDA_(M)
#endif
#if defined(KOKKOS_ENABLE_HIP) && KOKKOS_VERSION >= 40000
#define ATTNPHYS_SPACE_HIP_(M) M(Kokkos::HIP)
#else
#define ATTNPHYS_SPACE_HIP_(M)
#endif
#define ATTNPHYS_FOR_EACH_SPACE(M)                                                                   \
  ATTNPHYS_SPACE_SERIAL_(M) ATTNPHYS_SPACE_OPENMP_(M) ATTNPHYS_SPACE_THREADS_(M) ATTNPHYS_SPACE_CUDA_(M) \
  ATTNPHYS_SPACE_HIP_(M)

namespace attnphys {

// True when the host can read and write Space's memory (Serial, OpenMP, Threads; not Cuda or HIP device memory).
template <class Space>
constexpr bool host_accessible() {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Space::memory_space>::accessible;
}

}  // namespace attnphys
