// Bindings for MPS/DMRG: the one-line job mps.dmrg(model=..., n=..., chi=...) (mps::run_dmrg).
#include "attnphys/solvers/mps/run.hpp"
#include "bindings.hpp"

namespace attnphys::python {

namespace {

// mps.dmrg(model=..., n=..., chi=...): the job of `attnphys dmrg` (mps::run_dmrg), its result as the JSON text of
// DmrgRunResult::to_json (attnphys/mps.py makes the dict from it).
std::string dmrg_job(const std::string& model, int n, const std::string& bc, double J, double h, double delta,
                     double j2, int chi, int sweeps, double cutoff, double noise, int niter, bool variance,
                     const std::string& save, const std::string& symmetry) {
  mps::DmrgRunConfig cfg;
  cfg.model.model = model, cfg.model.n = n, cfg.model.bc = bc, cfg.model.J = J, cfg.model.h = h;
  cfg.model.delta = delta, cfg.model.j2 = j2;
  cfg.chi = chi, cfg.sweeps = sweeps, cfg.cutoff = cutoff, cfg.noise = noise, cfg.niter = niter;
  cfg.variance = variance;
  cfg.save = save;
  cfg.symmetry = mps::parse_symmetry(symmetry);
  cfg.validate();
  py::gil_scoped_release release;
  return mps::run_dmrg(cfg).to_json().dump();
}

}  // namespace

void bind_mps(py::module_& m) {
  auto sub = m.def_submodule("mps", "Matrix product states: two-site DMRG baselines for the spin chains");
  sub.def("_dmrg_job", &dmrg_job, py::arg("model") = "heisenberg", py::arg("n") = 20, py::arg("bc") = "open",
          py::arg("J") = 1.0, py::arg("h") = 1.0, py::arg("delta") = 1.0, py::arg("j2") = 0.5, py::arg("chi") = 100,
          py::arg("sweeps") = 12, py::arg("cutoff") = 1e-12, py::arg("noise") = 1e-5, py::arg("niter") = 4,
          py::arg("variance") = true, py::arg("save") = "", py::arg("symmetry") = "auto",
          "Ground state of a chain (tfim | xxz | heisenberg | j1j2) by two-site DMRG; returns the JSON text of a dict with energy, "
          "variance, max_bond_dimension, truncation_error, sweeps, converged, seconds, entropies, entropy_mid, "
          "magnetization (<Sz_i>) and sweep_energies, convergence_reason (None when converged) and symmetry. save: optional "
          "HDF5 path for the final MPS. symmetry: 'auto' (U(1) block-sparse for Sz-conserving chains, dense for the "
          "TFIM), 'u1' or 'none'.");
}

static BindRegistrar reg("mps", bind_mps);

}  // namespace attnphys::python
