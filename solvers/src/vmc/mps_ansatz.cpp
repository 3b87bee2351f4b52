#include "attnphys/solvers/vmc/mps_ansatz.hpp"
#include "attnphys/core/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnphys/core/random.hpp"
#include "attnphys/solvers/mps/mps.hpp"

namespace attnphys::vmc {

void MpsAnsatzOptions::declare(OptionSet& s, const std::string& p) {
  s.add(p + ".chi", &chi, "largest bond dimension of the MPS ansatz", Range::at_least(1));
  s.add(p + ".periodic", &periodic, "trace over a ring (every bond chi) instead of open ends");
  s.add(p + ".marshall_sign", &marshall_sign, "multiply by (-1)^(up spins on even sites)");
  s.add(p + ".init_std", &init_std, "noise on the identity start", Range::non_negative());
  s.add(p + ".seed", &seed, "initialisation seed");
}

void MpsAnsatzOptions::validate() const {
  require(chi >= 1 && chi <= 4096, "MPS ansatz: chi must be in [1, 4096], got ", chi);
  require(init_std >= 0 && std::isfinite(init_std), "MPS ansatz: init_std must be >= 0, got ", init_std);
}

std::vector<int> mps_bond_dimensions(int n, long chi, bool periodic) {
  require(n >= 1, "an MPS needs at least one site");
  require(chi >= 1, "MPS bond dimension must be >= 1, got ", chi);
  std::vector<int> d(n + 1, int(chi));
  if (periodic) return d;
  d[0] = d[n] = 1;
  for (int b = 1; b < n; ++b) {
    const int e = std::min(b, n - b);  // the bond can carry at most 2^min(b, n-b) states
    d[b] = e >= 30 ? int(chi) : int(std::min<long>(chi, 1L << e));
  }
  return d;
}

long mps_entry_count(const std::vector<int>& bonds, int d) {
  long total = 0;
  for (std::size_t i = 0; i + 1 < bonds.size(); ++i) total += long(d) * bonds[i] * bonds[i + 1];
  return total;
}

long mps_entry_count(const mps::Mps& psi) {
  long total = 0;
  for (const auto& a : psi.sites()) total += long(a.dl) * a.d * a.dr;
  return total;
}

template <class T>
MpsAnsatz<T>::MpsAnsatz(int n, const MpsAnsatzOptions& o)
    : MpsAnsatz(n, mps_bond_dimensions(n, o.chi, o.periodic), o) {}

template <class T>
MpsAnsatz<T>::MpsAnsatz(int n, const std::vector<int>& bonds, const MpsAnsatzOptions& o) : n_(n), opt_(o) {
  require(n >= 1, "MPS ansatz: needs at least one site");
  require(int(bonds.size()) == n + 1, "MPS ansatz: ", n, " sites need ", n + 1, " bond dimensions, got ",
          bonds.size());
  require(bonds.front() == bonds.back(), "MPS ansatz: the end bonds must match (trace), got ", bonds.front(), " and ",
          bonds.back());
  for (int d : bonds) require(d >= 1, "MPS ansatz: bond dimensions must be >= 1");
  bonds_ = bonds;
  chi_max_ = *std::max_element(bonds.begin(), bonds.end());
  opt_.chi = chi_max_;
  opt_.periodic = bonds.front() > 1;
  opt_.validate();
  for (int i = 0; i < n; ++i) {
    offsets_host_.push_back(params_.add("A" + std::to_string(i), {2, bonds[i], bonds[i + 1]}));
  }
  params_.allocate();
  bond_dev_ = View1<int>("attnphys::mps_ansatz_bonds", n + 1);
  offset_dev_ = View1<long>("attnphys::mps_ansatz_offsets", n);
  auto hb = Kokkos::create_mirror_view(bond_dev_);
  auto ho = Kokkos::create_mirror_view(offset_dev_);
  for (int i = 0; i <= n; ++i) hb(i) = bonds[i];
  for (int i = 0; i < n; ++i) ho(i) = offsets_host_[i];
  Kokkos::deep_copy(bond_dev_, hb);
  Kokkos::deep_copy(offset_dev_, ho);
  // Identity (rectangular at the edges) for both spin values, plus noise.
  if (o.init_std > 0) fill_normal(params_.params(), std::uint64_t(o.seed), 13, 0.0, o.init_std);
  auto v = params_.get_host();
  for (int i = 0; i < n; ++i) {
    const int dl = bonds[i], dr = bonds[i + 1];
    for (int s = 0; s < 2; ++s)
      for (int a = 0; a < std::min(dl, dr); ++a) v[offsets_host_[i] + (long(s) * dl + a) * dr + a] += T(1);
  }
  params_.set_host(v);
}

template <class T>
std::unique_ptr<MpsAnsatz<T>> MpsAnsatz<T>::from_mps(const mps::Mps& psi, bool marshall_sign) {
  const int n = psi.size();
  require(n >= 1 && psi.local_dim() == 2, "MpsAnsatz::from_mps needs a spin-1/2 MPS");
  require(psi[0].dl == 1 && psi[n - 1].dr == 1, "MpsAnsatz::from_mps needs an open-chain MPS (end bonds 1)");
  std::vector<int> bonds(n + 1);
  for (int i = 0; i < n; ++i) bonds[i] = psi[i].dl;
  bonds[n] = 1;
  MpsAnsatzOptions o;
  o.marshall_sign = marshall_sign;
  o.init_std = 0;
  auto out = std::make_unique<MpsAnsatz<T>>(n, bonds, o);
  std::vector<T> v(out->n_parameters());
  for (int i = 0; i < n; ++i) {
    const auto& a = psi[i];
    require(a.dr == bonds[i + 1], "MpsAnsatz::from_mps: bond dimensions of sites ", i, " and ", i + 1, " differ");
    for (int s = 0; s < 2; ++s)
      for (int l = 0; l < a.dl; ++l)
        for (int r = 0; r < a.dr; ++r) v[out->site_offset(i) + (long(s) * a.dl + l) * a.dr + r] = T(a(l, s, r));
  }
  out->parameters().set_host(v);
  return out;
}

template <class T>
void MpsAnsatz<T>::ensure_work(long B, bool with_left) {
  const long D0 = bonds_[0], stride = D0 * chi_max_;
  if (work_.extent(0) < std::size_t(B))
    work_ = View2<double>("attnphys::mps_ansatz_work", B, 2 * stride + long(chi_max_) * chi_max_);
  if (with_left && left_.extent(0) < std::size_t(B)) left_ = View3<double>("attnphys::mps_ansatz_left", B, n_, stride);
}

template <class T>
void MpsAnsatz<T>::log_psi(const View2<const T>& sigma, const View1<T>& re, const View1<T>& im) {
  ScopedRegion region("attnphys::mps_ansatz_log_psi");
  const long B = sigma.extent(0);
  require(sigma.extent(1) == std::size_t(n_), "MPS ansatz: sigma has ", sigma.extent(1), " sites, expected ", n_);
  require(re.extent(0) == std::size_t(B) && im.extent(0) == std::size_t(B), "MPS ansatz log_psi: outputs need ", B,
          " entries");
  if (B == 0) return;
  ensure_work(B, false);
  const int n = n_, D0 = bonds_[0];
  const long stride = long(D0) * chi_max_;
  const bool marshall = opt_.marshall_sign;
  const auto bd = bond_dev_;
  const auto off = offset_dev_;
  const auto th = params_.params();
  const auto w = work_;
  attnphys::parallel_for(
      "attnphys::mps_ansatz_log_psi", B, KOKKOS_LAMBDA(const long b) {
        double* P = &w(b, 0);
        double* Q = &w(b, stride);
        for (int k = 0; k < D0 * D0; ++k) P[k] = (k / D0 == k % D0) ? 1.0 : 0.0;
        double log_scale = 0;
        bool zero = false;
        for (int i = 0; i < n && !zero; ++i) {
          const int dl = bd(i), dr = bd(i + 1), s = sigma(b, i) > T(0) ? 0 : 1;
          const long base = off(i) + long(s) * dl * dr;
          double mx = 0;
          for (int r = 0; r < D0; ++r)
            for (int c = 0; c < dr; ++c) {
              double acc = 0;
              for (int a = 0; a < dl; ++a) acc += P[r * dl + a] * double(th(base + long(a) * dr + c));
              Q[r * dr + c] = acc;
              mx = math::fmax(mx, math::abs(acc));
            }
          if (mx == 0.0) {
            zero = true;
            break;
          }
          const double inv = 1.0 / mx;
          for (int k = 0; k < D0 * dr; ++k) Q[k] *= inv;
          log_scale += math::log(mx);
          double* t = P;
          P = Q;
          Q = t;
        }
        double tr = 0;
        if (!zero)
          for (int r = 0; r < D0; ++r) tr += P[r * D0 + r];
        int parity = 0;
        if (marshall)
          for (int i = 0; i < n; i += 2) parity += sigma(b, i) > T(0) ? 1 : 0;
        if (tr == 0.0) {
          re(b) = T(math::log(0.0));
          im(b) = T(0);
        } else {
          re(b) = T(math::log(math::abs(tr)) + log_scale);
          im(b) = T(3.14159265358979323846 * double((parity + (tr < 0 ? 1 : 0)) % 2));
        }
      }, 4);
}

template <class T>
void MpsAnsatz<T>::log_psi_gradients(const View2<const T>& sigma, const View2<T>& o_re, const View2<T>& o_im) {
  ScopedRegion region("attnphys::mps_ansatz_gradients");
  const long B = sigma.extent(0), P = params_.size();
  require(sigma.extent(1) == std::size_t(n_), "MPS ansatz: sigma has ", sigma.extent(1), " sites, expected ", n_);
  require(o_re.extent(0) == std::size_t(B) && o_re.extent(1) == std::size_t(P) && o_im.extent(0) == std::size_t(B) &&
              o_im.extent(1) == std::size_t(P),
          "MPS ansatz gradients: outputs must be [", B, ", ", P, "]");
  if (B == 0) return;
  Kokkos::deep_copy(o_im, T(0));  // real parameters, real amplitudes: ∂ log ψ is real
  ensure_work(B, true);
  const int n = n_, D0 = bonds_[0];
  const long stride = long(D0) * chi_max_;
  const auto bd = bond_dev_;
  const auto off = offset_dev_;
  const auto th = params_.params();
  const auto w = work_;
  const auto L = left_;
  attnphys::parallel_for(
      "attnphys::mps_ansatz_gradients", B, KOKKOS_LAMBDA(const long b) {
        // Left products P_i (D0 x D_i), each rescaled to largest entry 1 (the scales cancel in O).
        double* P0 = &L(b, 0, 0);
        for (int k = 0; k < D0 * D0; ++k) P0[k] = (k / D0 == k % D0) ? 1.0 : 0.0;
        for (int i = 0; i + 1 < n; ++i) {
          const int dl = bd(i), dr = bd(i + 1), s = sigma(b, i) > T(0) ? 0 : 1;
          const long base = off(i) + long(s) * dl * dr;
          const double* Pi = &L(b, i, 0);
          double* Pn = &L(b, i + 1, 0);
          double mx = 0;
          for (int r = 0; r < D0; ++r)
            for (int c = 0; c < dr; ++c) {
              double acc = 0;
              for (int a = 0; a < dl; ++a) acc += Pi[r * dl + a] * double(th(base + long(a) * dr + c));
              Pn[r * dr + c] = acc;
              mx = math::fmax(mx, math::abs(acc));
            }
          if (mx > 0)
            for (int k = 0; k < D0 * dr; ++k) Pn[k] /= mx;
        }
        // Right products R_{i+1} (D_{i+1} x D0), swept from the right end.
        double* R = &w(b, 0);
        double* Rt = &w(b, stride);
        double* M = &w(b, 2 * stride);
        for (int k = 0; k < D0 * D0; ++k) R[k] = (k / D0 == k % D0) ? 1.0 : 0.0;
        for (int i = n - 1; i >= 0; --i) {
          const int dl = bd(i), dr = bd(i + 1), s = sigma(b, i) > T(0) ? 0 : 1;
          const long base = off(i) + long(s) * dl * dr, other = off(i) + long(1 - s) * dl * dr;
          const double* Pi = &L(b, i, 0);
          // M = R_{i+1} P_i (dr x dl); c = Tr(P_i A R_{i+1}) = Σ M[c', a] A[a, c'].
          double c = 0;
          for (int cc = 0; cc < dr; ++cc)
            for (int a = 0; a < dl; ++a) {
              double m = 0;
              for (int k = 0; k < D0; ++k) m += R[cc * D0 + k] * Pi[k * dl + a];
              M[cc * dl + a] = m;
              c += m * double(th(base + long(a) * dr + cc));
            }
          const double inv = c != 0.0 ? 1.0 / c : 0.0;
          for (int a = 0; a < dl; ++a)
            for (int cc = 0; cc < dr; ++cc) {
              o_re(b, base + long(a) * dr + cc) = T(M[cc * dl + a] * inv);
              o_re(b, other + long(a) * dr + cc) = T(0);
            }
          // R_i = A R_{i+1} (dl x D0), rescaled.
          double mx = 0;
          for (int a = 0; a < dl; ++a)
            for (int k = 0; k < D0; ++k) {
              double acc = 0;
              for (int cc = 0; cc < dr; ++cc) acc += double(th(base + long(a) * dr + cc)) * R[cc * D0 + k];
              Rt[a * D0 + k] = acc;
              mx = math::fmax(mx, math::abs(acc));
            }
          if (mx > 0)
            for (int k = 0; k < dl * D0; ++k) Rt[k] /= mx;
          double* t = R;
          R = Rt;
          Rt = t;
        }
      }, 4);
}

template class MpsAnsatz<float>;
template class MpsAnsatz<double>;

}  // namespace attnphys::vmc
