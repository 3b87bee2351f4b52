// Requests that cannot fit are refused before they start, with the size they need: ED beyond
// memory, DMRG bond dimensions, heat dataset files larger than the free disk. Absurd sizes, so that nothing is
// allocated on any machine; ATTNPHYS_MEMORY_LIMIT shows the same checks at ordinary sizes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <regex>
#include <string>

#include "attnphys/core/error.hpp"
#include "attnphys/physics/heat/initial_conditions.hpp"
#include "attnphys/solvers/ed/exact.hpp"
#include "attnphys/solvers/fd/heat_dataset.hpp"
#include "attnphys/solvers/mps/dmrg.hpp"
#include "attnphys/solvers/mps/u1.hpp"
#include "scratch.hpp"

using namespace attnphys;
namespace fs = std::filesystem;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
spin::ChainModel chain(const std::string& model, int n) {
  spin::ChainModel m;
  m.model = spin::parse_model_kind(model), m.n = n, m.bc = spin::Boundary::Open;
  return m;
}
struct MemoryLimit {
  explicit MemoryLimit(const char* v) { setenv("ATTNPHYS_MEMORY_LIMIT", v, 1); }
  ~MemoryLimit() { unsetenv("ATTNPHYS_MEMORY_LIMIT"); }
};
#define EXPECT_MATCHES(text, pattern) \
  EXPECT_TRUE(std::regex_search(text, std::regex(pattern))) << "message: " << (text) << "\npattern: " << (pattern)
}  // namespace

TEST(ResourceLimits, EdBeyondMemoryIsRefusedWithItsSize) {
  // 62 sites in the Sz = 0 sector: dimension C(62, 31) = 4.65e17, a Lanczos basis of 40 vectors.
  const std::string m = error_of([] { ed::exact_ground_state(chain("heisenberg", 62)); });
  EXPECT_MATCHES(m, "^ED of 62 sites \\(sector 2Sz=0, dimension 465428353255261088, Lanczos basis of 40 vectors\\) "
                    "needs 238 EB of memory, more than the .* available .*: use fewer sites .* or DMRG");
  // The full space with the flip parity (TFIM): half of 2^40.
  const std::string t = error_of([] { ed::exact_ground_state(chain("tfim", 40)); });
  EXPECT_MATCHES(t, "^ED of 40 sites \\(one flip-parity sector, dimension 549755813888, .*\\) needs 281 TB of memory");
  // An ordinary size under a small cap: 16 sites (dimension 12870) need 8.3 MB.
  MemoryLimit cap("1M");
  const std::string s = error_of([] { ed::exact_ground_state(chain("heisenberg", 16)); });
  EXPECT_MATCHES(s, "^ED of 16 sites \\(sector 2Sz=0, dimension 12870, Lanczos basis of 40 vectors\\) needs 6.59 MB "
                    "of memory, more than the 1.05 MB available \\(ATTNPHYS_MEMORY_LIMIT\\)");
}

TEST(ResourceLimits, DmrgBondDimensionThatCannotFitIsRefusedBeforeTheFirstSweep) {
  mps::SweepParams p;
  p.max_dim = 1000000;
  const mps::Sweeps sweeps(2, p);
  {
    mps::Mps psi = mps::Mps::product_state(std::vector<int>(100, 0));
    const std::string m = error_of([&] { mps::dmrg(mps::chain_mpo(chain("tfim", 100)), psi, sweeps); });
    EXPECT_MATCHES(m, "^DMRG up to bond dimension 1000000 on 100 sites \\(dense, MPO bond dimension 3\\) needs "
                      "[0-9.]+ PB of memory, more than the .* available .*: lower chi \\(dmrg.chi; about [0-9]+ "
                      "fits\\)$");
  }
  {
    // A model that conserves Sz, run dense: the hint points to the U(1) DMRG.
    mps::Mps psi = mps::Mps::neel(100);
    const std::string m = error_of([&] { mps::dmrg(mps::chain_mpo(chain("heisenberg", 100)), psi, sweeps); });
    EXPECT_MATCHES(m, "^DMRG up to bond dimension 1000000 on 100 sites \\(dense, MPO bond dimension 5\\) needs "
                      ".*, or use the U\\(1\\) DMRG \\(dmrg.symmetry=u1\\), whose blocks are smaller$");
  }
  {
    mps::QMps psi = mps::QMps::neel(100);
    const std::string m = error_of([&] { mps::dmrg(mps::chain_mpo(chain("heisenberg", 100)), psi, sweeps); });
    EXPECT_MATCHES(m, "^DMRG up to bond dimension 1000000 on 100 sites \\(U\\(1\\) blocks, MPO bond dimension "
                      "5\\) needs [0-9.]+ [TP]B of memory");
  }
  // chi beyond what the chain can hold (2^(n/2)) counts as that: 20 sites at chi = 10^6 are chi = 1024.
  mps::Mps psi = mps::Mps::product_state(std::vector<int>(20, 0));
  MemoryLimit cap("1k");
  const std::string m = error_of([&] { mps::dmrg(mps::chain_mpo(chain("tfim", 20)), psi, sweeps); });
  EXPECT_MATCHES(m, "^DMRG up to bond dimension 1000000 on 20 sites \\(dense, MPO bond dimension 3\\) needs "
                    "2.65 GB of memory, more than the 1.02 kB available \\(ATTNPHYS_MEMORY_LIMIT\\): lower chi "
                    "\\(dmrg.chi; about 0 fits\\)$");
}

TEST(ResourceLimits, HeatDatasetLargerThanTheFreeDiskIsRefusedAndNothingIsWritten) {
  const fs::path dir = attnphys::test::scratch_dir("limits");
  fs::create_directories(dir);
  auto p = heat::make_problem(1, {16, 1, 1}, {1.0 / 16, 1, 1}, 1.0, "periodic");
  heat::InitialConditionOptions ic;
  fd::HeatDatasetOptions o;
  o.output = (dir / "huge.h5").string();
  o.samples = 10000000000000L;  // 1e13 samples of 2 x 16 float32 values: 1.28 PB
  o.progress = false;
  const std::string m = error_of([&] { fd::write_heat_dataset(p, ic, fd::HeatSolveOptions{}, o, ""); });
  EXPECT_MATCHES(m, "^heat dataset '.*huge.h5' \\(10000000000000 samples x 32 float32 values\\) needs 1.28 PB of "
                    "disk, more than the .* free on the file system of '.*attnphys_test_[0-9]+/limits': use fewer "
                    "dataset.samples");
  // One chunk that cannot be held in memory is refused the same way (every rank checks its own).
  o.samples = 4;
  MemoryLimit cap("100");
  const std::string c = error_of([&] { fd::write_heat_dataset(p, ic, fd::HeatSolveOptions{}, o, ""); });
  EXPECT_MATCHES(c, "^heat dataset: one chunk of 4 samples \\(32 float32 values each\\) needs 1.02 kB of memory, "
                    "more than the 100 B available \\(ATTNPHYS_MEMORY_LIMIT\\): use a smaller dataset.chunk");
  EXPECT_TRUE(fs::is_empty(dir));  // no file, no temporary
  fs::remove_all(dir);
}
