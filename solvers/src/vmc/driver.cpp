#include "attnphys/solvers/vmc/driver.hpp"
#include "attnphys/core/parallel.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/solvers/vmc/local_energy.hpp"
#include "attnphys/solvers/vmc/monitor.hpp"
#include "attnphys/solvers/vmc/sr.hpp"

namespace attnphys::vmc {

void VmcOptions::declare(OptionSet& s, const std::string& p) {
  sampler.declare(s);
  s.add(p + ".optimizer", &optimizer, "parameter update");
  s.add(p + ".lr", &lr, "SR step or Adam learning rate", Range::positive());
  s.add(p + ".diag_shift", &diag_shift, "initial SR diagonal shift", Range::non_negative());
  s.add(p + ".diag_shift_final", &diag_shift_final, "final SR diagonal shift", Range::non_negative());
  s.add(p + ".diag_shift_steps", &diag_shift_steps, "iterations of the diagonal-shift decay", Range::at_least(1));
  s.add(p + ".rcond", &rcond, "pseudo-inverse cut-off", Range::positive());
  s.add(p + ".sr_precision", &sr_precision,
        "SR solve: double, or mixed (a single-precision Gram matrix and Cholesky precondition conjugate gradients "
        "on the double system, to a 1e-10 relative residual; the double solve when that fails)");
  s.add(p + ".chunk_size", &chunk_size, "samples per model evaluation", Range::at_least(1));
  s.add(p + ".merge_duplicates", &merge_duplicates,
        "SR sees each distinct sample once, weighted by how often it was drawn (the same update, a smaller system)");
  s.add(p + ".n_iter", &n_iter, "iterations", Range::non_negative());
  s.add(p + ".log_path", &log_path, "CSV log file (empty: none)");
  s.add(p + ".checkpoint_path", &checkpoint_path, "checkpoint file (empty: none)");
  s.add(p + ".checkpoint_every", &checkpoint_every, "iterations between checkpoints (0: only at the end)",
        Range::non_negative());
  s.add(p + ".plateau_window", &plateau_window,
        "warn when the energy has not improved for this many iterations (0: never)", Range::non_negative());
  s.add(p + ".converge_window", &converge_window,
        "stop when converged (0: never): over the last two windows of this many iterations the mean energy fell by "
        "no more than converge_sigmas standard errors and the median variance by less than converge_variance_drop "
        "(checked from the end of the diagonal-shift decay on; vmc.n_iter is then the maximum)",
        Range::non_negative());
  s.add(p + ".converge_sigmas", &converge_sigmas, "energy plateau: improvement within this many standard errors",
        Range::non_negative());
  s.add(p + ".converge_variance_drop", &converge_variance_drop,
        "variance plateau: relative fall of the median variance below this over the last window", Range::closed(0, 1));
  s.add(p + ".converge_two_sided", &converge_two_sided,
        "two-sided plateau: a rise of the mean energy by more than converge_sigmas standard errors, or of the median "
        "variance by more than the factor 1 / (1 - converge_variance_drop), is no plateau either (false: only a fall "
        "counts, and a run can stop during an excursion)");
  s.add(p + ".guard_sigmas", &guard_sigmas,
        "step guard (0: off): an energy that is not finite, lies more than this many standard errors above the "
        "run's lowest, or has 100 times that energy's variance rejects the step, restores the parameters of that "
        "lowest energy and multiplies the diagonal shift by 10 for the rest of the run (a failed re-estimate right "
        "after a rejection becomes the lowest instead: that rejection was a false alarm and does not count toward the "
        "six after which the guard gives up; the raised shift stays)",
        Range::non_negative());
  s.add(p + ".guard_start", &guard_start, "first iteration the step guard may reject", Range::non_negative());
}

void VmcOptions::validate() const {
  sampler.validate();
  require(lr > 0 && diag_shift >= 0 && diag_shift_final >= 0 && diag_shift_steps >= 1 && chunk_size >= 1,
          "VMC options: lr > 0, diagonal shifts >= 0, diag_shift_steps >= 1 and chunk_size >= 1 are required");
}

double scheduled_diag_shift(const VmcOptions& o, long it) {
  if (o.diag_shift <= 0 || o.diag_shift_final <= 0) return it >= o.diag_shift_steps ? o.diag_shift_final : o.diag_shift;
  const double f = std::min(1.0, double(it) / double(o.diag_shift_steps));
  return o.diag_shift * std::pow(o.diag_shift_final / o.diag_shift, f);
}

GuardVerdict guard_verdict(double sigmas, const GuardEstimate& now, const GuardEstimate& best, bool after_rejection) {
  if (!std::isfinite(now.energy) || !std::isfinite(now.variance)) return GuardVerdict::Reject;
  const bool high = !(now.energy <= best.energy + sigmas * std::sqrt(now.error * now.error + best.error * best.error));
  const bool wide = !(now.variance <= kGuardVarianceFactor * best.variance + 1e-12 * (1 + best.energy * best.energy));
  if (!high && !wide) return GuardVerdict::Accept;
  return after_rejection ? GuardVerdict::Rebase : GuardVerdict::Reject;
}

GuardVerdict StepGuardState::observe(double sigmas, const GuardEstimate& now, bool active, bool& new_lowest) {
  new_lowest = false;
  GuardVerdict v = GuardVerdict::Accept;
  if (have_best && active) v = guard_verdict(sigmas, now, best, last_rejected);
  if (v == GuardVerdict::Reject) {
    last_rejected = true;
    ++rejections;
    return v;
  }
  if (v == GuardVerdict::Rebase) {
    best = now;  // the parameters are the lowest's already (restored, no step since)
    ++false_alarms;
  }
  last_rejected = false;
  new_lowest = !have_best || now.energy < best.energy;
  if (new_lowest) {
    best = now;
    have_best = true;
  }
  return v;
}

namespace {
// Every rank's rows [rows_r, cols] stacked rank-major, on every rank (a sum of zero-padded buffers, so that only
// Comm::allreduce_sum is needed). All ranks must pass the same cols.
template <class T>
std::vector<T> allgather_rows(const Comm& c, const T* local, long rows, long cols, long* total_rows = nullptr) {
  std::vector<double> counts(c.size(), 0.0);
  counts[c.rank()] = double(rows);
  c.allreduce_sum(counts.data(), long(counts.size()));
  long offset = 0, total = 0;
  for (int r = 0; r < c.size(); ++r) {
    if (r < c.rank()) offset += long(counts[r]);
    total += long(counts[r]);
  }
  std::vector<T> out(std::size_t(total * cols), T(0));
  std::copy(local, local + rows * cols, out.begin() + offset * cols);
  c.allreduce_sum(out.data(), long(out.size()));
  if (total_rows) *total_rows = total;
  return out;
}

template <class T>
View2<T> gather_view(const Comm& c, const View2<T>& local) {
  auto h = to_host(local);
  long total = 0;
  const auto all = allgather_rows(c, h.data(), long(h.extent(0)), long(h.extent(1)), &total);
  View2<T> out("attnphys::vmc_gathered", total, h.extent(1));
  Kokkos::deep_copy(out, HostView2<const T>(all.data(), total, h.extent(1)));
  return out;
}

template <class T>
View1<T> gather_view(const Comm& c, const View1<T>& local) {
  auto h = to_host(local);
  long total = 0;
  const auto all = allgather_rows(c, h.data(), long(h.extent(0)), 1, &total);
  View1<T> out("attnphys::vmc_gathered", total);
  Kokkos::deep_copy(out, Kokkos::View<const T*, Kokkos::LayoutRight, Kokkos::HostSpace>(all.data(), total));
  return out;
}

long share(long total, int ranks) { return (total + ranks - 1) / ranks; }

OptimizerOptions adam_options(double lr) {
  OptimizerOptions a;
  a.kind = OptimizerKind::Adam;
  a.lr = lr;
  return a;
}
}  // namespace

template <class T>
VmcDriver<T>::VmcDriver(LogPsiModel<T>& model, const spin::SpinHamiltonian& H, const VmcOptions& o,
                        const Comm& comm)
    : model_(model), H_(H), opt_(o), comm_(comm), local_(o.sampler), adam_(adam_options(o.lr)) {
  o.validate();
  if (comm_.size() > 1) {
    local_.n_chains = share(o.sampler.n_chains, comm_.size());
    local_.n_samples = share(o.sampler.n_samples, comm_.size());
    local_.seed = o.sampler.seed + 1000003L * comm_.rank();
  }
  require(model.n_sites() == H.n_sites(), "the model has ", model.n_sites(), " sites, the Hamiltonian ",
          H.n_sites());
  auto* direct = dynamic_cast<DirectSampling<T>*>(&model);
  require(direct || o.sampler.move != SamplerMove::Exact,
          "sampler.move = exact needs a model that samples |psi|^2 directly (autoregressive); the model '",
          model.name(), "' does not: use move = auto, local or exchange");
  if (direct && (o.sampler.move == SamplerMove::Auto || o.sampler.move == SamplerMove::Exact)) {
    direct_ = direct;
    int two_sz = 0;
    const bool sector = direct->fixed_sector(two_sz);
    require(!o.sampler.fixed_sz || (sector && two_sz == o.sampler.two_sz),
            "sampler.fixed_sz asks for the sector 2Sz = ", o.sampler.two_sz, ", but direct samples of the model '",
            model.name(), "' come from ",
            sector ? "the sector 2Sz = " + std::to_string(two_sz) : std::string("every sector"),
            ": confine the model to that sector (autoregressive.fixed_sz, two_sz) or set sampler.fixed_sz = false");
  } else {
    sampler_ = std::make_unique<MetropolisSampler<T>>(model, local_, o.sampler.periodic);
  }
  delta_ = View1<T>("attnphys::vmc_delta", model.n_parameters());
  holomorphic_ = holomorphic_pairs(model.complex_blocks(), model.n_parameters());
}

template <class T>
MetropolisSampler<T>& VmcDriver<T>::sampler() {
  require(sampler_ != nullptr, "the VMC driver samples the model '", model_.name(),
          "' directly: it has no Markov-chain sampler");
  return *sampler_;
}

template <class T>
void VmcDriver<T>::sample_direct(long M, std::uint64_t seed, std::uint64_t counter) {
  ScopedRegion region("attnphys::vmc_sample_direct");
  const long N = model_.n_sites();
  if (samples_.extent(0) != std::size_t(M) || samples_.extent(1) != std::size_t(N)) {
    samples_ = View2<T>("attnphys::vmc_samples", M, N);
    lp_re_ = View1<T>("attnphys::vmc_samples_re", M);
    lp_im_ = View1<T>("attnphys::vmc_samples_im", M);
  }
  direct_->sample_direct(samples_, seed, counter);
  for (long m0 = 0; m0 < M; m0 += opt_.chunk_size) {
    const auto r = Kokkos::make_pair(m0, std::min(M, m0 + opt_.chunk_size));
    model_.log_psi(Kokkos::subview(samples_, r, Kokkos::ALL()), Kokkos::subview(lp_re_, r),
                   Kokkos::subview(lp_im_, r));
  }
}

template <class T>
ChainStats VmcDriver<T>::energy_stats(long n_steps, long n_chains) {
  const long M = samples_.extent(0);
  if (e_re_.extent(0) != std::size_t(M)) {
    e_re_ = View1<T>("attnphys::vmc_e_re", M);
    e_im_ = View1<T>("attnphys::vmc_e_im", M);
  }
  local_energy<T>(model_, H_, samples_, lp_re_, lp_im_, e_re_, e_im_, opt_.chunk_size);
  auto h = to_host(e_re_);
  std::vector<double> x(M);
  for (long m = 0; m < M; ++m) x[m] = double(h(m));
  if (comm_.size() > 1) {
    // Every rank holds n_steps steps of n_chains chains (step-major); statistics over all R·n_chains chains.
    const int R = comm_.size();
    const auto all = allgather_rows(comm_, x.data(), M, 1);
    require(long(all.size()) == R * M, "VMC: ranks hold different numbers of samples (", all.size(), " vs ", R * M,
            ")");
    std::vector<double> g(all.size());
    for (int r = 0; r < R; ++r)
      for (long t = 0; t < n_steps; ++t)
        for (long c = 0; c < n_chains; ++c) g[(t * R + r) * n_chains + c] = all[(r * n_steps + t) * n_chains + c];
    x.swap(g);
    n_chains *= R;
  }
  ChainStats st = chain_statistics(x, n_steps, n_chains);
  require(std::isfinite(st.mean) || (opt_.guard_sigmas > 0 && guard_.have_best && iter_ >= opt_.guard_start),
          "VMC energy is ", st.mean, " at iteration ", iter_,
          ": the wavefunction diverged. Lower vmc.lr, raise vmc.diag_shift, or restart from the last checkpoint");
  return st;
}

template <class T>
ChainStats VmcDriver<T>::estimate_energy(long n_samples) {
  ScopedRegion region("attnphys::vmc_estimate");
  const long R = comm_.size(), rank = comm_.rank();
  if (direct_) {  // a fresh stream for extra samples, the run's own stream otherwise (as the chains continue)
    const long M = share(n_samples > 0 ? n_samples : opt_.sampler.n_samples, R);
    if (n_samples > 0) sample_direct(M, std::uint64_t(local_.seed + 7919 * (iter_ + 1)), 0);
    else sample_direct(M, std::uint64_t(local_.seed), direct_counter_++);
    estimate_acceptance_ = 1.0;
    return energy_stats(1, M);
  }
  auto mean_acceptance = [&](double a) { return R > 1 ? comm_.allreduce_sum(a) / R : a; };
  if (n_samples > 0) {
    SamplerOptions so = local_;
    so.n_samples = share(n_samples, R);
    so.seed = opt_.sampler.seed + 7919 * (iter_ + 1) + 1000003L * rank;
    MetropolisSampler<T> s(model_, so, so.periodic);
    // Continue from the run's equilibrated chains (a fresh start would need a long burn-in), with new numbers.
    if (sampler_) s.restore(sampler_->states(), 0);
    s.sample(samples_, lp_re_, lp_im_);
    estimate_acceptance_ = mean_acceptance(s.acceptance());
    return energy_stats(s.n_steps_per_sample(), s.n_chains());
  }
  sampler_->reset_acceptance();
  sampler_->sample(samples_, lp_re_, lp_im_);
  estimate_acceptance_ = mean_acceptance(sampler_->acceptance());
  return energy_stats(sampler_->n_steps_per_sample(), sampler_->n_chains());
}

template <class T>
double VmcDriver<T>::parameter_divergence() const {
  if (comm_.size() == 1) return 0.0;
  const auto mine = model_.parameters().get_host();
  std::vector<double> root(mine.begin(), mine.end());
  comm_.broadcast(root.data(), long(root.size()), 0);
  double worst = 0;
  for (std::size_t k = 0; k < mine.size(); ++k) worst = std::max(worst, std::abs(double(mine[k]) - root[k]));
  comm_.allreduce_max(&worst, 1);
  return worst;
}

template <class T>
VmcStep VmcDriver<T>::step() {
  ScopedRegion region("attnphys::vmc_step");
  const auto t0 = std::chrono::steady_clock::now();
  VmcStep out;
  out.iteration = iter_;
  ChainStats st;
  auto lap = [t = t0]() mutable {
    const auto now = std::chrono::steady_clock::now();
    const double dt = std::chrono::duration<double>(now - t).count();
    t = now;
    return dt;
  };
  if (direct_) {  // independent exact draws: one "step" of M chains, so tau = 1
    const long M = share(opt_.sampler.n_samples, comm_.size());
    sample_direct(M, std::uint64_t(local_.seed), direct_counter_++);
    out.acceptance = 1.0;
    out.sample_seconds = lap();
    st = energy_stats(1, M);
  } else {
    sampler_->reset_acceptance();
    sampler_->sample(samples_, lp_re_, lp_im_);
    out.acceptance = comm_.size() > 1 ? comm_.allreduce_sum(sampler_->acceptance()) / comm_.size()
                                      : sampler_->acceptance();
    out.sample_seconds = lap();
    st = energy_stats(sampler_->n_steps_per_sample(), sampler_->n_chains());
    out.sweep = sampler_->sweep_size();
    // tau is the same on every rank (the statistics are global), so every rank takes the same sweep.
    if (opt_.sampler.adapt_sweep) sampler_->set_sweep_size(sampler_->adapted_sweep(st.tau));
  }
  {
    auto hi = to_host(e_im_);
    double s = 0;
    for (std::size_t m = 0; m < hi.extent(0); ++m) s += double(hi(m));
    out.energy_imag = comm_.allreduce_sum(s) / comm_.allreduce_sum(double(hi.extent(0)));
  }
  out.energy = st.mean;
  out.error = st.error;
  out.variance = st.variance;
  out.tau = st.tau;
  out.r_hat = st.r_hat;
  out.v_score = v_score(model_.n_sites(), st.mean, st.variance);

  out.energy_seconds = lap();
  auto& buf = model_.parameters();
  if (opt_.guard_sigmas > 0) {
    // The step guard: judge this iteration's estimate (of the parameters the last step made) against the lowest so
    // far (guard_verdict).
    const GuardEstimate now{st.mean, st.error, st.variance};
    const GuardEstimate best = guard_.best;  // before this iteration (for the messages)
    bool new_lowest = false;
    const GuardVerdict verdict = guard_.observe(opt_.guard_sigmas, now, iter_ >= opt_.guard_start, new_lowest);
    if (verdict == GuardVerdict::Reject) {
      require(guard_.counted_rejections() <= kGuardMaxRejections, "VMC energy ", st.mean, " +- ", st.error,
              " at iteration ", iter_, " is above the run's lowest (", best.energy, " +- ", best.error, ") after ",
              kGuardMaxRejections,
              " rejected steps (vmc.guard_sigmas): the wavefunction keeps diverging. Lower "
              "vmc.lr or raise vmc.diag_shift_final");
      shift_mult_ *= 10;
      std::string w = msg("VMC step rejected at iteration ", iter_, ": energy ", st.mean, " +- ", st.error,
                          " (variance ", st.variance, ") against the run's lowest ", best.energy, " +- ",
                          best.error, " (variance ", best.variance, "; vmc.guard_sigmas = ", opt_.guard_sigmas,
                          "); the parameters of that energy are restored and the diagonal shift is ", shift_mult_,
                          "x its schedule from here on");
      if (comm_.is_root()) std::fprintf(stderr, "attnphys: warning: %s\n", w.c_str());
      warnings_.push_back(std::move(w));
      Kokkos::deep_copy(buf.params(), best_params_);
      if (sampler_) sampler_->refresh();
      guard_event_ = iter_;
      out.rejected = true;
      out.diag_shift = scheduled_diag_shift(opt_, iter_) * shift_mult_;
      out.update_seconds = lap();
      ++iter_;
      trace_e_.push_back(std::numeric_limits<double>::quiet_NaN());  // left out of the convergence criterion
      trace_v_.push_back(std::numeric_limits<double>::quiet_NaN());
      out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return out;
    }
    if (verdict == GuardVerdict::Rebase) {
      std::string w = msg("VMC step guard at iteration ", iter_, ": the parameters of the lowest energy ", best.energy,
                          " +- ", best.error, ", restored at the last iteration, now give ", st.mean, " +- ", st.error,
                          " (variance ", st.variance,
                          "): the chains found configurations that estimate never saw, so this estimate becomes the "
                          "lowest and the run goes on from it; the rejection before it was a false alarm: it does not "
                          "count toward the guard's limit of ",
                          kGuardMaxRejections, " (the diagonal shift stays at ", shift_mult_, "x its schedule)");
      if (comm_.is_root()) std::fprintf(stderr, "attnphys: warning: %s\n", w.c_str());
      warnings_.push_back(std::move(w));
      guard_event_ = iter_;
    }
    if (new_lowest) {
      if (best_params_.extent(0) != buf.params().extent(0))
        best_params_ = View1<T>("attnphys::vmc_best_params", buf.params().extent(0));
      Kokkos::deep_copy(best_params_, buf.params());
    }
  }
  const long M = samples_.extent(0), P = model_.n_parameters();
  if (o_re_.extent(0) != std::size_t(M) || o_re_.extent(1) != std::size_t(P)) {
    o_re_ = View2<T>("attnphys::vmc_o_re", M, P);
    o_im_ = View2<T>("attnphys::vmc_o_im", M, P);
  }
  for (long m0 = 0; m0 < M; m0 += opt_.chunk_size) {
    const auto r = Kokkos::make_pair(m0, std::min(M, m0 + opt_.chunk_size));
    model_.log_psi_gradients(Kokkos::subview(samples_, r, Kokkos::ALL()), Kokkos::subview(o_re_, r, Kokkos::ALL()),
                             Kokkos::subview(o_im_, r, Kokkos::ALL()));
  }
  out.gradient_seconds = lap();
  out.diag_shift = scheduled_diag_shift(opt_, iter_) * shift_mult_;
  // Under MPI every rank solves the same SR system from every rank's samples (so the parameters stay identical).
  View2<T> ore = o_re_, oim = o_im_;
  View1<T> ere = e_re_, eim = e_im_;
  if (comm_.size() > 1) {
    ScopedRegion gather("attnphys::vmc_gather");
    ore = g_o_re_ = gather_view(comm_, o_re_);
    oim = g_o_im_ = gather_view(comm_, o_im_);
    ere = g_e_re_ = gather_view(comm_, e_re_);
    eim = g_e_im_ = gather_view(comm_, e_im_);
  }
  const SrForm form = opt_.optimizer == VmcOptimizer::Pxp     ? SrForm::Pxp
                      : opt_.optimizer == VmcOptimizer::Minsr ? SrForm::Minsr
                                                              : SrForm::Auto;
  const bool pxp_form = form == SrForm::Pxp || (form == SrForm::Auto && P <= 2 * long(ore.extent(0)));
  const bool try_holomorphic = opt_.optimizer != VmcOptimizer::Adam && pxp_form && !holomorphic_.empty();
  // Identical samples (a peaked |ψ|², chains that stay put) enter SR once each with their count: the same
  // XᵀX and Xᵀε, so the same update, and minSR's 2M×2M kernel shrinks to the distinct rows. The merge runs on
  // the gathered rows, so it does not depend on the number of ranks.
  View1<T> counts;
  if (opt_.merge_duplicates && !try_holomorphic) {
    ScopedRegion merge("attnphys::vmc_merge_duplicates");
    const View2<T> all = comm_.size() > 1 ? gather_view(comm_, samples_) : samples_;
    merge_duplicate_samples<T>(all, u_first_, u_times_);
    const long U = long(u_first_.size()), Mall = long(all.extent(0));
    if (U < Mall) {
      // Storage for all Mall rows, allocated once; the distinct rows are the first U of it.
      if (long(u_o_re_.extent(0)) < Mall || long(u_o_re_.extent(1)) != P) {
        u_o_re_ = View2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("attnphys::vmc_u_o_re")), Mall, P);
        u_o_im_ = View2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("attnphys::vmc_u_o_im")), Mall, P);
        u_e_re_ = View1<T>("attnphys::vmc_u_e_re", Mall);
        u_e_im_ = View1<T>("attnphys::vmc_u_e_im", Mall);
        u_count_ = View1<T>("attnphys::vmc_u_count", Mall);
      }
      const View2<T> dre(u_o_re_.data(), U, P), dim(u_o_im_.data(), U, P);
      const View1<T> uer(u_e_re_.data(), U), uei(u_e_im_.data(), U), ucount(u_count_.data(), U);
      View1<long> first("attnphys::vmc_u_first", U);
      {
        auto hf = Kokkos::create_mirror_view(first);
        auto hc = Kokkos::create_mirror_view(ucount);
        for (long u = 0; u < U; ++u) {
          hf(u) = u_first_[u];
          hc(u) = T(u_times_[u]);
        }
        Kokkos::deep_copy(first, hf);
        Kokkos::deep_copy(ucount, hc);
      }
      const auto sre = ore, sim = oim;
      const auto eer = ere, eei = eim;
      attnphys::parallel_for(
          "attnphys::vmc_u_rows", U, KOKKOS_LAMBDA(const long u) {
            const long m = first(u);
            for (long k = 0; k < P; ++k) {
              dre(u, k) = sre(m, k);
              dim(u, k) = sim(m, k);
            }
            uer(u) = eer(m);
            uei(u) = eei(m);
          }, 16);
      ore = dre, oim = dim, ere = uer, eim = uei;
      counts = ucount;
    }
  }
  if (opt_.optimizer == VmcOptimizer::Adam) {
    const auto info =
        sr_direction<T>(ore, oim, ere, eim, 0.0, SrForm::Minsr, opt_.rcond, delta_, buf.grads(), counts);
    (void)info;
    out.grad_norm = l2_norm<T>(buf.grads());
    adam_.step(buf, opt_.lr);
  } else {
    // A model holomorphic in complex weights (checked on this iteration's Jacobian) solves the K = P/2 complex
    // system instead, half the work of the real P×P one; anything else, or a failed solve, takes the real path.
    SrInfo info;
    if (!(try_holomorphic &&
          sr_direction_holomorphic<T>(ore, oim, ere, eim, out.diag_shift, holomorphic_, delta_, info)))
      info = sr_direction<T>(ore, oim, ere, eim, out.diag_shift, form, opt_.rcond, delta_, View1<T>(), counts,
                             opt_.sr_precision);
    out.grad_norm = info.grad_norm;
    out.used_pinv = info.used_pinv;
    const auto p = buf.params();
    const auto d = delta_;
    const T lr = T(opt_.lr);
    attnphys::parallel_for(
        "attnphys::vmc_update", P, KOKKOS_LAMBDA(const long k) { p(k) -= lr * d(k); }, 4096);
  }
  if (sampler_) sampler_->refresh();
  out.update_seconds = lap();
  ++iter_;
  trace_e_.push_back(out.energy);
  trace_v_.push_back(out.variance);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

template <class T>
std::vector<std::string> VmcDriver<T>::log_columns(bool guard) {
  std::vector<std::string> c = {"iteration", "energy", "energy_imag", "error", "variance", "v_score", "tau",
                                "r_hat", "acceptance", "diag_shift", "grad_norm", "seconds", "sample_seconds",
                                "energy_seconds", "gradient_seconds", "update_seconds", "sweep"};
  if (guard) c.push_back("rejected");  // only then: logs of unguarded runs keep their columns (and resume)
  return c;
}

template <class T>
std::vector<double> VmcDriver<T>::log_row(const VmcStep& s, bool guard) {
  std::vector<double> r = {double(s.iteration), s.energy, s.energy_imag, s.error, s.variance, s.v_score, s.tau,
                           s.r_hat, s.acceptance, s.diag_shift, s.grad_norm, s.seconds, s.sample_seconds,
                           s.energy_seconds, s.gradient_seconds, s.update_seconds, double(s.sweep)};
  if (guard) r.push_back(s.rejected ? 1.0 : 0.0);
  return r;
}

template <class T>
std::vector<VmcStep> VmcDriver<T>::run(long n_iter, CsvLogger* logger, const std::vector<Callback>& callbacks) {
  if (n_iter < 0) n_iter = opt_.n_iter;
  std::vector<VmcStep> history;
  std::unique_ptr<CsvLogger> own;
  if (!logger && !opt_.log_path.empty() && comm_.is_root()) {
    // After a restart (iter_ > 0) the log keeps the iterations 0 .. iter_ − 1 of the checkpoint and drops the ones
    // logged after it, which this run takes again.
    const auto cols = log_columns(opt_.guard_sigmas > 0);
    own = std::make_unique<CsvLogger>(iter_ > 0 ? CsvLogger::resume(opt_.log_path, cols, double(iter_ - 1))
                                                : CsvLogger(opt_.log_path, cols, false));
    logger = own.get();
  }
  ProgressWarningOptions wo;
  wo.plateau_window = opt_.plateau_window;
  ProgressMonitor monitor(product_state_bound(H_, opt_.sampler.fixed_sz, opt_.sampler.two_sz), wo);
  for (long k = 0; k < n_iter; ++k) {
    if (converged()) break;
    history.push_back(step());
    // A step the guard rejected says nothing about the state the run goes on from (its parameters were restored).
    if (!history.back().rejected)
      for (auto& w : monitor.observe(history.back())) {
        if (comm_.is_root()) std::fprintf(stderr, "attnphys: warning: %s\n", w.c_str());
        warnings_.push_back(std::move(w));
      }
    if (logger) logger->row(log_row(history.back(), opt_.guard_sigmas > 0));
    if (!opt_.checkpoint_path.empty() && opt_.checkpoint_every > 0 && iter_ % opt_.checkpoint_every == 0)
      save_checkpoint(opt_.checkpoint_path);
    bool go = true;
    for (const auto& cb : callbacks) go = cb(history.back()) && go;
    if (!go) break;
  }
  if (!opt_.checkpoint_path.empty()) save_checkpoint(opt_.checkpoint_path);
  return history;
}

template <class T>
void VmcDriver<T>::save_checkpoint(const std::string& path) const {
  // Collective under MPI (every rank's chains are gathered); rank 0 writes.
  View2<T> states;
  if (sampler_) states = comm_.size() > 1 ? gather_view(comm_, View2<T>(sampler_->states())) : sampler_->states();
  if (!comm_.is_root()) return;
  h5::Writer w(path, "vmc_checkpoint", 1);
  h5::write_parameters(w, "/model", model_.parameters(), true);
  if (sampler_) h5::write_view(w, "/sampler/states", states);
  w.set_attr("/", "sampler", std::string(sampler_ ? "metropolis" : "exact"));
  w.set_attr("/", "iteration", iter_);
  w.set_attr("/", "sampler_step", long(sampler_ ? sampler_->step_counter() : direct_counter_));
  if (sampler_) w.set_attr("/", "sweep_size", sampler_->sweep_size());
  w.set_attr("/", "adam_steps", adam_.steps_taken());
  w.set_attr("/", "model_name", model_.name());
  w.set_attr("/", "n_ranks", long(comm_.size()));
  if (!trace_e_.empty()) {
    w.write("/trace/energy", trace_e_);
    w.write("/trace/variance", trace_v_);
  }
  if (guard_.rejections > 0 || guard_.have_best) {  // the step guard's state: a resumed run continues it exactly
    w.set_attr("/", "guard_rejections", guard_.rejections);
    w.set_attr("/", "guard_false_alarms", guard_.false_alarms);
    w.set_attr("/", "guard_shift_factor", shift_mult_);
    if (guard_.have_best) {
      w.set_attr("/", "guard_best_energy", guard_.best.energy);
      w.set_attr("/", "guard_best_error", guard_.best.error);
      w.set_attr("/", "guard_best_variance", guard_.best.variance);
      w.set_attr("/", "guard_last_rejected", long(guard_.last_rejected));
      w.set_attr("/", "guard_last_event", guard_event_);
      h5::write_view(w, "/guard/best_params", best_params_);
    }
  }
  w.commit();
}

template <class T>
void VmcDriver<T>::load_checkpoint(const std::string& path) {
  h5::Reader r(path, "vmc_checkpoint", 1);
  const std::string kind = r.has_attr("/", "sampler") ? r.attr_string("/", "sampler") : "metropolis";
  const std::string want = sampler_ ? "metropolis" : "exact";
  require(kind == want, "checkpoint ", path, " was written with ", kind, " sampling, but this run uses ", want,
          " sampling (sampler.move)");
  h5::read_parameters(r, "/model", model_.parameters(), true);
  const long ranks = r.has_attr("/", "n_ranks") ? r.attr_long("/", "n_ranks") : 1;
  const auto counter = std::uint64_t(r.attr_long("/", "sampler_step"));
  if (sampler_) {
    const long C = sampler_->states().extent(0), N = sampler_->states().extent(1);
    if (ranks == comm_.size()) {  // the same chains continue
      View2<T> all("attnphys::vmc_states", C * ranks, N);
      h5::read_view(r, "/sampler/states", all);
      View2<T> mine("attnphys::vmc_states", C, N);
      Kokkos::deep_copy(mine, Kokkos::subview(all, std::make_pair(comm_.rank() * C, (comm_.rank() + 1) * C),
                                              Kokkos::ALL()));
      sampler_->restore(mine, counter);
    } else {  // another rank count: fresh chains (burn-in by sampler.n_discard), same random-number position
      sampler_->reset();
      sampler_->restore(sampler_->states(), counter, false);
    }
    if (opt_.sampler.adapt_sweep && r.has_attr("/", "sweep_size"))  // the adapted sweep continues
      sampler_->set_sweep_size(r.attr_long("/", "sweep_size"));
  } else {
    direct_counter_ = counter;
  }
  iter_ = r.attr_long("/", "iteration");
  adam_.set_steps_taken(r.attr_long("/", "adam_steps"));
  shift_mult_ = r.has_attr("/", "guard_shift_factor") ? r.attr_double("/", "guard_shift_factor") : 1.0;
  guard_ = StepGuardState{};
  guard_.rejections = r.has_attr("/", "guard_rejections") ? r.attr_long("/", "guard_rejections") : 0;
  // Checkpoints from before false alarms were counted: none (every rejection counts, as it did then).
  guard_.false_alarms = r.has_attr("/", "guard_false_alarms") ? r.attr_long("/", "guard_false_alarms") : 0;
  guard_.have_best = r.has_attr("/", "guard_best_energy") && r.has("/guard/best_params");
  if (guard_.have_best) {
    guard_.best = {r.attr_double("/", "guard_best_energy"), r.attr_double("/", "guard_best_error"),
                   r.attr_double("/", "guard_best_variance")};
    guard_.last_rejected = r.has_attr("/", "guard_last_rejected") && r.attr_long("/", "guard_last_rejected") != 0;
    best_params_ = View1<T>("attnphys::vmc_best_params", model_.parameters().params().extent(0));
    h5::read_view(r, "/guard/best_params", best_params_);
  }
  trace_e_.clear();
  trace_v_.clear();
  if (r.has("/trace/energy") && r.has("/trace/variance")) {  // checkpoints before the trace have none
    trace_e_ = r.read<double>("/trace/energy");
    trace_v_ = r.read<double>("/trace/variance");
    require(trace_e_.size() == trace_v_.size() && long(trace_e_.size()) == iter_, "checkpoint ", path,
            " is inconsistent: its energy trace has ", trace_e_.size(), " entries and its variance trace ",
            trace_v_.size(), " for ", iter_, " iterations");
  }
  // The last guard event; checkpoints from before it was kept: the last rejection, a NaN in the trace.
  guard_event_ = -1;
  if (r.has_attr("/", "guard_last_event")) {
    guard_event_ = r.attr_long("/", "guard_last_event");
  } else {
    for (long k = long(trace_e_.size()) - 1; k >= 0; --k)
      if (std::isnan(trace_e_[k])) {
        guard_event_ = k;
        break;
      }
  }
}

template <class T>
ConvergenceCriterion VmcDriver<T>::convergence_criterion() const {
  ConvergenceCriterion c;
  c.window = opt_.converge_window;
  c.sigmas = opt_.converge_sigmas;
  c.variance_drop = opt_.converge_variance_drop;
  c.two_sided = opt_.converge_two_sided;
  c.start = opt_.optimizer == VmcOptimizer::Adam ? 0 : opt_.diag_shift_steps;
  return c;
}

template <class T>
bool VmcDriver<T>::converged() const {
  // A checkpoint from before the trace was kept has fewer entries than iterations: the criterion sees what is there.
  // After a guard event the run needs a whole window without one (VmcOptions::guard_sigmas).
  if (guard_event_ >= 0 && iter_ - guard_event_ <= opt_.converge_window) return false;
  return plateaued(trace_e_, trace_v_, convergence_criterion());
}

template class VmcDriver<float>;
template class VmcDriver<double>;

}  // namespace attnphys::vmc
