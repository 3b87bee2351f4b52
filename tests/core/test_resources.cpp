// Resource limits (core/resources.hpp): the available memory and free disk, and the refusal messages that name the
// size a request needs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <regex>
#include <string>

#include "attnphys/core/error.hpp"
#include "attnphys/core/resources.hpp"

using namespace attnphys;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Sets ATTNPHYS_MEMORY_LIMIT for one scope.
struct MemoryLimit {
  explicit MemoryLimit(const char* v) { setenv("ATTNPHYS_MEMORY_LIMIT", v, 1); }
  ~MemoryLimit() { unsetenv("ATTNPHYS_MEMORY_LIMIT"); }
};
}  // namespace

TEST(Resources, FormatBytesUsesDecimalUnitsWithThreeDigits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(999), "999 B");
  EXPECT_EQ(format_bytes(1500), "1.5 kB");
  EXPECT_EQ(format_bytes(2.5e9), "2.5 GB");
  EXPECT_EQ(format_bytes(1.234e15), "1.23 PB");
}

TEST(Resources, AvailableMemoryAndFreeDiskAreKnownAndPlausible) {
  const double mem = available_memory();
  EXPECT_GT(mem, 1e6);  // a Linux machine that runs the tests has more than a megabyte available
  EXPECT_FALSE(available_memory_source().empty());
  const double disk = free_disk_space("/tmp");
  EXPECT_TRUE(std::isfinite(disk));
  EXPECT_GE(disk, 0.0);
  // A path that does not exist yet is measured on its nearest existing parent.
  EXPECT_EQ(free_disk_space("/tmp/attnphys-no-such-dir/a/b/file.h5") > 0, disk > 0);
}

TEST(Resources, AbsurdRequestsAreRefusedWithTheSizeTheyNeed) {
  const std::string m = error_of([] { require_memory(3e21, "a test buffer", "ask for less"); });
  EXPECT_TRUE(std::regex_search(m, std::regex("^a test buffer needs 3 ZB of memory, more than the [0-9.]+ [kMGT]?B "
                                              "available \\(.+\\): ask for less$")))
      << m;
  const std::string d = error_of([] { require_disk(4e21, "/tmp/x.h5", "a test file", "write less"); });
  EXPECT_TRUE(std::regex_search(d, std::regex("^a test file needs 4 ZB of disk, more than the [0-9.]+ [kMGTP]?B free "
                                              "on the file system of '/tmp': write less$")))
      << d;
  EXPECT_NE(error_of([] { require_memory(INFINITY, "x", ""); }).find("more memory than can be counted"),
            std::string::npos);
  EXPECT_EQ(error_of([] { require_memory(1000, "x", ""); }), "");
  EXPECT_EQ(error_of([] { require_disk(1000, "/tmp/x.h5", "x", ""); }), "");
}

TEST(Resources, MemoryLimitFromTheEnvironmentCapsWhatIsAvailable) {
  {
    MemoryLimit cap("2M");
    EXPECT_EQ(available_memory(), 2.0 * 1024 * 1024);
    EXPECT_EQ(available_memory_source(), "ATTNPHYS_MEMORY_LIMIT");
    const std::string m = error_of([] { require_memory(5e6, "five megabytes", "lower it"); });
    EXPECT_EQ(m, "five megabytes needs 5 MB of memory, more than the 2.1 MB available (ATTNPHYS_MEMORY_LIMIT): "
                 "lower it");
  }
  {
    MemoryLimit cap("1G");
    EXPECT_EQ(available_memory(), 1024.0 * 1024 * 1024);
  }
  {
    MemoryLimit cap("12345");
    EXPECT_EQ(available_memory(), 12345.0);
  }
  {
    MemoryLimit cap("lots");
    EXPECT_NE(error_of([] { available_memory(); }).find("ATTNPHYS_MEMORY_LIMIT = 'lots' is not a size"),
              std::string::npos);
  }
  {
    MemoryLimit cap("3Q");
    EXPECT_NE(error_of([] { available_memory(); }).find("unknown unit 'Q'"), std::string::npos);
  }
}
