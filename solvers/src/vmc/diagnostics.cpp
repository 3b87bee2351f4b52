#include "attnphys/solvers/vmc/diagnostics.hpp"

#include <algorithm>
#include <cmath>

#include "attnphys/core/error.hpp"

namespace attnphys::vmc {

ChainStats chain_statistics(const std::vector<double>& x, long S, long C) {
  require(S >= 1 && C >= 1 && long(x.size()) == S * C, "chain_statistics: ", x.size(), " values are not ", S,
          " steps of ", C, " chains");
  ChainStats st;
  st.n = S * C;
  double m = 0;
  for (double v : x) m += v;
  m /= st.n;
  st.mean = m;
  double var = 0;
  for (double v : x) var += (v - m) * (v - m);
  var /= std::max<long>(1, st.n - 1);
  st.variance = var;
  if (var <= 0) return st;

  // Autocorrelation averaged over chains, with the global mean.
  if (S >= 4) {
    double tau = 1;
    for (long t = 1; t < S; ++t) {
      double acc = 0;
      for (long c = 0; c < C; ++c)
        for (long s = 0; s + t < S; ++s) acc += (x[s * C + c] - m) * (x[(s + t) * C + c] - m);
      const double rho = acc / (double(C) * (S - t)) / var;
      tau += 2 * rho;
      if (t >= 5 * tau) break;
    }
    st.tau = std::max(1.0, tau);
    // split-R̂ over 2C half-chains of length L.
    const long L = S / 2;
    std::vector<double> means, vars;
    for (long c = 0; c < C; ++c)
      for (long half = 0; half < 2; ++half) {
        double mm = 0, vv = 0;
        for (long s = half * L; s < (half + 1) * L; ++s) mm += x[s * C + c];
        mm /= L;
        for (long s = half * L; s < (half + 1) * L; ++s) vv += (x[s * C + c] - mm) * (x[s * C + c] - mm);
        means.push_back(mm);
        vars.push_back(vv / (L - 1));
      }
    double W = 0, mbar = 0;
    for (double v : vars) W += v;
    W /= vars.size();
    for (double v : means) mbar += v;
    mbar /= means.size();
    double Bn = 0;
    for (double v : means) Bn += (v - mbar) * (v - mbar);
    Bn /= (means.size() - 1);
    st.r_hat = W > 0 ? std::sqrt(((L - 1.0) / L * W + Bn) / W) : 1.0;
  }
  st.error = std::sqrt(var * st.tau / st.n);
  return st;
}

}  // namespace attnphys::vmc
