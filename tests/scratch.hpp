// Scratch folders of the GoogleTest programs. Every run has one root, <temp>/attnphys_test_<pid> (rank 0's pid under
// MPI, so that the ranks share it); test_main.cpp creates it before the first test and removes it when the run ends,
// unless ATTNPHYS_KEEP_TEST_DIRS is set (to look at a failed run's files). Tests put their files under it and need
// not clean up.
#pragma once

#include <filesystem>
#include <string>

namespace attnphys::test {

// The run's root folder (set by test_main.cpp).
const std::filesystem::path& scratch_root();

// <root>/<name>, created with its parents. `name` may hold '/'.
std::filesystem::path scratch_dir(const std::string& name);

}  // namespace attnphys::test
