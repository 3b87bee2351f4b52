// attnphys.spin's NetKet-shaped API (python/attnphys/_vmc_api.py) on the C++ VMC objects. The Python classes
// (spin.Spin, spin.Heisenberg, spin.MetropolisExchange, spin.Rbm(alpha=...), spin.MCState, spin.VMC, ...) only
// collect typed keywords; translate() turns their dotted keys into one vmc::VmcRunConfig exactly as `attnphys vmc`
// and spin.run_vmc do (VmcRunConfig::declare + apply_defaults), so every default and every model-dependent default
// (Marshall sign, boundary condition, sectors, the diagonal-shift schedule) comes from the C++.
//
// _VmcState holds the ansatz, the Hamiltonian and the VmcDriver (its chains, counters and iteration) and adds
// what the driver has no method for: expectation values of other operators (chain Hamiltonians and Σ w S_i·S_j)
// with autocorrelation-aware error bars, and a checkpoint that also carries the Python objects' description.
// Registered as "spin_api": it sorts after "spin", whose submodule and Ansatz class it uses.
#include <hdf5.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/core/logging.hpp"
#include "attnphys/solvers/vmc/diagnostics.hpp"
#include "attnphys/solvers/vmc/driver.hpp"
#include "attnphys/solvers/vmc/local_energy.hpp"
#include "attnphys/solvers/vmc/run.hpp"
#include "spin_common.hpp"

namespace attnphys::python {

namespace {

using Options = std::map<std::string, py::object>;

// The translation: dotted keys -> VmcRunConfig with the C++ defaults. sampler.fixed_sz / two_sz (the Hilbert
// space's total_sz) are declared here too when the C++ does not declare them, so that apply_defaults sees them as
// set and derives the rest (autoregressive sector) from them.
void translate(const Options& options, vmc::VmcRunConfig& cfg, OptionSet& set) {
  cfg.declare(set);
  if (!set.has("sampler.fixed_sz"))
    set.add("sampler.fixed_sz", &cfg.vmc.sampler.fixed_sz, "sample the sector 2Sz = sampler.two_sz");
  if (!set.has("sampler.two_sz")) set.add("sampler.two_sz", &cfg.vmc.sampler.two_sz, "twice the total Sz");
  apply_options(set, options);
  cfg.apply_defaults(set);
}

vmc::VmcRunConfig translate(const Options& options) {
  vmc::VmcRunConfig cfg;
  OptionSet set;
  translate(options, cfg, set);
  return cfg;
}

// An operator's chain: only its own model.* keys (the rest C++ defaults).
spin::ChainModel chain_model(const Options& options) {
  spin::ChainModel m;
  OptionSet set;
  m.declare(set);
  apply_options(set, options);
  m.validate();
  return m;
}

void require_finite(const std::vector<double>& p, const std::string& what) {
  for (std::size_t k = 0; k < p.size(); ++k)
    require(std::isfinite(p[k]), what, ": parameter ", k, " of ", p.size(), " is ", p[k],
            " (NaN or infinite); the state diverged or was given bad values: lower the learning rate, raise the SR "
            "diag_shift, or load an earlier checkpoint");
}

py::dict stats_dict(const vmc::ChainStats& st, double imag) {
  py::dict d;
  d["mean"] = st.mean;
  d["error"] = st.error;
  d["variance"] = st.variance;
  d["tau"] = st.tau;
  d["r_hat"] = st.r_hat;
  d["n"] = st.n;
  d["imag"] = imag;
  return d;
}

std::string temp_path(const std::string& tag) {
  static std::atomic<long> counter{0};
  return (std::filesystem::temp_directory_path() /
          ("attnphys-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".h5"))
      .string();
}

void add_string_attr(const std::string& path, const std::string& name, const std::string& value) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  require(f >= 0, "HDF5: cannot reopen ", path, " to add '", name, "'");
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  hid_t space = H5Screate(H5S_SCALAR);
  if (H5Aexists(f, name.c_str()) > 0) H5Adelete(f, name.c_str());
  hid_t attr = H5Acreate2(f, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  const char* v = value.c_str();
  const bool ok = attr >= 0 && H5Awrite(attr, type, &v) >= 0;
  if (attr >= 0) H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
  H5Fclose(f);
  require(ok, "HDF5: cannot write attribute '", name, "' to ", path);
}

struct Drawn {
  View2<double> s;
  View1<double> re, im;
  long steps = 1, chains = 1;
};

struct PyVmcState {
  Options options;  // the dotted keys of the current configuration
  vmc::VmcRunConfig cfg;
  py::object ansatz;  // a spin.Ansatz
  std::shared_ptr<spin::SpinHamiltonian> H;
  std::unique_ptr<vmc::VmcDriver<double>> driver;  // declared last: destroyed before H and the ansatz
  LiveToken token;

  vmc::LogPsiModel<double>& psi() { return *ansatz.cast<PyAnsatz&>().model; }

  PyVmcState(const Options& o, py::object prebuilt) : options(o), cfg(translate(o)) {
    if (prebuilt.is_none()) {
      auto p = std::make_unique<PyAnsatz>();
      p->model = vmc::make_ansatz(cfg);
      ansatz = py::cast(p.release(), py::return_value_policy::take_ownership);
    } else {
      ansatz = prebuilt;
      require(psi().n_sites() == cfg.model.n, "the model has ", psi().n_sites(), " sites, but the Hilbert space has ",
              cfg.model.n, ": build both for the same chain length");
    }
    require_finite(psi().parameters().get_host(), "MCState");
    H = std::make_shared<spin::SpinHamiltonian>(cfg.model);
    driver = std::make_unique<vmc::VmcDriver<double>>(psi(), *H, cfg.vmc);
  }

  // A new Hamiltonian / sampler / optimiser configuration on the same ansatz. The state's chains, counters,
  // iteration and optimiser moments carry over (through a checkpoint) when the sampling kind and chain count stay;
  // once the state has been optimised its diagonal-shift schedule stays the one it started with.
  void configure(const Options& o) {
    vmc::VmcRunConfig c = translate(o);
    require(c.model.n == psi().n_sites(), "the Hamiltonian has ", c.model.n, " sites, the state ", psi().n_sites());
    if (driver->iteration() > 0 && !o.count("vmc.diag_shift_steps")) c.vmc.diag_shift_steps = cfg.vmc.diag_shift_steps;
    auto h = std::make_shared<spin::SpinHamiltonian>(c.model);
    auto d = std::make_unique<vmc::VmcDriver<double>>(psi(), *h, c.vmc);
    const bool same_kind = d->direct_sampling() == driver->direct_sampling() &&
                           (d->direct_sampling() || d->sampler().n_chains() == driver->sampler().n_chains());
    if (same_kind) {
      const std::string tmp = temp_path("vmcstate");
      try {
        driver->save_checkpoint(tmp);
        d->load_checkpoint(tmp);
      } catch (...) {
        std::remove(tmp.c_str());
        throw;
      }
      std::remove(tmp.c_str());
    }
    driver = std::move(d);
    H = std::move(h);
    cfg = c;
    options = o;
  }

  // n_samples new samples of |ψ|², from a stream that depends only on (sampler seed, iteration, seed): the same
  // state gives the same estimate. Metropolis chains continue from the run's chains once those are equilibrated
  // (fresh chains get the full burn-in).
  Drawn draw(long n_samples, long seed) {
    auto& model = psi();
    Drawn out;
    const long M0 = n_samples > 0 ? n_samples : cfg.vmc.sampler.n_samples;
    const std::uint64_t s = std::uint64_t(cfg.vmc.sampler.seed + 7919 * (driver->iteration() + 1) + 104729 * seed);
    if (driver->direct_sampling()) {
      auto* direct = dynamic_cast<vmc::DirectSampling<double>*>(&model);
      out.s = View2<double>("attnphys::api_samples", M0, model.n_sites());
      direct->sample_direct(out.s, s, 0);
      out.re = View1<double>("attnphys::api_re", M0);
      out.im = View1<double>("attnphys::api_im", M0);
      const long chunk = cfg.vmc.chunk_size;
      for (long m0 = 0; m0 < M0; m0 += chunk) {
        const auto r = Kokkos::make_pair(m0, std::min(M0, m0 + chunk));
        model.log_psi(Kokkos::subview(out.s, r, Kokkos::ALL()), Kokkos::subview(out.re, r),
                      Kokkos::subview(out.im, r));
      }
      out.steps = 1;
      out.chains = M0;
      return out;
    }
    vmc::SamplerOptions so = cfg.vmc.sampler;
    so.n_samples = M0;
    so.seed = long(s % 9007199254740991ULL);
    vmc::MetropolisSampler<double> sampler(model, so, so.periodic);
    auto& run = driver->sampler();
    if (run.next_discard() != run.options().n_discard) sampler.restore(run.states(), 0);
    sampler.sample(out.s, out.re, out.im);
    out.steps = sampler.n_steps_per_sample();
    out.chains = sampler.n_chains();
    return out;
  }

  py::dict expect_chain(const Options& model_options, long n_samples, long seed) {
    const spin::ChainModel m = chain_model(model_options);
    require(m.n == psi().n_sites(), "the operator acts on ", m.n, " sites, the state on ", psi().n_sites());
    spin::SpinHamiltonian op(m);
    Drawn d = draw(n_samples, seed);
    const long M = d.s.extent(0);
    View1<double> er("attnphys::api_e_re", M), ei("attnphys::api_e_im", M);
    vmc::local_energy<double>(psi(), op, d.s, d.re, d.im, er, ei, cfg.vmc.chunk_size);
    auto hr = to_host(er), hi = to_host(ei);
    std::vector<double> x(M);
    double imag = 0;
    for (long k = 0; k < M; ++k) x[k] = hr(k), imag += hi(k) / double(M);
    return stats_dict(vmc::chain_statistics(x, d.steps, d.chains), imag);
  }

  // O = Σ_k w_k S_{i_k}·S_{j_k} (zz_only: Σ_k w_k S^z_i S^z_j). O_loc(σ) = Σ_k w_k [σ_iσ_j/4 + ½ ψ(σ^{ij})/ψ(σ) when
  // σ_i ≠ σ_j], σ^{ij} the configuration with spins i and j exchanged; S_i·S_i = 3/4.
  py::dict expect_pairs(const std::vector<int>& is, const std::vector<int>& js, const std::vector<double>& ws,
                        bool zz_only, long n_samples, long seed) {
    const int N = psi().n_sites();
    require(is.size() == js.size() && is.size() == ws.size() && !is.empty(), "expect: empty or ragged term list");
    for (std::size_t k = 0; k < is.size(); ++k)
      require(is[k] >= 0 && is[k] < N && js[k] >= 0 && js[k] < N, "expect: sites (", is[k], ", ", js[k],
              ") outside 0 .. ", N - 1);
    Drawn d = draw(n_samples, seed);
    const long M = d.s.extent(0);
    auto hs = to_host(d.s);
    auto hre = to_host(d.re), him = to_host(d.im);
    std::vector<double> re(M, 0.0), im(M, 0.0);
    std::vector<long> row_of;   // swapped configurations: (sample, weight)
    std::vector<double> w_of;
    std::vector<double> conf;
    for (long m = 0; m < M; ++m)
      for (std::size_t k = 0; k < is.size(); ++k) {
        const int i = is[k], j = js[k];
        if (i == j) {
          re[m] += ws[k] * (zz_only ? 0.25 : 0.75);
          continue;
        }
        re[m] += ws[k] * 0.25 * hs(m, i) * hs(m, j);
        if (zz_only || hs(m, i) == hs(m, j)) continue;
        row_of.push_back(m);
        w_of.push_back(0.5 * ws[k]);
        const std::size_t o = conf.size();
        conf.insert(conf.end(), &hs(m, 0), &hs(m, 0) + N);
        std::swap(conf[o + i], conf[o + j]);
      }
    const long K = long(row_of.size()), chunk = std::max(1L, cfg.vmc.chunk_size);
    for (long k0 = 0; k0 < K; k0 += chunk) {
      const long B = std::min(K, k0 + chunk) - k0;
      View2<double> s("attnphys::api_swapped", B, N);
      Kokkos::deep_copy(s, HostView2<const double>(conf.data() + k0 * N, B, N));
      View1<double> lr("attnphys::api_lr", B), li("attnphys::api_li", B);
      psi().log_psi(s, lr, li);
      auto hlr = to_host(lr), hli = to_host(li);
      for (long b = 0; b < B; ++b) {
        const long m = row_of[k0 + b];
        const double a = std::exp(hlr(b) - hre(m)), phi = hli(b) - him(m);
        re[m] += w_of[k0 + b] * a * std::cos(phi);
        im[m] += w_of[k0 + b] * a * std::sin(phi);
      }
    }
    double imag = 0;
    for (long m = 0; m < M; ++m) imag += im[m] / double(M);
    return stats_dict(vmc::chain_statistics(re, d.steps, d.chains), imag);
  }
};

}  // namespace

void bind_spin_api(py::module_& m) {
  require(py::hasattr(m, "spin"), "attnphys._core: the spin submodule must be bound before spin_api");
  py::module_ sp = m.attr("spin");

  sp.def("_vmc_option_defaults", []() {
    vmc::VmcRunConfig cfg;
    OptionSet set;
    cfg.declare(set);
    return set.to_json().dump();
  }, "JSON {dotted key: C++ default} of every `attnphys vmc` option (before the model-dependent defaults)");

  sp.def("_vmc_option_info", []() {
    vmc::VmcRunConfig cfg;
    OptionSet set;
    cfg.declare(set);
    Json out = Json::object();
    for (const auto& key : set.keys()) {
      const OptionInfo i = set.info(key);
      Json choices = Json::array();
      for (const auto& c : i.choices) choices.push_back(c);
      out.set(key, Json::object().set("help", i.help).set("type", i.type).set("choices", choices));
    }
    return out.dump();
  }, "JSON {dotted key: {help, type, choices}} of every `attnphys vmc` option, from its declaration");

  sp.def("_resolved_options", [](const Options& o) {
    OptionSet set;
    vmc::VmcRunConfig cfg;
    translate(o, cfg, set);
    return set.to_json().dump();
  }, py::arg("options"), "JSON of the VmcRunConfig that these dotted keys give, every default applied");

  sp.def("_chain_model", [](const Options& o) { return chain_model(o); }, py::arg("options"),
         "the spin.ChainModel that these dotted keys describe");

  sp.def("_read_api_spec", [](const std::string& path) {
    h5::Reader r(path, "vmc_checkpoint", 1);
    require(r.has_attr("/", "api_spec"), path, " is a VMC checkpoint without the Python API's description of the "
            "state (written by `attnphys vmc` or spin.Vmc): build the same spin.MCState, let it meet its Hamiltonian "
            "(spin.VMC(H, ...)) and call vs.restore(path)");
    return r.attr_string("/", "api_spec");
  }, py::arg("path"));

  py::class_<PyVmcState>(sp, "_VmcState", "the C++ side of spin.MCState (ansatz, Hamiltonian, VmcDriver)")
      .def(py::init([](const Options& o, py::object prebuilt) { return std::make_unique<PyVmcState>(o, prebuilt); }),
           py::arg("options"), py::arg("ansatz") = py::none())
      .def("configure", &PyVmcState::configure, py::arg("options"))
      .def_readonly("options", &PyVmcState::options)
      .def_readonly("ansatz", &PyVmcState::ansatz)
      .def_property_readonly("iteration", [](const PyVmcState& s) { return s.driver->iteration(); })
      .def_property_readonly("converged", [](const PyVmcState& s) { return s.driver->converged(); })
      .def_property_readonly("direct_sampling", [](const PyVmcState& s) { return s.driver->direct_sampling(); })
      .def_property_readonly("n_samples", [](PyVmcState& s) {
        return s.driver->direct_sampling() ? s.cfg.vmc.sampler.n_samples : s.driver->sampler().n_samples();
      })
      .def_property_readonly("sampler_move", [](PyVmcState& s) {
        return std::string(s.driver->direct_sampling() ? "exact" : enum_name(s.driver->sampler().move()));
      })
      .def_property_readonly("diag_shift_steps", [](const PyVmcState& s) { return s.cfg.vmc.diag_shift_steps; })
      .def("get_parameters", [](PyVmcState& s) {
        auto v = s.psi().parameters().get_host();
        Array<double> out(long(v.size()));
        std::copy(v.begin(), v.end(), out.mutable_data());
        return out;
      })
      .def("set_parameters", [](PyVmcState& s, const Array<double>& a) {
        const long P = s.psi().n_parameters();
        require(a.ndim() == 1 && a.shape(0) == P, "expected ", P, " parameters, got shape ", shape_str(a));
        std::vector<double> v(a.data(), a.data() + P);
        require_finite(v, "MCState.parameters");
        s.psi().parameters().set_host(v);
        if (!s.driver->direct_sampling()) s.driver->sampler().refresh();
      }, py::arg("values"))
      .def("run", [](PyVmcState& s, long n_iter, py::object callback, const std::string& log_path) {
        std::vector<vmc::VmcDriver<double>::Callback> cbs;
        if (!callback.is_none())
          cbs.push_back([callback](const vmc::VmcStep& st) {
            py::object r = callback(step_dict(st));
            return r.is_none() || r.cast<bool>();
          });
        std::unique_ptr<CsvLogger> log;
        if (!log_path.empty())
          log = std::make_unique<CsvLogger>(log_path,
                                            vmc::VmcDriver<double>::log_columns(s.driver->options().guard_sigmas > 0),
                                            s.driver->iteration() > 0);
        py::list out;
        for (const auto& st : s.driver->run(n_iter, log.get(), cbs)) out.append(step_dict(st));
        require_finite(s.psi().parameters().get_host(), "VMC");
        return out;
      }, py::arg("n_iter"), py::arg("callback") = py::none(), py::arg("log_path") = "")
      .def("sample", [](PyVmcState& s, long n_samples, long seed) {
        Drawn d = s.draw(n_samples, seed);
        const long M = d.s.extent(0), N = d.s.extent(1);
        return out_array(d.s, {M, N});
      }, py::arg("n_samples") = 0, py::arg("seed") = 0)
      .def("to_toml", [](PyVmcState& s) {
        // The CLI config of this state (`attnphys vmc --config`): every key VmcRunConfig declares, resolved.
        vmc::VmcRunConfig c = s.cfg;
        OptionSet set;
        c.declare(set);
        return set.to_toml();
      })
      .def("expect_chain", &PyVmcState::expect_chain, py::arg("model_options"), py::arg("n_samples") = 0,
           py::arg("seed") = 0)
      .def("expect_pairs", &PyVmcState::expect_pairs, py::arg("i"), py::arg("j"), py::arg("w"),
           py::arg("zz_only") = false, py::arg("n_samples") = 0, py::arg("seed") = 0)
      .def("save", [](PyVmcState& s, const std::string& path, const std::string& spec) {
        // The driver's own checkpoint (attnphys vmc --set run.resume=... reads it too), plus the description.
        const std::string tmp = path + ".tmp-api-" + std::to_string(::getpid());
        try {
          s.driver->save_checkpoint(tmp);
          add_string_attr(tmp, "api_spec", spec);
        } catch (...) {
          std::remove(tmp.c_str());
          throw;
        }
        require(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename ", tmp, " to ", path);
      }, py::arg("path"), py::arg("spec"))
      .def("load", [](PyVmcState& s, const std::string& path) {
        s.driver->load_checkpoint(path);
        require_finite(s.psi().parameters().get_host(), "MCState.load(" + path + ")");
      }, py::arg("path"));
}

static BindRegistrar reg("spin_api", bind_spin_api);

}  // namespace attnphys::python
