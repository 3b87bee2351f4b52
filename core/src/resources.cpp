#include "attnphys/core/resources.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "attnphys/core/error.hpp"

namespace attnphys {

namespace {

constexpr double kUnknown = std::numeric_limits<double>::infinity();

// First number of a one-line file ("max" or unreadable: unknown).
double read_number(const char* path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s == "max") return kUnknown;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  return end != s.c_str() && v >= 0 ? v : kUnknown;
}

double meminfo_available() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (f >> key >> kb) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return kb * 1024.0;
  }
  return kUnknown;
}

double cgroup_room() {
  // cgroup v2 (the process's own group is the mount root inside a container), then v1. Limits of 2^60 and above
  // mean "no limit" in v1.
  double limit = read_number("/sys/fs/cgroup/memory.max");
  double used = read_number("/sys/fs/cgroup/memory.current");
  if (!std::isfinite(limit)) {
    limit = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    used = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
    if (limit >= 1152921504606846976.0) limit = kUnknown;
  }
  if (!std::isfinite(limit)) return kUnknown;
  return std::isfinite(used) ? std::max(0.0, limit - used) : limit;
}

// ATTNPHYS_MEMORY_LIMIT=8G (k, M, G, T: powers of 1024), or bytes.
double env_limit() {
  const char* e = std::getenv("ATTNPHYS_MEMORY_LIMIT");
  if (!e || !*e) return kUnknown;
  char* end = nullptr;
  double v = std::strtod(e, &end);
  require(end != e && v >= 0 && std::isfinite(v), "ATTNPHYS_MEMORY_LIMIT = '", e,
          "' is not a size: give bytes, or a number with k, M, G or T (e.g. 8G)");
  const std::string unit(end);
  if (unit == "k" || unit == "K" || unit == "kB" || unit == "KB") v *= 1024.0;
  else if (unit == "M" || unit == "MB") v *= 1024.0 * 1024.0;
  else if (unit == "G" || unit == "GB") v *= 1024.0 * 1024.0 * 1024.0;
  else if (unit == "T" || unit == "TB") v *= 1024.0 * 1024.0 * 1024.0 * 1024.0;
  else require(unit.empty(), "ATTNPHYS_MEMORY_LIMIT = '", e, "' has an unknown unit '", unit, "': use k, M, G or T");
  return v;
}

struct Available {
  double bytes = kUnknown;
  std::string source = "unknown";
};

Available available() {
  Available a;
  const double m = meminfo_available(), c = cgroup_room(), e = env_limit();
  if (m < a.bytes) a = {m, "MemAvailable in /proc/meminfo"};
  if (c < a.bytes) a = {c, "the room under the cgroup's memory limit"};
  if (e < a.bytes) a = {e, "ATTNPHYS_MEMORY_LIMIT"};
  return a;
}

}  // namespace

double available_memory() { return available().bytes; }
std::string available_memory_source() { return available().source; }

double free_disk_space(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(path.empty() ? fs::path(".") : fs::path(path), ec);
  if (ec) return kUnknown;
  while (!p.empty() && !fs::exists(p, ec)) {
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  struct statvfs st {};
  if (statvfs(p.c_str(), &st) != 0) return kUnknown;
  return double(st.f_bavail) * double(st.f_frsize);
}

std::string format_bytes(double bytes) {
  if (!std::isfinite(bytes)) return "more bytes than a double holds";
  static const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  int u = 0;
  while (std::abs(bytes) >= 1000.0 && u < 8) bytes /= 1000.0, ++u;
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else std::snprintf(buf, sizeof buf, "%.3g %s", bytes, units[u]);
  return buf;
}

void require_memory(double bytes, const std::string& what, const std::string& hint) {
  require(std::isfinite(bytes), what, " needs more memory than can be counted (its sizes overflow)",
          hint.empty() ? "" : ": ", hint);
  const Available a = available();
  if (bytes <= a.bytes) return;
  fail(what, " needs ", format_bytes(bytes), " of memory, more than the ", format_bytes(a.bytes), " available (",
       a.source, ")", hint.empty() ? "" : ": ", hint);
}

void require_disk(double bytes, const std::string& path, const std::string& what, const std::string& hint) {
  require(std::isfinite(bytes), what, " needs more disk than can be counted (its sizes overflow)",
          hint.empty() ? "" : ": ", hint);
  const double free = free_disk_space(path);
  if (bytes <= free) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::absolute(path, ec).parent_path();
  fail(what, " needs ", format_bytes(bytes), " of disk, more than the ", format_bytes(free),
       " free on the file system of '", dir.string(), "'", hint.empty() ? "" : ": ", hint);
}

}  // namespace attnphys
