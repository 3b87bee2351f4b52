#include "attnphys/solvers/vmc/sampler.hpp"
#include "attnphys/core/parallel.hpp"

#include <algorithm>
#include <cstdlib>

#include "attnphys/core/random.hpp"

namespace attnphys::vmc {

void SamplerOptions::declare(OptionSet& s, const std::string& p) {
  s.add(p + ".n_chains", &n_chains, "Markov chains advanced together", Range::at_least(1));
  s.add(p + ".n_samples", &n_samples, "samples per iteration (rounded up to a multiple of n_chains)",
        Range::at_least(1));
  s.add(p + ".n_discard", &n_discard, "sweeps discarded before sampling fresh chains (burn-in)",
        Range::non_negative());
  s.add(p + ".n_discard_continue", &n_discard_continue,
        "sweeps discarded before sampling chains that continue from the previous iteration (negative: n_discard)",
        Range::at_least(-1));
  s.add(p + ".sweep_size", &sweep_size, "Metropolis steps per sweep (0: number of sites)", Range::non_negative());
  s.add(p + ".adapt_sweep", &adapt_sweep,
        "adapt the sweep (steps between kept samples) to the measured autocorrelation time: shorter while tau <= "
        "1.2, longer when tau > 1.5 (between sampler.min_sweep and twice the number of sites)");
  s.add(p + ".min_sweep", &min_sweep, "shortest adapted sweep (0: a quarter of the sites)", Range::non_negative());
  s.add(p + ".move", &move, "proposal (exact: direct sampling, for models that support it)");
  s.add(p + ".exchange_distance", &exchange_distance, "largest distance of exchanged pairs (0: any)",
        Range::non_negative());
  s.add(p + ".global_flip", &global_flip, "probability of a global spin flip", Range::closed(0, 1));
  s.add(p + ".seed", &seed, "random seed", Range::non_negative());
  s.add(p + ".float32", &float32,
        "evaluate Metropolis proposals in float32 where the ansatz has such a path (the kept samples' log psi is "
        "recomputed in float64)");
  s.add(p + ".fixed_sz", &fixed_sz,
        "start and stay in the sector 2Sz = two_sz (default for attnphys vmc: on for Sz-conserving chains of even N)");
  s.add(p + ".two_sz", &two_sz, "twice the total S^z of the sector (fixed_sz; odd N needs an odd value, e.g. 1)");
}

void SamplerOptions::validate() const {
  require(n_chains >= 1 && n_samples >= 1, "sampler needs n_chains >= 1 and n_samples >= 1");
  require(global_flip >= 0 && global_flip <= 1, "global_flip is a probability, got ", global_flip);
  require(!(global_flip > 0 && fixed_sz && two_sz != 0), "global flips leave the sector 2Sz = ", two_sz,
          ": use global_flip = 0");
}

namespace {
// v(c) = c. A free function: nvcc rejects a KOKKOS_LAMBDA in a constructor (the enclosing function of an extended
// lambda must allow its address to be taken).
void fill_identity(const View1<long>& v) {
  attnphys::parallel_for(
      "attnphys::mc_identity", long(v.extent(0)), KOKKOS_LAMBDA(const long c) { v(c) = c; }, 256);
}
}  // namespace

template <class T>
MetropolisSampler<T>::MetropolisSampler(LogPsiModel<T>& model, const SamplerOptions& o, bool periodic)
    : model_(model), opt_(o), n_(model.n_sites()) {
  o.validate();
  sweep_ = o.sweep_size > 0 ? o.sweep_size : n_;
  require(o.move != SamplerMove::Exact, "move = exact is direct sampling, not a Metropolis move: the model '",
          model.name(),
          "' must sample |psi|^2 itself (the VMC driver does this for autoregressive models)");
  move_ = o.move == SamplerMove::Auto ? (o.fixed_sz ? SamplerMove::Exchange : SamplerMove::Local) : o.move;
  require(!(o.fixed_sz && move_ == SamplerMove::Local), "local flips leave the fixed-Sz sector: use move = exchange");
  if (o.fixed_sz)
    require(std::abs(o.two_sz) <= n_ && (n_ + o.two_sz) % 2 == 0, "2Sz = ", o.two_sz, " impossible for ", n_,
            " sites");
  const long C = o.n_chains;
  state_ = View2<T>("attnphys::mc_state", C, n_);
  proposal_ = View2<T>("attnphys::mc_proposal", C, n_);
  lp_re_ = View1<T>("attnphys::mc_lp_re", C);
  lp_im_ = View1<T>("attnphys::mc_lp_im", C);
  new_re_ = View1<T>("attnphys::mc_new_re", C);
  new_im_ = View1<T>("attnphys::mc_new_im", C);
  log_hastings_ = View1<T>("attnphys::mc_hastings", C);
  accepted_ = View1<long>("attnphys::mc_accepted", C);
  take_ = View1<long>("attnphys::mc_take", C);
  identity_ = View1<long>("attnphys::mc_identity", C);
  fill_identity(identity_);
  if (auto* inc = dynamic_cast<IncrementalLogPsi<T>*>(&model); inc && inc->incremental_enabled()) inc_ = inc;
  if (move_ == SamplerMove::Exchange) {
    std::vector<int> pi, pj;
    const long d = o.exchange_distance > 0 ? o.exchange_distance : n_;
    for (int i = 0; i < n_; ++i)
      for (int j = i + 1; j < n_; ++j) {
        const int dist = periodic ? std::min(j - i, n_ - (j - i)) : j - i;
        if (dist <= d) {
          pi.push_back(i);
          pj.push_back(j);
        }
      }
    require(!pi.empty(), "no exchange pairs within distance ", d);
    pair_i_ = View1<int>("attnphys::mc_pair_i", pi.size());
    pair_j_ = View1<int>("attnphys::mc_pair_j", pj.size());
    auto hi = Kokkos::create_mirror_view(pair_i_);
    auto hj = Kokkos::create_mirror_view(pair_j_);
    for (std::size_t k = 0; k < pi.size(); ++k) {
      hi(k) = pi[k];
      hj(k) = pj[k];
    }
    Kokkos::deep_copy(pair_i_, hi);
    Kokkos::deep_copy(pair_j_, hj);
  }
  reset();
}

template <class T>
void MetropolisSampler<T>::reset() {
  ScopedRegion region("attnphys::mc_reset");
  const auto st = state_;
  const int n = n_;
  const bool fixed = opt_.fixed_sz;
  const int n_up = (n + opt_.two_sz) / 2;
  const std::uint64_t seed = std::uint64_t(opt_.seed);
  attnphys::parallel_for(
      "attnphys::mc_reset", st.extent(0), KOKKOS_LAMBDA(const long c) {
        CounterRng r(seed ^ 0x5EEDULL, c, 0);
        if (fixed) {  // n_up ups, then a Fisher-Yates shuffle of the row
          for (int i = 0; i < n; ++i) st(c, i) = i < n_up ? T(1) : T(-1);
          for (int i = n - 1; i > 0; --i) {
            const int j = int(r.below(i + 1));
            const T t = st(c, i);
            st(c, i) = st(c, j);
            st(c, j) = t;
          }
        } else {
          for (int i = 0; i < n; ++i) st(c, i) = r.uniform() < 0.5 ? T(1) : T(-1);
        }
      }, 256);
  model_.log_psi(state_, lp_re_, lp_im_);
  step_ = 0;
  fresh_ = true;
  ref_valid_ = false;
  reset_acceptance();
}

template <class T>
long MetropolisSampler<T>::next_discard() const {
  return fresh_ || opt_.n_discard_continue < 0 ? opt_.n_discard : opt_.n_discard_continue;
}

template <class T>
void MetropolisSampler<T>::restore(const View2<T>& states, std::uint64_t counter, bool equilibrated) {
  require(states.extent(0) == state_.extent(0) && states.extent(1) == state_.extent(1),
          "sampler restore: states must be [", state_.extent(0), ", ", n_, "]");
  Kokkos::deep_copy(state_, states);
  model_.log_psi(state_, lp_re_, lp_im_);
  step_ = counter;
  fresh_ = !equilibrated;
  ref_valid_ = false;
  reset_acceptance();
}

template <class T>
void MetropolisSampler<T>::reset_acceptance() {
  Kokkos::deep_copy(accepted_, 0L);
  proposed_ = 0;
}

template <class T>
double MetropolisSampler<T>::acceptance() const {
  if (proposed_ == 0) return 0.0;
  long acc = 0;
  const auto a = accepted_;
  Kokkos::parallel_reduce(
      "attnphys::mc_acceptance", Kokkos::RangePolicy<ExecSpace>(0, a.extent(0)),
      KOKKOS_LAMBDA(const long c, long& s) { s += a(c); }, acc);
  return double(acc) / double(proposed_);
}

template <class T>
void MetropolisSampler<T>::step() {
  ScopedRegion region("attnphys::mc_step");
  const long C = opt_.n_chains;
  const int n = n_;
  const auto st = state_, pr = proposal_;
  const auto lh = log_hastings_;
  const auto pi = pair_i_, pj = pair_j_;
  const long n_pairs = pair_i_.extent(0);
  const bool exchange = move_ == SamplerMove::Exchange;
  const bool all_pairs = exchange && n_pairs == long(n) * (n - 1) / 2;
  const double p_global = opt_.global_flip;
  const std::uint64_t seed = std::uint64_t(opt_.seed), start = 16 * step_;
  attnphys::parallel_for(
      "attnphys::mc_propose", C, KOKKOS_LAMBDA(const long c) {
        CounterRng r(seed, c, start);
        for (int i = 0; i < n; ++i) pr(c, i) = st(c, i);
        lh(c) = T(0);
        if (p_global > 0 && r.uniform() < p_global) {
          for (int i = 0; i < n; ++i) pr(c, i) = -pr(c, i);
        } else if (exchange && all_pairs) {
          // Every pair is a candidate: the antiparallel pairs number n_up·n_down before and after the swap (no
          // Hastings factor), and the pick-th of them in the order (i, j > i) is found in O(N) from suffix counts
          // of up spins (the same pair the enumeration below picks).
          long ups = 0;
          for (int i = 0; i < n; ++i) ups += st(c, i) > T(0);
          const long count = ups * (n - ups);
          if (count == 0) return;
          long pick = long(r.below(count));
          long ups_after = ups;  // up spins at sites > i
          for (int i = 0; i < n; ++i) {
            const bool up = st(c, i) > T(0);
            if (up) --ups_after;
            const long opp = up ? (n - 1 - i) - ups_after : ups_after;
            if (pick < opp) {
              int j = i + 1;
              for (;; ++j)
                if ((st(c, j) > T(0)) != up && pick-- == 0) break;
              pr(c, i) = st(c, j);
              pr(c, j) = st(c, i);
              break;
            }
            pick -= opp;
          }
        } else if (exchange) {
          long count = 0;
          for (long k = 0; k < n_pairs; ++k) count += st(c, pi(k)) != st(c, pj(k));
          if (count == 0) return;
          long pick = long(r.below(count));
          long k = 0;
          for (; k < n_pairs; ++k)
            if (st(c, pi(k)) != st(c, pj(k)) && pick-- == 0) break;
          pr(c, pi(k)) = st(c, pj(k));
          pr(c, pj(k)) = st(c, pi(k));
          long count_new = 0;
          for (long q = 0; q < n_pairs; ++q) count_new += pr(c, pi(q)) != pr(c, pj(q));
          lh(c) = T(math::log(double(count) / double(count_new)));
        } else {
          const int i = int(r.below(n));
          pr(c, i) = -pr(c, i);
        }
      }, 64);
  if (inc_) {
    if (!ref_valid_) {
      low_ = inc_->set_low_precision(opt_.float32);
      inc_->set_reference(state_);
      // In float32 the chains' own log ψ again from this fresh reference: the acceptance then compares two values
      // of one evaluation, not a proposal's against a value carried over from an earlier (drifted) reference.
      if (low_) inc_->log_psi_from_reference(state_, identity_, lp_re_, lp_im_);
    }
    ref_valid_ = true;
    inc_->log_psi_from_reference(proposal_, identity_, new_re_, new_im_);
  } else {
    model_.log_psi(proposal_, new_re_, new_im_);
  }
  const auto lr = lp_re_, li = lp_im_, nr = new_re_, ni = new_im_;
  const auto acc = accepted_, take = take_;
  attnphys::parallel_for(
      "attnphys::mc_accept", C, KOKKOS_LAMBDA(const long c) {
        CounterRng r(seed, c, start + 8);
        const double log_a = 2.0 * (double(nr(c)) - double(lr(c))) + double(lh(c));
        take(c) = 0;
        if (log_a >= 0 || math::log(r.uniform() + 1e-300) < log_a) {
          for (int i = 0; i < n; ++i) st(c, i) = pr(c, i);
          lr(c) = nr(c);
          li(c) = ni(c);
          acc(c) += 1;
          take(c) = 1;
        }
      }, 64);
  if (inc_) inc_->update_reference(take_);
  ++step_;
  proposed_ += C;
}

template <class T>
void MetropolisSampler<T>::sample(View2<T>& samples, View1<T>& re, View1<T>& im) {
  ScopedRegion region("attnphys::mc_sample");
  const long C = opt_.n_chains, S = n_steps_per_sample();
  if (samples.extent(0) != std::size_t(S * C) || samples.extent(1) != std::size_t(n_)) {
    samples = View2<T>("attnphys::mc_samples", S * C, n_);
    re = View1<T>("attnphys::mc_samples_re", S * C);
    im = View1<T>("attnphys::mc_samples_im", S * C);
  }
  const long discard = next_discard();
  fresh_ = false;
  ref_valid_ = false;  // others (the local energy) may have used the model's reference since the last call
  // The incremental reference keeps its rows by increments (x1 of the parent + the changed patch's part). In float32
  // their rounding walks: 2e4 accepted moves per chain left log ψ 1.3e-3 from a full evaluation (a final estimate of
  // 10^6 samples is ~10^5 moves per chain), so the sampled distribution was not |ψ|². A float32 reference is
  // therefore evaluated afresh after every sweep (a few accepted moves per chain, ~1e-5); float64 rounding is far
  // below anything measured, and its reference is kept for the whole call.
  auto sweep = [&] {
    for (long k = 0; k < sweep_; ++k) step();
    if (low_) ref_valid_ = false;
  };
  for (long k = 0; k < discard; ++k) sweep();
  for (long s = 0; s < S; ++s) {
    sweep();
    const auto rows = Kokkos::make_pair(s * C, (s + 1) * C);
    Kokkos::deep_copy(Kokkos::subview(samples, rows, Kokkos::ALL()), state_);
    Kokkos::deep_copy(Kokkos::subview(re, rows), lp_re_);
    Kokkos::deep_copy(Kokkos::subview(im, rows), lp_im_);
  }
  ref_valid_ = false;
  if (low_) {
    // Proposals ran in float32: the kept samples' log ψ again in the model's precision (local energies divide by
    // ψ(σ)); the chains keep their float32 values for the next acceptance tests.
    model_.log_psi(samples, re, im);
    low_ = inc_->set_low_precision(false);
  }
}

template <class T>
void MetropolisSampler<T>::set_sweep_size(long steps) {
  require(steps >= 1, "sampler: a sweep needs at least one Metropolis step, got ", steps);
  sweep_ = steps;
}

template <class T>
long MetropolisSampler<T>::adapted_sweep(double tau) const {
  const long lo = std::max(1L, opt_.min_sweep > 0 ? opt_.min_sweep : long(n_) / 4), hi = std::max(lo, 2L * n_);
  long next = sweep_;
  if (tau <= 1.2)
    next = sweep_ - std::max(1L, sweep_ / 5);  // the samples are (nearly) independent: 20 % fewer steps
  else if (tau > 1.5)
    next = sweep_ + std::max(1L, sweep_ / 4);  // correlated: 25 % more
  return std::min(hi, std::max(lo, next));
}

template class MetropolisSampler<float>;
template class MetropolisSampler<double>;

}  // namespace attnphys::vmc
