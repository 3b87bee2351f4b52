// Chain Hilbert spaces, Hamiltonian terms and the batched connected-configuration kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "attnphys/core/random.hpp"
#include "attnphys/physics/spin/hamiltonian.hpp"
#include "attnphys/physics/spin/observables.hpp"

using namespace attnphys;
using namespace attnphys::spin;

TEST(SpinHilbert, RankingIsABijectionInIncreasingOrder) {
  for (int two_sz : {0, 2, -4}) {
    ChainHilbert hs(10, two_sz);
    const int n_up = (10 + two_sz) / 2;
    long expected = 1;
    for (int k = 0; k < n_up; ++k) expected = expected * (10 - k) / (k + 1);
    ASSERT_EQ(hs.size(), expected);
    Basis prev = 0;
    for (long r = 0; r < hs.size(); ++r) {
      const Basis s = hs.state(r);
      EXPECT_EQ(popcount(s), n_up);
      EXPECT_EQ(hs.index(s), r);
      if (r > 0) EXPECT_GT(s, prev);
      prev = s;
    }
  }
  ChainHilbert full(6);
  EXPECT_EQ(full.size(), 64);
  EXPECT_EQ(full.index(37), 37);
  ChainHilbert sector(6, 0);
  EXPECT_EQ(sector.index(0b000111), 0);
  EXPECT_EQ(sector.index(0b001111), -1);  // wrong Sz
  EXPECT_THROW(ChainHilbert(6, 1), Error);
}

TEST(SpinHamiltonian, TwoSiteHeisenbergSingletAndTriplet) {
  ChainModel m;
  m.model = spin::ModelKind::Heisenberg;
  m.n = 2;
  m.J = 1.3;
  SpinHamiltonian H(m);
  ChainHilbert hs(2, 0);  // |↓↑⟩ = 0b10? states 0b01, 0b10
  auto d = H.dense(hs);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_DOUBLE_EQ(d[0], -1.3 / 4);
  EXPECT_DOUBLE_EQ(d[1], 1.3 / 2);
  // Eigenvalues of [[a, b], [b, a]]: a ± b → singlet -3J/4, triplet J/4.
  EXPECT_NEAR(d[0] - d[1], -0.75 * 1.3, 1e-15);
  EXPECT_NEAR(d[0] + d[1], 0.25 * 1.3, 1e-15);
  EXPECT_TRUE(H.conserves_sz());
}

TEST(SpinHamiltonian, DenseMatrixIsSymmetricAndTfimMatchesPaulis) {
  ChainModel m;
  m.model = spin::ModelKind::Tfim;
  m.n = 3;
  m.J = 0.7;
  m.h = 1.9;
  m.bc = spin::Boundary::Periodic;
  SpinHamiltonian H(m);
  EXPECT_FALSE(H.conserves_sz());
  ChainHilbert hs(3);
  auto d = H.dense(hs);
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) {
      EXPECT_DOUBLE_EQ(d[r * 8 + c], d[c * 8 + r]);
      const int diff = popcount(Basis(r ^ c));
      if (diff == 1) EXPECT_DOUBLE_EQ(d[r * 8 + c], -1.9);
      if (diff > 1) EXPECT_EQ(d[r * 8 + c], 0.0);
    }
  EXPECT_DOUBLE_EQ(d[0], -3 * 0.7);                     // all down: three satisfied bonds
  EXPECT_DOUBLE_EQ(d[1 * 8 + 1], -0.7 + 0.7 + 0.7);      // one up: two broken bonds
}

template <class T>
void check_connected(const ChainModel& m) {
  SpinHamiltonian H(m);
  const int N = m.n, K = H.max_conn(), B = 17;
  View2<T> sigma("sigma", B, N);
  fill_uniform(sigma, 5, 1);
  auto hs = to_host(sigma);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < N; ++i) hs(b, i) = hs(b, i) < 0.5 ? T(-1) : T(1);
  Kokkos::deep_copy(sigma, hs);
  View3<T> conn("conn", B, K, N);
  View2<T> el("el", B, K);
  connected_configs<T>(H, sigma, conn, el);
  auto hc = to_host(conn);
  auto he = to_host(el);
  for (int b = 0; b < B; ++b) {
    const Basis s = spins_to_bits(&hs(b, 0), N);
    std::map<Basis, double> want, got;
    want[s] += H.diagonal(s);
    H.for_each_offdiagonal(s, [&](Basis t, double e) { want[t] += e; });
    for (int k = 0; k < K; ++k) {
      std::vector<T> row(N);
      for (int i = 0; i < N; ++i) row[i] = hc(b, k, i);
      if (k > 0 && he(b, k) == T(0)) {
        EXPECT_EQ(spins_to_bits(row.data(), N), s);  // an idle slot holds σ itself
        continue;
      }
      got[spins_to_bits(row.data(), N)] += double(he(b, k));
    }
    ASSERT_EQ(want.size(), got.size());
    for (auto& [t, e] : want) EXPECT_NEAR(got[t], e, 1e-6) << "state " << t;
  }
}

TEST(SpinHamiltonian, ConnectedConfigsMatchHostMatrixElements) {
  for (const char* model : {"tfim", "xxz", "heisenberg", "j1j2"})
    for (const char* bc : {"open", "periodic"}) {
      ChainModel m;
      m.model = spin::parse_model_kind(model);
      m.n = 7;
      m.bc = spin::parse_boundary(bc);
      m.J = 0.9;
      m.h = 0.6;
      m.delta = 1.7;
      m.j2 = 0.35;
      check_connected<double>(m);
      check_connected<float>(m);
    }
}

TEST(SpinObservables, SingletCorrelationsAndSumRule) {
  ChainHilbert hs(2, 0);
  const double r = 1 / std::sqrt(2.0);
  std::vector<double> singlet{r, -r};
  auto ss = exact_spin_correlations(hs, singlet);
  EXPECT_NEAR(ss(0, 1), -0.75, 1e-14);
  EXPECT_NEAR(ss(0, 0), 0.75, 1e-14);
  auto zz = exact_sz_correlations(hs, singlet);
  EXPECT_NEAR(zz(0, 1), -0.25, 1e-14);
  auto sq = structure_factor(ss);
  EXPECT_NEAR(sq[0], 0.0, 1e-14);  // total spin 0
  EXPECT_NEAR(sq[0] + sq[1], 2 * 0.75, 1e-14);
  EXPECT_NEAR(exact_magnetization_squared(hs, singlet), 0.0, 1e-14);
}

TEST(SpinObservables, SampledSzCorrelationsAndMagnetization) {
  View2<double> sigma("sigma", 2, 3);
  auto h = Kokkos::create_mirror_view(sigma);
  const double v[2][3] = {{1, 1, -1}, {1, -1, -1}};
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i) h(b, i) = v[b][i];
  Kokkos::deep_copy(sigma, h);
  auto c = sz_correlations<double>(sigma);
  EXPECT_DOUBLE_EQ(c(0, 1), 0.0);
  EXPECT_DOUBLE_EQ(c(1, 2), 0.0);
  EXPECT_DOUBLE_EQ(c(0, 2), -0.25);
  View1<double> mz("mz", 2);
  magnetization<double>(sigma, mz);
  auto hm = to_host(mz);
  EXPECT_DOUBLE_EQ(hm(0), 0.5);
  EXPECT_DOUBLE_EQ(hm(1), -0.5);
}

TEST(ChainModel, NamesParseOnceAndRoundTrip) {
  EXPECT_EQ(parse_model_kind("j1j2"), ModelKind::J1J2);
  EXPECT_EQ(parse_boundary("periodic"), Boundary::Periodic);
  for (const char* name : {"tfim", "xxz", "heisenberg", "j1j2"}) EXPECT_STREQ(enum_name(parse_model_kind(name)), name);
  try {
    parse_model_kind("potts");
    FAIL() << "potts is not a model of attnphys";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown model 'potts': use tfim, xxz, heisenberg, j1j2");
  }
  // Through the options: the config names, the describe() text and the TOML written back.
  ChainModel m;
  OptionSet set;
  m.declare(set);
  set.set("model.model=xxz");
  set.set("model.bc=periodic");
  set.set("model.delta=0.5");
  EXPECT_EQ(m.model, ModelKind::Xxz);
  EXPECT_TRUE(m.periodic());
  EXPECT_DOUBLE_EQ(m.anisotropy(), 0.5);
  EXPECT_EQ(m.describe(), "xxz n=20 periodic J=1 delta=0.5");
  EXPECT_NE(set.to_toml().find("model = \"xxz\"\nn = 20\nbc = \"periodic\""), std::string::npos) << set.to_toml();
  EXPECT_THROW(set.set("model.bc=twisted"), Error);
}
