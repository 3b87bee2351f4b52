// attnphys.nn: the attention operators from Python — the encoder and a bare multi-head attention layer in float64
// and float32 (forward, backward, parameters as numpy, per-sample gradients, attention maps), and the elementary
// layers' forward/backward pairs in float64 for experiments.
#include "attnphys/core/optim.hpp"
#include "attnphys/operators/encoder.hpp"
#include "bindings.hpp"

namespace attnphys::python {

namespace {

using IntView = Kokkos::View<int**, Kokkos::LayoutRight, MemSpace>;

template <class T>
View2<T> device2(const Array<T>& a, long rows, long cols) {
  View2<T> v(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("attnphys::py")), rows, cols);
  Kokkos::deep_copy(v, HostView2<const T>(a.data(), rows, cols));
  return v;
}
template <class V>
py::array_t<typename V::non_const_value_type> host_array(const V& v, std::vector<long> shape) {
  using T = typename V::non_const_value_type;
  py::array_t<T> out(shape);
  Kokkos::deep_copy(Kokkos::View<T*, HostSpace>(out.mutable_data(), v.span()),
                    Kokkos::View<const T*, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(v.data(), v.span()));
  return out;
}

// Python value -> the text OptionSet::set understands.
std::string option_text(const py::handle& v) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  return py::str(v).cast<std::string>();
}

// Parameters, gradients and optimizer moments of one model, shared by the encoder and attention wrappers.
template <class T>
struct PyParams {
  ParameterBuffer<T> buf;
  std::vector<std::string> names() const {
    std::vector<std::string> n;
    for (const auto& b : buf.blocks()) n.push_back(b.name);
    return n;
  }
  py::array_t<T> flat(Slot s) const {
    auto v = buf.get_host(s);
    py::array_t<T> out(long(v.size()));
    std::copy(v.begin(), v.end(), out.mutable_data());
    return out;
  }
  void set_flat(const Array<T>& a) {
    require(a.ndim() == 1 && a.shape(0) == buf.size(), "expected a 1-d array of ", buf.size(),
            " parameters, got shape ", shape_str(a));
    buf.set_host(std::vector<T>(a.data(), a.data() + a.shape(0)));
  }
  py::array_t<T> get(const std::string& name, Slot s) const {
    require(buf.has(name), "no parameter named '", name, "'");
    const auto& blk = buf.block(name);
    return host_array(buf.view1(name, s), blk.shape);
  }
  void set(const std::string& name, const Array<T>& a) {
    require(buf.has(name), "no parameter named '", name, "'");
    const auto& blk = buf.block(name);
    require(a.size() == blk.size, "parameter '", name, "' has ", blk.size, " values, got an array of shape ",
            shape_str(a));
    Kokkos::deep_copy(buf.view1(name), Kokkos::View<const T*, HostSpace>(a.data(), blk.size));
  }
};

template <class T, class Cls>
void bind_params(Cls& cls) {
  using Self = typename Cls::type;
  cls.def_property_readonly("names", [](const Self& s) { return s.p.names(); }, "parameter block names")
      .def_property_readonly("num_parameters", [](const Self& s) { return s.p.buf.size(); })
      .def("parameters", [](const Self& s) { return s.p.flat(Slot::Params); }, "all parameters, flat")
      .def("gradients", [](const Self& s) { return s.p.flat(Slot::Grads); }, "accumulated gradients, flat")
      .def("set_parameters", [](Self& s, Array<T> a) { s.p.set_flat(a); }, py::arg("values"))
      .def("get", [](const Self& s, const std::string& n) { return s.p.get(n, Slot::Params); }, py::arg("name"),
           "one parameter block, shaped")
      .def("grad", [](const Self& s, const std::string& n) { return s.p.get(n, Slot::Grads); }, py::arg("name"))
      .def("set", [](Self& s, const std::string& n, Array<T> a) { s.p.set(n, a); }, py::arg("name"),
           py::arg("value"))
      .def("zero_grad", [](Self& s) { s.p.buf.zero_grads(); })
      .def("step", [](Self& s, Optimizer& o, double lr) { o.step(s.p.buf, lr); }, py::arg("optimizer"),
           py::arg("lr"), "one optimizer update from the accumulated gradients");
}

// Shapes and device copies of (x, coords, key_mask) for one call.
template <class T>
struct CallInputs {
  long batch = 0, len = 0;
  View2<T> x, coords;
  IntView mask;
  ops::EncoderInputs<T> in;
};

template <class T>
CallInputs<T> call_inputs(const Array<T>& x, long width, const std::optional<Array<T>>& coords, long coord_dim,
                          const std::optional<Array<int>>& key_mask) {
  require(x.ndim() == 3 && x.shape(2) == width, "x must have shape (B, N, ", width, "), got ", shape_str(x));
  CallInputs<T> c;
  c.batch = x.shape(0);
  c.len = x.shape(1);
  c.x = device2(x, c.batch * c.len, width);
  if (coords) {
    const auto& a = *coords;
    require(a.ndim() == 3 && (a.shape(0) == 1 || a.shape(0) == c.batch) && a.shape(1) == c.len &&
                a.shape(2) == coord_dim,
            "coords must have shape (B or 1, ", c.len, ", ", coord_dim, "), got ", shape_str(a));
    c.coords = device2(a, a.shape(0) * c.len, coord_dim);
    c.in.coords = c.coords;
  }
  if (key_mask) {
    const auto& a = *key_mask;
    require(a.ndim() == 2 && a.shape(0) == c.batch && a.shape(1) == c.len, "key_mask must have shape (",
            c.batch, ", ", c.len, "), got ", shape_str(a));
    c.mask = IntView("attnphys::key_mask", c.batch, c.len);
    Kokkos::deep_copy(c.mask, Kokkos::View<const int**, Kokkos::LayoutRight, HostSpace>(a.data(), c.batch, c.len));
    c.in.key_mask = c.mask;
  }
  return c;
}

template <class T>
struct PyEncoder {
  ops::Encoder<T> enc;
  PyParams<T> p;
  ops::EncoderCache<T> cache, sample_cache;
  IntView mask;  // kept alive for the backward
  LiveToken token;
  explicit PyEncoder(const ops::EncoderOptions& o) : enc(o) {}
};

template <class T>
void bind_encoder(py::module_& m, const char* name) {
  using E = PyEncoder<T>;
  using OptA = std::optional<Array<T>>;
  using OptM = std::optional<Array<int>>;
  py::class_<E> cls(m, name,
                    "Transformer encoder (pre-LN blocks). Keyword options are EncoderOptions' fields: d_in, d_model, "
                    "n_heads, n_layers, d_ff, attention (dense|tiled|galerkin|factored|physics), n_slices, causal, "
                    "window, periodic, relative_bias, max_len, positional (none|sinusoidal|learned|coords), coord_dim, coord_features, "
                    "coord_sigma, coord_seed, final_norm, ln_eps, attention_precision and matmul_precision (float32|bf16: bf16 "
                    "attention on Intel AMX or AVX512-BF16, bf16 matmul on AMX; EncoderF32 only); plus seed for the initial parameters.");
  cls.def(py::init([](const py::kwargs& kw) {
    ops::EncoderOptions o;
    OptionSet set;
    o.declare(set, "encoder");
    std::uint64_t seed = 0;
    for (const auto& item : kw) {
      const auto key = item.first.cast<std::string>();
      if (key == "seed") {
        seed = item.second.cast<std::uint64_t>();
        continue;
      }
      set.set("encoder." + key + "=" + option_text(item.second));
    }
    auto e = std::make_unique<E>(o);
    e->enc.declare(e->p.buf);
    e->p.buf.allocate();
    e->enc.init(e->p.buf, seed);
    return e;
  }));
  bind_params<T>(cls);
  cls.def(
         "forward",
         [](E& e, Array<T> x, OptA coords, OptM key_mask) {
           const auto& o = e.enc.options();
           auto c = call_inputs<T>(x, o.d_in > 0 ? o.d_in : o.d_model, coords, o.coord_dim, key_mask);
           View2<T> y("attnphys::py_y", c.batch * c.len, o.d_model);
           {
             py::gil_scoped_release release;
             e.enc.forward(y, e.cache, c.x, c.batch, c.len, e.p.buf, c.in);
           }
           e.mask = c.mask;
           return host_array(y, {c.batch, c.len, o.d_model});
         },
         py::arg("x"), py::arg("coords") = py::none(), py::arg("key_mask") = py::none(),
         "y (B, N, d_model) from x (B, N, d_in or d_model); coords (B or 1, N, coord_dim); key_mask (B, N) int, "
         "nonzero = attend")
      .def(
          "backward",
          [](E& e, Array<T> dy) {
            const auto& o = e.enc.options();
            const long B = e.cache.batch, N = e.cache.len, w = o.d_in > 0 ? o.d_in : o.d_model;
            require(B > 0, "backward: call forward first");
            require(dy.ndim() == 3 && dy.shape(0) == B && dy.shape(1) == N && dy.shape(2) == o.d_model,
                    "dy must have the output's shape (", B, ", ", N, ", ", o.d_model, "), got ", shape_str(dy));
            auto d = device2(dy, B * N, o.d_model);
            View2<T> dx("attnphys::py_dx", B * N, w);
            {
              py::gil_scoped_release release;
              e.enc.backward(dx, e.cache, d, e.p.buf);
            }
            return host_array(dx, {B, N, w});
          },
          py::arg("dy"), "dL/dx for the last forward; parameter gradients accumulate (+=)")
      .def(
          "per_sample_gradients",
          [](E& e, Array<T> x, Array<T> dy, OptA coords, OptM key_mask) {
            const auto& o = e.enc.options();
            auto c = call_inputs<T>(x, o.d_in > 0 ? o.d_in : o.d_model, coords, o.coord_dim, key_mask);
            require(dy.ndim() == 3 && dy.shape(0) == c.batch && dy.shape(1) == c.len && dy.shape(2) == o.d_model,
                    "dy must have shape (", c.batch, ", ", c.len, ", ", o.d_model, "), got ", shape_str(dy));
            auto d = device2(dy, c.batch * c.len, o.d_model);
            View2<T> jac("attnphys::py_jac", c.batch, e.enc.num_parameters());
            {
              py::gil_scoped_release release;
              e.enc.per_sample_gradients(jac, e.sample_cache, c.x, d, c.batch, c.len, e.p.buf, c.in);
            }
            return host_array(jac, {c.batch, e.enc.num_parameters()});
          },
          py::arg("x"), py::arg("dy"), py::arg("coords") = py::none(), py::arg("key_mask") = py::none(),
          "(B, P) Jacobian: row b is the gradient of sum(dy[b] * y[b]) for sample b alone")
      .def(
          "attention_weights",
          [](const E& e, long layer, long sample, long head, long query) {
            auto w = e.enc.attention_weights(e.cache, e.p.buf, layer, sample, head, query);
            py::array_t<T> out(long(w.size()));
            std::copy(w.begin(), w.end(), out.mutable_data());
            return out;
          },
          py::arg("layer"), py::arg("sample"), py::arg("head"), py::arg("query"),
          "the N attention weights of one query in the last forward")
      .def_property_readonly("d_model", [](const E& e) { return e.enc.options().d_model; });
}

// A bare multi-head attention layer, y = attn(x), for comparisons with torch.nn.MultiheadAttention.
template <class T>
struct PyAttention {
  ops::MultiHeadAttention<T> attn;
  PyParams<T> p;
  ops::AttentionCache<T> cache;
  ops::AttentionScratch<T> scratch;
  View2<T> x;
  IntView mask;
  LiveToken token;
};

template <class T>
void bind_attention(py::module_& m, const char* name) {
  using A = PyAttention<T>;
  py::class_<A> cls(m, name,
                    "Multi-head attention layer (parameters named as torch.nn.MultiheadAttention's); kind dense, "
                    "tiled, galerkin, factored or physics (Transolver's Physics-Attention with n_slices slices)");
  cls.def(py::init([](long d_model, long n_heads, const std::string& kind, bool causal, long window, bool periodic,
                      bool relative_bias, long max_len, long n_slices, std::uint64_t seed) {
            ops::AttentionOptions o;
            o.d_model = d_model;
            o.n_heads = n_heads;
            o.kind = ops::parse_attention_kind(kind);
            o.causal = causal;
            o.window = window;
            o.periodic = periodic;
            o.relative_bias = relative_bias;
            o.max_len = max_len;
            o.n_slices = n_slices;
            auto a = std::make_unique<A>();
            a->attn = ops::MultiHeadAttention<T>(o, "");
            ops::InitPlan plan;
            a->attn.declare(a->p.buf, plan);
            a->p.buf.allocate();
            ops::init_parameters(a->p.buf, plan, seed);
            return a;
          }),
          py::arg("d_model"), py::arg("n_heads"), py::arg("kind") = "dense", py::arg("causal") = false,
          py::arg("window") = -1, py::arg("periodic") = false, py::arg("relative_bias") = false,
          py::arg("max_len") = 0, py::arg("n_slices") = 32, py::arg("seed") = 0);
  bind_params<T>(cls);
  cls.def(
         "forward",
         [](A& a, Array<T> x, std::optional<Array<int>> key_mask) {
           const long d = a.attn.options().d_model;
           auto c = call_inputs<T>(x, d, std::nullopt, 0, key_mask);
           View2<T> y("attnphys::py_y", c.batch * c.len, d);
           {
             py::gil_scoped_release release;
             a.attn.forward(y, a.cache, c.x, c.batch, c.len, a.p.buf, c.mask, a.scratch);
           }
           a.x = c.x;
           a.mask = c.mask;
           return host_array(y, {c.batch, c.len, d});
         },
         py::arg("x"), py::arg("key_mask") = py::none())
      .def(
          "backward",
          [](A& a, Array<T> dy) {
            const long d = a.attn.options().d_model, B = a.cache.batch, N = a.cache.len;
            require(B > 0, "backward: call forward first");
            require(dy.ndim() == 3 && dy.shape(0) == B && dy.shape(1) == N && dy.shape(2) == d,
                    "dy must have shape (", B, ", ", N, ", ", d, "), got ", shape_str(dy));
            auto dd = device2(dy, B * N, d);
            View2<T> dx("attnphys::py_dx", B * N, d);
            {
              py::gil_scoped_release release;
              a.attn.backward(dx, a.cache, dd, a.x, a.p.buf, a.scratch);
            }
            return host_array(dx, {B, N, d});
          },
          py::arg("dy"))
      .def(
          "attention_weights",
          [](const A& a, long sample, long head, long query) {
            auto w = a.attn.weights(a.cache, a.p.buf, sample, head, query);
            py::array_t<T> out(long(w.size()));
            std::copy(w.begin(), w.end(), out.mutable_data());
            return out;
          },
          py::arg("sample"), py::arg("head"), py::arg("query"),
          "the N weights of one query over the tokens in the last forward (physics: the effective weights "
          "sum_{m,m'} w_qm P_mm' w_jm' / den_m')")
      .def(
          "slice_weights",
          [](const A& a, long sample, long head, long token) {
            auto w = a.attn.slice_weights(a.cache, sample, head, token);
            py::array_t<T> out(long(w.size()));
            std::copy(w.begin(), w.end(), out.mutable_data());
            return out;
          },
          py::arg("sample"), py::arg("head"), py::arg("token"),
          "physics attention: the n_slices slice weights of one token in the last forward");
}

// Elementary layers (float64): forward returns outputs and saved values, backward returns input and parameter
// gradients.
void bind_layers(py::module_& m) {
  using T = double;
  m.def("linear", [](Array<T> x, Array<T> w, Array<T> b) {
    require(x.ndim() == 2 && w.ndim() == 2 && b.ndim() == 1 && x.shape(1) == w.shape(1) && b.shape(0) == w.shape(0),
            "linear: x (M, in), w (out, in), b (out,) expected, got ", shape_str(x), ", ", shape_str(w), ", ",
            shape_str(b));
    const long M = x.shape(0), out = w.shape(0), in = w.shape(1);
    View2<T> y("y", M, out);
    auto bd = device2(b, 1, out);
    ops::linear_forward<T>(y, device2(x, M, in), device2(w, out, in), Kokkos::subview(bd, 0, Kokkos::ALL));
    return host_array(y, {M, out});
  }, py::arg("x"), py::arg("w"), py::arg("b"), "y = x wᵀ + b");
  m.def("linear_backward", [](Array<T> dy, Array<T> x, Array<T> w) {
    require(dy.ndim() == 2 && x.ndim() == 2 && w.ndim() == 2 && dy.shape(1) == w.shape(0) &&
                x.shape(1) == w.shape(1) && dy.shape(0) == x.shape(0),
            "linear_backward: dy (M, out), x (M, in), w (out, in) expected");
    const long M = x.shape(0), out = w.shape(0), in = w.shape(1);
    View2<T> dx("dx", M, in), dw("dw", out, in);
    View1<T> db("db", out);
    ops::linear_backward<T>(dx, dw, db, device2(dy, M, out), device2(x, M, in), device2(w, out, in));
    return py::make_tuple(host_array(dx, {M, in}), host_array(dw, {out, in}), host_array(db, {out}));
  }, py::arg("dy"), py::arg("x"), py::arg("w"), "(dx, dw, db)");
  m.def("layer_norm", [](Array<T> x, Array<T> w, Array<T> b, double eps) {
    require(x.ndim() == 2 && w.ndim() == 1 && b.ndim() == 1 && w.shape(0) == x.shape(1) && b.shape(0) == x.shape(1),
            "layer_norm: x (M, d), w (d,), b (d,) expected");
    const long M = x.shape(0), d = x.shape(1);
    View2<T> y("y", M, d);
    View1<T> mean("mean", M), rstd("rstd", M);
    auto wd = device2(w, 1, d), bd = device2(b, 1, d);
    ops::layernorm_forward<T>(y, mean, rstd, device2(x, M, d), Kokkos::subview(wd, 0, Kokkos::ALL),
                              Kokkos::subview(bd, 0, Kokkos::ALL), T(eps));
    return py::make_tuple(host_array(y, {M, d}), host_array(mean, {M}), host_array(rstd, {M}));
  }, py::arg("x"), py::arg("w"), py::arg("b"), py::arg("eps") = 1e-5, "(y, mean, rstd)");
  m.def("layer_norm_backward", [](Array<T> dy, Array<T> x, Array<T> w, Array<T> mean, Array<T> rstd) {
    require(x.ndim() == 2 && dy.ndim() == 2 && dy.shape(0) == x.shape(0) && dy.shape(1) == x.shape(1) &&
                w.size() == x.shape(1) && mean.size() == x.shape(0) && rstd.size() == x.shape(0),
            "layer_norm_backward: dy, x (M, d), w (d,), mean, rstd (M,) expected");
    const long M = x.shape(0), d = x.shape(1);
    View2<T> dx("dx", M, d);
    View1<T> dw("dw", d), db("db", d);
    auto wd = device2(w, 1, d), md = device2(mean, 1, M), rd = device2(rstd, 1, M);
    ops::layernorm_backward<T>(dx, dw, db, device2(dy, M, d), device2(x, M, d), Kokkos::subview(wd, 0, Kokkos::ALL),
                               Kokkos::subview(md, 0, Kokkos::ALL), Kokkos::subview(rd, 0, Kokkos::ALL));
    return py::make_tuple(host_array(dx, {M, d}), host_array(dw, {d}), host_array(db, {d}));
  }, py::arg("dy"), py::arg("x"), py::arg("w"), py::arg("mean"), py::arg("rstd"), "(dx, dw, db)");
  auto rows2 = [](const Array<T>& a, const char* what) {
    require(a.ndim() == 2, what, " expects a 2-d array, got ", shape_str(a));
    return std::make_pair(long(a.shape(0)), long(a.shape(1)));
  };
  m.def("gelu", [rows2](Array<T> x) {
    auto [M, n] = rows2(x, "gelu");
    View2<T> y("y", M, n);
    ops::gelu_forward<T>(y, device2(x, M, n));
    return host_array(y, {M, n});
  }, py::arg("x"), "exact (erf) GELU");
  m.def("gelu_backward", [rows2](Array<T> dy, Array<T> x) {
    auto [M, n] = rows2(x, "gelu_backward");
    require(dy.ndim() == 2 && dy.shape(0) == M && dy.shape(1) == n, "gelu_backward: dy and x shapes differ");
    View2<T> dx("dx", M, n);
    ops::gelu_backward<T>(dx, device2(dy, M, n), device2(x, M, n));
    return host_array(dx, {M, n});
  }, py::arg("dy"), py::arg("x"));
  m.def("softmax", [rows2](Array<T> x) {
    auto [M, n] = rows2(x, "softmax");
    View2<T> y("y", M, n);
    ops::softmax_forward<T>(y, device2(x, M, n));
    return host_array(y, {M, n});
  }, py::arg("x"), "row-wise softmax");
  m.def("softmax_backward", [rows2](Array<T> dy, Array<T> y) {
    auto [M, n] = rows2(y, "softmax_backward");
    require(dy.ndim() == 2 && dy.shape(0) == M && dy.shape(1) == n, "softmax_backward: dy and y shapes differ");
    View2<T> dx("dx", M, n);
    ops::softmax_backward<T>(dx, device2(dy, M, n), device2(y, M, n));
    return host_array(dx, {M, n});
  }, py::arg("dy"), py::arg("y"), "from the saved output y");
}

}  // namespace

void bind_operators(py::module_& m) {
  auto nn = m.def_submodule("nn", "attention operators: encoder, multi-head attention, elementary layers");
  bind_encoder<double>(nn, "Encoder");
  bind_encoder<float>(nn, "EncoderF32");
  bind_attention<double>(nn, "MultiheadAttention");
  bind_attention<float>(nn, "MultiheadAttentionF32");
  bind_layers(nn);
}

static BindRegistrar reg("operators", bind_operators);

}  // namespace attnphys::python
