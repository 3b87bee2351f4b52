#pragma once
// The Hilbert space of a chain of N spin-1/2: basis states are bit strings (bit i set ⇔ σ_i = +1, spin up), either
// all 2^N of them or only those with a fixed total S^z. States of a fixed-S^z sector are numbered by the
// combinatorial number system (rank = Σ_k C(p_k, k+1) over the ascending positions p_k of the up spins), which
// numbers them in increasing bit-string order without a lookup table.
#include <cstdint>
#include <vector>

namespace attnphys::spin {

using Basis = std::uint64_t;

class ChainHilbert {
 public:
  static constexpr int kMaxSites = 62;

  // All 2^n states.
  explicit ChainHilbert(int n);
  // Only states with total 2·S^z = n_up − n_down = two_sz (two_sz ≡ n mod 2, |two_sz| ≤ n).
  ChainHilbert(int n, int two_sz);

  int n_sites() const { return n_; }
  bool fixed_sz() const { return fixed_; }
  int two_sz() const { return two_sz_; }
  int n_up() const { return n_up_; }
  long size() const { return size_; }

  Basis state(long index) const;  // index in [0, size())
  long index(Basis s) const;      // -1 when s is not in this space
  bool contains(Basis s) const;

 private:
  int n_ = 0, two_sz_ = 0, n_up_ = 0;
  bool fixed_ = false;
  long size_ = 0;
  std::vector<std::vector<long>> binom_;  // binom_[p][k] = C(p, k)
};

// The S^z sector holding the ground state of an S^z-conserving chain: 0 for even n, 1 (2·S^z) for odd n.
inline int ground_state_two_sz(int n) { return n % 2; }

inline int popcount(Basis s) { return __builtin_popcountll(s); }

// ±1 spins from bits and back (host).
template <class T>
void bits_to_spins(Basis s, int n, T* out) {
  for (int i = 0; i < n; ++i) out[i] = ((s >> i) & 1u) ? T(1) : T(-1);
}
template <class T>
Basis spins_to_bits(const T* spins, int n) {
  Basis s = 0;
  for (int i = 0; i < n; ++i)
    if (spins[i] > T(0)) s |= Basis(1) << i;
  return s;
}

}  // namespace attnphys::spin
