// One training step (forward, backward, AdamW) of a transformer encoder in float32: d = 64, 4 heads, 4 layers,
// FFN 256, sequence 1024 (a 32x32 grid), batch 16. Prints the step time, its FLOP count, the achieved GFLOP/s and
// the sgemm GFLOP/s of this machine measured in the same run; the last line is JSON. One warm-up step, then
// `repeats` rounds of `steps` timed steps; each round reports its median step time, and attnphys_s is the median
// of the rounds' medians. The PyTorch side of the comparison is benchmarks/attention_train_vs_torch.py, which
// runs this program with --serve: after the warm-up it reads commands from stdin, one per line, and answers each
// with one JSON line ("run": `steps` timed steps; "sgemm": the sgemm rate; "quit"), so that the peers' rounds can
// be interleaved with ours.
//
//   bench_attention_train_vs_torch [--attention dense|tiled] [--precision float32|bf16]
//                                  [--matmul-precision float32|bf16] [--batch B] [--len N] [--steps S] [--repeats R]
//                                  [--sgemm 0|1] [--tile-budget ELEMENTS] [--serve]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <vector>
#include <algorithm>
#include <string>

#include "bench_common.hpp"
#include "attnphys/core/json.hpp"
#include "attnphys/core/optim.hpp"
#include "attnphys/core/random.hpp"
#include "attnphys/core/runtime.hpp"
#include "attnphys/operators/encoder.hpp"

using namespace attnphys;
using Clock = std::chrono::steady_clock;

namespace {
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double sgemm_gflops() {
  const long n = 2048;
  View2<float> a("a", n, n), b("b", n, n), c("c", n, n);
  fill_normal(a, 1, 0);
  fill_normal(b, 1, 1);
  gemm('N', 'N', 1.0f, a, b, 0.0f, c);  // warm-up
  Kokkos::fence();
  const int reps = 5;
  const auto t0 = Clock::now();
  for (int r = 0; r < reps; ++r) gemm('N', 'N', 1.0f, a, b, 0.0f, c);
  Kokkos::fence();
  return reps * gemm_flops(n, n, n) / seconds_since(t0) / 1e9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

Json array_of(const std::vector<double>& v) {
  Json a = Json::array();
  for (double x : v) a.push_back(Json(x));
  return a;
}

// FLOPs of the matrix products of one step (forward + backward; elementwise work and the optimizer excluded).
double step_flops(const ops::EncoderOptions& o, long batch, long len) {
  const double tokens = double(batch) * len, d = o.d_model, f = o.ff_width(), dh = d / o.n_heads;
  const double linear = 2 * tokens * d * (3 * d + d + 2 * f);          // forward of the four projections
  const double attn = 2 * double(batch) * o.n_heads * len * len * dh;  // one N x N x dh product
  return o.n_layers * (3 * linear + 6 * attn);                         // backward: 2x linear, 4 attention products
}
}  // namespace

int run(int argc, char** argv) {
  long batch = 16, len = 1024, steps = 5, repeats = 1, measure_sgemm = 1, tile_budget = 0;
  bool serve = false;
  std::string attention = "tiled";  // exact attention either way; tiled runs the fused kernels
  std::string precision = "float32";         // attention arithmetic: float32 | bf16 (AMX)
  std::string matmul_precision = "float32";  // dense products: float32 | bf16 (AMX)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--serve") {
      serve = true;
      continue;
    }
    require(i + 1 < argc, "bench_attention_train_vs_torch: ", a, " needs a value");
    const char* v = argv[++i];
    if (a == "--batch") batch = std::stol(v);
    else if (a == "--len") len = std::stol(v);
    else if (a == "--steps") steps = std::stol(v);
    else if (a == "--repeats") repeats = std::stol(v);
    else if (a == "--attention") attention = v;
    else if (a == "--precision") precision = v;
    else if (a == "--matmul-precision") matmul_precision = v;
    else if (a == "--sgemm") measure_sgemm = std::stol(v);
    else if (a == "--tile-budget") tile_budget = std::stol(v);
    else fail("bench_attention_train_vs_torch: unknown option ", a,
              " (use --attention, --precision, --matmul-precision, --batch, --len, --steps, --repeats, --sgemm, --tile-budget, --serve)");
  }
  require(steps >= 1 && repeats >= 1, "bench_attention_train_vs_torch: --steps and --repeats must be >= 1");
  ops::EncoderOptions o;
  o.d_model = 64;
  o.n_heads = 4;
  o.n_layers = 4;
  o.d_ff = 256;
  o.attention = parse_enum<ops::AttentionKind>(attention, "--attention");
  o.attention_precision = parse_enum<ops::AttentionPrecision>(precision, "--precision");
  o.matmul_precision = parse_enum<MatmulPrecision>(matmul_precision, "--matmul-precision");
  ops::Encoder<float> enc(o);
  ParameterBuffer<float> buf;
  enc.declare(buf);
  buf.allocate();
  enc.init(buf, 0);
  OptimizerOptions oo;
  oo.kind = OptimizerKind::AdamW;
  oo.lr = 1e-3;
  oo.weight_decay = 1e-2;
  Optimizer opt(oo);

  const long tokens = batch * len;
  View2<float> x("x", tokens, o.d_model), y("y", tokens, o.d_model), dy("dy", tokens, o.d_model);
  fill_normal(x, 2, 0);
  fill_normal(dy, 2, 1, 0.0, 1.0 / double(tokens));  // gradient of a mean-type loss
  ops::EncoderCache<float> cache;
  if (tile_budget > 0) cache.scratch.tile_budget = tile_budget;
  auto step = [&] {
    enc.forward(y, cache, x, batch, len, buf);
    buf.zero_grads();
    enc.backward(Mat<float>(), cache, dy, buf);
    opt.step(buf, oo.lr);
    Kokkos::fence();
  };
  auto round = [&] {  // `steps` timed steps
    std::vector<double> t;
    for (long s = 0; s < steps; ++s) {
      const auto t0 = Clock::now();
      step();
      t.push_back(seconds_since(t0));
    }
    return t;
  };
  const double flops = step_flops(o, batch, len);
  const auto w0 = Clock::now();
  step();  // warm-up: allocates the cache
  const double warmup = seconds_since(w0);
  if (serve) {
    Json ready = Json::object();
    ready.set("ready", true);
    ready.set("warmup_s", warmup);
    ready.set("flop", flops);
    ready.set("machine", bench::machine_json());
    std::printf("%s\n", ready.dump().c_str());
    std::fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
      Json j = Json::object();
      if (line == "run") {
        const auto t = round();
        j.set("step_s", array_of(t));
        j.set("median_s", median(t));
      } else if (line == "sgemm") {
        j.set("sgemm_gflops", sgemm_gflops());
      } else if (line == "quit") {
        break;
      } else {
        j.set("error", Json("unknown command '" + line + "': use run, sgemm or quit"));
      }
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
    }
    return 0;
  }
  std::vector<double> medians;
  Json rounds = Json::array();
  for (long r = 0; r < repeats; ++r) {
    const auto t = round();
    medians.push_back(median(t));
    rounds.push_back(array_of(t));
  }
  const double t = median(medians);
  const double sg = measure_sgemm ? sgemm_gflops() : 0.0;
  std::fprintf(stderr, "attnphys %s step: %.3f s (median), %.1f GFLOP, %.1f GFLOP/s (sgemm %.1f GFLOP/s)\n",
               attention.c_str(), t, flops / 1e9, flops / t / 1e9, sg);
  Json j = Json::object();
  j.set("attention", Json(attention));
  j.set("machine", bench::machine_json());
  j.set("batch", batch);
  j.set("len", len);
  j.set("attnphys_s", t);
  j.set("round_medians_s", array_of(medians));
  j.set("step_s", rounds);
  j.set("warmup_s", warmup);
  j.set("flop", flops);
  j.set("gflops", flops / t / 1e9);
  j.set("sgemm_gflops", sg);
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  try {
    return run(argc, argv);  // every view is gone when it returns
  } catch (const std::exception& e) {
    // A refused option (bf16 products without AMX, ...): its message and a non-zero exit instead of an abort.
    std::fprintf(stderr, "bench_attention_train_vs_torch: %s\n", e.what());
    return 2;
  }
}
