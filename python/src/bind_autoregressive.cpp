// attnphys.spin.Autoregressive: the autoregressive transformer wavefunction (float64) with exact sampling. It is a
// spin.Ansatz (parameters, log_psi, gradients, local_energies come from the base class), so spin.Vmc drives it and
// samples it directly. Registered after "spin" (names are bound in sorted order) so that it can add to that submodule.
#include "attnphys/solvers/vmc/autoregressive.hpp"
#include "attnphys/solvers/vmc/driver.hpp"
#include "attnphys/solvers/vmc/local_energy.hpp"
#include "spin_common.hpp"

#include <complex>

namespace attnphys::python {

namespace {
struct PyAutoregressive : PyAnsatz {
  vmc::AutoregressiveTransformer<double>& ar() { return static_cast<vmc::AutoregressiveTransformer<double>&>(*model); }
  const vmc::AutoregressiveTransformer<double>& ar() const {
    return static_cast<const vmc::AutoregressiveTransformer<double>&>(*model);
  }
};
}  // namespace

void bind_autoregressive(py::module_& m) {
  require(py::hasattr(m, "spin"), "attnphys._core: the spin submodule must be bound before the autoregressive model");
  py::module_ sp = m.attr("spin");
  using AR = vmc::AutoregressiveTransformer<double>;
  const vmc::AutoregressiveOptions d;  // the keywords' defaults are the C++ options'

  py::class_<PyAutoregressive, PyAnsatz>(
      sp, "Autoregressive",
      "autoregressive transformer wavefunction: normalised, sampled exactly (no Markov chains); fixed_sz confines it "
      "to the sector 2Sz = two_sz")
      .def(py::init([](int n, long d_model, long n_heads, long n_layers, long d_ff, const std::string& positional,
                       bool fixed_sz, int two_sz, double init_std, long seed) {
             vmc::AutoregressiveOptions o;
             o.d_model = d_model;
             o.n_heads = n_heads;
             o.n_layers = n_layers;
             o.d_ff = d_ff;
             o.positional = parse_enum<vmc::AutoregressivePositional>(positional, "Autoregressive(positional)");
             o.fixed_sz = fixed_sz;
             o.two_sz = two_sz;
             o.init_std = init_std;
             o.seed = seed;
             auto p = std::make_unique<PyAutoregressive>();
             p->model = std::make_unique<AR>(n, o);
             return p;
           }),
           py::arg("n"), py::arg("d_model") = d.d_model, py::arg("n_heads") = d.n_heads,
           py::arg("n_layers") = d.n_layers, py::arg("d_ff") = d.d_ff,
           py::arg("positional") = std::string(enum_name(d.positional)), py::arg("fixed_sz") = d.fixed_sz,
           py::arg("two_sz") = d.two_sz, py::arg("init_std") = d.init_std, py::arg("seed") = d.seed)
      .def_property_readonly("fixed_sz", [](const PyAutoregressive& p) { return p.ar().options().fixed_sz; })
      .def_property_readonly("two_sz", [](const PyAutoregressive& p) { return p.ar().options().two_sz; })
      .def("conditionals", [](PyAutoregressive& p, const Array<double>& sigma) {
        auto s = spins_in(sigma, p.model->n_sites());
        const long B = s.extent(0), n = p.model->n_sites();
        View2<double> up("up", B, n), dn("dn", B, n);
        p.ar().conditionals(s, up, dn);
        Array<double> out({B, n, 2L});
        auto hu = to_host(up), hd = to_host(dn);
        for (long b = 0; b < B; ++b)
          for (long i = 0; i < n; ++i) {
            out.mutable_data()[(b * n + i) * 2] = hu(b, i);
            out.mutable_data()[(b * n + i) * 2 + 1] = hd(b, i);
          }
        return out;
      }, py::arg("sigma"), "log p(σ_i = up | σ_<i) and log p(σ_i = down | σ_<i): [B, N, 2]")
      .def("sample", [](PyAutoregressive& p, long n_samples, long seed, long counter) {
        require(n_samples >= 0 && seed >= 0 && counter >= 0, "sample: n_samples, seed and counter must be >= 0");
        const long n = p.model->n_sites();
        View2<double> s("attnphys::py_ar_samples", n_samples, n);
        p.ar().sample_direct(s, std::uint64_t(seed), std::uint64_t(counter));
        Array<double> out({n_samples, n});
        auto h = to_host(s);
        std::copy(h.data(), h.data() + h.span(), out.mutable_data());
        return out;
      }, py::arg("n_samples"), py::arg("seed") = 1, py::arg("counter") = 0,
         "n_samples independent exact draws from |ψ|² as a [n_samples, N] array of ±1 (a pure function of "
         "seed, counter and row)");
}

// "spin_autoregressive" sorts after "spin": the spin submodule exists when this runs.
static BindRegistrar reg("spin_autoregressive", bind_autoregressive);

}  // namespace attnphys::python
