#include "attnphys/core/runtime.hpp"

#include <dlfcn.h>

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
bool g_we_initialized_mpi = false;
}  // namespace

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
  j.set("blas", info.blas);
  Json mpi = Json::object();
  mpi.set("enabled", info.mpi_enabled);
  mpi.set("ranks", info.mpi_ranks);
  mpi.set("rank", info.mpi_rank);
  j.set("mpi", mpi);
  return j.dump();
}

}  // namespace attnphys
