#include "attnphys/physics/spin/hilbert.hpp"

#include <cstdlib>

#include "attnphys/core/error.hpp"

namespace attnphys::spin {

ChainHilbert::ChainHilbert(int n) : n_(n) {
  require(n >= 1 && n <= kMaxSites, "a basis-state Hilbert space holds 1 to ", kMaxSites, " sites, got ", n);
  size_ = 1L << n;
}

ChainHilbert::ChainHilbert(int n, int two_sz) : n_(n), two_sz_(two_sz), fixed_(true) {
  require(n >= 1 && n <= kMaxSites, "a basis-state Hilbert space holds 1 to ", kMaxSites, " sites, got ", n);
  require(std::abs(two_sz) <= n && (n + two_sz) % 2 == 0, "2·Sz = ", two_sz, " is impossible for ", n,
          " spins: it must have the parity of n and |2·Sz| <= n");
  n_up_ = (n + two_sz) / 2;
  binom_.assign(n + 1, std::vector<long>(n + 2, 0));
  for (int p = 0; p <= n; ++p) {
    binom_[p][0] = 1;
    for (int k = 1; k <= p; ++k) binom_[p][k] = binom_[p - 1][k - 1] + (k <= p - 1 ? binom_[p - 1][k] : 0);
  }
  size_ = binom_[n][n_up_];
}

bool ChainHilbert::contains(Basis s) const {
  if (n_ < 64 && (s >> n_) != 0) return false;
  return !fixed_ || popcount(s) == n_up_;
}

long ChainHilbert::index(Basis s) const {
  if (!contains(s)) return -1;
  if (!fixed_) return static_cast<long>(s);
  long r = 0;
  int k = 1;
  while (s) {
    const int p = __builtin_ctzll(s);
    r += binom_[p][k++];
    s &= s - 1;
  }
  return r;
}

Basis ChainHilbert::state(long index) const {
  require(index >= 0 && index < size_, "basis index ", index, " outside [0, ", size_, ")");
  if (!fixed_) return static_cast<Basis>(index);
  Basis s = 0;
  long r = index;
  for (int k = n_up_; k >= 1; --k) {
    int p = k - 1;  // the largest p with C(p, k) <= r
    while (p + 1 < n_ && binom_[p + 1][k] <= r) ++p;
    s |= Basis(1) << p;
    r -= binom_[p][k];
  }
  return s;
}

}  // namespace attnphys::spin
