#include "attnphys/solvers/vmc/local_energy.hpp"

namespace attnphys::vmc {

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
    View3<T> conn("attnphys::conn", nb, K, N);
    View2<T> el("attnphys::conn_el", nb, K);
    spin::connected_configs<T>(H, s, conn, el);
    View1<long> count("attnphys::conn_count", nb + 1), offset("attnphys::conn_offset", nb + 1);
    Kokkos::parallel_for(
        "attnphys::local_energy_count", Kokkos::RangePolicy<ExecSpace>(0, nb), KOKKOS_LAMBDA(const long b) {
          long c = 0;
          for (int k = 1; k < K; ++k) c += el(b, k) != T(0);
          count(b) = c;
        });
    Kokkos::parallel_scan(
        "attnphys::local_energy_scan", Kokkos::RangePolicy<ExecSpace>(0, nb + 1),
        KOKKOS_LAMBDA(const long b, long& update, const bool final) {
          if (final) offset(b) = update;
          if (b < nb) update += count(b);
        });
    long total = 0;
    Kokkos::deep_copy(total, Kokkos::subview(offset, nb));
    View2<T> flat("attnphys::conn_flat", total, N);
    View1<T> flat_el("attnphys::conn_flat_el", total);
    View1<long> flat_parent("attnphys::conn_flat_parent", total);
    Kokkos::parallel_for(
        "attnphys::local_energy_pack", Kokkos::RangePolicy<ExecSpace>(0, nb), KOKKOS_LAMBDA(const long b) {
          long p = offset(b);
          for (int k = 1; k < K; ++k) {
            if (el(b, k) == T(0)) continue;
            for (int i = 0; i < N; ++i) flat(p, i) = conn(b, k, i);
            flat_el(p) = el(b, k);
            flat_parent(p) = b;
            ++p;
          }
        });
    View1<T> fre("attnphys::conn_lp_re", total), fim("attnphys::conn_lp_im", total);
    if (inc) {
      inc->set_reference(s);
      inc->log_psi_from_reference(flat, flat_parent, fre, fim);
    } else {
      for (long f0 = 0; f0 < total; f0 += chunk) {
        const auto r = Kokkos::make_pair(f0, std::min(total, f0 + chunk));
        model.log_psi(Kokkos::subview(flat, r, Kokkos::ALL()), Kokkos::subview(fre, r), Kokkos::subview(fim, r));
      }
    }
    Kokkos::parallel_for(
        "attnphys::local_energy_sum", Kokkos::RangePolicy<ExecSpace>(0, nb), KOKKOS_LAMBDA(const long b) {
          double er = double(el(b, 0)), ei = 0;
          const double r0 = lp_re(b0 + b), i0 = lp_im(b0 + b);
          for (long p = offset(b); p < offset(b + 1); ++p) {
            const double a = math::exp(double(fre(p)) - r0), ph = double(fim(p)) - i0;
            er += double(flat_el(p)) * a * math::cos(ph);
            ei += double(flat_el(p)) * a * math::sin(ph);
          }
          el_re(b0 + b) = T(er);
          el_im(b0 + b) = T(ei);
        });
  }
}

template void local_energy<float>(LogPsiModel<float>&, const spin::SpinHamiltonian&, const View2<const float>&,
                                  const View1<const float>&, const View1<const float>&, const View1<float>&,
                                  const View1<float>&, long);
template void local_energy<double>(LogPsiModel<double>&, const spin::SpinHamiltonian&, const View2<const double>&,
                                   const View1<const double>&, const View1<const double>&, const View1<double>&,
                                   const View1<double>&, long);

}  // namespace attnphys::vmc
