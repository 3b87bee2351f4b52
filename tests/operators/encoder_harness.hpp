#pragma once
// A tiny double-precision encoder with fixed random inputs, for gradient and property tests.
#include <string>
#include <vector>

#include "attnphys/operators/encoder.hpp"
#include "fd_check.hpp"

namespace attnphys::test {

struct EncoderHarness {
  ops::EncoderOptions opt;
  long batch, len;
  ops::Encoder<double> enc;
  ParameterBuffer<double> buf;
  ops::EncoderCache<double> cache;
  std::vector<double> x, dy, coords;
  std::vector<int> key_mask;  // [B, N] or empty

  EncoderHarness(ops::EncoderOptions o, long b, long n, std::uint64_t seed = 1)
      : opt(o), batch(b), len(n), enc(o) {
    enc.declare(buf);
    buf.allocate();
    enc.init(buf, seed);
    // Perturb every parameter (norm weights, zero biases, relative tables) so no gradient is trivially zero.
    auto p = buf.get_host();
    const auto noise = randn(long(p.size()), seed + 100, 0.1);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += noise[i];
    buf.set_host(p);
    const long width = o.d_in > 0 ? o.d_in : o.d_model;
    x = randn(b * n * width, seed + 1);
    dy = randn(b * n * o.d_model, seed + 2);
    if (o.positional == ops::PositionalKind::Coords) coords = randn(n * o.coord_dim, seed + 3);
  }
  long width() const { return opt.d_in > 0 ? opt.d_in : opt.d_model; }

  ops::EncoderInputs<double> inputs(View2<double>& cd, Kokkos::View<int**, Kokkos::LayoutRight, MemSpace>& km) {
    ops::EncoderInputs<double> in;
    if (!coords.empty()) {
      cd = to_device(coords, long(coords.size()) / opt.coord_dim, opt.coord_dim);
      in.coords = cd;
    }
    if (!key_mask.empty()) {
      km = Kokkos::View<int**, Kokkos::LayoutRight, MemSpace>("km", batch, len);
      Kokkos::deep_copy(km, Kokkos::View<const int**, Kokkos::LayoutRight, HostSpace>(key_mask.data(), batch, len));
      in.key_mask = km;
    }
    return in;
  }

  std::vector<double> forward(const std::vector<double>& xin) {
    View2<double> y("y", batch * len, opt.d_model), cd;
    Kokkos::View<int**, Kokkos::LayoutRight, MemSpace> km;
    enc.forward(y, cache, to_device(xin, batch * len, width()), batch, len, buf, inputs(cd, km));
    return to_vector(y);
  }
  double loss_params(const std::vector<double>& theta) {
    buf.set_host(theta);
    return dot(forward(x), dy);
  }
  // Analytic gradients of <dy, y>: (parameters, input).
  std::pair<std::vector<double>, std::vector<double>> gradients() {
    forward(x);
    buf.zero_grads();
    View2<double> dx("dx", batch * len, width());
    enc.backward(dx, cache, to_device(dy, batch * len, opt.d_model), buf);
    return {buf.get_host(Slot::Grads), to_vector(dx)};
  }
  // FD relative errors of the parameter and input gradients.
  std::pair<double, double> check() {
    auto [gp, gx] = gradients();
    const auto theta = buf.get_host();
    const double ep = fd_relative_error(theta, gp, [&](const std::vector<double>& t) { return loss_params(t); });
    buf.set_host(theta);
    const double ex = fd_relative_error(x, gx, [&](const std::vector<double>& xi) { return dot(forward(xi), dy); });
    return {ep, ex};
  }
};

inline ops::EncoderOptions small_options(const std::string& attention = "dense") {
  ops::EncoderOptions o;
  o.d_in = 3;
  o.d_model = 8;
  o.n_heads = 2;
  o.n_layers = 2;
  o.d_ff = 12;
  o.attention = parse_enum<ops::AttentionKind>(attention, "encoder.attention");
  o.max_len = 6;
  return o;
}

}  // namespace attnphys::test
