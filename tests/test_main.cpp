// Shared main for the GoogleTest executables: Kokkos (and MPI, under mpirun) live for the whole run, and so does the
// run's scratch folder (scratch.hpp), removed at the end.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "attnphys/core/comm.hpp"
#include "attnphys/core/runtime.hpp"
#include "scratch.hpp"

namespace attnphys::test {
namespace {
std::filesystem::path g_root;
}

const std::filesystem::path& scratch_root() { return g_root; }

std::filesystem::path scratch_dir(const std::string& name) {
  auto d = g_root / name;
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace attnphys::test

int main(int argc, char** argv) {
  attnphys::Runtime runtime(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  const attnphys::Comm world = attnphys::Comm::world();
  double pid = double(::getpid());
  world.broadcast(&pid, 1, 0);
  attnphys::test::g_root = std::filesystem::temp_directory_path() / ("attnphys_test_" + std::to_string(long(pid)));
  const int rc = RUN_ALL_TESTS();
  world.barrier();
  if (world.is_root() && std::getenv("ATTNPHYS_KEEP_TEST_DIRS") == nullptr) {
    std::error_code ec;  // a folder that cannot be removed is not a test failure
    std::filesystem::remove_all(attnphys::test::g_root, ec);
  }
  return rc;
}
