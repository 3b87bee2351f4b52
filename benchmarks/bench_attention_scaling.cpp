// Time and memory of one multi-head attention layer (forward + backward, float32, d = 64, 4 heads, batch 1)
// against the sequence length N = 256 ... 16384 for dense softmax attention (saves the N x N probabilities),
// tiled softmax attention (saves only the row log-sum-exp, recomputes scores in the backward) and Galerkin linear
// attention. Peak memory is the process's peak resident set during each configuration (Linux: VmHWM after
// resetting it through /proc/self/clear_refs). The last line is JSON.
//
//   bench_attention_scaling [--max-n 16384] [--max-dense-n 16384]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "attnphys/core/json.hpp"
#include "attnphys/core/random.hpp"
#include "attnphys/core/runtime.hpp"
#include "attnphys/operators/attention.hpp"

using namespace attnphys;

namespace {
long status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::strlen(key)));
  return -1;
}
void reset_peak() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

struct Result {
  double seconds = -1, peak_mb = -1;
};

Result run(const std::string& kind, long n) {
  const long d = 64;
  reset_peak();
  Result r;
  {
    ops::AttentionOptions o;
    o.d_model = d;
    o.n_heads = 4;
    o.kind = ops::parse_attention_kind(kind == "linear" ? "galerkin" : kind);
    ops::MultiHeadAttention<float> attn(o, "");
    ParameterBuffer<float> buf;
    ops::InitPlan plan;
    attn.declare(buf, plan);
    buf.allocate();
    ops::init_parameters(buf, plan, 0);
    View2<float> x("x", n, d), y("y", n, d), dy("dy", n, d), dx("dx", n, d);
    fill_normal(x, 1, 0);
    fill_normal(dy, 1, 1);
    ops::AttentionCache<float> cache;
    ops::AttentionScratch<float> ws;
    auto pass = [&] {
      attn.forward(y, cache, x, 1, n, buf, ops::IntMask(), ws);
      attn.backward(dx, cache, dy, x, buf, ws);
      Kokkos::fence();
    };
    pass();  // allocation
    const int reps = n <= 2048 ? 5 : 1;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) pass();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    r.peak_mb = status_kb("VmHWM:") / 1024.0;
  }
  return r;
}
}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  long max_n = 16384, max_dense_n = 16384;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--max-n")) max_n = std::stol(argv[i + 1]);
    if (!std::strcmp(argv[i], "--max-dense-n")) max_dense_n = std::stol(argv[i + 1]);
  }
  Json out = Json::object();
  Json ns = Json::array();
  for (long n = 256; n <= max_n; n *= 2) ns.push_back(Json(n));
  out.set("n", ns);
  out.set("machine", bench::machine_json());
  out.set("config", Json("d_model 64, 4 heads, batch 1, float32, forward + backward of one attention layer"));
  for (const char* kind : {"linear", "tiled", "dense"}) {
    Json times = Json::array(), peaks = Json::array();
    for (long n = 256; n <= max_n; n *= 2) {
      if (std::string(kind) == "dense" && n > max_dense_n) {
        times.push_back(Json());
        peaks.push_back(Json());
        continue;
      }
      const auto r = run(kind, n);
      std::fprintf(stderr, "%-6s N = %5ld: %8.4f s, peak %8.1f MB\n", kind, n, r.seconds, r.peak_mb);
      times.push_back(Json(r.seconds));
      peaks.push_back(Json(r.peak_mb));
      if (std::string(kind) == "tiled" && n == 16384) out.set("tiled_peak_mb_16384", Json(r.peak_mb));
    }
    out.set(std::string(kind) + "_s", times);
    out.set(std::string(kind) + "_peak_mb", peaks);
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
