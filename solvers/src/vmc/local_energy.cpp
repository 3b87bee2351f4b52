#include "attnphys/solvers/vmc/local_energy.hpp"
#include "attnphys/core/parallel.hpp"

namespace attnphys::vmc {

namespace {
// Work buffers kept between calls (every VMC iteration evaluates the same shapes; allocating and zero-filling the
// [chunk, max_conn, N] connected configurations, ~80 MB at N = 100, cost a tenth of the phase). Grow-only, filled
// before they are read; released when Kokkos finalises.
template <class T>
struct LocalEnergyWork {
  View3<T> conn;
  View2<T> el, flat;
  View1<T> flat_el, fre, fim;
  View1<long> count, offset, flat_parent;
  // An unmanaged view of shape ext over v's storage, which grows (25% slack on the first extent) when too small.
  template <class V, class... Ext>
  static V grown(V& v, long first, Ext... rest) {
    long want = first;
    ((want *= long(rest)), ...);
    if (long(v.span()) < want)
      v = V(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("attnphys::local_energy_work")),
            first + first / 4 + 1, rest...);
    return V(v.data(), first, rest...);
  }
};

template <class T>
LocalEnergyWork<T>& local_energy_work() {
  static LocalEnergyWork<T>* work = nullptr;
  if (!work) {
    work = new LocalEnergyWork<T>();
    Kokkos::push_finalize_hook([] {
      delete work;
      work = nullptr;
    });
  }
  return *work;
}
}  // namespace

template <class T>
void local_energy(LogPsiModel<T>& model, const spin::SpinHamiltonian& H, const View2<const T>& sigma,
                  const View1<const T>& lp_re, const View1<const T>& lp_im, const View1<T>& el_re,
                  const View1<T>& el_im, long chunk) {
  ScopedRegion region("attnphys::local_energy");
  const long B = sigma.extent(0);
  const int N = sigma.extent(1), K = H.max_conn();
  require(N == H.n_sites() && N == model.n_sites(), "local_energy: sigma has ", N, " sites, the Hamiltonian ",
          H.n_sites(), ", the model ", model.n_sites());
  require(lp_re.extent(0) == std::size_t(B) && lp_im.extent(0) == std::size_t(B) &&
              el_re.extent(0) == std::size_t(B) && el_im.extent(0) == std::size_t(B),
          "local_energy: log ψ and output views need ", B, " entries");
  if (chunk <= 0) chunk = B;
  // Connected configurations differ from their sample in one or two sites: the model's incremental path (when it
  // has one) evaluates them against the samples as references.
  auto* inc = dynamic_cast<IncrementalLogPsi<T>*>(&model);
  if (inc && !inc->incremental_enabled()) inc = nullptr;
  for (long b0 = 0; b0 < B; b0 += chunk) {
    const long b1 = std::min(B, b0 + chunk), nb = b1 - b0;
    View2<const T> s = Kokkos::subview(sigma, Kokkos::make_pair(b0, b1), Kokkos::ALL());
    auto& w = local_energy_work<T>();
    const View3<T> conn = w.grown(w.conn, nb, K, N);
    const View2<T> el = w.grown(w.el, nb, K);
    spin::connected_configs<T>(H, s, conn, el);
    const View1<long> count = w.grown(w.count, nb + 1), offset = w.grown(w.offset, nb + 1);
    attnphys::parallel_for(
        "attnphys::local_energy_count", nb, KOKKOS_LAMBDA(const long b) {
          long c = 0;
          for (int k = 1; k < K; ++k) c += el(b, k) != T(0);
          count(b) = c;
        }, 64);
    Kokkos::parallel_scan(
        "attnphys::local_energy_scan", Kokkos::RangePolicy<ExecSpace>(0, nb + 1),
        KOKKOS_LAMBDA(const long b, long& update, const bool final) {
          if (final) offset(b) = update;
          if (b < nb) update += count(b);
        });
    long total = 0;
    Kokkos::deep_copy(total, Kokkos::subview(offset, nb));
    const View2<T> flat = w.grown(w.flat, total, N);
    const View1<T> flat_el = w.grown(w.flat_el, total);
    const View1<long> flat_parent = w.grown(w.flat_parent, total);
    attnphys::parallel_for(
        "attnphys::local_energy_pack", nb, KOKKOS_LAMBDA(const long b) {
          long p = offset(b);
          for (int k = 1; k < K; ++k) {
            if (el(b, k) == T(0)) continue;
            for (int i = 0; i < N; ++i) flat(p, i) = conn(b, k, i);
            flat_el(p) = el(b, k);
            flat_parent(p) = b;
            ++p;
          }
        }, 64);
    const View1<T> fre = w.grown(w.fre, total), fim = w.grown(w.fim, total);
    if (inc) {
      inc->set_low_precision(false);
      inc->set_reference(s);
      inc->log_psi_from_reference(flat, flat_parent, fre, fim);
    } else {
      for (long f0 = 0; f0 < total; f0 += chunk) {
        const auto r = Kokkos::make_pair(f0, std::min(total, f0 + chunk));
        model.log_psi(Kokkos::subview(flat, r, Kokkos::ALL()), Kokkos::subview(fre, r), Kokkos::subview(fim, r));
      }
    }
    attnphys::parallel_for(
        "attnphys::local_energy_sum", nb, KOKKOS_LAMBDA(const long b) {
          double er = double(el(b, 0)), ei = 0;
          const double r0 = lp_re(b0 + b), i0 = lp_im(b0 + b);
          for (long p = offset(b); p < offset(b + 1); ++p) {
            const double a = math::exp(double(fre(p)) - r0), ph = double(fim(p)) - i0;
            er += double(flat_el(p)) * a * math::cos(ph);
            ei += double(flat_el(p)) * a * math::sin(ph);
          }
          el_re(b0 + b) = T(er);
          el_im(b0 + b) = T(ei);
        }, 64);
  }
}

template void local_energy<float>(LogPsiModel<float>&, const spin::SpinHamiltonian&, const View2<const float>&,
                                  const View1<const float>&, const View1<const float>&, const View1<float>&,
                                  const View1<float>&, long);
template void local_energy<double>(LogPsiModel<double>&, const spin::SpinHamiltonian&, const View2<const double>&,
                                   const View1<const double>&, const View1<const double>&, const View1<double>&,
                                   const View1<double>&, long);

}  // namespace attnphys::vmc
