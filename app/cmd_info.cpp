// attnphys info: what this build runs on (Kokkos version and backends, concurrency, BLAS, MPI).
#include <Kokkos_Core.hpp>

#include "attnphys/core/runtime.hpp"
#include "cli_common.hpp"

namespace attnphys::cli {

namespace {
struct InfoOptions {
  bool kokkos_config = false;
  void declare(OptionSet& s) { s.add("info.kokkos_config", &kokkos_config, "also print Kokkos' full configuration"); }
};
}  // namespace

void register_info(CLI::App& app) {
  auto* sub = app.add_subcommand("info", "print the Kokkos version, execution spaces, concurrency, BLAS and MPI");
  auto flags = std::make_shared<CommonFlags>();
  flags->add_to(sub);
  sub->callback([flags]() {
    InfoOptions opt;
    OptionSet set;
    opt.declare(set);
    flags->apply(set);
    const RuntimeInfo info = runtime_info();
    if (Comm::world().is_root()) {
      std::cout << "attnphys " << info.version << " (" << info.git_revision << ")\n";
      std::cout << "Kokkos " << info.kokkos_version << ", default execution space " << info.default_execution_space
                << ", concurrency " << info.concurrency
                << (info.host_threads > 1 ? ", kernels on " + std::to_string(info.host_threads) + " host threads"
                                          : std::string())
                << "\n";
      std::cout << "execution spaces:";
      for (const auto& s : info.execution_spaces) std::cout << " " << s;
      std::cout << "\nBLAS: " << info.blas << "\n";
      if (!info.blas_core.empty())
        std::cout << "BLAS kernels: " << info.blas_core << ", " << info.blas_threads << " thread(s)"
                  << (info.blas_coretype_env.empty() ? "" : " (OPENBLAS_CORETYPE=" + info.blas_coretype_env + ")")
                  << (info.blas_thread_timeout > 0
                          ? ", idle workers spin 2^" + std::to_string(info.blas_thread_timeout) + " cycles"
                          : std::string())
                  << "\n";
      std::cout << "CPU: " << (info.cpu_model.empty() ? "unknown" : info.cpu_model)
                << (info.cpu_simd.empty() ? "" : ", widest SIMD " + info.cpu_simd) << "\n";
      std::cout << "AMX bf16: "
                << (info.amx_bf16 ? "yes (encoder.attention_precision / matmul_precision = bf16 can run)"
                                  : "no (" + info.amx_reason + ")")
                << "\n";
      std::cout << "bf16 attention: "
                << (info.bf16_attention == "amx" ? std::string("yes, on AMX")
                    : info.bf16_attention == "avx512-bf16"
                        ? std::string("yes, on AVX512-BF16 (no AMX; model.attention_precision / "
                                      "encoder.attention_precision = bf16 can run, matmul_precision = bf16 cannot)")
                        : "no (" + info.bf16_reason + ")")
                << "\n";
      std::cout << "MPI: " << (info.mpi_enabled ? "built in" : "not built in") << ", " << info.mpi_ranks
                << " rank(s)\n";
      if (opt.kokkos_config) Kokkos::print_configuration(std::cout, true);
      if (!info.blas_warning.empty()) std::cerr << "attnphys: warning: " << info.blas_warning << "\n";
    }
    if (flags->json && Comm::world().is_root()) std::cout << to_json(info) << std::endl;
  });
}

static Registrar registrar("info", register_info);

}  // namespace attnphys::cli
