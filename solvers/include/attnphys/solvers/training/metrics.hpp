#pragma once
// Error metrics for field predictions, per sample, on host arrays [ny, nx] (1D: ny = 1). Definitions follow
// PDEBench (Takamoto et al. 2022) so numbers are comparable:
//   rel_l2 = ‖pred − ref‖₂ / ‖ref‖₂                 (the relative L2 error; no mean subtraction)
//   rmse   = sqrt(mean((pred − ref)²))
//   nrmse  = ‖pred − ref‖₂ / ‖ref‖₂                 (PDEBench's nRMSE is the same ratio of norms)
//   max_err= max |pred − ref|
//   crmse  = |Σ(pred − ref)| / n_points             (error of the conserved quantity, per point)
//   brmse  = RMSE over boundary points only (the outermost ring; the two end points in 1D)
//   frmse_{low,mid,high}: RMSE of the error's Fourier amplitudes binned by radial wavenumber
//           k = floor(sqrt(kx² + ky²)) into [0, 4), [4, 12), [12, ∞) (PDEBench's iLow = 4, iHigh = 12),
//           normalised so that Parseval holds: Σ_k |E_k|² / n² = mean(err²).
#include <vector>

namespace attnphys::training {

struct FieldMetrics {
  double rel_l2 = 0, rmse = 0, nrmse = 0, max_err = 0, crmse = 0, brmse = 0;
  double frmse_low = 0, frmse_mid = 0, frmse_high = 0;
};

FieldMetrics field_metrics(const double* pred, const double* ref, int ny, int nx);
// The same on a 3D field [nz, ny, nx]: boundary points are the outermost layer of cells, the radial wavenumber
// k = floor(sqrt(kx² + ky² + kz²)). nz = 1 gives the 2D metrics.
FieldMetrics field_metrics(const double* pred, const double* ref, int nz, int ny, int nx);

// Mean of each metric over samples (what the metrics table prints).
FieldMetrics mean_metrics(const std::vector<FieldMetrics>& per_sample);

}  // namespace attnphys::training
