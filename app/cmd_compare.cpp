// attnphys compare: energy error against parameter count for DMRG (MPS of bond dimension χ), VMC with an MPS ansatz
// (same SR optimiser and iteration budget as the transformer) and the relative-position transformer ansatz, on open
// chains (the critical TFIM and the Heisenberg chain by default). Writes a CSV and a markdown table; --json prints
// the rows. python/scripts/compare_study.py runs it and draws the log-log plot.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "attnphys/core/logging.hpp"
#include "attnphys/solvers/mps/run.hpp"
#include "attnphys/solvers/vmc/run.hpp"
#include "cli_common.hpp"

namespace attnphys::cli {
enum class CompareMethod { Dmrg, VmcMps, Transformer };
}  // namespace attnphys::cli

namespace attnphys {
template <>
struct EnumNames<cli::CompareMethod> {
  static constexpr EnumName<cli::CompareMethod> values[] = {{cli::CompareMethod::Dmrg, "dmrg"},
                                                            {cli::CompareMethod::VmcMps, "vmc_mps"},
                                                            {cli::CompareMethod::Transformer, "transformer"}};
};
}  // namespace attnphys

namespace attnphys::cli {

namespace {
struct CompareOptions {
  std::vector<std::string> models{"tfim", "heisenberg"};
  std::vector<int> sizes{16, 32};
  std::vector<int> dmrg_chi{2, 4, 8, 16, 32};
  std::vector<int> vmc_chi{2, 4, 8};
  std::vector<std::string> methods{"dmrg", "vmc_mps", "transformer"};
  long iters = 100;
  long samples = 1024;
  long final_samples = 8192;
  int ref_chi = 128;
  long seed = 1;
  std::string out;
};

struct Row {
  std::string model, reference_source;
  CompareMethod method = CompareMethod::Dmrg;
  int n = 0, chi = 0;
  long n_parameters = 0, iterations = 0;
  double energy = 0, energy_error = 0, reference = 0, seconds = 0, step_seconds = 0;
  double relative_error() const { return std::abs(energy - reference) / std::abs(reference); }
};

spin::ChainModel make_model(const std::string& name, int n) {
  spin::ChainModel m;
  m.model = spin::parse_model_kind(name);
  m.n = n;
  m.bc = spin::Boundary::Open;
  m.J = 1.0;
  m.h = 1.0;  // critical TFIM
  m.validate();
  return m;
}

// DMRG ground state with largest bond dimension chi (the dense path, 16 sweeps, cutoff 1e-14, as the study ran
// from the start); the result has the energy and the number of MPS entries.
mps::DmrgRunResult dmrg_ground_state(const spin::ChainModel& m, int chi) {
  mps::DmrgRunConfig cfg;
  cfg.model = m;
  cfg.chi = chi;
  cfg.sweeps = 16;
  cfg.cutoff = 1e-14;
  cfg.noise = 1e-5;
  cfg.niter = 4;
  cfg.symmetry = mps::Symmetry::None;
  cfg.variance = false;
  cfg.magnetization = false;
  return mps::run_dmrg(cfg);
}

std::string fmt(double v, int prec = 10) {
  std::ostringstream s;
  s << std::setprecision(prec) << v;
  return s.str();
}
}  // namespace

void register_compare(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "compare", "energy error vs parameter count: DMRG, VMC with an MPS ansatz and the transformer ansatz");
  auto flags = std::make_shared<CommonFlags>();
  auto o = std::make_shared<CompareOptions>();
  flags->add_to(sub);
  sub->add_option("--models", o->models, "chains (open boundaries): tfim (h = 1) and/or heisenberg")
      ->check(CLI::IsMember({"tfim", "heisenberg"}))
      ->delimiter(',');
  sub->add_option("--n", o->sizes, "chain lengths")->delimiter(',');
  sub->add_option("--dmrg-chi", o->dmrg_chi, "DMRG bond dimensions")->delimiter(',');
  sub->add_option("--vmc-chi", o->vmc_chi, "bond dimensions of the VMC MPS ansatz")->delimiter(',');
  sub->add_option("--methods", o->methods, enum_list<CompareMethod>())
      ->check(CLI::IsMember(enum_names<CompareMethod>()))
      ->delimiter(',');
  sub->add_option("--iters", o->iters, "VMC iterations per run (MPS and transformer alike)");
  sub->add_option("--samples", o->samples, "VMC samples per iteration");
  sub->add_option("--final-samples", o->final_samples, "samples of each final VMC energy estimate");
  sub->add_option("--ref-chi", o->ref_chi, "DMRG bond dimension of the reference energy when n > 22 (else ED)");
  sub->add_option("--seed", o->seed, "sampler seed");
  sub->add_option("--out", o->out, "write <out>.csv and <out>.md");
  sub->callback([flags, o]() {
    for (long v : {o->iters, o->samples, o->final_samples, long(o->ref_chi)})
      require(v >= 1, "compare: --iters, --samples, --final-samples and --ref-chi must be positive");
    const bool root = Comm::world().is_root();
    std::vector<Row> rows;
    auto note = [&](const Row& r) {
      if (root)
        std::cerr << "compare: " << r.model << " n=" << r.n << " " << enum_name(r.method) << " chi=" << r.chi
                  << " params " << r.n_parameters << " E " << fmt(r.energy) << " rel.err " << fmt(r.relative_error(), 3)
                  << " (" << format_seconds(r.seconds) << ")" << std::endl;
    };
    for (const auto& name : o->models)
      for (int n : o->sizes) {
        const auto m = make_model(name, n);
        // Reference: closed form or ED when affordable, else DMRG at a large bond dimension.
        std::string src;
        double ref;
        if (auto r = vmc::reference_energy(m, vmc::ReferencePolicy::Auto, &src)) {
          ref = *r;
        } else {
          ref = dmrg_ground_state(m, o->ref_chi).energy;
          src = msg("DMRG chi=", o->ref_chi);
        }
        if (root) std::cerr << "compare: " << m.describe() << " reference " << fmt(ref, 12) << " (" << src << ")\n";
        auto base = [&](CompareMethod method, int chi) {
          Row r;
          r.model = name;
          r.n = n;
          r.method = method;
          r.chi = chi;
          r.reference = ref;
          r.reference_source = src;
          return r;
        };
        for (const auto& method_name : o->methods) {
          const CompareMethod method = parse_enum<CompareMethod>(method_name, "compare --methods");
          if (method == CompareMethod::Dmrg) {
            for (int chi : o->dmrg_chi) {
              Row r = base(CompareMethod::Dmrg, chi);
              const auto t0 = std::chrono::steady_clock::now();
              const mps::DmrgRunResult d = dmrg_ground_state(m, chi);
              r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
              r.energy = d.energy;
              r.n_parameters = d.n_parameters;
              rows.push_back(r);
              note(r);
            }
            continue;
          }
          const bool is_mps = method == CompareMethod::VmcMps;
          for (int chi : is_mps ? o->vmc_chi : std::vector<int>{0}) {
            OptionSet set;
            vmc::VmcRunConfig cfg;
            cfg.declare(set);
            flags->apply(set);  // the file and --set, then the study's own settings win
            cfg.model = m;
            cfg.ansatz = is_mps ? vmc::AnsatzKind::Mps : vmc::AnsatzKind::Transformer;
            cfg.mps.chi = chi > 0 ? chi : 1;
            cfg.vmc.n_iter = o->iters;
            cfg.vmc.sampler.n_samples = o->samples;
            cfg.vmc.sampler.seed = o->seed;
            cfg.final_samples = o->final_samples;
            cfg.reference = vmc::ReferencePolicy::None;
            cfg.apply_defaults(set);
            const auto res = vmc::run_vmc(cfg);
            Row r = base(method, chi);
            r.energy = res.energy;
            r.energy_error = res.energy_error;
            r.n_parameters = res.n_parameters;
            r.iterations = res.iterations;
            r.seconds = res.seconds;
            r.step_seconds = res.step_seconds;
            rows.push_back(r);
            note(r);
          }
        }
      }
    if (!root) return;
    if (!o->out.empty()) {
      // Each table goes to "<file>.tmp" first and is renamed into place, so an earlier study's files are never left
      // half-overwritten.
      std::ofstream csv(o->out + ".csv.tmp");
      require(bool(csv), "compare: cannot write ", o->out, ".csv.tmp");
      csv << "model,n,method,chi,n_parameters,energy,energy_error,reference,reference_source,relative_error,"
             "iterations,seconds,step_seconds\n";
      for (const auto& r : rows)
        csv << r.model << ',' << r.n << ',' << enum_name(r.method) << ',' << r.chi << ',' << r.n_parameters << ','
            << fmt(r.energy, 14) << ',' << fmt(r.energy_error, 4) << ',' << fmt(r.reference, 14) << ','
            << r.reference_source << ',' << fmt(r.relative_error(), 4) << ',' << r.iterations << ','
            << fmt(r.seconds, 4) << ',' << fmt(r.step_seconds, 4) << '\n';
      csv.close();
      require(bool(csv), "compare: writing ", o->out, ".csv.tmp failed");
      std::filesystem::rename(o->out + ".csv.tmp", o->out + ".csv");
      std::ofstream md(o->out + ".md.tmp");
      require(bool(md), "compare: cannot write ", o->out, ".md.tmp");
      md << "| model | N | method | χ | parameters | energy | stat. error | reference | \\|ΔE\\|/\\|E\\| | "
            "VMC iterations | time (s) |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
      for (const auto& r : rows)
        md << "| " << r.model << " | " << r.n << " | " << enum_name(r.method) << " | "
           << (r.chi > 0 ? std::to_string(r.chi) : "-") << " | " << r.n_parameters << " | " << fmt(r.energy, 10)
           << " | " << (r.method == CompareMethod::Dmrg ? std::string("-") : fmt(r.energy_error, 2)) << " | "
           << fmt(r.reference, 10) << " (" << r.reference_source << ") | " << fmt(r.relative_error(), 3) << " | "
           << (r.method == CompareMethod::Dmrg ? std::string("-") : std::to_string(r.iterations)) << " | "
           << fmt(r.seconds, 3) << " |\n";
      md.close();
      require(bool(md), "compare: writing ", o->out, ".md.tmp failed");
      std::filesystem::rename(o->out + ".md.tmp", o->out + ".md");
    }
    if (flags->json) {
      Json arr = Json::array();
      for (const auto& r : rows) {
        Json j = Json::object();
        j.set("model", r.model).set("n", r.n).set("method", enum_name(r.method)).set("chi", r.chi);
        j.set("n_parameters", r.n_parameters).set("energy", r.energy).set("energy_error", r.energy_error);
        j.set("reference", r.reference).set("reference_source", r.reference_source);
        j.set("relative_error", r.relative_error()).set("iterations", r.iterations).set("seconds", r.seconds);
        arr.push_back(j);
      }
      Json out = Json::object();
      out.set("rows", arr);
      emit_json(out);
    } else {
      std::cout << std::left << std::setw(11) << "model" << std::setw(5) << "N" << std::setw(12) << "method"
                << std::setw(5) << "chi" << std::setw(10) << "params" << std::setw(18) << "energy"
                << "rel.error\n";
      for (const auto& r : rows)
        std::cout << std::setw(11) << r.model << std::setw(5) << r.n << std::setw(12) << enum_name(r.method)
                  << std::setw(5) << r.chi << std::setw(10) << r.n_parameters << std::setw(18) << fmt(r.energy, 12)
                  << fmt(r.relative_error(), 3) << "\n";
    }
  });
}

static Registrar registrar("compare", register_compare);

}  // namespace attnphys::cli
