#include "attnphys/operators/attention.hpp"

#include "attnphys/core/resources.hpp"

#include <algorithm>
#include <cmath>

namespace attnphys::ops {

AttentionKind parse_attention_kind(const std::string& kind) {
  if (const auto k = find_enum<AttentionKind>(kind)) return *k;
  fail("attention kind '", kind, "' is unknown: use dense, tiled, galerkin, factored or physics");
}

void AttentionOptions::validate() const {
  require(d_model > 0 && n_heads > 0 && d_model % n_heads == 0, "attention: d_model = ", d_model,
          " must be a positive multiple of n_heads = ", n_heads);
  const AttentionKind k = kind;
  require(!(relative_bias || k == AttentionKind::Factored) || max_len > 0,
          "attention: relative_bias and factored attention need max_len > 0 (the longest sequence)");
  require(k != AttentionKind::Galerkin || (!causal && window < 0 && !relative_bias),
          "attention: galerkin attention has no score matrix, so it takes no causal/window mask or relative bias");
  require(k != AttentionKind::Factored || !relative_bias,
          "attention: factored attention's weights are already relative; turn relative_bias off");
  require(k != AttentionKind::Physics || (!causal && window < 0 && !relative_bias),
          "attention: physics attention attends among its slice tokens, not between tokens, so it takes no ",
          "causal/window mask or relative bias");
  require(k != AttentionKind::Physics || n_slices >= 1, "attention: physics attention needs n_slices >= 1, got ",
          n_slices);
}

namespace {
// The cache's buffers: reallocated (uninitialised) only when their extents change (core grow_view).
template <class V, class... I>
void alloc(V& v, I... n) {
  grow_view(v, "attnphys::attention", n...);
}
template <class T>
ConstMat3<T> c3(const View3<T>& v) {
  return ConstMat3<T>(v.data(), v.extent(0), v.extent(1), v.extent(2));
}
template <class T>
Mat3<T> m3(const View3<T>& v) {
  return Mat3<T>(v.data(), v.extent(0), v.extent(1), v.extent(2));
}
// Galerkin's layer norms, one per head (Cao 2021): slice bh = b*H + h of x [B*H, N, dh] is normalised with row h
// of the weight and bias tables [H, dh]; mean and rstd are [B*H*N].
template <class T>
void head_layernorm_forward(const View3<T>& y, const View1<T>& mean, const View1<T>& rstd, const View3<T>& x,
                            const ConstMat<T>& w, const ConstMat<T>& b, long heads) {
  const long nbh = x.extent(0), n = x.extent(1), dh = x.extent(2);
  for (long bh = 0; bh < nbh; ++bh) {
    const long h = bh % heads;
    layernorm_forward<T>(Mat<T>(y.data() + bh * n * dh, n, dh), Vec<T>(mean.data() + bh * n, n),
                         Vec<T>(rstd.data() + bh * n, n), ConstMat<T>(x.data() + bh * n * dh, n, dh),
                         ConstVec<T>(w.data() + h * dh, dh), ConstVec<T>(b.data() + h * dh, dh));
  }
}
// dx +=, dw, db += (row h of [H, dh] for slice bh).
template <class T>
void head_layernorm_backward(const View3<T>& dx, const Mat<T>& dw, const Mat<T>& db, const View3<T>& dy,
                             const View3<T>& x, const ConstMat<T>& w, const View1<T>& mean, const View1<T>& rstd,
                             long heads) {
  const long nbh = x.extent(0), n = x.extent(1), dh = x.extent(2);
  for (long bh = 0; bh < nbh; ++bh) {
    const long h = bh % heads;
    layernorm_backward<T>(Mat<T>(dx.data() + bh * n * dh, n, dh), Vec<T>(dw.data() + h * dh, dh),
                          Vec<T>(db.data() + h * dh, dh), ConstMat<T>(dy.data() + bh * n * dh, n, dh),
                          ConstMat<T>(x.data() + bh * n * dh, n, dh), ConstVec<T>(w.data() + h * dh, dh),
                          ConstVec<T>(mean.data() + bh * n, n), ConstVec<T>(rstd.data() + bh * n, n));
  }
}

template <class T>
FactoredRowsBuffers<T> rows_buffers(AttentionCache<T>& c, long heads, long n, AttentionScratch<T>* ws) {
  FactoredRowsBuffers<T> b{m3(c.v), m3(c.o), m3(c.dv), m3(c.p), Mat3<T>()};
  if (ws) b.dp = Mat3<T>(ws->ensure(ws->dtile, heads * n * n, "attnphys::attention_dtile"), heads, n, n);
  return b;
}
}  // namespace

template <class T>
void AttentionCache<T>::ensure(AttentionKind kind, const AttentionOptions& opt, long b, long n) {
  const long h = opt.n_heads, d = opt.d_model, dh = opt.head_dim();
  const bool factored = kind == AttentionKind::Factored, galerkin = kind == AttentionKind::Galerkin;
  const bool dense = kind == AttentionKind::Dense, tiled = kind == AttentionKind::Tiled;
  if (kind != AttentionKind::Physics && (b != batch || n != len)) {
    // Refuse sizes that cannot fit before any buffer is allocated: the O(B·N·d) activations and gradients of
    // every kind, and the probabilities [B·H, N, N] of dense attention (factored: [H, N, N] and their gradient).
    const double B = double(b), N = double(n), D = double(d), H = double(h);
    const bool rows = factored && key_mask.extent(0) == 0;
    double values = B * N * D * (2.0 * (factored ? 1 : 3) + 3 + (rows ? 0 : 1) + 2 + (factored ? 0 : 4));
    const double probs = (dense || factored) ? (rows ? 2.0 * H : B * H) * N * N : 0.0;
    values += probs + ((dense || tiled) ? B * H * N : 0.0);
    if (galerkin) values += 4 * B * N * D + B * H * double(dh) * double(dh) + 4 * B * H * N;
    const double bytes = values * double(sizeof(T));
    if (bytes > 256e6)
      require_memory(bytes,
                     msg("attention (", enum_name(kind), ", ", h, " heads, d_model ", d, ") on ", b, " samples of ", n,
                         " tokens",
                         probs > 0 ? " (its N x N probabilities alone: " + format_bytes(probs * sizeof(T)) + ")"
                                   : std::string()),
                     dense || factored ? "use the tiled attention kind (FlashAttention-2 tiles: memory linear in N), a "
                                         "smaller batch, or fewer tokens (a coarser grid, patches)"
                                       : "use a smaller batch, or fewer tokens (a coarser grid, patches)");
  }
  batch = b;
  len = n;
  if (kind == AttentionKind::Physics) {  // its own buffers (physics.ensure, in the forward) and the merged heads
    alloc(merged, b * n, d);
    alloc(dmerged, b * n, d);
    return;
  }
  alloc(proj, b * n, factored ? d : 3 * d);
  alloc(dproj, b * n, factored ? d : 3 * d);
  // Factored attention without a key mask keeps v, o, dv as per-head blocks [H, N, B*dh] and p as [H, N, N]
  // (FactoredRowsBuffers); with a key mask its weights differ per sample and it uses the [B*H, ...] layout.
  const bool rows = factored && key_mask.extent(0) == 0;
  alloc(v, rows ? h : b * h, n, rows ? b * dh : dh);
  alloc(o, rows ? h : b * h, n, rows ? b * dh : dh);
  alloc(dv, rows ? h : b * h, n, rows ? b * dh : dh);
  if (!rows) alloc(dout, b * h, n, dh);
  alloc(merged, b * n, d);
  alloc(dmerged, b * n, d);
  if (!factored) {
    alloc(q, b * h, n, dh);
    alloc(k, b * h, n, dh);
    alloc(dq, b * h, n, dh);
    alloc(dk, b * h, n, dh);
  }
  if (dense || factored) alloc(p, rows ? h : b * h, n, n);
  if (dense || tiled) alloc(lse, b * h, n);
  if (galerkin) {
    alloc(kn, b * h, n, dh);
    alloc(vn, b * h, n, dh);
    alloc(dkn, b * h, n, dh);
    alloc(dvn, b * h, n, dh);
    alloc(kv, b * h, dh, dh);
    alloc(k_mean, b * h * n);
    alloc(k_rstd, b * h * n);
    alloc(v_mean, b * h * n);
    alloc(v_rstd, b * h * n);
  }
}

template <class T>
MultiHeadAttention<T>::MultiHeadAttention(AttentionOptions options, std::string prefix)
    : opt_(std::move(options)), prefix_(std::move(prefix)) {
  opt_.validate();
  kind_ = opt_.kind;
}

template <class T>
void MultiHeadAttention<T>::declare(ParameterBuffer<T>& buf, InitPlan& plan) {
  const long d = opt_.d_model, h = opt_.n_heads, dh = opt_.head_dim();
  const long table = relative_table_size(opt_.max_len, opt_.periodic);
  if (kind_ == AttentionKind::Physics) {
    // Transolver's layer: nn.Linear defaults for the projections; the slice weights with the entry variance
    // 1/max(M, dh) of its orthogonal init; the temperature 0.5.
    const long m = opt_.n_slices;
    declare_linear(buf, plan, prefix_ + "in_proj_fx.", d, d);
    declare_linear(buf, plan, prefix_ + "in_proj_x.", d, d);
    buf.add(prefix_ + "slice.weight", {h, dh, m}, true);
    plan.push_back({prefix_ + "slice.weight", InitSpec::Kind::Uniform, std::sqrt(3.0 / double(std::max(m, dh)))});
    buf.add(prefix_ + "slice.bias", {h, m}, false);
    plan.push_back({prefix_ + "slice.bias", InitSpec::Kind::Uniform, 1.0 / std::sqrt(double(dh))});
    buf.add(prefix_ + "log_tau", {h}, false);
    plan.push_back({prefix_ + "log_tau", InitSpec::Kind::Constant, std::log(0.5)});
    for (const char* name : {"to_q.", "to_k.", "to_v."}) declare_linear(buf, plan, prefix_ + name, dh, dh, false);
  } else if (kind_ == AttentionKind::Factored) {
    declare_linear(buf, plan, prefix_ + "v_proj.", d, d);
    buf.add(prefix_ + "alpha", {h, table}, true);
    // Start near uniform averaging over the reachable offsets, with a little noise to break head symmetry.
    plan.push_back({prefix_ + "alpha", InitSpec::Kind::Normal, 1.0 / double(opt_.max_len)});
  } else {
    // Like nn.MultiheadAttention: one fused projection, biases zero.
    buf.add(prefix_ + "in_proj_weight", {3 * d, d}, true);
    buf.add(prefix_ + "in_proj_bias", {3 * d}, false);
    plan.push_back({prefix_ + "in_proj_weight", InitSpec::Kind::Uniform, std::sqrt(6.0 / double(d + 3 * d))});
    plan.push_back({prefix_ + "in_proj_bias", InitSpec::Kind::Constant, 0.0});
  }
  if (kind_ == AttentionKind::Galerkin) {
    for (const char* name : {"k_norm.", "v_norm."}) {  // one layer norm per head: tables [H, dh]
      buf.add(prefix_ + name + "weight", {h, dh}, false);
      buf.add(prefix_ + name + "bias", {h, dh}, false);
      plan.push_back({prefix_ + name + "weight", InitSpec::Kind::Constant, 1.0});
      plan.push_back({prefix_ + name + "bias", InitSpec::Kind::Constant, 0.0});
    }
  }
  if (opt_.relative_bias) {
    buf.add(prefix_ + "rel_bias", {h, table}, false);
    plan.push_back({prefix_ + "rel_bias", InitSpec::Kind::Constant, 0.0});
  }
  declare_linear(buf, plan, prefix_ + "out_proj.", d, d);
  // Resolved once: forward and backward take their views from these.
  const auto& p = prefix_;
  t_ = Tensors{};
  if (kind_ == AttentionKind::Physics) {
    t_.fx_w = buf.ref(p + "in_proj_fx.weight"), t_.fx_b = buf.ref(p + "in_proj_fx.bias");
    t_.xm_w = buf.ref(p + "in_proj_x.weight"), t_.xm_b = buf.ref(p + "in_proj_x.bias");
    t_.slice_w = buf.ref(p + "slice.weight"), t_.slice_b = buf.ref(p + "slice.bias");
    t_.log_tau = buf.ref(p + "log_tau");
    t_.to_q = buf.ref(p + "to_q.weight"), t_.to_k = buf.ref(p + "to_k.weight"), t_.to_v = buf.ref(p + "to_v.weight");
  } else if (kind_ == AttentionKind::Factored) {
    t_.v_w = buf.ref(p + "v_proj.weight"), t_.v_b = buf.ref(p + "v_proj.bias"), t_.alpha = buf.ref(p + "alpha");
  } else {
    t_.in_w = buf.ref(p + "in_proj_weight"), t_.in_b = buf.ref(p + "in_proj_bias");
  }
  if (kind_ == AttentionKind::Galerkin) {
    t_.kn_w = buf.ref(p + "k_norm.weight"), t_.kn_b = buf.ref(p + "k_norm.bias");
    t_.vn_w = buf.ref(p + "v_norm.weight"), t_.vn_b = buf.ref(p + "v_norm.bias");
  }
  if (opt_.relative_bias) t_.rel_bias = buf.ref(p + "rel_bias");
  t_.out_w = buf.ref(p + "out_proj.weight"), t_.out_b = buf.ref(p + "out_proj.bias");
}

template <class T>
ScoreSpec<T> MultiHeadAttention<T>::spec(const AttentionCache<T>& c, const ParameterBuffer<T>& params) const {
  ScoreSpec<T> s;
  s.heads = opt_.n_heads;
  s.max_len = opt_.max_len;
  s.mask.causal = opt_.causal;
  s.mask.window = opt_.window;
  s.mask.periodic = opt_.periodic;
  s.mask.key_mask = c.key_mask;
  if (opt_.relative_bias) s.rel_bias = params.view2(t_.rel_bias);
  return s;
}

template <class T>
PhysicsAttentionParams<T> MultiHeadAttention<T>::physics_params(const ParameterBuffer<T>& params) const {
  return {params.view2(t_.fx_w),    params.view2(t_.xm_w),    params.view1(t_.fx_b), params.view1(t_.xm_b),
          params.view3(t_.slice_w), params.view2(t_.slice_b), params.view1(t_.log_tau), params.view2(t_.to_q),
          params.view2(t_.to_k),    params.view2(t_.to_v)};
}

template <class T>
PhysicsAttentionGrads<T> MultiHeadAttention<T>::physics_grads(const ParameterBuffer<T>& params) const {
  const Slot g = Slot::Grads;
  return {params.view2(t_.fx_w, g),    params.view2(t_.xm_w, g),    params.view1(t_.fx_b, g),
          params.view1(t_.xm_b, g),    params.view3(t_.slice_w, g), params.view2(t_.slice_b, g),
          params.view1(t_.log_tau, g), params.view2(t_.to_q, g),    params.view2(t_.to_k, g),
          params.view2(t_.to_v, g)};
}

template <class T>
void MultiHeadAttention<T>::forward(const Mat<T>& y, AttentionCache<T>& c, const ConstMat<T>& x, long batch,
                                    long len, const ParameterBuffer<T>& params, const IntMask& key_mask,
                                    AttentionScratch<T>& ws) const {
  ScopedRegion region("attnphys::attention_forward");
  const long d = opt_.d_model, h = opt_.n_heads;
  require(long(x.extent(0)) == batch * len && long(x.extent(1)) == d, "attention: input is ", x.extent(0), "x",
          x.extent(1), ", expected ", batch * len, "x", d, " (B*N tokens of d_model features)");
  require(key_mask.extent(0) == 0 || (long(key_mask.extent(0)) == batch && long(key_mask.extent(1)) == len),
          "attention: key mask is ", key_mask.extent(0), "x", key_mask.extent(1), ", expected ", batch, "x", len);
  require(key_mask.extent(0) == 0 || kind_ != AttentionKind::Galerkin,
          "attention: galerkin attention takes no key mask");
  require(key_mask.extent(0) == 0 || kind_ != AttentionKind::Physics,
          "attention: physics attention takes no key mask (padded tokens would enter the slice tokens); pass ",
          "samples without padding, or use dense or tiled attention");
  require(!(opt_.relative_bias || kind_ == AttentionKind::Factored) || len <= opt_.max_len,
          "attention: sequence length ", len, " exceeds max_len = ", opt_.max_len, " of the relative tables");
  c.key_mask = key_mask;
  c.ensure(kind_, opt_, batch, len);
  if (kind_ == AttentionKind::Physics) {
    physics_attention_forward<T>(c.merged, c.physics, x, batch, len, physics_params(params), ws);
    linear_forward<T>(y, c.merged, params.view2(t_.out_w),
                      params.view1(t_.out_b));
    return;
  }
  const bool factored = kind_ == AttentionKind::Factored, rows = factored && key_mask.extent(0) == 0;
  const auto s = spec(c, params);
  if (rows) {
    linear_forward<T>(c.proj, x, params.view2(t_.v_w), params.view1(t_.v_b));
    factored_rows_forward<T>(c.merged, rows_buffers(c, h, len, static_cast<AttentionScratch<T>*>(nullptr)), c.proj,
                             params.view2(t_.alpha), batch, len, s);
  } else if (factored) {
    linear_forward<T>(c.proj, x, params.view2(t_.v_w), params.view1(t_.v_b));
    split_heads<T>(c.v, c.proj, 0, batch, h);
    factored_forward<T>(c.o, c.p, c3(c.v), params.view2(t_.alpha), s);
  } else {
    linear_forward<T>(c.proj, x, params.view2(t_.in_w), params.view1(t_.in_b));
    split_heads<T>(c.q, c.proj, 0, batch, h);
    split_heads<T>(c.k, c.proj, d, batch, h);
    split_heads<T>(c.v, c.proj, 2 * d, batch, h);
    if (kind_ == AttentionKind::Galerkin) {
      head_layernorm_forward<T>(c.kn, c.k_mean, c.k_rstd, c.k, params.view2(t_.kn_w),
                                params.view2(t_.kn_b), h);
      head_layernorm_forward<T>(c.vn, c.v_mean, c.v_rstd, c.v, params.view2(t_.vn_w),
                                params.view2(t_.vn_b), h);
      galerkin_forward<T>(c.o, c.kv, c3(c.q), c3(c.kn), c3(c.vn));
    } else {
      sdpa_forward<T>(c.o, kind_ == AttentionKind::Dense ? m3(c.p) : Mat3<T>(), c.lse, c3(c.q), c3(c.k), c3(c.v),
                      s, ws);
    }
  }
  if (!rows) merge_heads<T>(c.merged, 0, c3(c.o), batch, h);
  linear_forward<T>(y, c.merged, params.view2(t_.out_w), params.view1(t_.out_b));
}

template <class T>
void MultiHeadAttention<T>::backward(const Mat<T>& dx, AttentionCache<T>& c, const ConstMat<T>& dy,
                                     const ConstMat<T>& x, const ParameterBuffer<T>& params,
                                     AttentionScratch<T>& ws) const {
  ScopedRegion region("attnphys::attention_backward");
  const long d = opt_.d_model, h = opt_.n_heads, batch = c.batch;
  require(long(dy.extent(0)) == batch * c.len, "attention backward: gradient has ", dy.extent(0),
          " rows, the forward had ", batch * c.len, " tokens");
  linear_backward<T>(c.dmerged, params.view2(t_.out_w, Slot::Grads),
                     params.view1(t_.out_b, Slot::Grads), dy, c.merged,
                     params.view2(t_.out_w));
  if (kind_ == AttentionKind::Physics) {
    physics_attention_backward<T>(dx, c.physics, c.dmerged, x, physics_params(params), physics_grads(params), ws);
    return;
  }
  const auto s = spec(c, params);
  if (kind_ == AttentionKind::Factored && c.key_mask.extent(0) == 0) {
    factored_rows_backward<T>(c.dproj, params.view2(t_.alpha, Slot::Grads), rows_buffers(c, h, c.len, &ws),
                              c.dmerged, batch, c.len, s);
    linear_backward<T>(dx, params.view2(t_.v_w, Slot::Grads),
                       params.view1(t_.v_b, Slot::Grads), c.dproj, x,
                       params.view2(t_.v_w));
    return;
  }
  split_heads<T>(c.dout, c.dmerged, 0, batch, h);
  if (kind_ == AttentionKind::Factored) {
    factored_backward<T>(c.dv, params.view2(t_.alpha, Slot::Grads), c3(c.dout), c3(c.v), c3(c.p), s, ws);
    merge_heads<T>(c.dproj, 0, c3(c.dv), batch, h);
    linear_backward<T>(dx, params.view2(t_.v_w, Slot::Grads),
                       params.view1(t_.v_b, Slot::Grads), c.dproj, x,
                       params.view2(t_.v_w));
    return;
  }
  if (kind_ == AttentionKind::Galerkin) {
    galerkin_backward<T>(c.dq, c.dkn, c.dvn, c3(c.dout), c3(c.q), c3(c.kn), c3(c.vn), c3(c.kv), ws);
    Kokkos::deep_copy(c.dk, T(0));
    Kokkos::deep_copy(c.dv, T(0));
    head_layernorm_backward<T>(c.dk, params.view2(t_.kn_w, Slot::Grads),
                               params.view2(t_.kn_b, Slot::Grads), c.dkn, c.k,
                               params.view2(t_.kn_w), c.k_mean, c.k_rstd, h);
    head_layernorm_backward<T>(c.dv, params.view2(t_.vn_w, Slot::Grads),
                               params.view2(t_.vn_b, Slot::Grads), c.dvn, c.v,
                               params.view2(t_.vn_w), c.v_mean, c.v_rstd, h);
  } else {
    const Mat<T> dbias = opt_.relative_bias ? Mat<T>(params.view2(t_.rel_bias, Slot::Grads)) : Mat<T>();
    sdpa_backward<T>(c.dq, c.dk, c.dv, dbias, c3(c.dout), c3(c.q), c3(c.k), c3(c.v), c3(c.o),
                     kind_ == AttentionKind::Dense ? c3(c.p) : ConstMat3<T>(), c.lse, s, ws);
  }
  merge_heads<T>(c.dproj, 0, c3(c.dq), batch, h);
  merge_heads<T>(c.dproj, d, c3(c.dk), batch, h);
  merge_heads<T>(c.dproj, 2 * d, c3(c.dv), batch, h);
  linear_backward<T>(dx, params.view2(t_.in_w, Slot::Grads),
                     params.view1(t_.in_b, Slot::Grads), c.dproj, x,
                     params.view2(t_.in_w));
}

template <class T>
std::vector<T> MultiHeadAttention<T>::weights(const AttentionCache<T>& c, const ParameterBuffer<T>& params,
                                              long sample, long head, long query) const {
  require(c.batch > 0, "attention weights: run a forward pass first");
  require(sample >= 0 && sample < c.batch && head >= 0 && head < opt_.n_heads && query >= 0 && query < c.len,
          "attention weights: sample ", sample, ", head ", head, ", query ", query, " out of range (batch ", c.batch,
          ", heads ", opt_.n_heads, ", length ", c.len, ")");
  require(kind_ != AttentionKind::Galerkin,
          "attention weights: galerkin attention has no attention matrix to export");
  if (kind_ == AttentionKind::Physics) return physics_token_weights(c.physics, sample, head, query);
  const long bh = sample * opt_.n_heads + head, n = c.len;
  View1<T> row("attnphys::attention_row", n);
  if (kind_ == AttentionKind::Factored && c.key_mask.extent(0) == 0) {
    // Position-only weights: alpha_h(query - j) where the (sample-independent) mask allows the pair.
    const auto alpha = to_host(params.view2(t_.alpha));
    const AttentionMask mask = spec(c, params).mask;
    std::vector<T> out(n, T(0));
    for (long j = 0; j < n; ++j)
      if (mask.allowed(0, query, j, n)) out[j] = alpha(head, relative_index(query, j, n, opt_.max_len, mask.periodic));
    return out;
  } else if (c.p.extent(0) != 0) {
    Kokkos::deep_copy(row, Kokkos::subview(c.p, bh, query, Kokkos::ALL));
  } else {
    sdpa_row<T>(row, c3(c.q), c3(c.k), c.lse, spec(c, params), bh, query);
  }
  auto h = to_host(row);
  return std::vector<T>(h.data(), h.data() + n);
}

template <class T>
std::vector<T> MultiHeadAttention<T>::slice_weights(const AttentionCache<T>& c, long sample, long head,
                                                    long token) const {
  require(kind_ == AttentionKind::Physics, "attention slice weights: only physics attention has slices (kind is '",
          enum_name(kind_), "'); use weights() for the token weights");
  return physics_slice_weights(c.physics, sample, head, token);
}

template struct AttentionCache<float>;
template struct AttentionCache<double>;
template class MultiHeadAttention<float>;
template class MultiHeadAttention<double>;

}  // namespace attnphys::ops
