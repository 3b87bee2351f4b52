// attnphys::parallel_for (core/parallel.hpp): every index runs exactly once whatever the thread count, results do
// not depend on the thread count, a call from inside a body and calls from several threads at once complete, and
// the pool survives changes of its size.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <type_traits>
#include <vector>

#include "attnphys/core/parallel.hpp"

using namespace attnphys;

namespace {

struct ThreadsGuard {
  int saved = host_threads();
  ~ThreadsGuard() { set_host_threads(saved); }
};

// The kernels live in free functions: nvcc refuses device lambdas inside GoogleTest bodies (private TestBody()).
void add_one_to_each(const View1<int>& h, long n) {
  attnphys::parallel_for("test::hits", n, KOKKOS_LAMBDA(long i) { h(i) += 1; });
}

void fill_series(const View1<double>& out, long n) {
  attnphys::parallel_for("test::series", n, KOKKOS_LAMBDA(long i) {
    double s = 0.0;
    for (long k = 1; k <= 50 + i % 13; ++k) s += math::sin(0.001 * double(i * k)) / double(k);
    out(i) = s;
  });
}

}  // namespace

TEST(HostParallel, EveryIndexRunsExactlyOnceForAnyThreadCountAndSize) {
  ThreadsGuard guard;
  for (int threads : {1, 2, 3, 4}) {
    set_host_threads(threads);
    EXPECT_EQ(host_threads(), threads);
    for (long n : {0L, 1L, 2L, 7L, 64L, 1001L}) {
      View1<int> hits("hits", n);
      add_one_to_each(hits, n);  // captured by value, as in a library kernel
      Kokkos::fence();
      auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), hits);
      long wrong = 0;
      for (long i = 0; i < n; ++i) wrong += host(i) != 1;
      EXPECT_EQ(wrong, 0) << "threads " << threads << ", n " << n;
    }
  }
}

TEST(HostParallel, ResultsAreBitIdenticalAcrossThreadCounts) {
  ThreadsGuard guard;
  const long n = 4099;
  auto run = [&](int threads) {
    set_host_threads(threads);
    View1<double> out("out", n);
    fill_series(out, n);
    Kokkos::fence();
    return Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
  };
  auto a = run(1), b = run(2), c = run(3);
  long diff = 0;
  for (long i = 0; i < n; ++i) diff += a(i) != b(i) || a(i) != c(i);
  EXPECT_EQ(diff, 0);
}

// Host-pool behaviour: host lambdas are only valid when the execution space is Serial (elsewhere parallel_for is
// Kokkos::parallel_for on the backend and this check does not apply).
template <class Space>
void nested_and_concurrent_checks() {
#if defined(KOKKOS_ENABLE_SERIAL)
  if constexpr (std::is_same<Space, Kokkos::Serial>::value) {
    set_host_threads(2);
    const long n = 200;
    std::vector<long> out(n * n, -1);
    long* o = out.data();
    // A body that calls parallel_for again runs the inner range on its own thread.
    attnphys::parallel_for("test::outer", n, [=](long i) {
      attnphys::parallel_for("test::inner", n, [=](long j) { o[i * n + j] = i * n + j; });
    });
    long wrong = 0;
    for (long k = 0; k < n * n; ++k) wrong += out[k] != k;
    EXPECT_EQ(wrong, 0);
    // Two host threads launching at once take turns on the pool.
    std::vector<long> sums(2, 0);
    std::vector<std::thread> callers;
    for (int c = 0; c < 2; ++c)
      callers.emplace_back([&, c] {
        std::vector<long> v(5000, 0);
        long* p = v.data();
        for (int rep = 0; rep < 20; ++rep) attnphys::parallel_for("test::caller", 5000, [=](long i) { p[i] += i; });
        for (long x : v) sums[c] += x;
      });
    for (auto& t : callers) t.join();
    const long expect = 20L * 4999 * 5000 / 2;
    EXPECT_EQ(sums[0], expect);
    EXPECT_EQ(sums[1], expect);
    return;
  }
#endif
  GTEST_SKIP() << "the host pool applies only when Kokkos runs Serial";
}

TEST(HostParallel, NestedCallsAndConcurrentCallersComplete) {
  ThreadsGuard guard;
  nested_and_concurrent_checks<ExecSpace>();
}
