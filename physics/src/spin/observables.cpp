#include "attnphys/physics/spin/observables.hpp"

#include <cmath>

#include "attnphys/physics/spin/hamiltonian.hpp"

namespace attnphys::spin {

template <class T>
void magnetization(const View2<const T>& sigma, const View1<T>& mz) {
  ScopedRegion region("attnphys::spin_magnetization");
  require(mz.extent(0) == sigma.extent(0), "magnetization: output has ", mz.extent(0), " entries for ",
          sigma.extent(0), " samples");
  const int n = sigma.extent(1);
  Kokkos::parallel_for(
      "attnphys::spin_magnetization", Kokkos::RangePolicy<ExecSpace>(0, sigma.extent(0)),
      KOKKOS_LAMBDA(const long b) {
        double m = 0;
        for (int i = 0; i < n; ++i) m += double(sigma(b, i));
        mz(b) = T(0.5 * m);
      });
}

template <class T>
Correlations sz_correlations(const View2<const T>& sigma) {
  ScopedRegion region("attnphys::spin_sz_correlations");
  const long B = sigma.extent(0);
  const int n = sigma.extent(1);
  require(B > 0, "sz_correlations needs at least one sample");
  View2<double> c("attnphys::spin_zz", n, n);
  Kokkos::parallel_for(
      "attnphys::spin_sz_correlations", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {n, n}),
      KOKKOS_LAMBDA(const int i, const int j) {
        double s = 0;
        for (long b = 0; b < B; ++b) s += double(sigma(b, i)) * double(sigma(b, j));
        c(i, j) = 0.25 * s / double(B);
      });
  auto h = to_host(c);
  Correlations out{n, std::vector<double>(std::size_t(n) * n)};
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) out.values[std::size_t(i) * n + j] = h(i, j);
  return out;
}

namespace {
void check_state(const ChainHilbert& space, const std::vector<double>& psi) {
  require(long(psi.size()) == space.size(), "state vector has ", psi.size(), " entries, the space ", space.size());
}
}  // namespace

double exact_magnetization_squared(const ChainHilbert& space, const std::vector<double>& psi) {
  check_state(space, psi);
  double m2 = 0;
  for (long k = 0; k < space.size(); ++k) {
    const double m = 0.5 * (2 * popcount(space.state(k)) - space.n_sites());
    m2 += psi[k] * psi[k] * m * m;
  }
  return m2;
}

Correlations exact_sz_correlations(const ChainHilbert& space, const std::vector<double>& psi) {
  check_state(space, psi);
  const int n = space.n_sites();
  Correlations c{n, std::vector<double>(std::size_t(n) * n, 0.0)};
  for (long k = 0; k < space.size(); ++k) {
    const Basis s = space.state(k);
    const double w = psi[k] * psi[k];
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) c.values[std::size_t(i) * n + j] += (((s >> i) ^ (s >> j)) & 1u ? -0.25 : 0.25) * w;
  }
  return c;
}

Correlations exact_spin_correlations(const ChainHilbert& space, const std::vector<double>& psi) {
  Correlations c = exact_sz_correlations(space, psi);
  const int n = space.n_sites();
  // S^x_i S^x_j + S^y_i S^y_j = (S^+_i S^-_j + h.c.)/2 swaps antiparallel spins with element 1/2.
  for (long k = 0; k < space.size(); ++k) {
    const Basis s = space.state(k);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        if (i == j) {
          c.values[std::size_t(i) * n + i] += 0.5 * psi[k] * psi[k];  // S^x S^x + S^y S^y = 1/2 on one site
          continue;
        }
        if (!(((s >> i) ^ (s >> j)) & 1u)) continue;
        const long t = space.index(s ^ ((Basis(1) << i) | (Basis(1) << j)));
        c.values[std::size_t(i) * n + j] += 0.5 * psi[t] * psi[k];
      }
  }
  return c;
}

SpinHamiltonian spin_spin_operator(int n, int i, int j) {
  require(i != j && i >= 0 && j >= 0 && i < n && j < n, "spin_spin_operator needs two different sites in [0, ", n,
          "), got ", i, " and ", j);
  return SpinHamiltonian(n, {{i, j, 0.25}}, {{i, j, 0.5}}, {});
}

std::vector<double> structure_factor(const Correlations& c) {
  const int n = c.n;
  std::vector<double> s(n, 0.0);
  for (int k = 0; k < n; ++k) {
    const double q = 2.0 * M_PI * k / n;
    double acc = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) acc += std::cos(q * (i - j)) * c(i, j);
    s[k] = acc / n;
  }
  return s;
}

template void magnetization<float>(const View2<const float>&, const View1<float>&);
template void magnetization<double>(const View2<const double>&, const View1<double>&);
template Correlations sz_correlations<float>(const View2<const float>&);
template Correlations sz_correlations<double>(const View2<const double>&);

}  // namespace attnphys::spin
