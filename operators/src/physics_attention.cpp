#include "attnphys/operators/physics_attention.hpp"
#include "attnphys/core/parallel.hpp"

#include <string>

namespace attnphys::ops {

namespace {
template <class T>
ConstMat3<T> c3(const View3<T>& v) {
  return ConstMat3<T>(v.data(), v.extent(0), v.extent(1), v.extent(2));
}
template <class T>
Mat3<T> m3(const View3<T>& v) {
  return Mat3<T>(v.data(), v.extent(0), v.extent(1), v.extent(2));
}
// Slices [b*H, (b+1)*H) of a [B*H, r, c] tensor: the H heads of sample b, as a batch for one batched_gemm against
// per-head weights [H, ...].
template <class T>
Mat3<T> sample_heads(const View3<T>& v, long b, long heads) {
  return Mat3<T>(v.data() + b * heads * v.extent(1) * v.extent(2), heads, v.extent(1), v.extent(2));
}
template <class T>
ConstMat3<T> csample_heads(const View3<T>& v, long b, long heads) {
  return ConstMat3<T>(v.data() + b * heads * v.extent(1) * v.extent(2), heads, v.extent(1), v.extent(2));
}
// A [B*H, r, c] tensor as one [B*H*r, c] matrix (the slice projections are one product over every head).
template <class T>
Mat<T> flat(const View3<T>& v) {
  return Mat<T>(v.data(), v.extent(0) * v.extent(1), v.extent(2));
}
template <class T>
ConstMat<T> cflat(const View3<T>& v) {
  return ConstMat<T>(v.data(), v.extent(0) * v.extent(1), v.extent(2));
}
// Softmax attention among the M slice tokens: no mask, no bias.
template <class T>
ScoreSpec<T> slice_spec(long heads) {
  ScoreSpec<T> s;
  s.heads = heads;
  return s;
}
}  // namespace

template <class T>
void PhysicsAttentionBuffers<T>::ensure(long b, long n, long d, long h, long m) {
  const long dh = d / h, bh = b * h;
  batch = b;
  len = n;
  heads = h;
  slices = m;
  for (View2<T>* t : {&fx, &xm, &dfx, &dxm}) grow_view(*t, "attnphys::physics_attention", b * n, d);
  for (View3<T>* t : {&fxh, &xmh, &oh, &doh, &dfxh, &dxmh}) grow_view(*t, "attnphys::physics_attention", bh, n, dh);
  for (View3<T>* t : {&logits, &w, &dw}) grow_view(*t, "attnphys::physics_attention", bh, n, m);
  for (View3<T>* t : {&z, &q, &k, &v, &zo, &dzo, &dq, &dk, &dv, &dz}) grow_view(*t, "attnphys::physics_attention", bh, m, dh);
  grow_view(p, "attnphys::physics_attention", bh, m, m);
  for (View2<T>* t : {&den, &lse, &dden}) grow_view(*t, "attnphys::physics_attention", bh, m);
  if (long(ones.extent(0)) != n) {
    ones = View1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("attnphys::physics_ones")), n);
    Kokkos::deep_copy(ones, T(1));
  }
}

template <class T>
void physics_attention_forward(const Mat<T>& merged, PhysicsAttentionBuffers<T>& buf, const ConstMat<T>& x,
                               long batch, long len, const PhysicsAttentionParams<T>& p, AttentionScratch<T>& ws) {
  ScopedRegion region("attnphys::physics_attention_forward");
  const long d = x.extent(1), heads = p.w_slice.extent(0), dh = p.w_slice.extent(1), m = p.w_slice.extent(2);
  require(heads > 0 && dh * heads == d && m > 0, "physics attention: slice.weight is ", p.w_slice.extent(0), "x",
          p.w_slice.extent(1), "x", p.w_slice.extent(2), ", expected [H, d/H, M] with d = ", d);
  require(long(x.extent(0)) == batch * len && long(merged.extent(0)) == batch * len && long(merged.extent(1)) == d,
          "physics attention: input is ", x.extent(0), "x", d, ", output ", merged.extent(0), "x", merged.extent(1),
          ", expected ", batch * len, " rows");
  buf.ensure(batch, len, d, heads, m);
  const long n = len, nbh = batch * heads;
  linear_forward<T>(buf.fx, x, p.w_fx, p.b_fx);
  linear_forward<T>(buf.xm, x, p.w_x, p.b_x);
  split_heads<T>(buf.fxh, buf.fx, 0, batch, heads);
  split_heads<T>(buf.xmh, buf.xm, 0, batch, heads);

  // Slice logits xm_h W_slice[h], one batched product over the heads of each sample.
  for (long b = 0; b < batch; ++b)
    batched_gemm('N', 'N', T(1), csample_heads(buf.xmh, b, heads), p.w_slice, T(0), sample_heads(buf.logits, b, heads));
  // s = (logits + b_slice) / τ_h in place, w = softmax over the M slices; one row (b, h, i) per work item.
  {
    const auto logits = buf.logits, w = buf.w;
    const auto bias = p.b_slice;
    const auto log_tau = p.log_tau;
    attnphys::parallel_for(
        "attnphys::physics_slice_softmax", nbh * n, KOKKOS_LAMBDA(long r) {
          const long bh = r / n, i = r % n, h = bh % heads;
          const T inv_tau = math::exp(-log_tau(h));
          T mx = Kokkos::reduction_identity<T>::max();
          for (long s = 0; s < m; ++s) {
            const T v = (logits(bh, i, s) + bias(h, s)) * inv_tau;
            logits(bh, i, s) = v;
            mx = v > mx ? v : mx;
          }
          T sum = 0;
          for (long s = 0; s < m; ++s) {
            const T e = fast_exp(logits(bh, i, s) - mx);
            w(bh, i, s) = e;
            sum += e;
          }
          const T inv = T(1) / sum;
          for (long s = 0; s < m; ++s) w(bh, i, s) *= inv;
        }, 64);
  }
  // den = Σ_i w (ones · w), z = wᵀ fx_h, then z /= den + N ε.
  batched_gemm('N', 'N', T(1), ConstMat3<T>(buf.ones.data(), 1, 1, n), c3(buf.w), T(0),
               Mat3<T>(buf.den.data(), nbh, 1, m));
  batched_gemm('T', 'N', T(1), c3(buf.w), c3(buf.fxh), T(0), m3(buf.z));
  {
    const auto den = buf.den;
    const auto z = buf.z;
    const T add = T(kPhysicsSliceEps) * T(n);
    Kokkos::parallel_for(
        "attnphys::physics_slice_tokens", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {nbh, m}),
        KOKKOS_LAMBDA(long bh, long s) {
          const T dn = den(bh, s) + add;
          den(bh, s) = dn;
          const T inv = T(1) / dn;
          for (long c = 0; c < dh; ++c) z(bh, s, c) *= inv;
        });
  }
  // Attention among the slice tokens (projections shared by the heads).
  linear_forward<T>(flat(buf.q), cflat(buf.z), p.wq, ConstVec<T>());
  linear_forward<T>(flat(buf.k), cflat(buf.z), p.wk, ConstVec<T>());
  linear_forward<T>(flat(buf.v), cflat(buf.z), p.wv, ConstVec<T>());
  sdpa_forward<T>(m3(buf.zo), m3(buf.p), buf.lse, c3(buf.q), c3(buf.k), c3(buf.v), slice_spec<T>(heads), ws);
  // Deslice: o = w z', then the heads side by side.
  batched_gemm('N', 'N', T(1), c3(buf.w), c3(buf.zo), T(0), m3(buf.oh));
  merge_heads<T>(merged, 0, c3(buf.oh), batch, heads);
}

template <class T>
void physics_attention_backward(const Mat<T>& dx, PhysicsAttentionBuffers<T>& buf, const ConstMat<T>& dmerged,
                                const ConstMat<T>& x, const PhysicsAttentionParams<T>& p,
                                const PhysicsAttentionGrads<T>& g, AttentionScratch<T>& ws) {
  ScopedRegion region("attnphys::physics_attention_backward");
  const long batch = buf.batch, n = buf.len, heads = buf.heads, m = buf.slices, dh = buf.fxh.extent(2);
  const long nbh = batch * heads;
  require(batch > 0, "physics attention backward: run the forward first");
  require(long(dmerged.extent(0)) == batch * n && long(dmerged.extent(1)) == heads * dh,
          "physics attention backward: gradient is ", dmerged.extent(0), "x", dmerged.extent(1), ", expected ",
          batch * n, "x", heads * dh);
  split_heads<T>(buf.doh, dmerged, 0, batch, heads);
  // Deslice o = w z': dz' = wᵀ do, dw = do z'ᵀ.
  batched_gemm('T', 'N', T(1), c3(buf.w), c3(buf.doh), T(0), m3(buf.dzo));
  batched_gemm('N', 'T', T(1), c3(buf.doh), c3(buf.zo), T(0), m3(buf.dw));
  // Slice attention and its projections: dz = dq Wq + dk Wk + dv Wv.
  sdpa_backward<T>(m3(buf.dq), m3(buf.dk), m3(buf.dv), Mat<T>(), c3(buf.dzo), c3(buf.q), c3(buf.k), c3(buf.v),
                   c3(buf.zo), c3(buf.p), buf.lse, slice_spec<T>(heads), ws);
  linear_backward<T>(flat(buf.dz), g.wq, Vec<T>(), cflat(buf.dq), cflat(buf.z), p.wq);
  linear_backward<T>(flat(buf.dz), g.wk, Vec<T>(), cflat(buf.dk), cflat(buf.z), p.wk, true);
  linear_backward<T>(flat(buf.dz), g.wv, Vec<T>(), cflat(buf.dv), cflat(buf.z), p.wv, true);
  // z = num / den with num = wᵀ fx_h, den = Σ_i w + N ε: dnum = dz / den (in place), dden = -Σ_c dz z / den.
  {
    const auto den = buf.den, dden = buf.dden;
    const auto z = buf.z, dz = buf.dz;
    Kokkos::parallel_for(
        "attnphys::physics_slice_tokens_backward",
        Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {nbh, m}), KOKKOS_LAMBDA(long bh, long s) {
          const T inv = T(1) / den(bh, s);
          T acc = 0;
          for (long c = 0; c < dh; ++c) {
            acc += dz(bh, s, c) * z(bh, s, c);
            dz(bh, s, c) *= inv;
          }
          dden(bh, s) = -acc * inv;
        });
  }
  // dfx_h = w dnum; dw += fx_h dnumᵀ (+ dden per slice, in the softmax kernel below).
  batched_gemm('N', 'N', T(1), c3(buf.w), c3(buf.dz), T(0), m3(buf.dfxh));
  batched_gemm('N', 'T', T(1), c3(buf.fxh), c3(buf.dz), T(1), m3(buf.dw));
  // Softmax over the slices and the temperature, in place on dw: per row, g = dw + dden, ds = w (g - w·g), and the
  // logits' gradient da = ds / τ_h. s = a / τ_h = a exp(-log_tau), so dlog_tau[h] += -Σ ds s (one sum per (b, h)).
  {
    const auto w = buf.w, dw = buf.dw, logits = buf.logits;
    const auto dden = buf.dden;
    const auto log_tau = p.log_tau;
    const auto dlog_tau = g.log_tau;
    using Member = Kokkos::TeamPolicy<ExecSpace>::member_type;
    Kokkos::parallel_for(
        "attnphys::physics_slice_softmax_backward", Kokkos::TeamPolicy<ExecSpace>(nbh, Kokkos::AUTO),
        KOKKOS_LAMBDA(const Member& team) {
          const long bh = team.league_rank(), h = bh % heads;
          const T inv_tau = math::exp(-log_tau(h));
          T total = 0;
          Kokkos::parallel_reduce(
              Kokkos::TeamThreadRange(team, n),
              [&](long i, T& acc) {
                T dot = 0;
                for (long s = 0; s < m; ++s) dot += w(bh, i, s) * (dw(bh, i, s) + dden(bh, s));
                T row = 0;
                for (long s = 0; s < m; ++s) {
                  const T ds = w(bh, i, s) * (dw(bh, i, s) + dden(bh, s) - dot);
                  row += ds * logits(bh, i, s);
                  dw(bh, i, s) = ds * inv_tau;
                }
                acc += row;
              },
              total);
          Kokkos::single(Kokkos::PerTeam(team), [&]() { Kokkos::atomic_add(&dlog_tau(h), -total); });
        });
  }
  // Through a = xm_h W_slice[h] + b_slice[h]: db_slice += Σ_i da, dW_slice += xm_hᵀ da, dxm_h = da W_slice[h]ᵀ.
  const Mat3<T> db_slice(g.b_slice.data(), heads, 1, m);
  for (long b = 0; b < batch; ++b) {
    const auto da = csample_heads(buf.dw, b, heads);
    batched_gemm('N', 'N', T(1), ConstMat3<T>(buf.ones.data(), 1, 1, n), da, T(1), db_slice);
    batched_gemm('T', 'N', T(1), csample_heads(buf.xmh, b, heads), da, T(1), g.w_slice);
    batched_gemm('N', 'T', T(1), da, p.w_slice, T(0), sample_heads(buf.dxmh, b, heads));
  }
  merge_heads<T>(buf.dfx, 0, c3(buf.dfxh), batch, heads);
  merge_heads<T>(buf.dxm, 0, c3(buf.dxmh), batch, heads);
  linear_backward<T>(dx, g.w_fx, g.b_fx, buf.dfx, x, p.w_fx);
  linear_backward<T>(dx, g.w_x, g.b_x, buf.dxm, x, p.w_x, true);
}

template <class T>
std::vector<T> physics_slice_weights(const PhysicsAttentionBuffers<T>& buf, long sample, long head, long token) {
  require(buf.batch > 0, "physics attention weights: run a forward pass first");
  require(sample >= 0 && sample < buf.batch && head >= 0 && head < buf.heads && token >= 0 && token < buf.len,
          "physics attention weights: sample ", sample, ", head ", head, ", token ", token, " out of range (batch ",
          buf.batch, ", heads ", buf.heads, ", length ", buf.len, ")");
  const auto row = to_host(Kokkos::subview(buf.w, sample * buf.heads + head, token, Kokkos::ALL));
  std::vector<T> out(buf.slices);
  for (long s = 0; s < buf.slices; ++s) out[s] = row(s);
  return out;
}

template <class T>
std::vector<T> physics_token_weights(const PhysicsAttentionBuffers<T>& buf, long sample, long head, long query) {
  const auto wq = physics_slice_weights(buf, sample, head, query);
  const long bh = sample * buf.heads + head, m = buf.slices, n = buf.len;
  const auto p = to_host(Kokkos::subview(buf.p, bh, Kokkos::ALL, Kokkos::ALL));
  const auto den = to_host(Kokkos::subview(buf.den, bh, Kokkos::ALL));
  // r_m' = Σ_m w_qm P_mm' / den_m' on the host (M values), then A_qj = Σ_m' r_m' w_jm' on the device.
  HostView1<T> rh("attnphys::physics_r", m);
  for (long s2 = 0; s2 < m; ++s2) {
    T acc = 0;
    for (long s = 0; s < m; ++s) acc += wq[s] * p(s, s2);
    rh(s2) = acc / den(s2);
  }
  View1<T> r("attnphys::physics_r", m), a("attnphys::physics_row", n);
  Kokkos::deep_copy(r, rh);
  const auto w = buf.w;
  attnphys::parallel_for(
      "attnphys::physics_token_weights", n, KOKKOS_LAMBDA(long j) {
        T acc = 0;
        for (long s = 0; s < m; ++s) acc += r(s) * w(bh, j, s);
        a(j) = acc;
      }, 1024);
  const auto ah = to_host(a);
  return std::vector<T>(ah.data(), ah.data() + n);
}

#define ATTNPHYS_INSTANTIATE_PHYSICS_ATTENTION(T)                                                                 \
  template struct PhysicsAttentionBuffers<T>;                                                                      \
  template void physics_attention_forward<T>(const Mat<T>&, PhysicsAttentionBuffers<T>&, const ConstMat<T>&, long, \
                                             long, const PhysicsAttentionParams<T>&, AttentionScratch<T>&);        \
  template void physics_attention_backward<T>(const Mat<T>&, PhysicsAttentionBuffers<T>&, const ConstMat<T>&,      \
                                              const ConstMat<T>&, const PhysicsAttentionParams<T>&,                \
                                              const PhysicsAttentionGrads<T>&, AttentionScratch<T>&);              \
  template std::vector<T> physics_slice_weights<T>(const PhysicsAttentionBuffers<T>&, long, long, long);           \
  template std::vector<T> physics_token_weights<T>(const PhysicsAttentionBuffers<T>&, long, long, long);

ATTNPHYS_INSTANTIATE_PHYSICS_ATTENTION(float)
ATTNPHYS_INSTANTIATE_PHYSICS_ATTENTION(double)

}  // namespace attnphys::ops
