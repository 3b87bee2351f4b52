// Bindings for MPS/DMRG: the one-line job mps.dmrg(model=..., n=..., chi=...) (mps::run_dmrg), and the pieces of
// the ITensor-shaped API of attnphys/mps.py (SpinHalf, AutoMpo, MPS, Sweeps, dmrg(H, psi0, sweeps)) on the same C++
// objects: mps::Mpo from mps::AutoMpo, mps::QMps (U(1)) or mps::Mps (dense) states, mps::dmrg.
#include <cmath>
#include <optional>
#include <tuple>

#include "attnphys/solvers/mps/observables.hpp"
#include "attnphys/solvers/mps/run.hpp"
#include "attnphys/solvers/mps/u1.hpp"
#include "attnphys/solvers/vmc/mps_ansatz.hpp"
#include "bindings.hpp"
#include "spin_common.hpp"

namespace attnphys::python {

namespace {

// mps.dmrg(model=..., n=..., chi=...): the job of `attnphys dmrg` (mps::run_dmrg), its result as the JSON text of
// DmrgRunResult::to_json (attnphys/mps.py makes the dict from it). The keywords are DmrgRunConfig's typed fields
// (their defaults too, but for the model: heisenberg, n = 20); options={"dmrg.KEY": value} reaches every other key
// the CLI declares (DmrgOptions: energy_tol, davidson_adaptive, ...), checked the same way as --set.
std::string dmrg_job(const std::string& model, int n, const std::string& bc, double J, double h, double delta,
                     double j2, int chi, int sweeps, double cutoff, double noise, int niter, bool variance,
                     const std::string& save, const std::string& symmetry,
                     const std::map<std::string, py::object>& options) {
  mps::DmrgRunConfig cfg;
  cfg.model.model = spin::parse_model_kind(model), cfg.model.n = n;
  cfg.model.bc = spin::parse_boundary(bc), cfg.model.J = J, cfg.model.h = h;
  cfg.model.delta = delta, cfg.model.j2 = j2;
  cfg.chi = chi, cfg.sweeps = sweeps, cfg.cutoff = cutoff, cfg.noise = noise, cfg.niter = niter;
  cfg.variance = variance;
  cfg.save = save;
  cfg.symmetry = mps::parse_symmetry(symmetry);
  cfg.validate();
  if (!options.empty()) {
    static const char* keyword_keys[] = {"dmrg.chi", "dmrg.sweeps", "dmrg.cutoff", "dmrg.noise", "dmrg.niter",
                                         "dmrg.variance", "dmrg.save", "dmrg.symmetry"};
    for (const auto& [k, v] : options) {
      require(k.rfind("model.", 0) != 0, "dmrg: options['", k, "']: give the model as keywords (model=, n=, bc=, J=, ",
              "h=, delta=, j2=)");
      for (const char* kk : keyword_keys)
        require(k != kk, "dmrg: options['", k, "']: give it as the keyword ", k.substr(5), "=");
    }
    OptionSet set;
    cfg.declare(set);
    apply_options(set, options);
    cfg.resolve();
  }
  py::gil_scoped_release release;
  return mps::run_dmrg(cfg).to_json().dump();
}

struct PyMpo {
  mps::Mpo w;
  mps::MpoCharges charges;
};

// A state of the Python API: block-sparse U(1) (sites with conserve_sz) or dense.
struct PyState {
  bool u1 = false;
  mps::QMps q;
  mps::Mps d;
  int n() const { return u1 ? q.size() : d.size(); }
  mps::Mps dense() const { return u1 ? q.to_dense_mps() : d; }
};

Eigen::MatrixXd op_matrix(const Array<double>& a, const char* what) {
  require(a.ndim() == 2 && a.shape(0) == 2 && a.shape(1) == 2, what, ": an operator must be a 2 x 2 matrix, got shape ",
          shape_str(a));
  Eigen::MatrixXd m(2, 2);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) m(i, j) = a.data()[i * 2 + j];
  require(m.allFinite(), what, ": the operator has NaN or infinite entries");
  return m;
}

PyMpo auto_mpo(int n, const std::vector<std::pair<double, std::vector<std::pair<std::string, int>>>>& terms) {
  require(n >= 1, "AutoMpo: the sites need n >= 1, got ", n);
  mps::AutoMpo a(n);
  for (const auto& [c, ops] : terms) {
    require(std::isfinite(c), "AutoMpo: a coefficient is ", c, "; coefficients must be finite");
    a.add(c, ops);
  }
  PyMpo out;
  out.w = a.to_mpo();
  out.charges = mps::mpo_charges(out.w);
  return out;
}

mps::Sweeps make_sweeps(const std::vector<std::tuple<int, int, double, int, double>>& entries) {
  require(!entries.empty(), "Sweeps: at least one sweep");
  mps::Sweeps s(int(entries.size()));
  s.entries().clear();
  for (const auto& [maxdim, mindim, cutoff, niter, noise] : entries) {
    require(maxdim >= 1, "Sweeps: maxdim must be >= 1, got ", maxdim);
    require(mindim >= 1 && mindim <= maxdim, "Sweeps: mindim must be in 1..maxdim, got ", mindim);
    require(cutoff >= 0 && std::isfinite(cutoff), "Sweeps: cutoff must be a finite number >= 0, got ", cutoff);
    require(niter >= 1, "Sweeps: niter must be >= 1, got ", niter);
    require(noise >= 0 && std::isfinite(noise), "Sweeps: noise must be a finite number >= 0, got ", noise);
    mps::SweepParams p;
    p.max_dim = maxdim, p.min_dim = mindim, p.cutoff = cutoff, p.niter = niter, p.noise = noise;
    s.entries().push_back(p);
  }
  return s;
}

py::dict record_dict(const mps::SweepRecord& r) {
  py::dict d;
  d["sweep"] = r.sweep;
  d["energy"] = r.energy;
  d["truncation_error"] = r.truncation_error;
  d["max_bond_dimension"] = r.max_bond_dimension;
  d["max_entropy_change"] = r.max_entropy_change;
  d["seconds"] = r.seconds;
  d["davidson_products"] = r.davidson_products;
  d["residual_tol"] = r.residual_tol;
  return d;
}

// dmrg(H, psi0, sweeps): U(1) when psi0 is a U(1) state (H must then conserve Sz), dense otherwise; psi0 is not
// changed. The observer (a Python callable or None) sees a dict per sweep; returning False stops the run.
std::pair<std::string, PyState> dmrg_state(const PyMpo& h, const PyState& psi0,
                                           const std::vector<std::tuple<int, int, double, int, double>>& entries,
                                           bool adaptive, const std::map<std::string, double>& options,
                                           py::object observer) {
  require(h.w.size() == psi0.n(), "dmrg: H has ", h.w.size(), " sites but psi0 has ", psi0.n());
  require(!psi0.u1 || h.charges.ok, "dmrg: psi0 conserves Sz (its sites have conserve_sz=True) but H does not (",
          h.charges.reason, "); build the sites with mps.SpinHalf(n, conserve_sz=False)");
  const mps::Sweeps sweeps = make_sweeps(entries);
  mps::DmrgOptions opt;
  opt.davidson_adaptive = adaptive;
  for (const auto& [k, v] : options) {
    require(std::isfinite(v) && v >= 0, "dmrg: ", k, " must be a finite number >= 0, got ", v);
    if (k == "energy_tol") opt.energy_tol = v;
    else if (k == "entropy_tol") opt.entropy_tol = v;
    else if (k == "min_sweeps") opt.min_sweeps = std::max(1, int(v));
    else if (k == "davidson_tol") require(v > 0, "dmrg: davidson_tol must be > 0"), opt.davidson_tol = v;
    else if (k == "davidson_max_iter") opt.davidson_max_iter = std::max(1, int(v));
    else fail("dmrg: unknown option '", k, "' (energy_tol, entropy_tol, min_sweeps, davidson_tol, davidson_max_iter)");
  }
  std::optional<py::error_already_set> raised;
  mps::DmrgObserver obs;
  if (!observer.is_none())
    obs = [&](const mps::SweepRecord& r) {
      py::gil_scoped_acquire gil;
      try {
        py::object v = observer(record_dict(r));
        return v.is_none() || v.cast<bool>();
      } catch (py::error_already_set& e) {
        raised.emplace(std::move(e));
        return false;
      }
    };
  PyState out = psi0;
  mps::DmrgResult r;
  {
    py::gil_scoped_release release;
    if (out.u1) {
      mps::right_canonicalize(out.q);  // the U(1) sweep starts from a right-canonical state
      r = mps::dmrg(h.w, out.q, sweeps, opt, obs);
    } else {
      r = mps::dmrg(h.w, out.d, sweeps, opt, obs);
    }
  }
  if (raised) throw std::move(*raised);
  Json j = mps::to_json(r);
  j.set("symmetry", out.u1 ? "u1" : "none");
  return {j.dump(), std::move(out)};
}

Array<double> to_array(const Eigen::MatrixXd& m) {
  Array<double> out({long(m.rows()), long(m.cols())});
  for (long i = 0; i < m.rows(); ++i)
    for (long j = 0; j < m.cols(); ++j) out.mutable_data()[i * m.cols() + j] = m(i, j);
  return out;
}

}  // namespace

void bind_mps(py::module_& m) {
  auto sub = m.def_submodule("mps", "Matrix product states: two-site DMRG baselines for the spin chains");
  const mps::DmrgRunConfig d;  // the keywords' defaults are the job's
  sub.def("_dmrg_job", &dmrg_job, py::arg("model") = "heisenberg", py::arg("n") = 20,
          py::arg("bc") = std::string(enum_name(d.model.bc)),
          py::arg("J") = d.model.J, py::arg("h") = d.model.h, py::arg("delta") = d.model.delta,
          py::arg("j2") = d.model.j2, py::arg("chi") = d.chi, py::arg("sweeps") = d.sweeps,
          py::arg("cutoff") = d.cutoff, py::arg("noise") = d.noise, py::arg("niter") = d.niter,
          py::arg("variance") = d.variance, py::arg("save") = d.save,
          py::arg("symmetry") = std::string(mps::symmetry_name(d.symmetry)),
          py::arg("options") = std::map<std::string, py::object>{},
          "Ground state of a chain (tfim | xxz | heisenberg | j1j2) by two-site DMRG (the job of attnphys dmrg); "
          "returns the JSON text of a dict with energy, variance, max_bond_dimension, truncation_error, sweeps, "
          "converged, convergence_reason (None when converged), energy_change, symmetry, seconds, entropies, "
          "entropy_mid, magnetization (<Sz_i>), sweep_energies, bond_dimensions and n_parameters. save: optional "
          "HDF5 path for the final MPS. symmetry: 'auto' (U(1) block-sparse for Sz-conserving chains, dense for the "
          "TFIM), 'u1' or 'none'. options: other configuration keys, e.g. {'dmrg.energy_tol': 1e-12}.");

  py::class_<PyMpo>(sub, "_Mpo", "a matrix product operator (mps.AutoMpo(...).mpo())")
      .def_property_readonly("n", [](const PyMpo& h) { return h.w.size(); })
      .def_property_readonly("max_bond_dimension", [](const PyMpo& h) { return h.w.max_bond_dimension(); })
      .def_property_readonly("conserves_sz", [](const PyMpo& h) { return h.charges.ok; })
      .def_property_readonly("sz_reason", [](const PyMpo& h) { return h.charges.reason; });
  sub.def("_auto_mpo", &auto_mpo, py::arg("n"), py::arg("terms"),
          "MPO of sum_t coef_t prod op(site) from [(coef, [(name, site), ...]), ...] (names Id, Sz, S+, S-, Sx, X, Z)");

  py::class_<PyState>(sub, "_State", "an MPS (U(1) block-sparse or dense)")
      .def_property_readonly("n", &PyState::n)
      .def_property_readonly("u1", [](const PyState& p) { return p.u1; })
      .def_property_readonly("bond_dimensions", [](const PyState& p) {
        return p.u1 ? p.q.bond_dimensions() : p.d.bond_dimensions();
      })
      .def("tensors", [](const PyState& p) {
        const mps::Mps d = p.dense();
        py::list out;
        for (const auto& t : d.sites()) {
          Array<double> a({long(t.dl), long(t.d), long(t.dr)});
          long k = 0;
          for (int l = 0; l < t.dl; ++l)
            for (int s = 0; s < t.d; ++s)
              for (int r = 0; r < t.dr; ++r) a.mutable_data()[k++] = t(l, s, r);
          out.append(a);
        }
        return out;
      }, "site tensors A[l, s, r] of the dense form")
      .def("expect", [](const PyState& p, const Array<double>& op) {
        const Eigen::MatrixXd o = op_matrix(op, "expect");
        py::gil_scoped_release release;
        return mps::local_expectations(p.dense(), o);
      })
      .def("correlation", [](const PyState& p, const Array<double>& a, const Array<double>& b) {
        const Eigen::MatrixXd x = op_matrix(a, "correlation"), y = op_matrix(b, "correlation");
        Eigen::MatrixXd c;
        {
          py::gil_scoped_release release;
          c = mps::correlation_matrix(p.dense(), x, y);
        }
        return to_array(c);
      })
      .def("entropies", [](const PyState& p) {
        py::gil_scoped_release release;
        return p.u1 ? mps::entanglement_entropies(p.q) : mps::entanglement_entropies(p.d);
      })
      .def("energy", [](const PyState& p, const PyMpo& h) {
        require(h.w.size() == p.n(), "energy: H has ", h.w.size(), " sites, the MPS ", p.n());
        py::gil_scoped_release release;
        return p.u1 && h.charges.ok ? mps::expectation(h.w, p.q) : mps::expectation(h.w, p.dense());
      })
      .def("variance", [](const PyState& p, const PyMpo& h) {
        require(h.w.size() == p.n(), "variance: H has ", h.w.size(), " sites, the MPS ", p.n());
        py::gil_scoped_release release;
        return p.u1 && h.charges.ok ? mps::variance(h.w, p.q) : mps::variance(h.w, p.dense());
      })
      .def("save", [](const PyState& p, const std::string& path, const std::string& config) {
        mps::save_mps(p.dense(), path, config);
      }, py::arg("path"), py::arg("config") = "")
      .def("to_ansatz", [](const PyState& p, bool marshall_sign) {
        auto a = std::make_unique<PyAnsatz>();
        a->model = vmc::MpsAnsatz<double>::from_mps(p.dense(), marshall_sign);
        return a;
      }, py::arg("marshall_sign") = false);

  sub.def("_product_state", [](const std::vector<int>& states, bool u1) {
    PyState p;
    p.u1 = u1;
    if (u1) p.q = mps::QMps::product_state(states);
    else p.d = mps::Mps::product_state(states);
    return p;
  }, py::arg("states"), py::arg("u1"));
  sub.def("_random_state", [](int n, int chi, unsigned long seed, bool u1, int two_sz) {
    PyState p;
    p.u1 = u1;
    if (u1) p.q = mps::random_qmps(n, chi, two_sz, seed);
    else p.d = mps::Mps::random(n, 2, chi, seed);
    return p;
  }, py::arg("n"), py::arg("chi"), py::arg("seed"), py::arg("u1"), py::arg("two_sz"));
  sub.def("_load_state", [](const std::string& path, int mode) {
    // mode: -1 U(1) when every bond state has a definite charge, 0 dense, 1 U(1) (refused when impossible).
    PyState p;
    p.d = mps::load_mps(path);
    if (mode != 0) {
      std::string why;
      if (auto q = mps::qmps_from_dense(p.d, &why)) {
        p.u1 = true;
        p.q = std::move(*q);
        p.d = mps::Mps();
      } else {
        require(mode < 0, "load: conserve_sz=True but ", path, " holds no U(1) state: ", why);
      }
    }
    return p;
  }, py::arg("path"), py::arg("mode"));
  sub.def("_dmrg", &dmrg_state, py::arg("H"), py::arg("psi0"), py::arg("sweeps"), py::arg("adaptive"),
          py::arg("options"), py::arg("observer"));
}

static BindRegistrar reg("mps", bind_mps);

}  // namespace attnphys::python
