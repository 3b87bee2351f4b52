#pragma once
// One VMC job as the CLI (`attnphys vmc`) and Python (attnphys.spin.run_vmc) run it: a chain model, an ansatz
// chosen by name, the sampler and optimiser settings, defaults that depend on the model, a final energy estimate
// with many samples, and the exact reference when one is available.
//
//   OptionSet set; VmcRunConfig cfg; cfg.declare(set); set.load_file(path); cfg.apply_defaults(set);
//   VmcRunResult r = run_vmc(cfg);
//
// Model-dependent defaults (applied unless the key was set explicitly):
//   sampler.fixed_sz / two_sz  the 2Sz = 0 sector for Sz-conserving models with even N (exchange moves);
//   sampler.periodic           the chain's boundary condition (always);
//   ansatz.marshall_sign=auto  the Marshall sign for antiferromagnetic Heisenberg, XXZ (J > 0) and J1-J2 chains
//                              (transformer and MPS; the autoregressive model learns its phase, the RBM its sign);
//   mps.periodic               the chain's boundary condition;
//   autoregressive.fixed_sz    the sampler's sector (exact samples then stay in it);
//   vmc.diag_shift_steps       two thirds of vmc.n_iter (the SR shift reaches its final value there).
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "attnphys/physics/spin/chain_model.hpp"
#include "attnphys/solvers/vmc/autoregressive.hpp"
#include "attnphys/solvers/vmc/driver.hpp"
#include "attnphys/solvers/vmc/mps_ansatz.hpp"
#include "attnphys/solvers/vmc/rbm.hpp"
#include "attnphys/solvers/vmc/transformer.hpp"

namespace attnphys::vmc {

enum class AnsatzKind { Transformer, Rbm, Autoregressive, Mps };
// auto: on for antiferromagnetic Sz-conserving chains (see above).
enum class MarshallSign { Auto, On, Off };
// auto: the closed form, else ED for n <= 22; ed: ED; none: no reference.
enum class ReferencePolicy { Auto, Ed, None };

}  // namespace attnphys::vmc

namespace attnphys {
template <>
struct EnumNames<vmc::AnsatzKind> {
  static constexpr EnumName<vmc::AnsatzKind> values[] = {{vmc::AnsatzKind::Transformer, "transformer"},
                                                         {vmc::AnsatzKind::Rbm, "rbm"},
                                                         {vmc::AnsatzKind::Autoregressive, "autoregressive"},
                                                         {vmc::AnsatzKind::Mps, "mps"}};
};
template <>
struct EnumNames<vmc::MarshallSign> {
  static constexpr EnumName<vmc::MarshallSign> values[] = {
      {vmc::MarshallSign::Auto, "auto"}, {vmc::MarshallSign::On, "on"}, {vmc::MarshallSign::Off, "off"}};
};
template <>
struct EnumNames<vmc::ReferencePolicy> {
  static constexpr EnumName<vmc::ReferencePolicy> values[] = {
      {vmc::ReferencePolicy::Auto, "auto"}, {vmc::ReferencePolicy::Ed, "ed"}, {vmc::ReferencePolicy::None, "none"}};
};
}  // namespace attnphys

namespace attnphys::vmc {

struct VmcRunConfig {
  spin::ChainModel model;
  AnsatzKind ansatz = AnsatzKind::Transformer;
  MarshallSign marshall_sign = MarshallSign::Auto;
  TransformerAnsatzOptions transformer;
  AutoregressiveOptions autoregressive;
  RbmOptions rbm;
  long rbm_seed = 1;
  MpsAnsatzOptions mps;
  VmcOptions vmc;
  long final_samples = 16384;          // samples of the final energy estimate (0: skip it)
  ReferencePolicy reference = ReferencePolicy::Auto;
  std::string resume;                  // checkpoint to continue from (empty: start fresh)

  VmcRunConfig();
  void declare(OptionSet& set);
  // Model-dependent defaults for every key the user did not set (see above); validates.
  void apply_defaults(const OptionSet& set);
  bool uses_marshall_sign() const;
};

struct VmcRunResult {
  double energy = 0, energy_error = 0, variance = 0, v_score = 0, tau = 1, r_hat = 1, acceptance = 0;
  long n_parameters = 0, iterations = 0, n_samples = 0;
  // Whether vmc.converge_window's criterion stopped the run (vmc/monitor.hpp); false when it is off or n_iter came
  // first.
  bool converged = false;
  long guard_rejections = 0;     // steps the step guard rejected (vmc.guard_sigmas)
  long guard_false_alarms = 0;   // ... of which the re-estimate rebased (not counted toward the guard's limit)
  double seconds = 0;
  double step_seconds = 0;       // median wall time of one VMC iteration (0 without iterations)
  double estimate_seconds = 0;   // wall time of the final estimate (sampling and local energies)
  std::optional<double> reference;
  std::string reference_source;  // "closed form", "ED" or ""
  std::vector<VmcStep> history;
  // What the run noticed and said on stderr (rank 0), e.g. an energy that stays >= 0 on a chain whose ground state
  // is negative (the ansatz has not found the sign structure).
  std::vector<std::string> warnings;
  double relative_error() const;  // NaN without a reference
};

// Iterations in a row with E >= 0 after which run_vmc warns that the ansatz misses the sign structure.
constexpr long kSignWarningIterations = 10;

// The sampler's model-dependent defaults, the same for `attnphys vmc`, run_vmc and Python's spin.Vmc:
// sampler.periodic = the chain's boundary condition; sampler.fixed_sz (unless `set` gave it) = whether the model
// conserves Sz and N is even (the sector 2Sz = two_sz, 0 unless given).
void apply_model_defaults(const spin::ChainModel& model, const OptionSet& set, VmcOptions& vmc);

// Builds the ansatz the config names (double precision).
std::unique_ptr<LogPsiModel<double>> make_ansatz(const VmcRunConfig& cfg);
// Exact ground-state energy for the reference policy (nullopt: none wanted or none affordable).
std::optional<double> reference_energy(const spin::ChainModel& m, ReferencePolicy policy, std::string* source);

// Runs cfg.vmc.n_iter iterations (continuing from cfg.resume when set), then the final estimate. on_step sees every
// iteration and may stop the run by returning false.
VmcRunResult run_vmc(const VmcRunConfig& cfg, const std::function<bool(const VmcStep&)>& on_step = {});

}  // namespace attnphys::vmc
