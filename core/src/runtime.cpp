#include "attnphys/core/runtime.hpp"

#include "attnphys/core/amx.hpp"

#include "attnphys/core/parallel.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <Kokkos_Core.hpp>
#include <KokkosKernels_config.h>
#include <mutex>

#include "attnphys/core/build_info.hpp"
#include "attnphys/core/comm.hpp"
#include "attnphys/core/gemm.hpp"
#include "attnphys/core/json.hpp"

#ifdef ATTNPHYS_HAVE_MPI
#include <mpi.h>
#endif

namespace attnphys {

namespace {
std::mutex g_mutex;
bool g_we_initialized_kokkos = false;
#ifdef ATTNPHYS_HAVE_MPI
bool g_we_initialized_mpi = false;
#endif
bool g_blas_spin_tuned = false;

// OpenBLAS' worker threads spin (sched_yield in a loop) for 2^28 cycles, about 0.1 s, after each product before
// they sleep. Between two products attnphys runs its own kernels on the same cores (the host pool of
// parallel.hpp), and the spinning workers then take time slices from them, which makes those kernels slower and
// their timings noisier when cores are few. Unless the user chose a value
// (OPENBLAS_THREAD_TIMEOUT or GOTO_THREAD_TIMEOUT), shorten the spin to 2^20 cycles (about 0.3 ms) and restart
// OpenBLAS' thread server, which reads the value only when it starts. Done once, at initialisation, before any
// product can be in flight; a no-op for other BLAS libraries and single-threaded OpenBLAS.
constexpr int kBlasThreadTimeout = 20;
void tune_blas_spin() {
  if (g_blas_spin_tuned) return;
  g_blas_spin_tuned = true;
  if (std::getenv("OPENBLAS_THREAD_TIMEOUT") || std::getenv("GOTO_THREAD_TIMEOUT")) return;
  using VoidFn = void (*)();
  using IntFn = int (*)();
  auto read_env = reinterpret_cast<VoidFn>(dlsym(RTLD_DEFAULT, "openblas_read_env"));
  auto shutdown = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"));
  auto init = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "blas_thread_init"));
  auto threads = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (!read_env || !shutdown || !init || !threads || threads() <= 1) return;
  setenv("OPENBLAS_THREAD_TIMEOUT", std::to_string(kBlasThreadTimeout).c_str(), 0);
  read_env();
  shutdown();
  init();
}
}  // namespace

int blas_thread_timeout() {
  using IntFn = int (*)();
  auto fn = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "openblas_thread_timeout"));
  if (!fn) return 0;
  const int v = fn();  // the value read from the environment; 0 when unset, then OpenBLAS' default 28
  return v <= 0 ? 28 : (v < 4 ? 4 : (v > 30 ? 30 : v));
}

void ensure_initialized(int* argc, char*** argv) {
  std::lock_guard<std::mutex> lock(g_mutex);
#ifdef ATTNPHYS_HAVE_MPI
  if (mpi_launched()) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      MPI_Init(argc, argv);
      g_we_initialized_mpi = true;
    }
  }
#endif
  if (!Kokkos::is_initialized()) {
    if (argc && argv) {
      Kokkos::initialize(*argc, *argv);
    } else {
      Kokkos::initialize();
    }
    g_we_initialized_kokkos = true;
  }
  tune_blas_spin();
}

void finalize() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_we_initialized_kokkos && Kokkos::is_initialized()) {
    Kokkos::finalize();
    g_we_initialized_kokkos = false;
  }
#ifdef ATTNPHYS_HAVE_MPI
  if (g_we_initialized_mpi) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
    g_we_initialized_mpi = false;
  }
#endif
}

bool is_initialized() { return Kokkos::is_initialized(); }

namespace {
std::string host_blas_name() {
  // Run one tiny product through the gemm wrapper first: it proves the BLAS path works and makes sure the BLAS
  // library is loaded. OpenBLAS and MKL then announce themselves through a symbol; otherwise name the library
  // that provides dgemm_.
  if (Kokkos::is_initialized()) {
    View2<double> a("a", 1, 1);
    Kokkos::deep_copy(a, 2.0);
    View2<double> c("c", 1, 1);
    gemm('N', 'N', 1.0, a, a, 0.0, c);
    require(to_host(c)(0, 0) == 4.0, "the BLAS behind KokkosBlas::gemm computed 2*2 wrongly");
  }
  using ConfigFn = char* (*)();
  if (auto fn = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) return fn();
  if (dlsym(RTLD_DEFAULT, "mkl_get_version")) return "Intel MKL";
  if (dlsym(RTLD_DEFAULT, "bli_info_get_version_str")) return "BLIS";
  Dl_info dl{};
  if (void* sym = dlsym(RTLD_DEFAULT, "dgemm_"); sym && dladdr(sym, &dl) && dl.dli_fname) return dl.dli_fname;
  return "system BLAS (unknown vendor)";
}
}  // namespace

namespace {
// The CPU model and the widest SIMD its flags list (Linux /proc/cpuinfo; empty elsewhere).
void cpu_details(std::string& model, std::string& simd) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  bool avx512 = false, avx2 = false, fma = false, avx = false, sse3 = false, got_flags = false;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && model.empty()) model = value;
    if (key == "flags" && !got_flags) {
      got_flags = true;
      std::istringstream f(value);
      std::string flag;
      bool f512 = false, bw = false, vl = false, dq = false;
      while (f >> flag) {
        f512 |= flag == "avx512f", bw |= flag == "avx512bw", vl |= flag == "avx512vl", dq |= flag == "avx512dq";
        avx2 |= flag == "avx2", fma |= flag == "fma", avx |= flag == "avx", sse3 |= flag == "pni";
      }
      avx512 = f512 && bw && vl && dq;  // what OpenBLAS' SkylakeX kernels need
    }
  }
  simd = avx512 ? "avx512" : (avx2 && fma) ? "avx2" : avx ? "avx" : (got_flags || sse3) ? "sse" : "";
}
}  // namespace

std::string blas_core_advice(const std::string& core, const std::string& simd) {
  if (core.empty() || simd.empty()) return "";
  // OpenBLAS' x86-64 cores by the widest SIMD their kernels use.
  static const char* avx512_cores[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
  static const char* avx2_cores[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"};
  auto is = [&](const char* const* list, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      if (core == list[i]) return true;
    return false;
  };
  std::string want;
  if (simd == "avx512" && !is(avx512_cores, 3) && !is(avx2_cores, 5)) want = "SkylakeX";
  else if ((simd == "avx512" || simd == "avx2") && !is(avx2_cores, 5) && !is(avx512_cores, 3)) want = "Haswell";
  // AVX2 kernels on an AVX-512 CPU: not a generic fallback, but half the rate on a full-width AVX-512 core.
  if (want.empty() && simd == "avx512" && !is(avx512_cores, 3))
    return "OpenBLAS runs its " + core + " (AVX2) kernels, but this CPU supports avx512: on an AMD EPYC (Zen 5) "
           "of this project's machines sgemm ran at 242 GFLOP/s with Haswell against 467 with SkylakeX on 2 "
           "threads. Set OPENBLAS_CORETYPE=SkylakeX in the environment before starting attnphys (export "
           "OPENBLAS_CORETYPE=SkylakeX; OPENBLAS_VERBOSE=2 prints the core OpenBLAS picks).";
  if (want.empty()) return "";
  return "OpenBLAS chose its " + core + " kernels, but this CPU supports " + simd +
         ": dense products (gemm) run several times slower than they could (sgemm 34-50 GFLOP/s with Prescott "
         "against 226-287 with SkylakeX on 2 threads, measured on this project's machines). Set "
         "OPENBLAS_CORETYPE=" + want + " in the environment before starting attnphys (export OPENBLAS_CORETYPE=" +
         want + "; OPENBLAS_VERBOSE=2 prints the core OpenBLAS picks).";
}

RuntimeInfo runtime_info() {
  RuntimeInfo info;
  info.version = build::version;
  info.git_revision = build::git_revision;
  const int v = KOKKOS_VERSION;
  info.kokkos_version = std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
  info.default_execution_space = Kokkos::DefaultExecutionSpace::name();
  info.execution_spaces.push_back(info.default_execution_space);
  auto add = [&](const char* name) {
    if (info.default_execution_space != name) info.execution_spaces.push_back(name);
  };
#ifdef KOKKOS_ENABLE_CUDA
  add("Cuda");
#endif
#ifdef KOKKOS_ENABLE_HIP
  add("HIP");
#endif
#ifdef KOKKOS_ENABLE_SYCL
  add("SYCL");
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  add("OpenMP");
#endif
#ifdef KOKKOS_ENABLE_THREADS
  add("Threads");
#endif
#ifdef KOKKOS_ENABLE_SERIAL
  add("Serial");
#endif
  info.concurrency = Kokkos::is_initialized() ? static_cast<int>(Kokkos::DefaultExecutionSpace().concurrency()) : 0;
  info.host_threads = host_pool_applies() ? host_threads() : 1;
  std::string blas;
#if defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS)
  blas += "cuBLAS (device); ";
#endif
#if defined(KOKKOSKERNELS_ENABLE_TPL_ROCBLAS)
  blas += "rocBLAS (device); ";
#endif
#if defined(KOKKOSKERNELS_ENABLE_TPL_MKL)
  blas += "MKL TPL: ";
#endif
#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS) || defined(KOKKOSKERNELS_ENABLE_TPL_MKL)
  blas += host_blas_name();
#else
  blas += "Kokkos Kernels native (no BLAS TPL: slow host gemm)";
#endif
  info.blas = blas;
  using CharFn = char* (*)();
  using IntFn = int (*)();
  if (auto cfg = reinterpret_cast<CharFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
    info.blas_vendor = "OpenBLAS";
    std::istringstream words(cfg());
    std::string first, version;
    words >> first >> version;
    if (first == "OpenBLAS") info.blas_version = version;
    if (auto core = reinterpret_cast<CharFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"))) info.blas_core = core();
    if (auto threads = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads")))
      info.blas_threads = threads();
    info.blas_thread_timeout = blas_thread_timeout();
  } else if (dlsym(RTLD_DEFAULT, "mkl_get_version")) {
    info.blas_vendor = "Intel MKL";
  } else if (dlsym(RTLD_DEFAULT, "bli_info_get_version_str")) {
    info.blas_vendor = "BLIS";
  }
  if (const char* env = std::getenv("OPENBLAS_CORETYPE")) info.blas_coretype_env = env;
  cpu_details(info.cpu_model, info.cpu_simd);
  info.blas_warning = blas_core_advice(info.blas_core, info.cpu_simd);
  info.amx_bf16 = amx::available();
  info.amx_reason = amx::unavailable_reason();
  info.bf16_attention = info.amx_bf16 ? "amx" : amx::avx512_bf16_available() ? "avx512-bf16" : "none";
  if (info.bf16_attention == "none") info.bf16_reason = amx::avx512_bf16_unavailable_reason();
  if (!info.blas_warning.empty() && !info.blas_coretype_env.empty())
    info.blas_warning += " (OPENBLAS_CORETYPE is set to " + info.blas_coretype_env + " now.)";
#ifdef ATTNPHYS_HAVE_MPI
  info.mpi_enabled = true;
#endif
  Comm c = Comm::world();
  info.mpi_ranks = c.size();
  info.mpi_rank = c.rank();
  return info;
}

std::string to_json(const RuntimeInfo& info) {
  Json j = Json::object();
  j.set("version", info.version);
  j.set("git_revision", info.git_revision);
  j.set("kokkos_version", info.kokkos_version);
  j.set("default_execution_space", info.default_execution_space);
  j.set("execution_spaces", info.execution_spaces);
  j.set("concurrency", info.concurrency);
  j.set("host_threads", info.host_threads);
  Json blas = Json::object();
  blas.set("name", info.blas);
  blas.set("vendor", info.blas_vendor);
  blas.set("version", info.blas_version);
  blas.set("core", info.blas_core);
  blas.set("threads", info.blas_threads);
  blas.set("thread_timeout", info.blas_thread_timeout);
  blas.set("openblas_coretype", info.blas_coretype_env);
  j.set("blas", blas);
  Json cpu = Json::object();
  cpu.set("model", info.cpu_model);
  cpu.set("simd", info.cpu_simd);
  cpu.set("amx_bf16", info.amx_bf16);
  if (!info.amx_bf16) cpu.set("amx_reason", info.amx_reason);
  cpu.set("bf16_attention", info.bf16_attention);
  if (!info.bf16_reason.empty()) cpu.set("bf16_reason", info.bf16_reason);
  j.set("cpu", cpu);
  std::vector<std::string> warnings;
  if (!info.blas_warning.empty()) warnings.push_back(info.blas_warning);
  j.set("warnings", warnings);
  Json mpi = Json::object();
  mpi.set("enabled", info.mpi_enabled);
  mpi.set("ranks", info.mpi_ranks);
  mpi.set("rank", info.mpi_rank);
  j.set("mpi", mpi);
  return j.dump();
}

}  // namespace attnphys
