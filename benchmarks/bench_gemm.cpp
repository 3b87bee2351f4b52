// gemm: the attnphys wrapper (KokkosBlas::gemm) against calling the BLAS directly, float32 and float64, on the
// shapes the attention layers use. The peer is the vendor sgemm/dgemm itself: the wrapper should cost nothing.
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_common.hpp"
#include "attnphys/core/gemm.hpp"
#include "attnphys/core/json.hpp"
#include "attnphys/core/random.hpp"
#include "attnphys/core/runtime.hpp"

extern "C" {
void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*, const int*,
            const float*, const int*, const float*, float*, const int*);
void dgemm_(const char*, const char*, const int*, const int*, const int*, const double*, const double*, const int*,
            const double*, const int*, const double*, double*, const int*);
}

using namespace attnphys;

namespace {
template <class F>
double best_seconds(F&& f, int reps) {
  double best = 1e30;
  f();  // warm-up
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    Kokkos::fence();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

template <class T>
std::pair<double, double> measure(int m, int n, int k) {
  View2<T> A("A", m, k), B("B", k, n), C("C", m, n);
  fill_normal(A, 1, 0);
  fill_normal(B, 1, 1);
  const double ours = best_seconds([&] { gemm('N', 'N', T(1), A, B, T(0), C); }, 5);
  auto hA = to_host(A), hB = to_host(B);
  std::vector<T> c(size_t(m) * n);
  const T one = 1, zero = 0;
  // Row-major C = A B is column-major C^T = B^T A^T.
  const double peer = best_seconds(
      [&] {
        if constexpr (std::is_same_v<T, float>)
          sgemm_("N", "N", &n, &m, &k, &one, hB.data(), &n, hA.data(), &k, &zero, c.data(), &n);
        else
          dgemm_("N", "N", &n, &m, &k, &one, hB.data(), &n, hA.data(), &k, &zero, c.data(), &n);
      },
      5);
  return {ours, peer};
}
}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  Json out = Json::object();
  out.set("benchmark", "gemm");
  double worst_ratio = 0;
  struct Shape {
    const char* name;
    int m, n, k;
  };
  const Shape shapes[] = {{"square_1024", 1024, 1024, 1024}, {"tokens_16384x64x64", 16384, 64, 64},
                          {"ffn_16384x256x64", 16384, 256, 64}, {"scores_1024x1024x16", 1024, 1024, 16}};
  std::printf("%-24s %6s %12s %12s %10s %8s\n", "shape", "type", "attnphys_s", "blas_s", "GFLOP/s", "ratio");
  for (const auto& s : shapes) {
    for (int dbl = 0; dbl < 2; ++dbl) {
      auto [ours, peer] = dbl ? measure<double>(s.m, s.n, s.k) : measure<float>(s.m, s.n, s.k);
      const double gf = gemm_flops(s.m, s.n, s.k) / ours * 1e-9;
      const double ratio = ours / peer;
      worst_ratio = std::max(worst_ratio, ratio);
      std::printf("%-24s %6s %12.6f %12.6f %10.1f %8.3f\n", s.name, dbl ? "f64" : "f32", ours, peer, gf, ratio);
      const std::string key = std::string(s.name) + (dbl ? "_f64" : "_f32");
      out.set(key + "_gflops", gf);
      out.set(key + "_ratio", ratio);
    }
  }
  out.set("ratio", worst_ratio);
  out.set("blas", runtime_info().blas);
  out.set("machine", bench::machine_json());
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
