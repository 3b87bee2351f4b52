#pragma once
// What every benchmark records beside its figures: the CPU, the BLAS and the kernel core it chose (figures depend
// on it: Debian's OpenBLAS falls back to its Prescott kernels on some CPUs; see `attnphys info`).
#include "attnphys/core/json.hpp"
#include "attnphys/core/runtime.hpp"

namespace attnphys::bench {

inline Json machine_json() {
  const RuntimeInfo i = runtime_info();
  Json m = Json::object();
  m.set("cpu_model", i.cpu_model);
  m.set("cpu_simd", i.cpu_simd);
  m.set("blas", i.blas);
  m.set("blas_core", i.blas_core);
  m.set("blas_threads", i.blas_threads);
  m.set("openblas_coretype", i.blas_coretype_env);
  m.set("blas_warning", i.blas_warning);
  m.set("execution_space", i.default_execution_space);
  m.set("concurrency", i.concurrency);
  return m;
}

}  // namespace attnphys::bench
