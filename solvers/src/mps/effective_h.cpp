#include "effective_h.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "dense_ops.hpp"

namespace attnphys::mps::detail {

std::vector<MpoElement> elements(const MpoSite& w) {
  std::vector<MpoElement> out;
  for (const auto& e : w.entries)
    for (int s = 0; s < e.op.cols(); ++s)
      for (int sp = 0; sp < e.op.rows(); ++sp)
        if (e.op(sp, s) != 0.0) out.push_back({e.a, e.b, sp, s, e.op(sp, s)});
  return out;
}

namespace {
// y[0..n) += alpha * x[0..n)
inline void axpy(long n, double alpha, const double* x, double* y) {
  for (long k = 0; k < n; ++k) y[k] += alpha * x[k];
}
}  // namespace

void EffectiveH::set_bond(const Mpo& h, int i, const Env& left, const Env& right) {
  d_ = h.d;
  left_ = &left;
  right_ = &right;
  dl_ = left.dim, wl_ = left.w, dr_ = right.dim, wr_ = right.w;
  wm_ = h.sites[i].wr;
  w1_ = elements(h.sites[i]);
  w2_ = elements(h.sites[i + 1]);
  std::map<std::tuple<int, int, int, int>, double> acc;
  for (const auto& e1 : w1_)
    for (const auto& e2 : w2_)
      if (e1.b == e2.a) acc[{e1.a, e2.b, e1.sp + d_ * e2.sp, e1.s + d_ * e2.s}] += e1.value * e2.value;
  pair_.clear();
  for (const auto& [k, v] : acc)
    if (v != 0.0) pair_.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k), v});
}

void EffectiveH::apply(const double* theta, double* out) {
  const long dl = dl_, dr = dr_, d2 = long(d_) * d_;
  // X (l', a, p, r) = sum_l L(l', a, l) theta(l, p, r)
  double* x = grow(x_, std::size_t(dl * wl_ * d2 * dr));
  gemm(false, false, dl * wl_, d2 * dr, dl, 1.0, left_->m.data(), theta, 0.0, x);
  // Y (l', p', r, c) = sum W12(a, c)(p', p) X(l', a, p, r)
  const std::size_t ny = std::size_t(dl * d2 * dr * wr_);
  double* y = grow(y_, ny);
  std::fill(y, y + ny, 0.0);
  for (const auto& e : pair_)
    for (long r = 0; r < dr; ++r)
      axpy(dl, e.value, x + dl * (e.a + wl_ * (e.p + d2 * r)), y + dl * (e.pp + d2 * (r + dr * e.c)));
  // out (l', p', r') = sum_{r, c} Y(l', p', (r, c)) R((r, c), r')
  gemm(false, false, dl * d2, dr, dr * wr_, 1.0, y, right_->m.data(), 0.0, out);
}

void EffectiveH::density_left(const double* theta, double noise, Eigen::MatrixXd& rho) {
  const long dl = dl_, dr = dr_, d = d_, m = dl * d, ncol = d * dr;
  rho.resize(m, m);
  gemm(false, true, m, m, ncol, 1.0, theta, theta, 0.0, rho.data());
  if (noise <= 0.0) return;
  const long d2 = d * d;
  double* x = grow(x_, std::size_t(dl * wl_ * d2 * dr));
  gemm(false, false, dl * wl_, d2 * dr, dl, 1.0, left_->m.data(), theta, 0.0, x);
  // P (l', s1', s2, r, b) = sum_a W1(a, b)(s1', s1) X(l', a, s1, s2, r)
  const std::size_t np = std::size_t(m * ncol * wm_);
  double* p = grow(p_, np);
  std::fill(p, p + np, 0.0);
  for (const auto& e : w1_)
    for (long s2 = 0; s2 < d; ++s2)
      for (long r = 0; r < dr; ++r)
        axpy(dl, e.value, x + dl * (e.a + wl_ * (e.s + d * (s2 + d * r))),
             p + dl * (e.sp + d * (s2 + d * (r + dr * e.b))));
  gemm(false, true, m, m, ncol * wm_, noise, p, p, 1.0, rho.data());
}

void EffectiveH::density_right(const double* theta, double noise, Eigen::MatrixXd& rho) {
  const long dl = dl_, dr = dr_, d = d_, m = dl * d, ncol = d * dr;
  rho.resize(ncol, ncol);
  gemm(true, false, ncol, ncol, m, 1.0, theta, theta, 0.0, rho.data());
  if (noise <= 0.0) return;
  // Q (l, s1, s2, c, r') = sum_r theta(l, s1, s2, r) R(r, c, r')
  double* q = grow(x_, std::size_t(m * d * wr_ * dr));
  gemm(false, false, m * d, wr_ * dr, dr, 1.0, theta, right_->m.data(), 0.0, q);
  // P (l, s1, b, s2', r') = sum_c W2(b, c)(s2', s2) Q(l, s1, s2, c, r')
  const std::size_t np = std::size_t(m * wm_ * ncol);
  double* p = grow(p_, np);
  std::fill(p, p + np, 0.0);
  for (const auto& e : w2_)
    for (long r = 0; r < dr; ++r)
      axpy(m, e.value, q + m * (e.s + d * (e.b + wr_ * r)), p + m * (e.a + wm_ * (e.sp + d * r)));
  gemm(true, false, ncol, ncol, m * wm_, noise, p, p, 1.0, rho.data());
}

void EffectiveH::update_left(const Env& left, const SiteTensor& a, const MpoSite& w, Env& out) {
  const long dl = a.dl, dr = a.dr, d = a.d, wl = left.w, wr = w.wr;
  // T (l', a, s, r) = sum_l L(l', a, l) A(l, s, r)
  double* t = grow(t_, std::size_t(dl * wl * d * dr));
  gemm(false, false, dl * wl, d * dr, dl, 1.0, left.m.data(), a.data.data(), 0.0, t);
  // U (l', s', b, r) = sum W(a, b)(s', s) T(l', a, s, r)
  const std::size_t nu = std::size_t(dl * d * wr * dr);
  double* u = grow(u_, nu);
  std::fill(u, u + nu, 0.0);
  for (const auto& e : elements(w))
    for (long r = 0; r < dr; ++r) axpy(dl, e.value, t + dl * (e.a + wl * (e.s + d * r)), u + dl * (e.sp + d * (e.b + wr * r)));
  // out (r', b, r) = sum_{l', s'} A(l', s', r') U(l', s', b, r)
  out.dim = int(dr), out.w = int(wr);
  out.m.resize(dr * wr, dr);
  gemm(true, false, dr, wr * dr, dl * d, 1.0, a.data.data(), u, 0.0, out.m.data());
}

void EffectiveH::update_right(const Env& right, const SiteTensor& b, const MpoSite& w, Env& out) {
  const long dl = b.dl, dr = b.dr, d = b.d, wr = right.w, wl = w.wl;
  // T (l, s, c, r') = sum_r B(l, s, r) R(r, c, r')
  double* t = grow(t_, std::size_t(dl * d * wr * dr));
  gemm(false, false, dl * d, wr * dr, dr, 1.0, b.data.data(), right.m.data(), 0.0, t);
  // U (l, a, s', r') = sum W(a, c)(s', s) T(l, s, c, r')
  const std::size_t nu = std::size_t(dl * wl * d * dr);
  double* u = grow(u_, nu);
  std::fill(u, u + nu, 0.0);
  for (const auto& e : elements(w))
    for (long r = 0; r < dr; ++r) axpy(dl, e.value, t + dl * (e.s + d * (e.b + wr * r)), u + dl * (e.a + wl * (e.sp + d * r)));
  // out (l, a, l') = sum_{s', r'} U(l, a, s', r') B(l', s', r')
  out.dim = int(dl), out.w = int(wl);
  out.m.resize(dl * wl, dl);
  gemm(false, true, dl * wl, dl, d * dr, 1.0, u, b.data.data(), 0.0, out.m.data());
}

}  // namespace attnphys::mps::detail
