#pragma once
// Kokkos (and MPI) lifetime. Every entry point — the command-line program, the Python import, the test mains —
// goes through Runtime so that Kokkos is initialised exactly once and finalised cleanly.
#include <string>
#include <vector>

namespace attnphys {

struct RuntimeInfo {
  std::string version;            // attnphys version
  std::string git_revision;
  std::string kokkos_version;     // e.g. "3.4.1"
  std::vector<std::string> execution_spaces;  // enabled backends, default first
  std::string default_execution_space;
  int concurrency = 0;
  int host_threads = 1;           // threads of attnphys::parallel_for under Serial (1 with other backends)
  std::string blas;               // what KokkosBlas::gemm reaches on the host / device
  // The host BLAS in detail (OpenBLAS reports all of these; other libraries leave the fields empty / 0).
  std::string blas_vendor;        // "OpenBLAS", "Intel MKL", "BLIS", ...
  std::string blas_version;       // "0.3.21"
  std::string blas_core;          // the kernel set OpenBLAS chose at load time ("SkylakeX", "Haswell", "Prescott")
  int blas_threads = 0;           // OpenBLAS' thread count
  int blas_thread_timeout = 0;    // log2 of the cycles OpenBLAS' idle workers spin before they sleep (0: not OpenBLAS)
  std::string blas_coretype_env;  // OPENBLAS_CORETYPE as set in the environment (empty: unset)
  std::string cpu_model;          // /proc/cpuinfo "model name"
  std::string cpu_simd;           // the widest SIMD the CPU reports: "avx512", "avx2", "avx", "sse" (empty: unknown)
  std::string blas_warning;       // non-empty when the BLAS runs a generic fallback the CPU could beat (see below)
  bool amx_bf16 = false;          // Intel AMX bf16 tiles usable here (attention_precision / matmul_precision = bf16)
  std::string amx_reason;         // why not, when amx_bf16 is false
  std::string bf16_attention;     // the unit the bf16 attention (attention_precision = bf16) runs on: "amx",
                                  // "avx512-bf16" (VDPBF16PS, no AMX) or "none" (then amx_reason / the probe says why)
  std::string bf16_reason;        // why none, when bf16_attention is "none"
  bool mpi_enabled = false;
  int mpi_ranks = 1;
  int mpi_rank = 0;
};

// Initialises Kokkos (and MPI when built with it) unless already done; safe to call repeatedly.
void ensure_initialized(int* argc = nullptr, char*** argv = nullptr);
// Finalises Kokkos (and MPI if this library initialised it). Views must be gone by then.
void finalize();
bool is_initialized();

// OpenBLAS' worker spin before sleeping, as log2 of cycles (0 when the BLAS is not OpenBLAS). ensure_initialized()
// sets it to 20 (about 0.3 ms; OpenBLAS' default is 28, about 0.1 s) unless OPENBLAS_THREAD_TIMEOUT or
// GOTO_THREAD_TIMEOUT is set: long spins take time slices from attnphys' own host threads between products.
int blas_thread_timeout();

RuntimeInfo runtime_info();
std::string to_json(const RuntimeInfo& info);

// The advice attnphys gives about OpenBLAS' kernel choice: empty when the core `core` suits a CPU whose widest
// SIMD is `simd` ("avx512", "avx2", ...), otherwise a warning that names the core, what the CPU supports and the
// exact setting to use (OPENBLAS_CORETYPE=SkylakeX or Haswell). Debian's OpenBLAS 0.3.21 does not recognise some
// newer CPUs and falls back to its Prescott (SSE3) kernels, which run dense products several times slower (the
// README's measured results give the figures).
std::string blas_core_advice(const std::string& core, const std::string& simd);

// Scope guard for main(): initialises on construction, finalises on destruction.
class Runtime {
 public:
  Runtime(int& argc, char**& argv) { ensure_initialized(&argc, &argv); }
  Runtime() { ensure_initialized(); }
  ~Runtime() { finalize(); }
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
};

}  // namespace attnphys
