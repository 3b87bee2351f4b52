// Shared main for the GoogleTest executables: Kokkos (and MPI, under mpirun) live for the whole run.
#include <gtest/gtest.h>

#include "attnphys/core/runtime.hpp"

int main(int argc, char** argv) {
  attnphys::Runtime runtime(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
