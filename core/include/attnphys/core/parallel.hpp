#pragma once
// attnphys::parallel_for: Kokkos::parallel_for over [0, n), plus host threads when Kokkos runs Serial.
//
// Debian's Kokkos 3.4 has only the Serial backend, so on a laptop or a CPU node every Kokkos kernel runs on one core
// while OpenBLAS uses them all. For kernels whose work items are independent (each index writes its own outputs
// and reads nothing another index writes: what every Kokkos parallel_for must be anyway, or it would race on OpenMP
// and CUDA) this helper splits the range over a small persistent pool of host threads when the execution space is
// Kokkos::Serial. The results are bit-identical to a serial run whatever the thread count or scheduling, because
// no index's arithmetic depends on another's. With any other backend (OpenMP, CUDA, HIP) it is exactly
// Kokkos::parallel_for, and the backend's own threads do the work.
//
// The body is called by const reference from the pool's threads (the functor is never copied there), so it may
// capture Views by value as KOKKOS_LAMBDA does; it must not call into Kokkos (allocate, deep_copy, fence) or
// throw, and it must not rely on Kokkos atomics: a Serial-only Kokkos compiles them as plain read-modify-writes
// (KOKKOS_ENABLE_SERIAL_ATOMICS), so a kernel with atomic_add stays on Kokkos::parallel_for. Reductions are not
// offered: a parallel sum would change the rounding with the thread count.
//
// Thread count: ATTNPHYS_NUM_THREADS if set, else OpenBLAS' thread count (which follows OPENBLAS_NUM_THREADS /
// OMP_NUM_THREADS), else the hardware's; divided by the MPI ranks of the job (ranks already use the cores).
// `set_host_threads(k)` overrides it at run time (1: no pool).
#include <Kokkos_Core.hpp>
#include <type_traits>

#include "attnphys/core/spaces.hpp"
#include "attnphys/core/views.hpp"

namespace attnphys {

int host_threads();              // the threads parallel_for uses under Serial (1: none besides the caller)
void set_host_threads(int n);    // n <= 0: back to the default above
bool host_pool_applies();        // true when ExecSpace is Kokkos::Serial (the pool can be used at all)
// Both the host pool and OpenBLAS (when it is the BLAS) to n threads, as torch.set_num_threads does for PyTorch.
void set_num_threads(int n);
// What set_num_threads controls, so that saving it and setting it back restores the state (torch's idiom): the host
// pool's threads under Serial; with another backend, whose own threads run the kernels, OpenBLAS' threads (the
// backend's concurrency when OpenBLAS is not the BLAS).
int get_num_threads();

namespace detail {
// Runs body(ctx, begin, end) over disjoint chunks that cover [0, n), on the calling thread and the pool's.
// Returns when every chunk is done. Called from a pool thread, it runs everything on the caller.
void host_pool_run(long n, long grain, void (*body)(const void*, long, long), const void* ctx);
}  // namespace detail

// parallel_for(label, n, f): f(i) for i in [0, n). `grain` is the smallest number of indices worth handing to
// another thread (a hint for cheap bodies; the default 1 suits bodies that do micro-seconds of work or more).
// parallel_for<Space>(...) runs on another enabled execution space (core/spaces.hpp); the host pool serves Serial.
template <class Space = ExecSpace, class F>
void parallel_for(const char* label, long n, const F& f, long grain = 1) {
#if defined(KOKKOS_ENABLE_SERIAL)
  if constexpr (std::is_same<Space, Kokkos::Serial>::value) {
    if (n > grain && host_threads() > 1) {
      Kokkos::Profiling::pushRegion(label);
      detail::host_pool_run(
          n, grain,
          [](const void* ctx, long b, long e) {
            const F& fn = *static_cast<const F*>(ctx);
            for (long i = b; i < e; ++i) fn(i);
          },
          &f);
      Kokkos::Profiling::popRegion();
      return;
    }
  }
#endif
  Kokkos::parallel_for(label, Kokkos::RangePolicy<Space>(0, n), f);
}

}  // namespace attnphys
