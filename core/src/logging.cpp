#include "attnphys/core/logging.hpp"

#include <cstdlib>

#include <unistd.h>

#include <cmath>
#include <cstring>

#include "attnphys/core/error.hpp"

namespace attnphys {

CsvLogger::CsvLogger(const std::string& path, std::vector<std::string> columns, bool append)
    : cols_(std::move(columns)) {
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  require(f_ != nullptr, "cannot open metrics file '", path, "' for writing: ", std::strerror(errno));
  if (!append || std::ftell(f_) == 0) {
    for (std::size_t i = 0; i < cols_.size(); ++i) std::fprintf(f_, "%s%s", i ? "," : "", cols_[i].c_str());
    std::fprintf(f_, "\n");
    std::fflush(f_);
  }
}

CsvLogger CsvLogger::resume(const std::string& path, std::vector<std::string> columns, double step) {
  std::vector<std::string> kept;
  std::vector<double> values;
  bool same_header = false;
  if (std::FILE* in = std::fopen(path.c_str(), "r")) {
    std::string line, header;
    for (std::size_t i = 0; i < columns.size(); ++i) header += (i ? "," : "") + columns[i];
    char buf[4096];
    bool first = true;
    while (std::fgets(buf, sizeof buf, in)) {
      line = buf;
      const bool whole = !line.empty() && line.back() == '\n';  // a line cut by a crash is dropped
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
      if (first) {
        same_header = line == header;
        first = false;
        if (!same_header) break;
        continue;
      }
      if (!whole || line.empty()) continue;
      std::vector<double> row;
      const char* c = line.c_str();
      char* end = nullptr;
      bool ok = true;
      for (std::size_t k = 0; k < columns.size() && ok; ++k) {
        row.push_back(std::strtod(c, &end));
        ok = end != c && (*end == ',' || (*end == '\0' && k + 1 == columns.size()));
        c = *end == ',' ? end + 1 : end;
      }
      if (!ok || row.size() != columns.size() || !(row[0] <= step)) continue;
      kept.push_back(line);
      values.insert(values.end(), row.begin(), row.end());
    }
    std::fclose(in);
  }
  if (!same_header) return CsvLogger(path, std::move(columns), false);
  const std::string tmp = path + ".tmp";
  {
    std::FILE* out = std::fopen(tmp.c_str(), "w");
    require(out != nullptr, "cannot write metrics file '", tmp, "': ", std::strerror(errno));
    for (std::size_t i = 0; i < columns.size(); ++i) std::fprintf(out, "%s%s", i ? "," : "", columns[i].c_str());
    std::fprintf(out, "\n");
    for (const auto& l : kept) std::fprintf(out, "%s\n", l.c_str());
    std::fclose(out);
  }
  require(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot replace metrics file '", path, "': ",
          std::strerror(errno));
  CsvLogger log(path, std::move(columns), true);
  log.rows_ = std::move(values);
  return log;
}

CsvLogger::~CsvLogger() {
  if (f_) std::fclose(f_);
}

CsvLogger::CsvLogger(CsvLogger&& o) noexcept : f_(o.f_), cols_(std::move(o.cols_)), rows_(std::move(o.rows_)) {
  o.f_ = nullptr;
}
CsvLogger& CsvLogger::operator=(CsvLogger&& o) noexcept {
  if (this != &o) {
    if (f_) std::fclose(f_);
    f_ = o.f_;
    cols_ = std::move(o.cols_);
    rows_ = std::move(o.rows_);
    o.f_ = nullptr;
  }
  return *this;
}

void CsvLogger::row(const std::vector<double>& values) {
  if (!f_) return;
  require(values.size() == cols_.size(), "CsvLogger: row has ", values.size(), " values, header has ", cols_.size());
  rows_.insert(rows_.end(), values.begin(), values.end());
  for (std::size_t i = 0; i < values.size(); ++i) std::fprintf(f_, "%s%.10g", i ? "," : "", values[i]);
  std::fprintf(f_, "\n");
  std::fflush(f_);
}

std::string format_seconds(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", int(s) / 3600, (int(s) % 3600) / 60);
  return buf;
}

bool ProgressBar::stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

ProgressBar::ProgressBar(long total, std::string label, bool enabled)
    : total_(total), label_(std::move(label)), enabled_(enabled), tty_(stderr_is_terminal()) {
  start_ = last_print_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() {
  if (enabled_ && !finished_ && tty_ && last_done_ >= 0) std::fprintf(stderr, "\n");
}

void ProgressBar::update(long done, const std::string& status) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_print_).count();
  // Terminal: redraw at most 10 times a second. Log file: a line every 10 s or every 10 % of the work.
  bool due;
  if (tty_) {
    due = since > 0.1 || done == total_;
  } else {
    const long tenth = total_ > 0 ? std::max(1L, total_ / 10) : 0;
    const bool crossed = tenth > 0 && (last_done_ < 0 || done / tenth != last_done_ / tenth);
    due = since > 10.0 || crossed;
  }
  if (!due) return;
  last_print_ = now;
  print(done, status, false);
  last_done_ = done;
}

void ProgressBar::finish(const std::string& status) {
  if (!enabled_ || finished_) return;
  print(total_ > 0 ? total_ : std::max(0L, last_done_), status, true);
  finished_ = true;
}

void ProgressBar::print(long done, const std::string& status, bool final_line) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? done / elapsed : 0;
  const double eta = (total_ > 0 && rate > 0) ? (total_ - done) / rate : NAN;
  char rate_s[32];
  std::snprintf(rate_s, sizeof rate_s, rate >= 10 ? "%.0f/s" : "%.2f/s", rate);
  std::string line = label_ + " ";
  if (total_ > 0) {
    const int width = 24;
    const int filled = int(width * double(done) / double(total_));
    if (tty_) {
      line += "[" + std::string(std::max(0, std::min(width, filled)), '#') +
              std::string(std::max(0, width - std::max(0, std::min(width, filled))), '.') + "] ";
    }
    line += std::to_string(done) + "/" + std::to_string(total_);
  } else {
    line += std::to_string(done);
  }
  line += "  " + std::string(rate_s) + "  elapsed " + format_seconds(elapsed);
  if (!final_line && total_ > 0) line += "  eta " + format_seconds(eta);
  if (!status.empty()) line += "  " + status;
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final_line ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

}  // namespace attnphys
