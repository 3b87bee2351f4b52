// What attnphys reports about the machine and its BLAS: the kernel core OpenBLAS chose, and the warning (with the
// exact setting) when that core is a generic fallback on a CPU that supports better.
#include <gtest/gtest.h>

#include <cstdlib>

#include "attnphys/core/parallel.hpp"
#include "attnphys/core/runtime.hpp"

using namespace attnphys;

TEST(RuntimeBlas, GenericFallbackKernelsOnAModernCpuAreWarnedAboutWithTheSettingToUse) {
  const std::string w = blas_core_advice("Prescott", "avx512");
  EXPECT_NE(w.find("Prescott"), std::string::npos) << w;
  EXPECT_NE(w.find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << w;
  EXPECT_NE(blas_core_advice("Core2", "avx2").find("OPENBLAS_CORETYPE=Haswell"), std::string::npos);
  EXPECT_NE(blas_core_advice("Nehalem", "avx512").find("SkylakeX"), std::string::npos);
  // AVX2 kernels on an AVX-512 CPU (Debian's OpenBLAS 0.3.21 on a Zen 5, with OPENBLAS_CORETYPE=Haswell): the
  // SkylakeX kernels ran sgemm 1.9x faster there.
  for (const char* avx2 : {"Haswell", "Zen"}) {
    const std::string a = blas_core_advice(avx2, "avx512");
    EXPECT_NE(a.find(std::string("its ") + avx2 + " (AVX2) kernels"), std::string::npos) << a;
    EXPECT_NE(a.find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << a;
  }
  // Kernels that fit the CPU: no warning.
  for (const char* ok : {"SkylakeX", "Cooperlake", "SapphireRapids"}) EXPECT_EQ(blas_core_advice(ok, "avx512"), "") << ok;
  EXPECT_EQ(blas_core_advice("Haswell", "avx2"), "");
  EXPECT_EQ(blas_core_advice("Zen", "avx2"), "");
  EXPECT_EQ(blas_core_advice("Prescott", "sse"), "");  // nothing better to ask for
  EXPECT_EQ(blas_core_advice("", "avx512"), "");         // not OpenBLAS
  EXPECT_EQ(blas_core_advice("Prescott", ""), "");       // CPU unknown
}

TEST(RuntimeBlas, InfoNamesTheBlasItsCoreAndTheCpu) {
  const RuntimeInfo i = runtime_info();
  EXPECT_FALSE(i.blas.empty());
  if (i.blas_vendor == "OpenBLAS") {
    EXPECT_FALSE(i.blas_core.empty());
    EXPECT_FALSE(i.blas_version.empty());
    EXPECT_GE(i.blas_threads, 1);
    // The advice, and when OPENBLAS_CORETYPE is set, a note of its value after it.
    EXPECT_EQ(i.blas_warning.substr(0, blas_core_advice(i.blas_core, i.cpu_simd).size()),
              blas_core_advice(i.blas_core, i.cpu_simd));
    EXPECT_EQ(i.blas_warning.empty(), blas_core_advice(i.blas_core, i.cpu_simd).empty());
  }
  const std::string j = to_json(i);
  EXPECT_GE(i.host_threads, 1);
  if (!host_pool_applies()) EXPECT_EQ(i.host_threads, 1);
  for (const char* key : {"\"host_threads\": ", "\"blas\": {\"name\": ", "\"core\": ", "\"threads\": ", "\"openblas_coretype\": ",
                          "\"cpu\": {\"model\": ", "\"warnings\": ["})
    EXPECT_NE(j.find(key), std::string::npos) << key << " in " << j;
  // A faked generic core on an AVX-512 CPU puts its warning into the list.
  RuntimeInfo fake = i;
  fake.blas_core = "Prescott";
  fake.cpu_simd = "avx512";
  fake.blas_warning = blas_core_advice(fake.blas_core, fake.cpu_simd);
  EXPECT_NE(to_json(fake).find("\"warnings\": [\"OpenBLAS chose its Prescott kernels"), std::string::npos);
  if (i.blas_warning.empty()) EXPECT_NE(j.find("\"warnings\": []"), std::string::npos);
  // AMX: reported as usable or not, with the reason when not (and the reason empty when usable).
  EXPECT_NE(j.find(i.amx_bf16 ? "\"amx_bf16\": true" : "\"amx_bf16\": false"), std::string::npos) << j;
  EXPECT_EQ(i.amx_reason.empty(), i.amx_bf16);
  if (!i.amx_bf16) EXPECT_NE(j.find("\"amx_reason\": "), std::string::npos) << j;
  // The bf16 attention's unit: AMX where AMX is usable, else AVX512-BF16 or none (with the reason).
  if (i.amx_bf16) EXPECT_EQ(i.bf16_attention, "amx");
  EXPECT_TRUE(i.bf16_attention == "amx" || i.bf16_attention == "avx512-bf16" || i.bf16_attention == "none")
      << i.bf16_attention;
  EXPECT_EQ(i.bf16_reason.empty(), i.bf16_attention != "none");
  EXPECT_NE(j.find("\"bf16_attention\": \"" + i.bf16_attention + "\""), std::string::npos) << j;
}

// OpenBLAS' idle workers must not spin for its default ~0.1 s between products (they would take time slices from the
// host pool's kernels): initialisation shortens the spin unless the user set it, and reports the value in effect.
TEST(RuntimeBlas, IdleBlasWorkersSpinBrieflyUnlessTheUserChose) {
  const RuntimeInfo i = runtime_info();
  if (i.blas_vendor != "OpenBLAS") {
    EXPECT_EQ(blas_thread_timeout(), 0);
    GTEST_SKIP() << "not OpenBLAS";
  }
  EXPECT_EQ(i.blas_thread_timeout, blas_thread_timeout());
  EXPECT_GE(i.blas_thread_timeout, 4);
  EXPECT_LE(i.blas_thread_timeout, 30);
  EXPECT_NE(to_json(i).find("\"thread_timeout\": " + std::to_string(i.blas_thread_timeout)), std::string::npos);
  if (i.blas_threads > 1 && !std::getenv("GOTO_THREAD_TIMEOUT")) {
    const char* env = std::getenv("OPENBLAS_THREAD_TIMEOUT");
    ASSERT_NE(env, nullptr) << "initialisation should have set OPENBLAS_THREAD_TIMEOUT";
    const int v = std::atoi(env);
    EXPECT_EQ(i.blas_thread_timeout, v < 4 ? 4 : (v > 30 ? 30 : v));
  }
}
