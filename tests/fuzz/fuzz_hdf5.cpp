// libFuzzer target: the HDF5 readers (core/src/hdf5_io.cpp) on mutated files.
//
// Input: the bytes of a file (seeds: real checkpoints, a parameter buffer, a dataset, an MPS file and an evaluation
// file written by attnphys, tests/fuzz/corpus/hdf5). It is written to a temporary file and read the way attnphys
// reads its files: h5::Reader (any HDF5 file, then the attnphys kind check), the identifying and the config
// attributes, every dataset's shape, numeric datasets whole and by row slabs, and the parameter buffers under
// /model and /best through h5::read_parameters with a buffer built from the file's own block table (as a model
// of the stored configuration would be). Reading may fail only with attnphys::Error.
//
// CPU watchdog: an input that uses more than ATTNPHYS_FUZZ_CPU_MS of CPU time (default 250 ms; 0: off; a valid
// file takes a few ms) ends the process with "fuzz_hdf5: ERROR: ... CPU time" and the stack where it was, as a
// crash (libFuzzer saves it as crash-*; tests/fuzz/triage.py places it by that stack). libFuzzer's own -timeout
// counts wall-clock seconds (1 s at least): libhdf5 1.10.8 loops on some corrupted global heaps, and those loops
// used about a fifth of a run's time at a 1-2 s timeout. CPU time, unlike wall time, does not grow with the load of
// a shared machine, so a busy machine does not turn slow inputs into findings.
#include <sanitizer/common_interface_defs.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "attnphys/core/error.hpp"
#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/core/params.hpp"
#include "attnphys/core/runtime.hpp"

namespace h5 = attnphys::h5;

namespace {

std::string temp_path() {
  const char* dir = std::getenv("ATTNPHYS_FUZZ_TMP");
  return std::string(dir ? dir : "/tmp") + "/attnphys-fuzz-hdf5-" + std::to_string(::getpid()) + ".h5";
}

// "name:AxB\n..." (the block table of write_parameters) -> blocks; false when it is not one or is too large to try.
bool parse_blocks(const std::string& table, std::vector<std::pair<std::string, std::vector<long>>>& out) {
  long total = 0;
  std::size_t pos = 0;
  while (pos < table.size()) {
    auto nl = table.find('\n', pos);
    if (nl == std::string::npos) return false;
    const std::string line = table.substr(pos, nl - pos);
    pos = nl + 1;
    const auto colon = line.rfind(':');
    if (colon == std::string::npos || colon == 0) return false;
    std::vector<long> shape;
    long size = 1;
    std::size_t p = colon + 1;
    while (p <= line.size()) {
      auto x = line.find('x', p);
      if (x == std::string::npos) x = line.size();
      const std::string num = line.substr(p, x - p);
      if (num.empty() || num.size() > 6 || num.find_first_not_of("0123456789") != std::string::npos) return false;
      shape.push_back(std::stol(num));
      size *= shape.back();
      if (size > (1L << 20)) return false;
      p = x + 1;
    }
    total += size;
    if (total > (1L << 20) || out.size() > 4096) return false;
    out.emplace_back(line.substr(0, colon), shape);
  }
  return !out.empty();
}

void read_buffer(const h5::Reader& r, const std::string& group) {
  if (!r.has(group + "/params") || !r.has_attr(group + "/params", "blocks")) return;
  std::vector<std::pair<std::string, std::vector<long>>> blocks;
  if (!parse_blocks(r.attr_string(group + "/params", "blocks"), blocks)) return;
  attnphys::ParameterBuffer<double> buf;
  for (const auto& [name, shape] : blocks) {
    if (buf.has(name)) return;  // a table naming a block twice
    buf.add(name, shape);
  }
  buf.allocate();
  h5::read_parameters(r, group, buf, r.has(group + "/moment1"));
  attnphys::ParameterBuffer<float> f32;  // the surrogate's float parameters read the same file
  for (const auto& [name, shape] : blocks) f32.add(name, shape);
  f32.allocate();
  h5::read_parameters(r, group, f32, false);
}

void read_all(const std::string& path) {
  h5::Reader r(path, h5::AnyFile{});
  if (r.is_attnphys()) {
    (void)r.kind();
    (void)r.format_version();
    try {
      r.require_kind("", 1);
    } catch (const attnphys::Error&) {
    }
    for (const char* a : {"config", "attnphys_version", "git_revision", "created_utc", "sampler", "model_name"})
      if (r.has_attr("/", a)) (void)r.attr_string("/", a);
    for (const char* a : {"step", "optimizer_steps", "iteration", "sampler_step", "adam_steps", "bad_evals"})
      if (r.has_attr("/", a)) (void)r.attr_long("/", a);
    for (const char* a : {"best_val_rel_l2", "norm_mean", "norm_std"})
      if (r.has_attr("/", a)) (void)r.attr_double("/", a);
    for (const char* a : {"channel_mean", "channel_std"})
      if (r.has_attr("/", a)) (void)r.attr_doubles("/", a);
  }
  for (const auto& name : r.datasets()) {
    const h5::Shape s = r.shape(name);
    std::uint64_t n = 1;
    for (auto e : s) n = e > 0 && n > (1u << 22) / e ? (1u << 22) + 1 : n * e;
    if (!r.is_numeric_dataset(name) || n > (1u << 22)) continue;  // a real reader refuses sizes it cannot hold
    (void)r.read<double>(name);
    (void)r.read<float>(name);
    if (!s.empty() && s[0] > 0) {
      std::vector<double> row(n / s[0] + 1);
      r.read_rows<double>(name, 0, 1, row.data());
    }
    if (r.has_attr(name, "columns")) (void)r.attr_string(name, "columns");
  }
  read_buffer(r, "/model");
  read_buffer(r, "/best");
}

long g_cpu_ms = 250;

extern "C" void fuzz_hdf5_cpu_watchdog(int) {  // tests/fuzz/triage.py skips this frame
  static const char msg[] = "==fuzz_hdf5== ERROR: fuzz_hdf5: this input used more than ATTNPHYS_FUZZ_CPU_MS of CPU time\n";
  (void)!::write(2, msg, sizeof msg - 1);
  __sanitizer_print_stack_trace();
  std::abort();
}

void arm_watchdog(bool on) {
  if (g_cpu_ms <= 0) return;
  itimerval t{};
  if (on) {
    t.it_value.tv_sec = g_cpu_ms / 1000;
    t.it_value.tv_usec = (g_cpu_ms % 1000) * 1000;
  }
  ::setitimer(ITIMER_PROF, &t, nullptr);  // process CPU time (user + system)
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  attnphys::ensure_initialized();
  if (const char* ms = std::getenv("ATTNPHYS_FUZZ_CPU_MS")) g_cpu_ms = std::atol(ms);
  if (g_cpu_ms > 0) {
    struct sigaction sa {};
    sa.sa_handler = fuzz_hdf5_cpu_watchdog;
    ::sigaction(SIGPROF, &sa, nullptr);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = temp_path();
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return 0;
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  arm_watchdog(true);
  try {
    read_all(path);
  } catch (const attnphys::Error&) {
  }
  arm_watchdog(false);
  std::remove(path.c_str());
  return 0;
}
