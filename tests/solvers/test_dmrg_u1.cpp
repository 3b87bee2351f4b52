// U(1) block-sparse two-site DMRG against the dense DMRG and exact diagonalisation (Sz-conserving chains).
#include <gtest/gtest.h>

#include <malloc.h>

#include <Eigen/Dense>
#include <cmath>
#include <fstream>
#include <string>

#include "attnphys/solvers/ed/exact.hpp"
#include "attnphys/solvers/mps/dmrg.hpp"
#include "attnphys/solvers/mps/observables.hpp"
#include "attnphys/solvers/mps/u1.hpp"
#include "test_mps_dense.hpp"

namespace attnphys::mps {
namespace {

using testing::chain;

Sweeps exact_sweeps(int max_dim, int nsweeps = 12) {
  SweepParams p;
  p.max_dim = max_dim;
  p.cutoff = 1e-15;
  p.niter = 6;
  return Sweeps(nsweeps, p);
}

double ed_energy(const spin::ChainModel& m) {
  ed::EdOptions o;
  o.tol = 1e-13;
  return ed::exact_ground_state(m, o).energies.at(0);
}

TEST(DmrgU1, MpoChargesOfTheChains) {
  for (const auto& m : {chain("heisenberg", 8, "open"), chain("xxz", 8, "periodic", 1.0, 1.0, 0.5),
                        chain("j1j2", 8, "open", 1.0, 1.0, 1.0, 0.3)}) {
    const MpoCharges c = mpo_charges(chain_mpo(m));
    ASSERT_TRUE(c.ok) << m.describe() << ": " << c.reason;
    // Heisenberg MPO states: start/final (0), after S+ (+2), after S- (-2), after Sz (0).
    std::vector<int> q = c.bond[4];
    std::sort(q.begin(), q.end());
    EXPECT_EQ(q.front(), -2);
    EXPECT_EQ(q.back(), 2);
  }
  const MpoCharges t = mpo_charges(chain_mpo(chain("tfim", 8, "open")));
  EXPECT_FALSE(t.ok);
  EXPECT_NE(t.reason.find("Sz"), std::string::npos) << t.reason;
  // The product MPO H*H conserves Sz too.
  EXPECT_TRUE(mpo_charges(mpo_product(chain_mpo(chain("heisenberg", 6, "open")),
                                      chain_mpo(chain("heisenberg", 6, "open"))))
                  .ok);
}

TEST(DmrgU1, ProductStateIsTheDenseOne) {
  const QMps q = QMps::product_state({0, 1, 1, 0, 1});
  EXPECT_EQ(q.total_charge(), -1);
  const Eigen::VectorXd a = q.to_dense_mps().to_dense(), b = Mps::product_state({0, 1, 1, 0, 1}).to_dense();
  EXPECT_NEAR((a - b).norm(), 0.0, 1e-15);
}

// U(1) and dense DMRG from the same Neel state with the same exact schedule: the same energy to 1e-10, that of ED
// to 1e-9, the same entropies, the same state; observables from the blocks equal the dense ones.
void compare_u1_dense(const spin::ChainModel& m, int max_dim) {
  const Mpo h = chain_mpo(m);
  Mps dense = Mps::neel(m.n);
  QMps sym = QMps::neel(m.n);
  const Sweeps s = exact_sweeps(max_dim);
  const DmrgResult rd = dmrg(h, dense, s);
  const DmrgResult ru = dmrg(h, sym, s);
  const double exact = ed_energy(m);
  EXPECT_NEAR(ru.energy, rd.energy, 1e-10) << m.describe();
  EXPECT_NEAR(ru.energy, exact, 1e-9) << m.describe();
  EXPECT_NEAR(expectation(h, sym), exact, 1e-9) << m.describe();
  EXPECT_TRUE(ru.converged) << ru.convergence_reason;
  EXPECT_EQ(sym.total_charge(), 0);
  ASSERT_EQ(ru.entropies.size(), rd.entropies.size());
  const std::vector<double> eb = entanglement_entropies(sym);
  for (std::size_t b = 0; b < rd.entropies.size(); ++b) {
    EXPECT_NEAR(ru.entropies[b], rd.entropies[b], 1e-8) << m.describe() << " bond " << b;
    EXPECT_NEAR(eb[b], rd.entropies[b], 1e-8) << m.describe() << " bond " << b;
  }
  // Observables from the blocks against the dense code on the dense form of the same state.
  const Mps conv = sym.to_dense_mps();
  const auto mzd = local_expectations(conv, "Sz");
  const auto szu = local_expectations(sym, "Sz");
  for (int i = 0; i < m.n; ++i) {
    EXPECT_NEAR(szu[i], mzd[i], 1e-12);
    // The singlet ground state of an open chain (even n): zero, up to the triplet admixture that is linear in the
    // Davidson residual (energy errors are quadratic in it).
    EXPECT_NEAR(szu[i], 0.0, 1e-5);
  }
  const double cu = spin_correlation(sym, 2, 7);
  const double cd = correlation(conv, "Sz", 2, "Sz", 7) +
                    0.5 * (correlation(conv, "S+", 2, "S-", 7) + correlation(conv, "S-", 2, "S+", 7));
  EXPECT_NEAR(cu, cd, 1e-12);
  // SU(2) singlet: <S_i . S_j> = 3 <Sz_i Sz_j> (Heisenberg and J1-J2 only).
  if (m.anisotropy() == 1.0) EXPECT_NEAR(cu, 3.0 * correlation(sym, "Sz", 2, "Sz", 7), 1e-8);
  EXPECT_NEAR(variance(h, sym), 0.0, 1e-9);
  // Both states are the ground state (up to sign).
  const double ov = std::abs(overlap(conv, dense));
  EXPECT_NEAR(ov, 1.0, 1e-9);
}

TEST(DmrgU1, HeisenbergN12MatchesDenseAndEd) { compare_u1_dense(chain("heisenberg", 12, "open"), 64); }

TEST(DmrgU1, XxzN12MatchesDenseAndEd) { compare_u1_dense(chain("xxz", 12, "open", 1.0, 1.0, 0.5), 64); }

TEST(DmrgU1, J1J2N12MatchesDenseAndEd) { compare_u1_dense(chain("j1j2", 12, "open", 1.0, 1.0, 1.0, 0.24), 64); }

// N = 16 through both paths with the same schedule (chi ramp 16 -> 128 with noise; the exact middle bond would be
// 256, 128 already gives 1e-10): U(1) = dense to 1e-10 in energy and 1e-8 in every bond entropy, both = ED to 1e-9,
// the same state up to sign.
void compare_n16(const spin::ChainModel& m) {
  const Mpo h = chain_mpo(m);
  QMps sym = QMps::neel(16);
  Mps dense = Mps::neel(16);
  const Sweeps s = Sweeps::ramp(10, 128, 1e-14, 1e-6, 4, 16);
  const DmrgResult ru = dmrg(h, sym, s), rd = dmrg(h, dense, s);
  const double exact = ed_energy(m);
  EXPECT_TRUE(ru.converged) << m.describe() << ": " << ru.convergence_reason;
  EXPECT_TRUE(rd.converged) << m.describe() << ": " << rd.convergence_reason;
  EXPECT_NEAR(ru.energy, rd.energy, 1e-10) << m.describe();
  EXPECT_NEAR(ru.energy, exact, 1e-9) << m.describe();
  EXPECT_NEAR(rd.energy, exact, 1e-9) << m.describe();
  EXPECT_NEAR(expectation(h, sym), exact, 1e-9) << m.describe();
  ASSERT_EQ(ru.entropies.size(), rd.entropies.size());
  for (std::size_t b = 0; b < rd.entropies.size(); ++b)
    EXPECT_NEAR(ru.entropies[b], rd.entropies[b], 1e-8) << m.describe() << " bond " << b;
  EXPECT_NEAR(std::abs(overlap(sym.to_dense_mps(), dense)), 1.0, 1e-9) << m.describe();
}

TEST(DmrgU1, XxzDelta05N16AgreesWithDenseAndEd) { compare_n16(chain("xxz", 16, "open", 1.0, 1.0, 0.5)); }

TEST(DmrgU1, J1J2J2024N16AgreesWithDenseAndEd) { compare_n16(chain("j1j2", 16, "open", 1.0, 1.0, 1.0, 0.24)); }

TEST(DmrgU1, HeisenbergN16AgreesWithDenseAndEd) { compare_n16(chain("heisenberg", 16, "open")); }

TEST(DmrgU1, TruncationFollowsTheDenseCode) {
  // A truncated run (chi ramp 4 -> 12 < exact, no noise): the same multiplet-safe truncation over all sectors gives
  // the dense energies and bond dimensions sweep by sweep.
  const auto m = chain("heisenberg", 14, "open");
  const Mpo h = chain_mpo(m);
  const Sweeps s = Sweeps::ramp(6, 12, 1e-12, 0.0, 6, 4);
  DmrgOptions o;
  o.davidson_adaptive = false;
  Mps dense = Mps::neel(14);
  QMps sym = QMps::neel(14);
  const DmrgResult rd = dmrg(h, dense, s, o), ru = dmrg(h, sym, s, o);
  ASSERT_EQ(ru.history.size(), rd.history.size());
  for (std::size_t k = 0; k < rd.history.size(); ++k) {
    EXPECT_NEAR(ru.history[k].energy, rd.history[k].energy, 1e-9) << "sweep " << k;
    EXPECT_EQ(ru.history[k].max_bond_dimension, rd.history[k].max_bond_dimension) << "sweep " << k;
  }
  EXPECT_LE(sym.max_bond_dimension(), 12);
}

TEST(DmrgU1, MajumdarGhoshFromAProductStateWithNoise) {
  // J2 = J1/2: the dimer state, E0 = -3N/8; from Neel the noise term (block by block) is needed to get there.
  const int n = 12;
  const Sweeps s = Sweeps::ramp(12, 32, 1e-14, 1e-4, 4, 4);
  QMps psi = QMps::neel(n);
  const DmrgResult r = dmrg(chain_mpo(chain("j1j2", n, "open", 1.0, 1.0, 1.0, 0.5)), psi, s);
  EXPECT_NEAR(r.energy, -3.0 * n / 8.0, 1e-10);
  // Without noise the same schedule also gets there or not, but never below the exact energy.
  EXPECT_GE(r.energy, -3.0 * n / 8.0 - 1e-10);
}

TEST(DmrgU1, OddChainTargetsItsSector) {
  // n = 9 from a state with 2Sz = 1: the lowest state of that sector (the ED ground sector too).
  const auto m = chain("heisenberg", 9, "open");
  QMps sym = QMps::product_state({0, 1, 0, 1, 0, 1, 0, 1, 0});
  const DmrgResult r = dmrg(chain_mpo(m), sym, exact_sweeps(32));
  EXPECT_EQ(sym.total_charge(), 1);
  EXPECT_NEAR(r.energy, ed_energy(m), 1e-10);
  double total = 0;
  for (double x : local_expectations(sym, "Sz")) total += x;
  EXPECT_NEAR(total, 0.5, 1e-10);
}

TEST(DmrgU1, RefusesOperatorsThatBreakSz) {
  QMps sym = QMps::neel(6);
  EXPECT_THROW(dmrg(chain_mpo(chain("tfim", 6, "open")), sym, exact_sweeps(8)), Error);
  EXPECT_THROW(local_expectations(sym, "X"), Error);
  EXPECT_EQ(parse_symmetry("u1"), Symmetry::U1);
  EXPECT_EQ(parse_symmetry("none"), Symmetry::None);
  EXPECT_THROW(parse_symmetry("su2"), Error);
}

TEST(DmrgConvergence, TooFewSweepsSayWhy) {
  const auto m = chain("heisenberg", 12, "open");
  const Mpo h = chain_mpo(m);
  QMps sym = QMps::neel(12);
  const DmrgResult r = dmrg(h, sym, Sweeps::ramp(2, 16, 1e-12, 1e-4, 4, 4));
  EXPECT_FALSE(r.converged);
  EXPECT_NE(r.convergence_reason.find("sweeps"), std::string::npos) << r.convergence_reason;
  // A converged run whose variance misses the goal is flagged, with the variance in the reason.
  QMps good = QMps::neel(12);
  DmrgResult g = dmrg(h, good, exact_sweeps(64));
  ASSERT_TRUE(g.converged) << g.convergence_reason;
  DmrgOptions o;
  o.variance_tol = 1e-6;
  check_variance(g, 1e-12, o);
  EXPECT_TRUE(g.converged);
  check_variance(g, 1e-3, o);
  EXPECT_FALSE(g.converged);
  EXPECT_NE(g.convergence_reason.find("variance"), std::string::npos);
}

TEST(DmrgConvergence, AdaptiveDavidsonReachesTheGroundStateWhereFixedNiterDoesNot) {
  // niter = 1 (one product per bond) stalls; the adaptive eigensolver iterates to its residual tolerance.
  const auto m = chain("heisenberg", 12, "open");
  const Mpo h = chain_mpo(m);
  SweepParams p;
  p.max_dim = 64, p.cutoff = 1e-15, p.niter = 1;
  DmrgOptions fixed;
  fixed.davidson_adaptive = false;
  QMps a = QMps::neel(12), b = QMps::neel(12);
  const DmrgResult rf = dmrg(h, a, Sweeps(4, p), fixed);
  const DmrgResult ra = dmrg(h, b, Sweeps(12, p));
  const double exact = ed_energy(m);
  EXPECT_GT(rf.energy - exact, 1e-6);
  EXPECT_NEAR(ra.energy, exact, 1e-10);
  EXPECT_TRUE(ra.converged) << ra.convergence_reason;
  EXPECT_GT(ra.history.front().davidson_products, 1.0);
  // Exact bonds iterate to the floor; truncated ones to ~ 0.1 sqrt(discarded weight), which tightens along a chi
  // ramp.
  EXPECT_LT(ra.history.back().residual_tol, 1e-8);
  QMps c = QMps::neel(14);
  const DmrgResult rr = dmrg(chain_mpo(chain("heisenberg", 14, "open")), c, Sweeps::ramp(6, 16, 1e-14, 0.0, 1, 4));
  ASSERT_EQ(rr.history.size(), 6u);
  EXPECT_EQ(rr.history[0].residual_tol, DmrgOptions{}.davidson_tol);
  for (std::size_t k = 1; k < rr.history.size(); ++k)
    EXPECT_NEAR(rr.history[k].residual_tol,
                std::max(1e-12, std::min(1e-3, 0.1 * std::sqrt(rr.history[k - 1].truncation_error))), 1e-15);
  EXPECT_GT(rr.history.back().residual_tol, 1e-6);  // chi = 16 < exact: a loose tolerance
}


// /proc/self/status field in KiB (-1 if absent).
long status_kib(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1));
  return -1;
}

// Bytes of the heap in use (glibc: small blocks plus mmapped ones).
double heap_bytes() {
  const struct mallinfo2 mi = mallinfo2();
  return double(mi.uordblks) + double(mi.hblkhd);
}

// Entries of the left and right environments of a U(1) state for an MPO with state charges `dmpo` per bond: for
// each bond sector k, dim(k) x sum over MPO states a of dim(sector Q(k) + D(a)).
double env_entries(const QMps& psi, const MpoCharges& c) {
  double total = 0;
  for (int b = 1; b < psi.size(); ++b) {
    const QnIndex& q = psi[b].layout.left;
    for (int k = 0; k < q.sectors(); ++k)
      for (int d : c.bond[b]) {
        const int o = q.find(q.charge[k] + d), u = q.find(q.charge[k] - d);
        if (o >= 0) total += double(q.dim[k]) * q.dim[o];  // left environment
        if (u >= 0) total += double(q.dim[k]) * q.dim[u];  // right environment
      }
  }
  return total;
}

TEST(DmrgMemory, PeakIsTheTensorsPlusOneWorkSetAndSaturatedSweepsDoNotGrow) {
  // Heisenberg N = 60 at chi = 64, every sweep run (energy_tol = 0). The work buffers (two-site vector, Davidson
  // basis and images, block effective-Hamiltonian intermediates, density matrices, LAPACK work) are sized for the
  // largest bond once and reused by every bond after it: the heap in use at the end of each sweep stops growing once
  // the bond dimension has saturated, and the peak resident memory of the run is the state, its environments and
  // one work set of the largest bond (with one environment per bond: the stale side is freed as the sweep passes).
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer: its allocator, shadow memory and quarantine are not the library's footprint";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) || __has_feature(thread_sanitizer)
  GTEST_SKIP() << "sanitizer build: its allocator, shadow memory and quarantine are not the library's footprint";
#endif
#endif
  const int n = 60, chi = 64;
  const Mpo h = chain_mpo(chain("heisenberg", n, "open"));
  const MpoCharges charges = mpo_charges(h);
  QMps psi = QMps::neel(n);
  DmrgOptions o;
  o.energy_tol = 0.0;
  const Sweeps s = Sweeps::ramp(10, chi, 1e-12, 1e-5, 4);
  {
    // A small run first, so that the code pages it touches (LAPACK, BLAS kernels) are resident before the peak is
    // reset: the peak is then the run's data.
    QMps warm = QMps::neel(12);
    dmrg(chain_mpo(chain("heisenberg", 12, "open")), warm, Sweeps::ramp(4, 16, 1e-12, 1e-5, 4));
  }
  malloc_trim(0);
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5" << std::flush;  // resets VmHWM to the current resident size
  if (!clear) GTEST_SKIP() << "/proc/self/clear_refs is not writable here";
  const long rss0 = status_kib("VmRSS");
  const double heap0 = heap_bytes();
  std::vector<double> heap;
  std::vector<int> dims;
  const DmrgResult r = dmrg(h, psi, s, o, [&](const SweepRecord& rec) {
    heap.push_back(heap_bytes() - heap0);
    dims.push_back(rec.max_bond_dimension);
    return true;
  });
  const double peak = 1024.0 * double(status_kib("VmHWM") - rss0);
  ASSERT_EQ(r.sweeps, 10);
  EXPECT_NEAR(r.energy / n, 0.25 - std::log(2.0), 0.01);  // sanity: the Bethe-ansatz energy per site, 1/4 - ln 2

  double tensors = 0;
  long len_max = 0;
  for (int i = 0; i < n; ++i) tensors += double(psi[i].layout.size);
  for (int i = 0; i + 1 < n; ++i) {
    QBlockLayout th;
    th.build(psi[i].layout.left, psi[i + 1].layout.right, {2, 0, 0, -2});
    len_max = std::max(len_max, th.size);
  }
  // One environment per bond is live (left of the sweep's position: left ones; right of it: right ones); the
  // stale side is freed.
  const double envs = 0.5 * env_entries(psi, charges);
  const int D = h.max_bond_dimension();
  // One work set (doubles): Davidson 2 (max_iter + 1) + 1 vectors, theta, the block matrices, density matrices and
  // eigenvectors (~4), the effective-Hamiltonian intermediates (2 D).
  const double work = double(len_max) * (2.0 * (o.davidson_max_iter + 1) + 1 + 4 + 2.0 * D);
  const double model = 8.0 * (tensors + envs + work);
  std::printf("[          ] tensors %.2f MiB, environments %.2f MiB, one work set %.2f MiB (two-site length %ld); "
              "peak RSS increase %.2f MiB, heap after each sweep (MiB):",
              8 * tensors / 1048576, 8 * envs / 1048576, 8 * work / 1048576, len_max, peak / 1048576);
  for (double x : heap) std::printf(" %.2f", x / 1048576);
  std::printf("\n");
  // (Keeping both environments of every bond measured 7.7 MiB here, against 5.6 MiB with the stale side freed.)
  EXPECT_LE(peak, 1.2 * model + 2.5 * 1048576) << "peak resident memory above the state + environments + one work set";
  // Once chi = 64 is reached (sweep 4 of the 10, 16 -> 64 ramp), the heap in use at the end of a sweep is flat: no
  // per-bond allocation survives its bond and no buffer is reallocated larger.
  ASSERT_EQ(heap.size(), 10u);
  ASSERT_EQ(dims[3], chi);
  for (std::size_t k = 5; k < heap.size(); ++k)
    EXPECT_NEAR(heap[k], heap[4], 0.05 * heap[4] + 65536) << "sweep " << k + 1;
  // The heap at the end of a sweep holds the state, the environments and the work set, and not much else.
  EXPECT_LE(heap.back(), 1.25 * model + 1048576);
  EXPECT_GE(heap.back(), 8.0 * (tensors + envs) * 0.9);
}

}  // namespace
}  // namespace attnphys::mps
