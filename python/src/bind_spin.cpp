// attnphys.spin: spin chains from Python — the chain model, exact diagonalisation and reference energies,
// connected configurations and local energies, the RBM baseline ansatz and the VMC driver (float64).
#include <cmath>

#include "attnphys/solvers/ed/exact.hpp"
#include "attnphys/solvers/mps/mps.hpp"
#include "attnphys/solvers/vmc/driver.hpp"
#include "attnphys/solvers/vmc/local_energy.hpp"
#include "attnphys/solvers/vmc/monitor.hpp"
#include "attnphys/solvers/vmc/mps_ansatz.hpp"
#include "attnphys/solvers/vmc/rbm.hpp"
#include "attnphys/solvers/vmc/run.hpp"
#include "attnphys/solvers/vmc/transformer.hpp"
#include "spin_common.hpp"

namespace attnphys::python {

namespace {

using spin::ChainModel;

struct PyRbm : PyAnsatz {};
struct PyTransformer : PyAnsatz {};
struct PyMps : PyAnsatz {};

struct PyVmc {
  vmc::VmcOptions options;  // as resolved: the keys given, then the model-dependent defaults
  std::shared_ptr<spin::SpinHamiltonian> H;
  std::unique_ptr<vmc::VmcDriver<double>> driver;
  LiveToken token;
};

}  // namespace

void bind_spin(py::module_& m) {
  auto sp = m.def_submodule("spin", "spin chains: models, exact diagonalisation, local energies, RBM and VMC");

  const ChainModel dm;  // the keywords' defaults are the C++ model's
  const ed::EdOptions ed_defaults;
  py::class_<ChainModel>(sp, "ChainModel",
                         "a spin-chain model: tfim, xxz, heisenberg or j1j2 (the conventions of attnphys ed)")
      .def(py::init([](const std::string& model, int n, const std::string& bc, double J, double h, double delta,
                       double j2) {
             ChainModel c;
             c.model = spin::parse_model_kind(model);
             c.n = n;
             c.bc = spin::parse_boundary(bc);
             c.J = J;
             c.h = h;
             c.delta = delta;
             c.j2 = j2;
             c.validate();
             return c;
           }),
           py::arg("model") = std::string(enum_name(dm.model)), py::arg("n") = dm.n,
           py::arg("bc") = std::string(enum_name(dm.bc)), py::arg("J") = dm.J, py::arg("h") = dm.h,
           py::arg("delta") = dm.delta, py::arg("j2") = dm.j2)
      .def_property(
          "model", [](const ChainModel& c) { return std::string(enum_name(c.model)); },
          [](ChainModel& c, const std::string& s) { c.model = spin::parse_model_kind(s); })
      .def_readwrite("n", &ChainModel::n)
      .def_property(
          "bc", [](const ChainModel& c) { return std::string(enum_name(c.bc)); },
          [](ChainModel& c, const std::string& s) { c.bc = spin::parse_boundary(s); })
      .def_readwrite("J", &ChainModel::J)
      .def_readwrite("h", &ChainModel::h)
      .def_readwrite("delta", &ChainModel::delta)
      .def_readwrite("j2", &ChainModel::j2)
      .def_property_readonly("periodic", &ChainModel::periodic)
      .def_property_readonly("conserves_sz", &ChainModel::conserves_sz)
      .def("describe", &ChainModel::describe)
      .def("__repr__", [](const ChainModel& c) { return "ChainModel(" + c.describe() + ")"; });

  sp.def("reference_energy", [](const ChainModel& c) -> py::object {
    auto r = ed::reference_energy(c);
    if (r) return py::float_(*r);
    return py::none();
  }, py::arg("model"), "closed-form ground-state energy when one is known (TFIM, Majumdar-Ghosh), else None");

  sp.def("plateaued", [](const std::vector<double>& energy, const std::vector<double>& variance, long window,
                         double sigmas, double variance_drop, bool two_sided, long start) {
    require(window >= 1, "spin.plateaued: window must be >= 1 iterations, got ", window);
    require(std::isfinite(sigmas) && sigmas >= 0, "spin.plateaued: sigmas must be finite and >= 0, got ", sigmas);
    require(variance_drop >= 0 && variance_drop <= 1, "spin.plateaued: variance_drop must lie in [0, 1], got ",
            variance_drop);
    vmc::ConvergenceCriterion c;
    c.window = window;
    c.sigmas = sigmas;
    c.variance_drop = variance_drop;
    c.two_sided = two_sided;
    c.start = start;
    return vmc::plateaued(energy, variance, c);
  }, py::arg("energy"), py::arg("variance"), py::arg("window"), py::arg("sigmas") = 2.0,
     py::arg("variance_drop") = 0.1, py::arg("two_sided") = false, py::arg("start") = 0,
     "whether a trace (per-iteration energies and variances, NaN where the step guard rejected) meets the plateau "
     "criterion of vmc.converge_window at its end: the driver's own test (spin.Convergence)");

  sp.def("exact_ground_state", [](const ChainModel& c, int n_states, bool want_vectors, bool use_sz_sector) {
    require(c.n <= 26, "exact_ground_state: n = ", c.n, " is too large from Python (use n <= 26)");
    ed::EdOptions o;
    o.n_states = n_states;
    o.want_vectors = want_vectors;
    o.use_sz_sector = use_sz_sector;
    ed::EdResult r;
    {
      py::gil_scoped_release release;
      r = ed::exact_ground_state(c, o);
    }
    py::dict d;
    d["energy"] = r.energies[0];
    d["energies"] = r.energies;
    d["sector"] = r.sector;
    d["dimension"] = r.dimension;
    d["matvecs"] = r.matvecs;
    d["converged"] = r.converged;
    d["seconds"] = r.seconds;
    if (want_vectors) {
      // Vectors are over the sector's basis states (bit i set: spin i up), listed in `states`.
      const auto space = ed::ed_space(c, use_sz_sector);
      py::array_t<std::uint64_t> states(space.size());
      for (long k = 0; k < space.size(); ++k) states.mutable_data()[k] = space.state(k);
      Array<double> vec({long(r.vectors.size()), space.size()});
      for (std::size_t k = 0; k < r.vectors.size(); ++k)
        std::copy(r.vectors[k].begin(), r.vectors[k].end(), vec.mutable_data() + k * space.size());
      d["states"] = states;
      d["vectors"] = vec;
    }
    return d;
  }, py::arg("model"), py::arg("n_states") = ed_defaults.n_states, py::arg("want_vectors") = ed_defaults.want_vectors,
     py::arg("use_sz_sector") = ed_defaults.use_sz_sector,
     "Lanczos ground state (and excitations) in the ground state's Sz sector");

  sp.def("connected", [](const ChainModel& c, const Array<double>& sigma) {
    spin::SpinHamiltonian H(c);
    auto s = spins_in(sigma, c.n);
    const long B = s.extent(0);
    const int K = H.max_conn();
    View3<double> conn("attnphys::py_conn", B, K, c.n);
    View2<double> el("attnphys::py_el", B, K);
    spin::connected_configs<double>(H, s, conn, el);
    return py::make_tuple(out_array(conn, {B, K, c.n}), out_array(el, {B, K}));
  }, py::arg("model"), py::arg("sigma"),
     "connected configurations [B, max_conn, N] and matrix elements [B, max_conn] (slot 0: the diagonal)");

  py::class_<PyAnsatz>(sp, "Ansatz", "a variational wavefunction log ψ(σ) (base class of Rbm, Transformer, Mps)")
      .def_property_readonly("n_parameters", [](const PyAnsatz& p) { return p.model->n_parameters(); })
      .def_property_readonly("n_sites", [](const PyAnsatz& p) { return p.model->n_sites(); })
      .def("parameter_blocks", [](const PyAnsatz& p) {
        py::list out;
        for (const auto& b : p.model->parameters().blocks()) {
          py::dict d;
          d["name"] = b.name;
          d["offset"] = b.offset;
          d["shape"] = b.shape;
          out.append(d);
        }
        return out;
      }, "[{'name', 'offset', 'shape'}] of the flat parameter vector, in order")
      .def_property_readonly("name", [](const PyAnsatz& p) { return p.model->name(); })
      .def("get_parameters", [](const PyAnsatz& p) {
        auto v = p.model->parameters().get_host();
        Array<double> out(long(v.size()));
        std::copy(v.begin(), v.end(), out.mutable_data());
        return out;
      })
      .def("set_parameters", [](PyAnsatz& p, const Array<double>& a) {
        require(a.ndim() == 1 && a.shape(0) == p.model->n_parameters(), "expected ", p.model->n_parameters(),
                " parameters, got shape ", shape_str(a));
        long bad = 0, first = -1;
        for (long k = 0; k < a.shape(0); ++k)
          if (!std::isfinite(a.data()[k]) && bad++ == 0) first = k;
        require(bad == 0, "set_parameters: ", bad, " of the ", a.shape(0), " parameters are NaN or infinite (the "
                "first at index ", first, "): give finite values");
        p.model->parameters().set_host(std::vector<double>(a.data(), a.data() + a.shape(0)));
      })
      .def("log_psi", [](PyAnsatz& p, const Array<double>& sigma) {
        auto s = spins_in(sigma, p.model->n_sites());
        const long B = s.extent(0);
        View1<double> re("re", B), im("im", B);
        p.model->log_psi(s, re, im);
        auto hr = to_host(re), hi = to_host(im);
        py::array_t<std::complex<double>> out(B);
        for (long b = 0; b < B; ++b) out.mutable_data()[b] = {hr(b), hi(b)};
        return out;
      }, py::arg("sigma"), "complex log ψ of a batch [B, N] of ±1 spins")
      .def("gradients", [](PyAnsatz& p, const Array<double>& sigma) {
        auto s = spins_in(sigma, p.model->n_sites());
        const long B = s.extent(0), P = p.model->n_parameters();
        View2<double> ore("ore", B, P), oim("oim", B, P);
        p.model->log_psi_gradients(s, ore, oim);
        auto hr = to_host(ore), hi = to_host(oim);
        py::array_t<std::complex<double>> out({B, P});
        for (long k = 0; k < B * P; ++k) out.mutable_data()[k] = {hr.data()[k], hi.data()[k]};
        return out;
      }, py::arg("sigma"), "per-sample ∂ log ψ / ∂θ [B, P] (complex)")
      .def("local_energies", [](PyAnsatz& p, const ChainModel& c, const Array<double>& sigma) {
        require(c.n == p.model->n_sites(), "model has ", c.n, " sites, the RBM ", p.model->n_sites());
        spin::SpinHamiltonian H(c);
        auto s = spins_in(sigma, c.n);
        const long B = s.extent(0);
        View1<double> lr("lr", B), li("li", B), er("er", B), ei("ei", B);
        p.model->log_psi(s, lr, li);
        vmc::local_energy<double>(*p.model, H, s, lr, li, er, ei);
        auto hr = to_host(er), hi = to_host(ei);
        py::array_t<std::complex<double>> out(B);
        for (long b = 0; b < B; ++b) out.mutable_data()[b] = {hr(b), hi(b)};
        return out;
      }, py::arg("model"), py::arg("sigma"), "E_loc(σ) = Σ H_σσ' ψ(σ')/ψ(σ) of a batch (complex)");

  const vmc::RbmOptions rd;  // the C++ defaults of the ansatz keywords
  const vmc::MpsAnsatzOptions md;
  py::class_<PyRbm, PyAnsatz>(sp, "Rbm", "restricted Boltzmann machine ansatz (complex or real parameters)")
      .def(py::init([](int n, double alpha, bool complex, bool visible_bias, double init_std, long seed) {
             auto p = std::make_unique<PyRbm>();
             p->model = std::make_unique<vmc::Rbm<double>>(
                 n, vmc::RbmOptions{alpha, complex, visible_bias, init_std, std::uint64_t(seed)});
             return p;
           }),
           py::arg("n"), py::arg("alpha") = rd.alpha, py::arg("complex") = rd.complex,
           py::arg("visible_bias") = rd.visible_bias, py::arg("init_std") = rd.init_std,
           py::arg("seed") = long(rd.seed));

  py::class_<PyMps, PyAnsatz>(sp, "Mps",
                              "matrix product state ansatz psi(s) = Tr A_0^s0 ... A_{N-1}^s(N-1) with real tensors "
                              "(open ends of bond dimension 1 unless periodic)")
      .def(py::init([](int n, long chi, bool periodic, bool marshall_sign, double init_std, long seed) {
             auto p = std::make_unique<PyMps>();
             p->model = std::make_unique<vmc::MpsAnsatz<double>>(
                 n, vmc::MpsAnsatzOptions{chi, periodic, marshall_sign, init_std, seed});
             return p;
           }),
           py::arg("n"), py::arg("chi") = md.chi, py::arg("periodic") = md.periodic,
           py::arg("marshall_sign") = md.marshall_sign, py::arg("init_std") = md.init_std, py::arg("seed") = md.seed)
      .def_static("from_file", [](const std::string& path, bool marshall_sign) {
             auto p = std::make_unique<PyMps>();
             p->model = vmc::MpsAnsatz<double>::from_mps(mps::load_mps(path), marshall_sign);
             return p;
           }, py::arg("path"), py::arg("marshall_sign") = false,
           "the ansatz holding the amplitudes of an MPS saved by DMRG (attnphys dmrg --save, mps.dmrg(save=...))")
      .def_property_readonly("bond_dimensions", [](const PyMps& p) {
        return static_cast<const vmc::MpsAnsatz<double>&>(*p.model).bond_dimensions();
      }, "D_0 .. D_N (D_0 = D_N = 1 for open chains)");

  py::class_<PyTransformer, PyAnsatz>(sp, "Transformer",
                                      "relative-position (factored-attention) transformer wavefunction; options as "
                                      "in the [transformer] config section")
      .def(py::init([](int n, bool periodic, const std::map<std::string, py::object>& options) {
             vmc::TransformerAnsatzOptions o;
             OptionSet set;
             o.declare(set);
             apply_options(set, options);
             auto p = std::make_unique<PyTransformer>();
             p->model = std::make_unique<vmc::TransformerAnsatz<double>>(n, periodic, o);
             return p;
           }),
           py::arg("n"), py::arg("periodic") = true, py::arg("options") = std::map<std::string, py::object>{},
           "options: {'transformer.patch_size': 2, 'transformer.d_model': 16, 'transformer.marshall_sign': True, ...}");

  sp.def("run_vmc", [](const std::map<std::string, py::object>& options, py::object callback) {
    vmc::VmcRunConfig cfg;
    OptionSet set;
    cfg.declare(set);
    apply_options(set, options);
    cfg.apply_defaults(set);
    std::function<bool(const vmc::VmcStep&)> cb;
    if (!callback.is_none())
      cb = [callback](const vmc::VmcStep& s) {
        py::object r = callback(step_dict(s));
        return r.is_none() || r.cast<bool>();
      };
    const auto r = vmc::run_vmc(cfg, cb);
    py::dict d;
    d["energy"] = r.energy;
    d["energy_error"] = r.energy_error;
    d["variance"] = r.variance;
    d["v_score"] = r.v_score;
    d["tau"] = r.tau;
    d["r_hat"] = r.r_hat;
    d["n_parameters"] = r.n_parameters;
    d["iterations"] = r.iterations;
    d["converged"] = r.converged;
    d["seconds"] = r.seconds;
    d["reference"] = r.reference ? py::object(py::float_(*r.reference)) : py::object(py::none());
    d["relative_error"] = r.relative_error();
    d["warnings"] = r.warnings;
    py::list hist;
    for (const auto& s : r.history) hist.append(step_dict(s));
    d["history"] = hist;
    return d;
  }, py::arg("options") = std::map<std::string, py::object>{}, py::arg("callback") = py::none(),
     "the `attnphys vmc` job: options as config keys ({'model.model': 'heisenberg', 'model.n': 20, ...}); same "
     "defaults and results as the CLI");

  py::class_<PyVmc>(sp, "Vmc", "VMC driver: Metropolis sampling, SR/minSR/Adam updates, checkpoints")
      .def(py::init([](const ChainModel& c, PyAnsatz& ansatz, const std::map<std::string, py::object>& options) {
             vmc::VmcOptions o;
             OptionSet set;
             o.declare(set);
             apply_options(set, options);
             // The model-dependent defaults of `attnphys vmc` (vmc::apply_model_defaults), for every key not given;
             // a model that samples itself directly (autoregressive) fixes the sector it lives in.
             vmc::apply_model_defaults(c, set, o);
             if (auto* direct = dynamic_cast<vmc::DirectSampling<double>*>(ansatz.model.get()))
               if (!set.was_set("sampler.fixed_sz") && !set.was_set("sampler.two_sz"))
                 o.sampler.fixed_sz = direct->fixed_sector(o.sampler.two_sz);
             auto p = std::make_unique<PyVmc>();
             p->options = o;
             p->H = std::make_shared<spin::SpinHamiltonian>(c);
             p->driver = std::make_unique<vmc::VmcDriver<double>>(*ansatz.model, *p->H, o);
             return p;
           }),
           py::arg("model"), py::arg("ansatz"), py::arg("options") = std::map<std::string, py::object>{},
           py::keep_alive<1, 3>(),
           "options: {'vmc.lr': 0.05, 'sampler.n_samples': 1024, ...} (keys as in the TOML configs)")
      .def("run", [](PyVmc& p, long n_iter, py::object callback) {
        std::vector<vmc::VmcDriver<double>::Callback> cbs;
        if (!callback.is_none())
          cbs.push_back([callback](const vmc::VmcStep& s) {
            py::object r = callback(step_dict(s));
            return r.is_none() || r.cast<bool>();
          });
        require(n_iter >= 0, "Vmc.run: n_iter must be >= 0, got ", n_iter);
        py::list out;
        for (const auto& s : p.driver->run(n_iter, nullptr, cbs)) out.append(step_dict(s));
        return out;
      }, py::arg("n_iter"), py::arg("callback") = py::none(),
         "n_iter iterations; callback(step: dict) returning False stops the run")
      .def("estimate_energy", [](PyVmc& p, long n_samples) {
        require(n_samples >= 0, "Vmc.estimate_energy: n_samples must be >= 0 (0: sampler.n_samples), got ",
                n_samples);
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
      .def_property_readonly("iteration", [](const PyVmc& p) { return p.driver->iteration(); })
      .def_property_readonly("options", [](const PyVmc& p) {
        vmc::VmcOptions o = p.options;
        OptionSet set;
        o.declare(set);
        return py::module_::import("json").attr("loads")(set.to_json().dump());
      }, "{dotted key: value} of the options this driver runs with (the model-dependent defaults applied)")
      .def_property_readonly("direct_sampling", [](const PyVmc& p) { return p.driver->direct_sampling(); })
      .def("save_checkpoint", [](const PyVmc& p, const std::string& path) { p.driver->save_checkpoint(path); })
      .def("load_checkpoint", [](PyVmc& p, const std::string& path) { p.driver->load_checkpoint(path); });
}

static BindRegistrar reg("spin", bind_spin);

}  // namespace attnphys::python
