#include "attnphys/solvers/training/metrics.hpp"

#include <cmath>
#include <complex>

#include "attnphys/core/error.hpp"

namespace attnphys::training {

namespace {
// Separable DFT of a real [ny, nx] field (evaluation-time only; grids are small, O(n³)).
std::vector<std::complex<double>> dft2(const std::vector<double>& f, int ny, int nx) {
  std::vector<std::complex<double>> rows(size_t(ny) * nx), out(size_t(ny) * nx);
  for (int y = 0; y < ny; ++y)
    for (int k = 0; k < nx; ++k) {
      std::complex<double> s = 0;
      for (int x = 0; x < nx; ++x) s += f[size_t(y) * nx + x] * std::polar(1.0, -2 * M_PI * double(k) * x / nx);
      rows[size_t(y) * nx + k] = s;
    }
  for (int k = 0; k < ny; ++k)
    for (int kx = 0; kx < nx; ++kx) {
      std::complex<double> s = 0;
      for (int y = 0; y < ny; ++y) s += rows[size_t(y) * nx + kx] * std::polar(1.0, -2 * M_PI * double(k) * y / ny);
      out[size_t(k) * nx + kx] = s;
    }
  return out;
}
}  // namespace

FieldMetrics field_metrics(const double* pred, const double* ref, int ny, int nx) {
  require(ny >= 1 && nx >= 1, "field_metrics: empty field ", ny, "x", nx);
  const size_t n = size_t(ny) * nx;
  FieldMetrics m;
  double se = 0, sr = 0, sum = 0, bse = 0;
  long nb = 0;
  std::vector<double> err(n);
  for (int y = 0; y < ny; ++y)
    for (int x = 0; x < nx; ++x) {
      const size_t i = size_t(y) * nx + x;
      const double e = pred[i] - ref[i];
      err[i] = e;
      se += e * e;
      sr += ref[i] * ref[i];
      sum += e;
      m.max_err = std::max(m.max_err, std::abs(e));
      const bool boundary = x == 0 || x == nx - 1 || (ny > 1 && (y == 0 || y == ny - 1));
      if (boundary) {
        bse += e * e;
        ++nb;
      }
    }
  m.rmse = std::sqrt(se / n);
  m.rel_l2 = sr > 0 ? std::sqrt(se / sr) : std::sqrt(se);
  m.nrmse = m.rel_l2;
  m.crmse = std::abs(sum) / n;
  m.brmse = nb ? std::sqrt(bse / nb) : 0;
  const auto E = dft2(err, ny, nx);
  double band[3] = {0, 0, 0};
  for (int ky = 0; ky < ny; ++ky)
    for (int kx = 0; kx < nx; ++kx) {
      const int fy = std::min(ky, ny - ky), fx = std::min(kx, nx - kx);  // signed frequency magnitude
      const double k = std::floor(std::sqrt(double(fx) * fx + double(fy) * fy));
      const int b = k < 4 ? 0 : (k < 12 ? 1 : 2);
      band[b] += std::norm(E[size_t(ky) * nx + kx]);
    }
  // Σ_all |E|² / n² = mean(err²) (Parseval), so each band's share is an RMSE contribution.
  m.frmse_low = std::sqrt(band[0] / (double(n) * n));
  m.frmse_mid = std::sqrt(band[1] / (double(n) * n));
  m.frmse_high = std::sqrt(band[2] / (double(n) * n));
  return m;
}

FieldMetrics field_metrics(const double* pred, const double* ref, int nz, int ny, int nx) {
  if (nz == 1) return field_metrics(pred, ref, ny, nx);
  require(nz >= 1 && ny >= 1 && nx >= 1, "field_metrics: empty field ", nz, "x", ny, "x", nx);
  const size_t n = size_t(nz) * ny * nx;
  FieldMetrics m;
  double se = 0, sr = 0, sum = 0, bse = 0;
  long nb = 0;
  std::vector<std::complex<double>> E(n);
  for (int z = 0; z < nz; ++z)
    for (int y = 0; y < ny; ++y)
      for (int x = 0; x < nx; ++x) {
        const size_t i = (size_t(z) * ny + y) * nx + x;
        const double e = pred[i] - ref[i];
        E[i] = e;
        se += e * e;
        sr += ref[i] * ref[i];
        sum += e;
        m.max_err = std::max(m.max_err, std::abs(e));
        if (x == 0 || x == nx - 1 || y == 0 || y == ny - 1 || z == 0 || z == nz - 1) {
          bse += e * e;
          ++nb;
        }
      }
  m.rmse = std::sqrt(se / n);
  m.rel_l2 = sr > 0 ? std::sqrt(se / sr) : std::sqrt(se);
  m.nrmse = m.rel_l2;
  m.crmse = std::abs(sum) / n;
  m.brmse = nb ? std::sqrt(bse / nb) : 0;
  // Separable DFT, one axis at a time with a table of twiddles (evaluation-time only: O(n·(nx + ny + nz))).
  auto axis_dft = [&](int len, size_t stride, size_t count_outer, size_t inner) {
    std::vector<std::complex<double>> tw(static_cast<size_t>(len)), line(static_cast<size_t>(len));
    for (int k = 0; k < len; ++k) tw[size_t(k)] = std::polar(1.0, -2 * M_PI * double(k) / len);
    for (size_t o = 0; o < count_outer; ++o)
      for (size_t in = 0; in < inner; ++in) {
        const size_t base = o * size_t(len) * stride + in;
        for (int k = 0; k < len; ++k) {
          std::complex<double> s = 0;
          for (int x = 0; x < len; ++x) s += E[base + size_t(x) * stride] * tw[size_t((long(k) * x) % len)];
          line[size_t(k)] = s;
        }
        for (int k = 0; k < len; ++k) E[base + size_t(k) * stride] = line[size_t(k)];
      }
  };
  axis_dft(nx, 1, size_t(nz) * ny, 1);
  axis_dft(ny, size_t(nx), size_t(nz), size_t(nx));
  axis_dft(nz, size_t(nx) * ny, 1, size_t(nx) * ny);
  double band[3] = {0, 0, 0};
  for (int kz = 0; kz < nz; ++kz)
    for (int ky = 0; ky < ny; ++ky)
      for (int kx = 0; kx < nx; ++kx) {
        const int fz = std::min(kz, nz - kz), fy = std::min(ky, ny - ky), fx = std::min(kx, nx - kx);
        const double k = std::floor(std::sqrt(double(fx) * fx + double(fy) * fy + double(fz) * fz));
        const int b = k < 4 ? 0 : (k < 12 ? 1 : 2);
        band[b] += std::norm(E[(size_t(kz) * ny + ky) * nx + kx]);
      }
  m.frmse_low = std::sqrt(band[0] / (double(n) * n));
  m.frmse_mid = std::sqrt(band[1] / (double(n) * n));
  m.frmse_high = std::sqrt(band[2] / (double(n) * n));
  return m;
}

FieldMetrics mean_metrics(const std::vector<FieldMetrics>& v) {
  FieldMetrics m;
  if (v.empty()) return m;
  for (const auto& x : v) {
    m.rel_l2 += x.rel_l2, m.rmse += x.rmse, m.nrmse += x.nrmse, m.max_err += x.max_err, m.crmse += x.crmse;
    m.brmse += x.brmse, m.frmse_low += x.frmse_low, m.frmse_mid += x.frmse_mid, m.frmse_high += x.frmse_high;
  }
  const double k = 1.0 / v.size();
  m.rel_l2 *= k, m.rmse *= k, m.nrmse *= k, m.max_err *= k, m.crmse *= k, m.brmse *= k;
  m.frmse_low *= k, m.frmse_mid *= k, m.frmse_high *= k;
  return m;
}

}  // namespace attnphys::training
