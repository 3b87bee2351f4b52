#pragma once
// Deterministic random numbers.
//
// The numbers are a pure function of (seed, stream, counter): each element i of a fill, or each (chain, step) of a
// Markov chain, draws from its own counter, so the result is the same on Serial, OpenMP, CUDA or HIP and for any
// thread count — which a shared Kokkos random pool cannot promise (which thread takes which pool state varies).
// The mixer is SplitMix64 (Steele, Lea & Flood 2014) applied to a keyed counter.
#include <cstdint>

#include "attnphys/core/views.hpp"

namespace attnphys {

struct CounterRng {
  std::uint64_t key;      // derived from (seed, stream)
  std::uint64_t counter;  // advanced by every draw

  KOKKOS_INLINE_FUNCTION static std::uint64_t mix(std::uint64_t z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  KOKKOS_INLINE_FUNCTION CounterRng(std::uint64_t seed, std::uint64_t stream, std::uint64_t start = 0)
      : key(mix(mix(seed) ^ (stream * 0xD1B54A32D192ED03ULL + 0x8CB92BA72F3D8DD7ULL))), counter(start) {}

  KOKKOS_INLINE_FUNCTION std::uint64_t next_u64() { return mix(key ^ mix(counter++)); }
  // Uniform in [0, 1) with 53 random bits.
  KOKKOS_INLINE_FUNCTION double uniform() { return (next_u64() >> 11) * (1.0 / 9007199254740992.0); }
  // Uniform integer in [0, n).
  KOKKOS_INLINE_FUNCTION std::uint64_t below(std::uint64_t n) {
    return static_cast<std::uint64_t>(uniform() * static_cast<double>(n)) % (n ? n : 1);
  }
  // Standard normal by Box–Muller (uses two draws, returns one, so the counter stays simple to reason about).
  KOKKOS_INLINE_FUNCTION double normal() {
    double u1 = uniform();
    const double u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return math::sqrt(-2.0 * math::log(u1)) * math::cos(6.283185307179586 * u2);
  }
};

// Fills a contiguous view with N(mean, std^2) values; element i depends only on (seed, stream, i).
template <class V>
void fill_normal(const V& v, std::uint64_t seed, std::uint64_t stream, double mean = 0.0, double stddev = 1.0) {
  using T = typename V::non_const_value_type;
  require(v.span_is_contiguous(), "fill_normal needs a contiguous view");
  auto* p = v.data();
  Kokkos::parallel_for(
      "attnphys::fill_normal", Kokkos::RangePolicy<typename V::execution_space>(0, v.span()),
      KOKKOS_LAMBDA(const std::size_t i) {
        CounterRng r(seed, stream, 2 * static_cast<std::uint64_t>(i));
        p[i] = static_cast<T>(mean + stddev * r.normal());
      });
}

// Fills a contiguous view with U[lo, hi) values; element i depends only on (seed, stream, i).
template <class V>
void fill_uniform(const V& v, std::uint64_t seed, std::uint64_t stream, double lo = 0.0, double hi = 1.0) {
  using T = typename V::non_const_value_type;
  require(v.span_is_contiguous(), "fill_uniform needs a contiguous view");
  auto* p = v.data();
  Kokkos::parallel_for(
      "attnphys::fill_uniform", Kokkos::RangePolicy<typename V::execution_space>(0, v.span()),
      KOKKOS_LAMBDA(const std::size_t i) {
        CounterRng r(seed, stream, static_cast<std::uint64_t>(i));
        p[i] = static_cast<T>(lo + (hi - lo) * r.uniform());
      });
}

}  // namespace attnphys
