#include "attnphys/solvers/vmc/rbm.hpp"
#include "attnphys/core/parallel.hpp"

#include <cmath>

#include "attnphys/core/gemm.hpp"
#include "attnphys/core/random.hpp"
#include "attnphys/solvers/vmc/complex_math.hpp"

namespace attnphys::vmc {


template <class T>
Rbm<T>::Rbm(int n, const RbmOptions& o) : n_(n), m_(std::max(1, int(std::lround(o.alpha * n)))), opt_(o) {
  require(n >= 1, "an RBM needs at least one site");
  require(o.alpha > 0, "RBM hidden density alpha must be positive, got ", o.alpha);
  for (const char* part : {"re", "im"}) {
    if (part[0] == 'i' && !o.complex) break;
    if (o.visible_bias) params_.add(std::string("a_") + part, {n}, false);
    params_.add(std::string("b_") + part, {m_}, false);
    params_.add(std::string("W_") + part, {m_, n});
  }
  params_.allocate();
  if (o.init_std > 0) fill_normal(params_.params(), o.seed, 11, 0.0, o.init_std);
  const bool cplx = o.complex, vb = o.visible_bias;
  t_.W_re = params_.view2("W_re"), t_.o_W_re = params_.block("W_re").offset;
  t_.b_re = params_.view1("b_re"), t_.o_b_re = params_.block("b_re").offset;
  if (cplx) {
    t_.W_im = params_.view2("W_im"), t_.o_W_im = params_.block("W_im").offset;
    t_.b_im = params_.view1("b_im"), t_.o_b_im = params_.block("b_im").offset;
  }
  if (vb) t_.a_re = params_.view1("a_re"), t_.o_a_re = params_.block("a_re").offset;
  if (vb && cplx) t_.a_im = params_.view1("a_im"), t_.o_a_im = params_.block("a_im").offset;
}

template <class T>
std::vector<ComplexBlock> Rbm<T>::complex_blocks() const {
  if (!opt_.complex) return {};
  std::vector<ComplexBlock> out = {{t_.o_W_re, t_.o_W_im, long(m_) * n_}, {t_.o_b_re, t_.o_b_im, long(m_)}};
  if (opt_.visible_bias) out.push_back({t_.o_a_re, t_.o_a_im, long(n_)});
  return out;
}

template <class T>
void Rbm<T>::hidden(const View2<const T>& sigma) {
  const long B = sigma.extent(0);
  require(sigma.extent(1) == std::size_t(n_), "RBM: sigma has ", sigma.extent(1), " sites, expected ", n_);
  if (th_re_.extent(0) != std::size_t(B)) {
    th_re_ = View2<T>("attnphys::rbm_theta_re", B, m_);
    th_im_ = View2<T>("attnphys::rbm_theta_im", B, m_);
  }
  gemm('N', 'T', T(1), sigma, t_.W_re, T(0), th_re_);
  if (opt_.complex) gemm('N', 'T', T(1), sigma, t_.W_im, T(0), th_im_);
  else Kokkos::deep_copy(th_im_, T(0));
  const auto br = t_.b_re;
  const auto bi = t_.b_im;
  const bool cplx = opt_.complex;
  const auto tr = th_re_, ti = th_im_;
  Kokkos::parallel_for(
      "attnphys::rbm_hidden", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {B, long(m_)}),
      KOKKOS_LAMBDA(const long b, const long j) {
        tr(b, j) += br(j);
        if (cplx) ti(b, j) += bi(j);
      });
}

template <class T>
void Rbm<T>::log_psi(const View2<const T>& sigma, const View1<T>& re, const View1<T>& im) {
  ScopedRegion region("attnphys::rbm_log_psi");
  const long B = sigma.extent(0);
  require(re.extent(0) == std::size_t(B) && im.extent(0) == std::size_t(B), "RBM log_psi: outputs need ", B,
          " entries");
  if (B == 0) return;
  hidden(sigma);
  const bool vb = opt_.visible_bias, cplx = opt_.complex, marshall = opt_.marshall_sign;
  const auto ar = t_.a_re;
  const auto ai = t_.a_im;
  const auto tr = th_re_, ti = th_im_;
  const int n = n_, m = m_;
  attnphys::parallel_for(
      "attnphys::rbm_log_psi", B, KOKKOS_LAMBDA(const long b) {
        double r = 0, i = 0;
        for (int j = 0; j < m; ++j) {
          double lr, li;
          detail::log_cosh(double(tr(b, j)), double(ti(b, j)), lr, li);
          r += lr;
          i += li;
        }
        if (vb)
          for (int s = 0; s < n; ++s) {
            r += double(ar(s)) * double(sigma(b, s));
            if (cplx) i += double(ai(s)) * double(sigma(b, s));
          }
        if (marshall) {  // the phase π · N_up(even sites)
          long ups = 0;
          for (int s = 0; s < n; s += 2) ups += sigma(b, s) > T(0) ? 1 : 0;
          i += 3.14159265358979323846 * double(ups % 2);
        }
        re(b) = T(r);
        im(b) = T(i);
      }, 16);
}

template <class T>
void Rbm<T>::log_psi_gradients(const View2<const T>& sigma, const View2<T>& o_re, const View2<T>& o_im) {
  ScopedRegion region("attnphys::rbm_gradients");
  const long B = sigma.extent(0), P = params_.size();
  require(o_re.extent(0) == std::size_t(B) && o_re.extent(1) == std::size_t(P) && o_im.extent(0) == std::size_t(B) &&
              o_im.extent(1) == std::size_t(P),
          "RBM gradients: outputs must be [", B, ", ", P, "]");
  if (B == 0) return;
  hidden(sigma);
  const bool vb = opt_.visible_bias, cplx = opt_.complex;
  const long oa_r = t_.o_a_re, oa_i = t_.o_a_im, ob_r = t_.o_b_re, ob_i = t_.o_b_im, ow_r = t_.o_W_re,
             ow_i = t_.o_W_im;
  const auto tr = th_re_, ti = th_im_;
  const int n = n_;
  Kokkos::parallel_for(
      "attnphys::rbm_gradients_hidden", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {B, long(m_)}),
      KOKKOS_LAMBDA(const long b, const long j) {
        double gr, gi;
        detail::tanh_c(double(tr(b, j)), double(ti(b, j)), gr, gi);
        o_re(b, ob_r + j) = T(gr);
        o_im(b, ob_r + j) = T(gi);
        if (cplx) {  // ∂/∂(imaginary part) = i · ∂/∂(real part)
          o_re(b, ob_i + j) = T(-gi);
          o_im(b, ob_i + j) = T(gr);
        }
        for (int s = 0; s < n; ++s) {
          const double x = double(sigma(b, s));
          o_re(b, ow_r + j * n + s) = T(gr * x);
          o_im(b, ow_r + j * n + s) = T(gi * x);
          if (cplx) {
            o_re(b, ow_i + j * n + s) = T(-gi * x);
            o_im(b, ow_i + j * n + s) = T(gr * x);
          }
        }
      });
  if (vb)
    Kokkos::parallel_for(
        "attnphys::rbm_gradients_visible", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {B, long(n)}),
        KOKKOS_LAMBDA(const long b, const long s) {
          o_re(b, oa_r + s) = sigma(b, s);
          o_im(b, oa_r + s) = T(0);
          if (cplx) {
            o_re(b, oa_i + s) = T(0);
            o_im(b, oa_i + s) = sigma(b, s);
          }
        });
}

template <class T>
TableAnsatz<T>::TableAnsatz(int n, std::uint64_t seed, double init_std) : n_(n) {
  require(n >= 1 && n <= 16, "the table ansatz stores 2^n amplitudes: use 1 <= n <= 16, got ", n);
  params_.add("theta_re", {1L << n});
  params_.add("theta_im", {1L << n});
  params_.allocate();
  if (init_std > 0) fill_normal(params_.params(), seed, 12, 0.0, init_std);
}

template <class T>
void TableAnsatz<T>::log_psi(const View2<const T>& sigma, const View1<T>& re, const View1<T>& im) {
  require(sigma.extent(1) == std::size_t(n_) && re.extent(0) == sigma.extent(0) && im.extent(0) == sigma.extent(0),
          "table ansatz: sigma must be [B, ", n_, "] and outputs [B]");
  const auto th = params_.params();
  const int n = n_;
  const long D = 1L << n;
  attnphys::parallel_for(
      "attnphys::table_log_psi", sigma.extent(0), KOKKOS_LAMBDA(const long b) {
        long idx = 0;
        for (int s = 0; s < n; ++s)
          if (sigma(b, s) > T(0)) idx |= 1L << s;
        re(b) = th(idx);
        im(b) = th(D + idx);
      }, 64);
}

template <class T>
void TableAnsatz<T>::log_psi_gradients(const View2<const T>& sigma, const View2<T>& o_re, const View2<T>& o_im) {
  const long P = params_.size();
  require(sigma.extent(1) == std::size_t(n_) && o_re.extent(0) == sigma.extent(0) &&
              o_re.extent(1) == std::size_t(P) && o_im.extent(0) == sigma.extent(0) &&
              o_im.extent(1) == std::size_t(P),
          "table ansatz gradients: outputs must be [B, ", P, "]");
  Kokkos::deep_copy(o_re, T(0));
  Kokkos::deep_copy(o_im, T(0));
  const int n = n_;
  const long D = 1L << n;
  attnphys::parallel_for(
      "attnphys::table_gradients", sigma.extent(0), KOKKOS_LAMBDA(const long b) {
        long idx = 0;
        for (int s = 0; s < n; ++s)
          if (sigma(b, s) > T(0)) idx |= 1L << s;
        o_re(b, idx) = T(1);
        o_im(b, D + idx) = T(1);
      }, 16);
}

template class Rbm<float>;
template class Rbm<double>;
template class TableAnsatz<float>;
template class TableAnsatz<double>;

}  // namespace attnphys::vmc
