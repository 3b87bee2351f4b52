// Runs under mpirun -np 2: collectives across ranks.
#include <gtest/gtest.h>

#include <vector>

#include "attnphys/core/comm.hpp"
#include "attnphys/core/runtime.hpp"

using namespace attnphys;

TEST(Comm, LaunchedUnderMpiSeesAllRanks) {
  Comm c = Comm::world();
  EXPECT_TRUE(c.active());
  EXPECT_GE(c.size(), 2) << "this test is meant for mpirun -np 2";
  EXPECT_EQ(runtime_info().mpi_ranks, c.size());
}

TEST(Comm, AllreduceAndBroadcast) {
  Comm c = Comm::world();
  const int n = c.size(), r = c.rank();
  std::vector<double> v{double(r + 1), 2.0 * r};
  c.allreduce_sum(v.data(), 2);
  EXPECT_EQ(v[0], n * (n + 1) / 2.0);
  EXPECT_EQ(v[1], double(n * (n - 1)));
  std::vector<float> f{float(r)};
  c.allreduce_sum(f.data(), 1);
  EXPECT_EQ(f[0], float(n * (n - 1) / 2));
  double mx = r;
  c.allreduce_max(&mx, 1);
  EXPECT_EQ(mx, n - 1);
  double b = r == 0 ? 3.25 : -1.0;
  c.broadcast(&b, 1, 0);
  EXPECT_EQ(b, 3.25);
  EXPECT_EQ(c.allreduce_sum(1.0), double(n));
}
