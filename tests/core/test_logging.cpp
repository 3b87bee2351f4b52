// Run logging: the CSV file and the in-memory table (written to HDF5 by the trainers) hold the same rows.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "attnphys/core/error.hpp"
#include "attnphys/core/logging.hpp"
#include "scratch.hpp"

using namespace attnphys;

TEST(CsvLogger, FileAndTableAgree) {
  const auto path = (attnphys::test::scratch_dir("logging") / "log.csv").string();
  {
    CsvLogger log(path, {"step", "loss"});
    log.row({1, 0.5});
    log.row({2, 0.25});
    EXPECT_THROW(log.row({3}), Error);
    EXPECT_EQ(log.rows(), (std::vector<double>{1, 0.5, 2, 0.25}));
  }
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "step,loss\n1,0.5\n2,0.25\n");
  {
    CsvLogger more(path, {"step", "loss"}, /*append=*/true);  // resuming appends without a second header
    more.row({3, 0.125});
  }
  std::ifstream in2(path);
  std::stringstream s2;
  s2 << in2.rdbuf();
  EXPECT_EQ(s2.str(), "step,loss\n1,0.5\n2,0.25\n3,0.125\n");
  EXPECT_THROW(CsvLogger("/nonexistent/dir/x.csv", {"a"}), Error);
}

TEST(Logging, FormatSeconds) {
  EXPECT_EQ(format_seconds(5.25), "5.2s");
  EXPECT_EQ(format_seconds(125), "2m05s");
  EXPECT_EQ(format_seconds(7300), "2h01m");
  EXPECT_EQ(format_seconds(-1), "?");
}

TEST(CsvLogger, ResumeKeepsTheRowsUpToTheCheckpointAndDropsTheRest) {
  const std::string path = (attnphys::test::scratch_dir("logging") / "csv_resume.csv").string();
  {
    attnphys::CsvLogger log(path, {"step", "loss"});
    for (int s = 1; s <= 5; ++s) log.row({double(s), 1.0 / s});
  }
  {
    std::FILE* f = std::fopen(path.c_str(), "a");  // a row cut by a crash
    std::fputs("6,0.1", f);
    std::fclose(f);
  }
  {
    auto log = attnphys::CsvLogger::resume(path, {"step", "loss"}, 3.0);  // checkpoint at step 3
    ASSERT_EQ(log.rows().size(), 6u);
    EXPECT_EQ(log.rows()[4], 3.0);
    log.row({4.0, 0.25});
  }
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "step,loss\n1,1\n2,0.5\n3,0.3333333333\n4,0.25\n");
  // Another header: a fresh file.
  auto other = attnphys::CsvLogger::resume(path, {"iteration", "energy"}, 3.0);
  EXPECT_TRUE(other.rows().empty());
  std::filesystem::remove(path);
}
