#pragma once
// Run logging: metrics rows to CSV, and a progress display on stderr (a bar with rate and ETA on a terminal,
// plain periodic lines otherwise, so logs of batch jobs stay readable). stdout is left to results and --json.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace attnphys {

class CsvLogger {
 public:
  CsvLogger() = default;
  // Opens path for writing (append=false truncates) and writes the header unless appending to a non-empty file.
  CsvLogger(const std::string& path, std::vector<std::string> columns, bool append = false);
  // Continues a log after a restart from a checkpoint taken at `step`: the rows of `path` whose first column is at
  // most `step` are kept (the file rewritten atomically without the later ones, which the resumed run logs again),
  // loaded into rows(), and new rows are appended. A missing file, or one with another header, starts afresh.
  static CsvLogger resume(const std::string& path, std::vector<std::string> columns, double step);
  ~CsvLogger();
  CsvLogger(const CsvLogger&) = delete;
  CsvLogger& operator=(const CsvLogger&) = delete;
  CsvLogger(CsvLogger&& o) noexcept;
  CsvLogger& operator=(CsvLogger&& o) noexcept;

  bool is_open() const { return f_ != nullptr; }
  const std::vector<std::string>& columns() const { return cols_; }
  // One row; values in column order. Flushed at once so a crash keeps what was logged.
  void row(const std::vector<double>& values);
  // Every row logged by this logger, row-major [rows, columns] (for writing the metrics into HDF5 as well).
  const std::vector<double>& rows() const { return rows_; }

 private:
  std::FILE* f_ = nullptr;
  std::vector<std::string> cols_;
  std::vector<double> rows_;
};

class ProgressBar {
 public:
  // total: number of steps (0: unknown). enabled=false prints nothing (non-root MPI ranks, quiet mode).
  ProgressBar(long total, std::string label, bool enabled = true);
  ~ProgressBar();
  // Reports that `done` steps are complete, with a short status such as "loss 1.2e-3".
  void update(long done, const std::string& status = "");
  void finish(const std::string& status = "");
  static bool stderr_is_terminal();

 private:
  long total_;
  std::string label_;
  bool enabled_, tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_print_;
  long last_done_ = -1;
  void print(long done, const std::string& status, bool final_line);
};

std::string format_seconds(double s);

}  // namespace attnphys
