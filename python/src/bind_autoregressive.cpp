// attnphys.spin.Autoregressive: the autoregressive transformer wavefunction (float64) with exact sampling, and
// attnphys.spin.AutoregressiveVmc, the VMC driver (the same C++ VmcDriver as spin.Vmc) sampling it directly.
// Registered after "spin" (names are bound in sorted order) so that it can add to that submodule.
#include "attnphys/solvers/vmc/autoregressive.hpp"
#include "attnphys/solvers/vmc/driver.hpp"
#include "attnphys/solvers/vmc/local_energy.hpp"
#include "bindings.hpp"

#include <complex>

namespace attnphys::python {

namespace {

View2<double> ar_spins_in(const Array<double>& s, int n) {
  require(s.ndim() == 2 && s.shape(1) == n, "sigma must be a [B, ", n, "] array of ±1, got shape ", shape_str(s));
  const long B = s.shape(0);
  for (long k = 0; k < B * n; ++k)
    require(s.data()[k] == 1.0 || s.data()[k] == -1.0, "sigma must hold only +1 and -1, found ", s.data()[k]);
  View2<double> v("attnphys::py_sigma", B, n);
  Kokkos::deep_copy(v, HostView2<const double>(s.data(), B, n));
  return v;
}

py::array_t<std::complex<double>> complex_array(const View1<double>& re, const View1<double>& im) {
  auto hr = to_host(re), hi = to_host(im);
  const long B = hr.extent(0);
  py::array_t<std::complex<double>> out(B);
  for (long b = 0; b < B; ++b) out.mutable_data()[b] = {hr(b), hi(b)};
  return out;
}

struct PyAutoregressive {
  std::unique_ptr<vmc::AutoregressiveTransformer<double>> model;
  LiveToken token;
};

struct PyArVmc {
  std::shared_ptr<spin::SpinHamiltonian> H;
  std::unique_ptr<vmc::VmcDriver<double>> driver;
  LiveToken token;
};

py::dict ar_step_dict(const vmc::VmcStep& s) {
  py::dict d;
  const auto cols = vmc::VmcDriver<double>::log_columns();
  const auto row = vmc::VmcDriver<double>::log_row(s);
  for (std::size_t k = 0; k < cols.size(); ++k) d[cols[k].c_str()] = row[k];
  d["iteration"] = s.iteration;
  d["used_pinv"] = s.used_pinv;
  return d;
}

}  // namespace

void bind_autoregressive(py::module_& m) {
  require(py::hasattr(m, "spin"), "attnphys._core: the spin submodule must be bound before the autoregressive model");
  py::module_ sp = m.attr("spin");
  using AR = vmc::AutoregressiveTransformer<double>;

  py::class_<PyAutoregressive>(
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
             o.positional = positional;
             o.fixed_sz = fixed_sz;
             o.two_sz = two_sz;
             o.init_std = init_std;
             o.seed = seed;
             auto p = std::make_unique<PyAutoregressive>();
             p->model = std::make_unique<AR>(n, o);
             return p;
           }),
           py::arg("n"), py::arg("d_model") = 16, py::arg("n_heads") = 2, py::arg("n_layers") = 2,
           py::arg("d_ff") = 0, py::arg("positional") = "learned", py::arg("fixed_sz") = false,
           py::arg("two_sz") = 0, py::arg("init_std") = 0.01, py::arg("seed") = 1)
      .def_property_readonly("n_parameters", [](const PyAutoregressive& p) { return p.model->n_parameters(); })
      .def_property_readonly("n_sites", [](const PyAutoregressive& p) { return p.model->n_sites(); })
      .def_property_readonly("fixed_sz", [](const PyAutoregressive& p) { return p.model->options().fixed_sz; })
      .def_property_readonly("two_sz", [](const PyAutoregressive& p) { return p.model->options().two_sz; })
      .def("get_parameters", [](const PyAutoregressive& p) {
        auto v = p.model->parameters().get_host();
        Array<double> out(long(v.size()));
        std::copy(v.begin(), v.end(), out.mutable_data());
        return out;
      })
      .def("set_parameters", [](PyAutoregressive& p, const Array<double>& a) {
        require(a.ndim() == 1 && a.shape(0) == p.model->n_parameters(), "expected ", p.model->n_parameters(),
                " parameters, got shape ", shape_str(a));
        p.model->parameters().set_host(std::vector<double>(a.data(), a.data() + a.shape(0)));
      })
      .def("log_psi", [](PyAutoregressive& p, const Array<double>& sigma) {
        auto s = ar_spins_in(sigma, p.model->n_sites());
        const long B = s.extent(0);
        View1<double> re("re", B), im("im", B);
        p.model->log_psi(s, re, im);
        return complex_array(re, im);
      }, py::arg("sigma"), "complex log ψ of a batch [B, N] of ±1 spins (real part -inf outside a fixed sector)")
      .def("gradients", [](PyAutoregressive& p, const Array<double>& sigma) {
        auto s = ar_spins_in(sigma, p.model->n_sites());
        const long B = s.extent(0), P = p.model->n_parameters();
        View2<double> ore("ore", B, P), oim("oim", B, P);
        p.model->log_psi_gradients(s, ore, oim);
        auto hr = to_host(ore), hi = to_host(oim);
        py::array_t<std::complex<double>> out({B, P});
        for (long k = 0; k < B * P; ++k) out.mutable_data()[k] = {hr.data()[k], hi.data()[k]};
        return out;
      }, py::arg("sigma"), "per-sample ∂ log ψ / ∂θ [B, P] (complex)")
      .def("conditionals", [](PyAutoregressive& p, const Array<double>& sigma) {
        auto s = ar_spins_in(sigma, p.model->n_sites());
        const long B = s.extent(0), n = p.model->n_sites();
        View2<double> up("up", B, n), dn("dn", B, n);
        p.model->conditionals(s, up, dn);
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
        p.model->sample_direct(s, std::uint64_t(seed), std::uint64_t(counter));
        Array<double> out({n_samples, n});
        auto h = to_host(s);
        std::copy(h.data(), h.data() + h.span(), out.mutable_data());
        return out;
      }, py::arg("n_samples"), py::arg("seed") = 1, py::arg("counter") = 0,
         "n_samples independent exact draws from |ψ|² as a [n_samples, N] array of ±1 (a pure function of "
         "seed, counter and row)")
      .def("local_energies", [](PyAutoregressive& p, const spin::ChainModel& c, const Array<double>& sigma) {
        require(c.n == p.model->n_sites(), "model has ", c.n, " sites, the ansatz ", p.model->n_sites());
        spin::SpinHamiltonian H(c);
        auto s = ar_spins_in(sigma, c.n);
        const long B = s.extent(0);
        View1<double> lr("lr", B), li("li", B), er("er", B), ei("ei", B);
        p.model->log_psi(s, lr, li);
        vmc::local_energy<double>(*p.model, H, s, lr, li, er, ei);
        return complex_array(er, ei);
      }, py::arg("model"), py::arg("sigma"), "E_loc(σ) = Σ H_σσ' ψ(σ')/ψ(σ) of a batch (complex)");

  py::class_<PyArVmc>(sp, "AutoregressiveVmc",
                      "VMC driver (as spin.Vmc) for the autoregressive ansatz: exact sampling, SR/minSR/Adam, "
                      "checkpoints. The sampled sector is the ansatz's (fixed_sz, two_sz)")
      .def(py::init([](const spin::ChainModel& c, PyAutoregressive& ar,
                       const std::map<std::string, py::object>& options) {
             vmc::VmcOptions o;
             o.sampler.fixed_sz = ar.model->options().fixed_sz;
             o.sampler.two_sz = ar.model->options().two_sz;
             o.sampler.periodic = c.periodic();
             OptionSet set;
             o.declare(set);
             for (const auto& [k, v] : options) {
               std::string text = py::isinstance<py::bool_>(v) ? (v.cast<bool>() ? "true" : "false")
                                                                : py::str(v).cast<std::string>();
               set.set(k + "=" + text);
             }
             auto p = std::make_unique<PyArVmc>();
             p->H = std::make_shared<spin::SpinHamiltonian>(c);
             p->driver = std::make_unique<vmc::VmcDriver<double>>(*ar.model, *p->H, o);
             return p;
           }),
           py::arg("model"), py::arg("ansatz"), py::arg("options") = std::map<std::string, py::object>{},
           py::keep_alive<1, 3>(),
           "options: {'vmc.lr': 0.05, 'sampler.n_samples': 1024, ...} (keys as in the TOML configs)")
      .def("run", [](PyArVmc& p, long n_iter, py::object callback) {
        std::vector<vmc::VmcDriver<double>::Callback> cbs;
        if (!callback.is_none())
          cbs.push_back([callback](const vmc::VmcStep& s) {
            py::object r = callback(ar_step_dict(s));
            return r.is_none() || r.cast<bool>();
          });
        py::list out;
        for (const auto& s : p.driver->run(n_iter, nullptr, cbs)) out.append(ar_step_dict(s));
        return out;
      }, py::arg("n_iter"), py::arg("callback") = py::none(),
         "n_iter iterations; callback(step: dict) returning False stops the run")
      .def("estimate_energy", [](PyArVmc& p, long n_samples) {
        auto st = p.driver->estimate_energy(n_samples);
        py::dict d;
        d["energy"] = st.mean;
        d["error"] = st.error;
        d["variance"] = st.variance;
        d["tau"] = st.tau;
        d["r_hat"] = st.r_hat;
        d["n"] = st.n;
        return d;
      }, py::arg("n_samples") = 0)
      .def_property_readonly("iteration", [](const PyArVmc& p) { return p.driver->iteration(); })
      .def_property_readonly("direct_sampling", [](const PyArVmc& p) { return p.driver->direct_sampling(); })
      .def("save_checkpoint", [](const PyArVmc& p, const std::string& path) { p.driver->save_checkpoint(path); })
      .def("load_checkpoint", [](PyArVmc& p, const std::string& path) { p.driver->load_checkpoint(path); });
}

// "spin_autoregressive" sorts after "spin": the spin submodule exists when this runs.
static BindRegistrar reg("spin_autoregressive", bind_autoregressive);

}  // namespace attnphys::python
