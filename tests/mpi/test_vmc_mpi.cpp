// Runs under mpirun -np 2: VMC with the chains split over ranks. The parameters stay identical on every rank, the
// 2-rank energy agrees with a 1-rank run (every rank also runs one alone) within error bars and with the exact
// value, and a checkpoint written by 2 ranks restarts on 1.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "attnphys/solvers/ed/exact.hpp"
#include "attnphys/solvers/vmc/driver.hpp"
#include "attnphys/solvers/vmc/rbm.hpp"
#include "scratch.hpp"

using namespace attnphys;
using namespace attnphys::vmc;

namespace {
spin::ChainModel tfim8() {
  spin::ChainModel m;
  m.model = spin::ModelKind::Tfim;
  m.n = 8;
  m.bc = spin::Boundary::Open;
  m.h = 1.0;
  return m;
}
VmcOptions options() {
  VmcOptions o;
  o.sampler.n_chains = 64;  // totals over the ranks
  o.sampler.n_samples = 1024;
  o.sampler.n_discard = 4;
  o.lr = 0.05;
  o.diag_shift_steps = 60;
  return o;
}
}  // namespace

TEST(VmcMpi, TwoRanksKeepIdenticalParametersAndAgreeWithOneRank) {
  const Comm world = Comm::world();
  ASSERT_GE(world.size(), 2) << "run under mpirun -np 2";
  const auto m = tfim8();
  const double exact = *ed::reference_energy(m);
  spin::SpinHamiltonian H(m);

  Rbm<double> a(m.n, RbmOptions{1.0, false, true, 0.05, 7});
  VmcDriver<double> multi(a, H, options(), world);
  EXPECT_EQ(multi.sampler().n_chains(), 64 / world.size());
  multi.run(60);
  EXPECT_EQ(multi.parameter_divergence(), 0.0);
  const auto st2 = multi.estimate_energy(8192);
  EXPECT_EQ(st2.n, 8192);

  Rbm<double> b(m.n, RbmOptions{1.0, false, true, 0.05, 7});
  VmcDriver<double> single(b, H, options(), Comm{});  // one rank alone, the same total samples
  single.run(60);
  const auto st1 = single.estimate_energy(8192);

  const double tol = 4 * std::hypot(st1.error, st2.error) + 1e-6;
  EXPECT_NEAR(st2.mean, st1.mean, tol);
  EXPECT_LT(std::abs(st2.mean - exact) / std::abs(exact), 1e-3) << st2.mean << " vs " << exact;
  // Statistics cover every rank's chains: the same value on each rank.
  double mean = st2.mean;
  world.allreduce_max(&mean, 1);
  EXPECT_EQ(mean, st2.mean);
}

TEST(VmcMpi, CheckpointFromTwoRanksRestartsOnOne) {
  const Comm world = Comm::world();
  const auto m = tfim8();
  spin::SpinHamiltonian H(m);
  // Rank 0 writes it, into the run's scratch folder (created before any rank goes on).
  const std::string path = (attnphys::test::scratch_root() / "vmc_mpi_ckpt.h5").string();
  if (world.is_root()) std::filesystem::create_directories(attnphys::test::scratch_root());
  world.barrier();
  Rbm<double> a(m.n, RbmOptions{1.0, true, true, 0.05, 7});
  VmcDriver<double> multi(a, H, options(), world);
  multi.run(5);
  multi.save_checkpoint(path);  // collective; rank 0 writes
  world.barrier();
  if (world.is_root()) {
    Rbm<double> b(m.n, RbmOptions{1.0, true, true, 0.5, 99});
    VmcDriver<double> single(b, H, options(), Comm{});
    single.load_checkpoint(path);
    EXPECT_EQ(single.iteration(), 5);
    EXPECT_EQ(b.parameters().get_host(), a.parameters().get_host());
    auto more = single.run(2);
    EXPECT_TRUE(std::isfinite(more.back().energy));
    std::remove(path.c_str());
  }
  world.barrier();
}
