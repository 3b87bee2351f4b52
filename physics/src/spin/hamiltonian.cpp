#include "attnphys/physics/spin/hamiltonian.hpp"

namespace attnphys::spin {

namespace {
// Nearest (range 1) or next-nearest (range 2) bonds of a chain.
std::vector<std::pair<int, int>> bonds(int n, int range, bool periodic) {
  std::vector<std::pair<int, int>> b;
  for (int i = 0; i < n; ++i) {
    const int j = i + range;
    if (j < n) b.emplace_back(i, j);
    else if (periodic && n > range) b.emplace_back(i, j % n);
  }
  return b;
}

template <class T>
View1<T> upload_vec(const std::vector<T>& v, const char* label) {
  View1<T> d(std::string(label), v.size());
  auto h = Kokkos::create_mirror_view(d);
  for (std::size_t k = 0; k < v.size(); ++k) h(k) = v[k];
  Kokkos::deep_copy(d, h);
  return d;
}
}  // namespace

SpinHamiltonian::SpinHamiltonian(const ChainModel& m) : n_(m.n) {
  m.validate();
  const bool pbc = m.periodic();
  if (m.model == ModelKind::Tfim) {
    for (auto [i, j] : bonds(n_, 1, pbc)) zz_.push_back({i, j, -m.J});
    for (int i = 0; i < n_; ++i) flips_.push_back({i, -m.h});
  } else {
    const double delta = m.anisotropy();
    auto add = [&](double J, int range) {
      if (J == 0.0) return;
      for (auto [i, j] : bonds(n_, range, pbc)) {
        zz_.push_back({i, j, J * delta / 4.0});
        exchange_.push_back({i, j, J / 2.0});
      }
    };
    add(m.J, 1);
    if (m.model == ModelKind::J1J2) add(m.j2, 2);
  }
  upload();
}

SpinHamiltonian::SpinHamiltonian(int n, std::vector<ZZTerm> zz, std::vector<ExchangeTerm> ex,
                                 std::vector<FlipTerm> fl)
    : n_(n), zz_(std::move(zz)), exchange_(std::move(ex)), flips_(std::move(fl)) {
  require(n >= 1, "a Hamiltonian needs at least one site");
  auto ok = [n](int i) { return i >= 0 && i < n; };
  for (auto& t : zz_) require(ok(t.i) && ok(t.j), "zz term on sites (", t.i, ", ", t.j, ") outside the chain");
  for (auto& t : exchange_)
    require(ok(t.i) && ok(t.j) && t.i != t.j, "exchange term on sites (", t.i, ", ", t.j, ") is not a pair of sites");
  for (auto& t : flips_) require(ok(t.i), "flip term on site ", t.i, " outside the chain");
  upload();
}

void SpinHamiltonian::upload() {
  auto col = [](const auto& terms, auto get) {
    using R = decltype(get(terms[0]));
    std::vector<R> v;
    for (const auto& t : terms) v.push_back(get(t));
    return v;
  };
  if (!zz_.empty()) {
    dev_.zz_i = upload_vec(col(zz_, [](const ZZTerm& t) { return t.i; }), "attnphys::zz_i");
    dev_.zz_j = upload_vec(col(zz_, [](const ZZTerm& t) { return t.j; }), "attnphys::zz_j");
    dev_.zz_c = upload_vec(col(zz_, [](const ZZTerm& t) { return t.coef; }), "attnphys::zz_c");
  }
  if (!exchange_.empty()) {
    dev_.ex_i = upload_vec(col(exchange_, [](const ExchangeTerm& t) { return t.i; }), "attnphys::ex_i");
    dev_.ex_j = upload_vec(col(exchange_, [](const ExchangeTerm& t) { return t.j; }), "attnphys::ex_j");
    dev_.ex_c = upload_vec(col(exchange_, [](const ExchangeTerm& t) { return t.coef; }), "attnphys::ex_c");
  }
  if (!flips_.empty()) {
    dev_.fl_i = upload_vec(col(flips_, [](const FlipTerm& t) { return t.i; }), "attnphys::fl_i");
    dev_.fl_c = upload_vec(col(flips_, [](const FlipTerm& t) { return t.coef; }), "attnphys::fl_c");
  }
}

double SpinHamiltonian::diagonal(Basis s) const {
  double d = 0;
  for (const auto& t : zz_) d += (((s >> t.i) ^ (s >> t.j)) & 1u) ? -t.coef : t.coef;
  return d;
}

std::vector<double> SpinHamiltonian::dense(const ChainHilbert& space) const {
  require(space.n_sites() == n_, "Hilbert space has ", space.n_sites(), " sites, Hamiltonian ", n_);
  require(space.size() <= 1 << 14, "dense Hamiltonian of dimension ", space.size(), " is too large (max 16384)");
  const long d = space.size();
  std::vector<double> m(d * d, 0.0);
  for (long c = 0; c < d; ++c) {
    const Basis s = space.state(c);
    m[c * d + c] += diagonal(s);
    for_each_offdiagonal(s, [&](Basis t, double e) {
      const long r = space.index(t);
      require(r >= 0, "the Hamiltonian leaves the Hilbert space (it does not conserve Sz?)");
      m[r * d + c] += e;
    });
  }
  return m;
}

template <class T>
void diagonal_elements(const SpinHamiltonian& H, const View2<const T>& sigma, const View1<T>& diag) {
  ScopedRegion region("attnphys::spin_diagonal");
  require(sigma.extent(1) == std::size_t(H.n_sites()) && diag.extent(0) == sigma.extent(0),
          "diagonal_elements: sigma must be [B, ", H.n_sites(), "] and diag [B]");
  const auto& d = H.device();
  const auto zi = d.zz_i, zj = d.zz_j;
  const auto zc = d.zz_c;
  const int nzz = int(H.zz_terms().size());
  Kokkos::parallel_for(
      "attnphys::spin_diagonal", Kokkos::RangePolicy<ExecSpace>(0, sigma.extent(0)), KOKKOS_LAMBDA(const long b) {
        double e = 0;
        for (int t = 0; t < nzz; ++t) e += zc(t) * double(sigma(b, zi(t))) * double(sigma(b, zj(t)));
        diag(b) = T(e);
      });
}

template <class T>
void connected_configs(const SpinHamiltonian& H, const View2<const T>& sigma, const View3<T>& conn,
                       const View2<T>& elements) {
  ScopedRegion region("attnphys::spin_connected");
  const long B = sigma.extent(0);
  const int N = H.n_sites(), K = H.max_conn();
  require(sigma.extent(1) == std::size_t(N), "connected_configs: sigma has ", sigma.extent(1), " sites, H has ", N);
  require(conn.extent(0) == std::size_t(B) && conn.extent(1) == std::size_t(K) && conn.extent(2) == std::size_t(N) &&
              elements.extent(0) == std::size_t(B) && elements.extent(1) == std::size_t(K),
          "connected_configs: conn must be [", B, ", ", K, ", ", N, "] and elements [", B, ", ", K, "]");
  View1<T> diag("attnphys::spin_diag", B);
  diagonal_elements<T>(H, sigma, diag);
  const auto& d = H.device();
  const auto ei = d.ex_i, ej = d.ex_j, fi = d.fl_i;
  const auto ec = d.ex_c, fc = d.fl_c;
  const int nex = int(H.exchange_terms().size());
  Kokkos::parallel_for(
      "attnphys::spin_connected", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {B, K}),
      KOKKOS_LAMBDA(const long b, const int k) {
        for (int s = 0; s < N; ++s) conn(b, k, s) = sigma(b, s);
        if (k == 0) {
          elements(b, 0) = diag(b);
        } else if (k - 1 < nex) {
          const int t = k - 1, i = ei(t), j = ej(t);
          if (sigma(b, i) != sigma(b, j)) {
            conn(b, k, i) = sigma(b, j);
            conn(b, k, j) = sigma(b, i);
            elements(b, k) = T(ec(t));
          } else {
            elements(b, k) = T(0);
          }
        } else {
          const int t = k - 1 - nex;
          conn(b, k, fi(t)) = -sigma(b, fi(t));
          elements(b, k) = T(fc(t));
        }
      });
}

#define ATTNPHYS_SPIN_INSTANTIATE(T)                                                                          \
  template void connected_configs<T>(const SpinHamiltonian&, const View2<const T>&, const View3<T>&,           \
                                     const View2<T>&);                                                           \
  template void diagonal_elements<T>(const SpinHamiltonian&, const View2<const T>&, const View1<T>&);
ATTNPHYS_SPIN_INSTANTIATE(float)
ATTNPHYS_SPIN_INSTANTIATE(double)
#undef ATTNPHYS_SPIN_INSTANTIATE

}  // namespace attnphys::spin
