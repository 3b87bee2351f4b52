// gemm wrapper against a naive reference on awkward sizes and every transpose combination.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include <cstdint>
#include <cstring>

#include "attnphys/core/amx.hpp"
#include "attnphys/core/gemm.hpp"
#include "attnphys/core/random.hpp"

using namespace attnphys;

namespace {

// Random op(A) [m × k], op(B) [k × n] and C [m × n] (fixed seeds), with host copies of the inputs.
template <class T>
struct Operands {
  View2<T> A, B, C;
  typename View2<T>::HostMirror hA, hB, hC0;
  Operands(bool at, bool bt, long m, long n, long k)
      : A("A", at ? k : m, at ? m : k), B("B", bt ? n : k, bt ? k : n), C("C", m, n) {
    fill_normal(A, 1, 1);
    fill_normal(B, 1, 2);
    fill_normal(C, 1, 3);
    hA = to_host(A);
    hB = to_host(B);
    hC0 = Kokkos::create_mirror_view(C);
    Kokkos::deep_copy(hC0, C);
  }
};

template <class T>
void check_gemm(char ta, char tb, long m, long n, long k, T alpha, T beta, double tol) {
  const bool at = ta == 'T', bt = tb == 'T';
  Operands<T> op(at, bt, m, n, k);
  auto &A = op.A, &B = op.B, &C = op.C;
  auto &hA = op.hA, &hB = op.hB, &hC0 = op.hC0;
  std::vector<double> ref(m * n);
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) {
      double s = 0;
      for (long l = 0; l < k; ++l) s += double(at ? hA(l, i) : hA(i, l)) * double(bt ? hB(j, l) : hB(l, j));
      ref[i * n + j] = double(alpha) * s + (beta == T(0) ? 0.0 : double(beta) * double(hC0(i, j)));
    }
  gemm(ta, tb, alpha, A, B, beta, C);
  auto hC = to_host(C);
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j)
      ASSERT_NEAR(double(hC(i, j)), ref[i * n + j], tol * (1 + std::abs(ref[i * n + j])))
          << ta << tb << " " << m << "x" << n << "x" << k << " at " << i << "," << j;
}

double bf16_round(float x) {  // round to nearest even, as the AMX packing does
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}

// Under MatmulPrecision::BF16 (AMX): against a double reference on the bf16-rounded operands, so the layouts are
// checked exactly and only the float32 accumulation differs (2e-6 of sum |a||b|); and within bf16 rounding of the
// float32 product.
void check_gemm_bf16(char ta, char tb, long m, long n, long k, float alpha, float beta) {
  const bool at = ta == 'T', bt = tb == 'T';
  Operands<float> op(at, bt, m, n, k);
  auto &A = op.A, &B = op.B, &C = op.C;
  auto &hA = op.hA, &hB = op.hB, &hC0 = op.hC0;
  std::vector<double> ref(m * n), mag(m * n), exact(m * n);
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) {
      double s = 0, a = 0, e = 0;
      for (long l = 0; l < k; ++l) {
        const float x = at ? hA(l, i) : hA(i, l), y = bt ? hB(j, l) : hB(l, j);
        s += bf16_round(x) * bf16_round(y);
        a += std::abs(double(x) * double(y));
        e += double(x) * double(y);
      }
      const double c0 = beta == 0.0f ? 0.0 : double(beta) * double(hC0(i, j));
      ref[i * n + j] = double(alpha) * s + c0;
      exact[i * n + j] = double(alpha) * e + c0;
      mag[i * n + j] = std::abs(double(alpha)) * a + std::abs(c0);
    }
  {
    MatmulPrecisionScope scope(MatmulPrecision::BF16);
    gemm(ta, tb, alpha, A, B, beta, C);
  }
  EXPECT_EQ(matmul_precision(), MatmulPrecision::Float32);  // the scope restored it
  auto hC = to_host(C);
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) {
      ASSERT_NEAR(double(hC(i, j)), ref[i * n + j], 2e-6 * (1 + mag[i * n + j]))
          << ta << tb << " " << m << "x" << n << "x" << k << " at " << i << "," << j;
      ASSERT_NEAR(double(hC(i, j)), exact[i * n + j], 8e-3 * (1 + mag[i * n + j]));
    }
}

}  // namespace

TEST(GemmBf16, MatchesTheRoundedOperandsOnEveryTransposeAndEdge) {
  if (!amx::available()) GTEST_SKIP() << amx::unavailable_reason();
  // Sizes below a tile, not multiples of 16 or 32, k over several tile steps, and the training step's shapes.
  const long shapes[][3] = {{1, 1, 1}, {13, 15, 17}, {64, 33, 70}, {37, 16, 5}, {33, 47, 100}, {301, 64, 16},
                            {96, 64, 2049}, {512, 192, 64}};
  for (char ta : {'N', 'T'})
    for (char tb : {'N', 'T'})
      for (const auto& s : shapes) {
        check_gemm_bf16(ta, tb, s[0], s[1], s[2], 1.0f, 0.0f);
        check_gemm_bf16(ta, tb, s[0], s[1], s[2], 0.75f, -1.0f);
      }
}

TEST(GemmBf16, RefusedWhereAmxIsMissing) {
  if (amx::available()) {
    EXPECT_TRUE(amx::unavailable_reason().empty());
    return;
  }
  EXPECT_FALSE(amx::unavailable_reason().empty());
  EXPECT_THROW({ MatmulPrecisionScope scope(MatmulPrecision::BF16); }, Error);
}

class GemmShapes : public ::testing::TestWithParam<std::tuple<char, char, std::tuple<long, long, long>>> {};

TEST_P(GemmShapes, MatchesNaiveReferenceDouble) {
  auto [ta, tb, s] = GetParam();
  auto [m, n, k] = s;
  check_gemm<double>(ta, tb, m, n, k, 1.0, 0.0, 1e-12);
  check_gemm<double>(ta, tb, m, n, k, -0.5, 2.0, 1e-12);
}

TEST_P(GemmShapes, MatchesNaiveReferenceFloat) {
  auto [ta, tb, s] = GetParam();
  auto [m, n, k] = s;
  check_gemm<float>(ta, tb, m, n, k, 1.0f, 0.0f, 1e-5);
  check_gemm<float>(ta, tb, m, n, k, 0.75f, -1.0f, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Awkward, GemmShapes,
    ::testing::Combine(::testing::Values('N', 'T'), ::testing::Values('N', 'T'),
                       ::testing::Values(std::make_tuple(0L, 0L, 0L), std::make_tuple(1L, 1L, 1L),
                                         std::make_tuple(13L, 15L, 17L), std::make_tuple(4L, 0L, 3L),
                                         std::make_tuple(5L, 3L, 0L), std::make_tuple(64L, 33L, 70L),
                                         // narrow products (the host kernel for n = 16, 32, 64 and k <= 64 when
                                         // built for AVX2/AVX-512; BLAS otherwise): odd row counts, k = 1 and 64
                                         std::make_tuple(37L, 16L, 5L), std::make_tuple(1L, 32L, 64L),
                                         std::make_tuple(301L, 64L, 16L), std::make_tuple(7L, 16L, 1L),
                                         std::make_tuple(2100L, 64L, 40L))));

TEST(Gemm, BetaZeroNeverReadsC) {
  // BLAS semantics: with beta = 0, C is output only, so NaN or Inf already in it must not leak into the result.
  for (long n : {16L, 15L}) {
    View2<double> A("A", 9, 3), B("B", n, 3), C("C", 9, n);
    fill_normal(A, 1, 1);
    fill_normal(B, 1, 2);
    Kokkos::deep_copy(C, std::nan(""));
    gemm('N', 'T', 1.0, A, B, 0.0, C);
    auto hC = to_host(C);
    for (std::size_t i = 0; i < hC.size(); ++i) ASSERT_TRUE(std::isfinite(hC.data()[i])) << "n = " << n;
  }
}

TEST(Gemm, ZeroInnerDimensionScalesC) {
  View2<double> A("A", 3, 0), B("B", 0, 2), C("C", 3, 2);
  Kokkos::deep_copy(C, 4.0);
  gemm('N', 'N', 1.0, A, B, 0.5, C);
  auto h = to_host(C);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) EXPECT_EQ(h(i, j), 2.0);
  gemm('N', 'N', 1.0, A, B, 0.0, C);
  h = to_host(C);
  EXPECT_EQ(h(2, 1), 0.0);
}

TEST(Gemm, ShapeMismatchIsAClearError) {
  View2<double> A("A", 3, 4), B("B", 5, 2), C("C", 3, 2);
  try {
    gemm('N', 'N', 1.0, A, B, 0.0, C);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inner dimensions differ"), std::string::npos) << e.what();
  }
  View2<double> B2("B", 4, 2), Cbad("C", 2, 2);
  EXPECT_THROW(gemm('N', 'N', 1.0, A, B2, 0.0, Cbad), Error);
  EXPECT_THROW(gemm('X', 'N', 1.0, A, B2, 0.0, C), Error);
}

TEST(BatchedGemm, EachSliceAndSharedOperand) {
  const long nb = 3, m = 5, n = 4, k = 6;
  View3<double> A("A", nb, m, k), W("W", 1, n, k), C("C", nb, m, n);
  fill_normal(A, 7, 1);
  fill_normal(W, 7, 2);
  batched_gemm('N', 'T', 1.0, A, W, 0.0, C);  // C_b = A_b W^T, W shared
  auto hA = to_host(A), hW = to_host(W), hC = to_host(C);
  for (long b = 0; b < nb; ++b)
    for (long i = 0; i < m; ++i)
      for (long j = 0; j < n; ++j) {
        double s = 0;
        for (long l = 0; l < k; ++l) s += hA(b, i, l) * hW(0, j, l);
        EXPECT_NEAR(hC(b, i, j), s, 1e-12);
      }
  View3<double> Bbad("B", 2, k, n);
  EXPECT_THROW(batched_gemm('N', 'N', 1.0, A, Bbad, 0.0, C), Error);
}
