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
  std::string blas;               // what KokkosBlas::gemm reaches on the host / device
  bool mpi_enabled = false;
  int mpi_ranks = 1;
  int mpi_rank = 0;
};

// Initialises Kokkos (and MPI when built with it) unless already done; safe to call repeatedly.
void ensure_initialized(int* argc = nullptr, char*** argv = nullptr);
// Finalises Kokkos (and MPI if this library initialised it). Views must be gone by then.
void finalize();
bool is_initialized();

RuntimeInfo runtime_info();
std::string to_json(const RuntimeInfo& info);

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
