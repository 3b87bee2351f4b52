// The kernel building blocks on every enabled execution space (tests/spaces.hpp): attnphys::parallel_for, gemm_on
// and the counter-based random fills run on Serial, OpenMP, Cuda... alike, with their views in that space's memory.
// The list itself matches the Kokkos build.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "attnphys/core/gemm.hpp"
#include "attnphys/core/parallel.hpp"
#include "attnphys/core/random.hpp"
#include "spaces.hpp"

using namespace attnphys;

namespace {

template <class S>
struct Contains;
template <>
struct Contains<::testing::Types<>> {
  template <class X>
  static constexpr bool has() {
    return false;
  }
};
template <class H, class... R>
struct Contains<::testing::Types<H, R...>> {
  template <class X>
  static constexpr bool has() {
    return std::is_same<H, X>::value || Contains<::testing::Types<R...>>::template has<X>();
  }
};

// Every index of [0, n) written once by parallel_for<Space> (a free function: nvcc refuses device lambdas in
// GoogleTest bodies).
template <class Space>
long wrong_hits(long n) {
  Kokkos::View<int*, typename Space::memory_space> hits("hits", n);
  attnphys::parallel_for<Space>("test::hits", n, KOKKOS_LAMBDA(long i) { hits(i) += int(i % 7) + 1; });
  Space().fence();
  auto h = to_host(hits);
  long wrong = 0;
  for (long i = 0; i < n; ++i) wrong += h(i) != int(i % 7) + 1;
  return wrong;
}

template <class T>
std::vector<T> normal_values(long n, std::uint64_t seed) {
  std::vector<T> v(n);
  for (long i = 0; i < n; ++i) v[i] = T(CounterRng(seed, 3, i).normal());
  return v;
}

// gemm_on<Space> against a naive double-precision reference for one shape, transpose pair, alpha and beta.
template <class Space, class T>
double gemm_error(char ta, char tb, long m, long n, long k, T alpha, T beta) {
  const bool at = ta == 'T', bt = tb == 'T';
  const long ar = at ? k : m, ac = at ? m : k, br = bt ? n : k, bc = bt ? k : n;
  const auto a = normal_values<T>(ar * ac, 1), b = normal_values<T>(br * bc, 2), c0 = normal_values<T>(m * n, 3);
  auto A = test::on_space<Space>(a, ar, ac), B = test::on_space<Space>(b, br, bc), C = test::on_space<Space>(c0, m, n);
  gemm_on<Space, T>(ta, tb, alpha, A, B, beta, C);
  const auto c = test::host_values(C);
  double worst = 0;
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) {
      double s = 0;
      for (long l = 0; l < k; ++l)
        s += double(at ? a[l * ac + i] : a[i * ac + l]) * double(bt ? b[j * bc + l] : b[l * bc + j]);
      const double ref = double(alpha) * s + (beta == T(0) ? 0.0 : double(beta) * double(c0[i * n + j]));
      worst = std::fmax(worst, std::abs(c[i * n + j] - ref) / (1 + std::abs(ref)));
    }
  return worst;
}

}  // namespace

TEST(Spaces, TheListHoldsTheDefaultSpacesOfThisKokkosBuild) {
  EXPECT_GE(test::kSpaceCount, 1u);
  EXPECT_TRUE(Contains<test::Spaces>::has<Kokkos::DefaultExecutionSpace>()) << ExecSpace::name();
  EXPECT_TRUE(Contains<test::Spaces>::has<Kokkos::DefaultHostExecutionSpace>()) << HostExecSpace::name();
#if defined(KOKKOS_ENABLE_SERIAL)
  EXPECT_TRUE(Contains<test::Spaces>::has<Kokkos::Serial>());
#endif
#if defined(KOKKOS_ENABLE_CUDA)
  EXPECT_TRUE(Contains<test::Spaces>::has<Kokkos::Cuda>());
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  EXPECT_TRUE(Contains<test::Spaces>::has<Kokkos::OpenMP>());
#endif
}

template <class Space>
class KernelsOnSpace : public ::testing::Test {};
TYPED_TEST_SUITE(KernelsOnSpace, test::Spaces);

TYPED_TEST(KernelsOnSpace, ParallelForRunsEveryIndexOnce) {
  for (long n : {0L, 1L, 7L, 1000L, 100003L}) EXPECT_EQ(wrong_hits<TypeParam>(n), 0) << "n " << n;
}

TYPED_TEST(KernelsOnSpace, GemmMatchesANaiveReferenceOnEveryTranspose) {
  const long shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {64, 64, 64}, {3, 130, 16}};
  for (char ta : {'N', 'T'})
    for (char tb : {'N', 'T'})
      for (const auto& s : shapes) {
        EXPECT_LT((gemm_error<TypeParam, double>(ta, tb, s[0], s[1], s[2], 1.0, 0.0)), 1e-13)
            << ta << tb << " " << s[0] << "x" << s[1] << "x" << s[2];
        EXPECT_LT((gemm_error<TypeParam, double>(ta, tb, s[0], s[1], s[2], -0.5, 2.0)), 1e-13);
        EXPECT_LT((gemm_error<TypeParam, float>(ta, tb, s[0], s[1], s[2], 0.75f, -1.0f)), 2e-5);
      }
}

TYPED_TEST(KernelsOnSpace, RandomFillsGiveTheHostStreamsNumbers) {
  // A view whose execution space is TypeParam itself (a plain HostSpace view would run on the default host space).
  using Dev = Kokkos::Device<TypeParam, typename TypeParam::memory_space>;
  const long n = 4099;
  Kokkos::View<double*, Kokkos::LayoutRight, Dev> g("g", n), u("u", n);
  fill_normal(g, 11, 5, 0.5, 2.0);
  fill_uniform(u, 11, 6, -1.0, 3.0);
  TypeParam().fence();
  const auto hg = test::host_values(g), hu = test::host_values(u);
  long wrong_u = 0;
  double worst_g = 0;
  for (long i = 0; i < n; ++i) {
    CounterRng rg(11, 5, 2 * std::uint64_t(i)), ru(11, 6, std::uint64_t(i));
    const double eg = 0.5 + 2.0 * rg.normal(), eu = -1.0 + 4.0 * ru.uniform();
    wrong_u += hu[i] != eu;  // integer arithmetic and one exact scaling: the same bits everywhere
    worst_g = std::fmax(worst_g, std::abs(hg[i] - eg) / (1 + std::abs(eg)));  // log and cos may round differently
  }
  EXPECT_EQ(wrong_u, 0);
  EXPECT_LT(worst_g, 1e-13);
}
