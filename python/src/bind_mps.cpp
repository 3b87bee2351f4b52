// Bindings for MPS/DMRG: attnphys.mps.dmrg(...) runs two-site DMRG on a MISSION.md chain and returns a summary dict.
#include "attnphys/solvers/mps/dmrg.hpp"
#include "attnphys/solvers/mps/observables.hpp"
#include "attnphys/solvers/mps/u1.hpp"
#include "bindings.hpp"

namespace attnphys::python {

namespace {

py::dict dmrg_py(const std::string& model, int n, const std::string& bc, double J, double h, double delta, double j2,
                 int chi, int sweeps, double cutoff, double noise, int niter, bool variance, const std::string& save,
                 const std::string& symmetry) {
  spin::ChainModel m;
  m.model = model, m.n = n, m.bc = bc, m.J = J, m.h = h, m.delta = delta, m.j2 = j2;
  m.validate();
  require(chi >= 1 && sweeps >= 1 && niter >= 1, "dmrg: chi, sweeps and niter must be >= 1");
  require(cutoff >= 0 && noise >= 0, "dmrg: cutoff and noise must be >= 0");
  mps::Symmetry sym = mps::parse_symmetry(symmetry);
  mps::DmrgResult r;
  double energy = 0, var = 0;
  std::vector<double> mz;
  {
    py::gil_scoped_release release;
    const mps::Mpo w = mps::chain_mpo(m);
    const mps::MpoCharges charges = mps::mpo_charges(w);
    require(sym != mps::Symmetry::U1 || charges.ok, "dmrg: symmetry='u1' but ", m.describe(),
            " does not conserve Sz (", charges.reason, "); use symmetry='none' or 'auto'");
    if (sym == mps::Symmetry::Auto) sym = charges.ok ? mps::Symmetry::U1 : mps::Symmetry::None;
    const mps::Sweeps s = mps::default_sweeps(chi, sweeps, cutoff, noise, niter);
    mps::DmrgOptions opt;
    if (sym == mps::Symmetry::U1) {
      mps::QMps psi = mps::QMps::neel(n);
      r = mps::dmrg(w, psi, s, opt);
      energy = mps::expectation(w, psi);
      if (variance) var = mps::variance(w, psi);
      mz = mps::local_expectations(psi, "Sz");
      if (!save.empty()) mps::save_mps(psi.to_dense_mps(), save);
    } else {
      mps::Mps psi = m.model == "tfim" ? mps::Mps::uniform_product(n, Eigen::Vector2d(1.0, 1.0)) : mps::Mps::neel(n);
      r = mps::dmrg(w, psi, s, opt);
      energy = mps::expectation(w, psi);
      if (variance) var = mps::variance(w, psi);
      mz = mps::local_expectations(psi, "Sz");
      if (!save.empty()) mps::save_mps(psi, save);
    }
    if (variance) mps::check_variance(r, var, opt);
  }
  py::dict d;
  d["energy"] = energy;
  d["variance"] = variance ? py::object(py::float_(var)) : py::object(py::none());
  d["max_bond_dimension"] = r.max_bond_dimension;
  d["truncation_error"] = r.truncation_error;
  d["sweeps"] = r.sweeps;
  d["converged"] = r.converged;
  d["convergence_reason"] = r.converged ? py::object(py::none()) : py::object(py::str(r.convergence_reason));
  d["symmetry"] = mps::symmetry_name(sym);
  d["seconds"] = r.seconds;
  d["entropies"] = r.entropies;
  d["entropy_mid"] = r.entropies.empty() ? 0.0 : r.entropies[(n - 1) / 2];
  d["magnetization"] = mz;
  std::vector<double> energies;
  for (const auto& rec : r.history) energies.push_back(rec.energy);
  d["sweep_energies"] = energies;
  return d;
}

}  // namespace

void bind_mps(py::module_& m) {
  auto sub = m.def_submodule("mps", "Matrix product states: two-site DMRG baselines for the spin chains");
  sub.def("dmrg", &dmrg_py, py::arg("model") = "heisenberg", py::arg("n") = 20, py::arg("bc") = "open",
          py::arg("J") = 1.0, py::arg("h") = 1.0, py::arg("delta") = 1.0, py::arg("j2") = 0.5, py::arg("chi") = 100,
          py::arg("sweeps") = 12, py::arg("cutoff") = 1e-12, py::arg("noise") = 1e-5, py::arg("niter") = 4,
          py::arg("variance") = true, py::arg("save") = "", py::arg("symmetry") = "auto",
          "Ground state of a chain (tfim | xxz | heisenberg | j1j2) by two-site DMRG; returns a dict with energy, "
          "variance, max_bond_dimension, truncation_error, sweeps, converged, seconds, entropies, entropy_mid, "
          "magnetization (<Sz_i>) and sweep_energies, convergence_reason (None when converged) and symmetry. save: optional "
          "HDF5 path for the final MPS. symmetry: 'auto' (U(1) block-sparse for Sz-conserving chains, dense for the "
          "TFIM), 'u1' or 'none'.");
}

static BindRegistrar reg("mps", bind_mps);

}  // namespace attnphys::python
