#pragma once
// Stochastic reconfiguration for real parameters θ of a complex log ψ.
//
// With M samples, ΔO = O − ⟨O⟩ and ΔE = E_loc − ⟨E⟩, stack X = [Re ΔO; Im ΔO]/√M (2M × P) and
// ε = [Re ΔE; Im ΔE]/√M. Then S = Re⟨ΔO† ΔO⟩ = XᵀX and F = Re⟨ΔO† ΔE⟩ = Xᵀε (the energy gradient is 2F), and
// the update direction δ = (S + λI)⁻¹ F is computed either
//   pxp:   as written (P×P; Cholesky, with an eigenvalue pseudo-inverse when S + λI is not numerically positive
//          definite or the Cholesky solution does not solve the system), or
//   minsr: as δ = Xᵀ (X Xᵀ + λI)⁻¹ ε (2M×2M, the same vector by the push-through identity; Chen & Heyl 2024),
//          cheaper when P > 2M.
// θ then moves by −τ δ. Products go through gemm; the small solve runs on the host in double precision.
#include <string>
#include <vector>

#include "attnphys/core/options.hpp"
#include "attnphys/core/params.hpp"
#include "attnphys/core/views.hpp"
#include "attnphys/solvers/vmc/log_psi_model.hpp"

namespace attnphys::vmc {

// pxp: solve in parameter space (P x P); minsr: in sample space (2M x 2M); auto: minsr when P > 2M.
enum class SrForm { Auto, Pxp, Minsr };

// How the SR system is solved. double: the Gram matrix, its Cholesky factor and the solve in double precision.
// mixed: the Gram matrix and its Cholesky factor in single precision (half the time of the two double BLAS calls,
// which are most of an SR step) precondition conjugate gradients on the double system, whose products use the
// double X, until the relative residual recomputed from the solution is at most 1e-10 (the double solve's own,
// within rounding); a failed single-precision factorisation, a breakdown or 20 steps without convergence leave it
// to the double solve. The result never rests on the single-precision rounding.
enum class SrPrecision { Double, Mixed };

}  // namespace attnphys::vmc

namespace attnphys {
template <>
struct EnumNames<vmc::SrForm> {
  static constexpr EnumName<vmc::SrForm> values[] = {
      {vmc::SrForm::Auto, "auto"}, {vmc::SrForm::Pxp, "pxp"}, {vmc::SrForm::Minsr, "minsr"}};
};
template <>
struct EnumNames<vmc::SrPrecision> {
  static constexpr EnumName<vmc::SrPrecision> values[] = {{vmc::SrPrecision::Double, "double"},
                                                          {vmc::SrPrecision::Mixed, "mixed"}};
};
}  // namespace attnphys

namespace attnphys::vmc {

struct SrInfo {
  SrForm form = SrForm::Pxp;  // the form solved: pxp or minsr
  bool used_pinv = false;
  double grad_norm = 0;   // ‖2F‖
  bool holomorphic = false;  // solved as the complex K×K system of a holomorphic ansatz (sr_direction_holomorphic)
  int refinements = 0;       // mixed precision: conjugate-gradient steps taken (0: the double solve ran)
  double residual = 0;       // mixed precision: ‖(K + λ) x − b‖ / ‖b‖ of the solution returned
};

// form: pxp, minsr or auto (minsr when P > 2M). o_re/o_im [M, P], e_re/e_im [M]; delta [P] receives δ,
// gradient (if non-empty) [P] receives 2F. counts (if non-empty) [M]: row m stands for counts(m) identical samples
// (merge_duplicate_samples); the result is that of the expanded rows up to rounding, since both forms only see
// XᵀX and Xᵀε (a row scaled by √count), and minSR's kernel shrinks to the distinct rows.
template <class T>
SrInfo sr_direction(const View2<const T>& o_re, const View2<const T>& o_im, const View1<const T>& e_re,
                    const View1<const T>& e_im, double diag_shift, SrForm form, double rcond,
                    const View1<T>& delta, const View1<T>& gradient = View1<T>(),
                    const View1<const T>& counts = View1<const T>(),
                    SrPrecision precision = SrPrecision::Double);

// The distinct rows of samples [M, N] in order of first occurrence: first[u] is the row of distinct sample u,
// count[u] how often it occurs. Exact comparison of the rows (spins are ±1).
template <class T>
void merge_duplicate_samples(const View2<const T>& samples, std::vector<long>& first, std::vector<long>& count);


// Parameters that come in (real part, imaginary part) pairs of complex weights: column re[k] of O is ∂ log ψ/∂ Re w_k,
// column im[k] is ∂ log ψ/∂ Im w_k. holomorphic_pairs() lists the entries of the model's complex blocks
// (LogPsiModel::complex_blocks); it returns empty vectors unless they cover all n_parameters (a model with real
// parameters of its own, as the transformer's, keeps the real SR).
struct HolomorphicPairs {
  std::vector<long> re, im;
  bool empty() const { return re.empty(); }
};
HolomorphicPairs holomorphic_pairs(const std::vector<ComplexBlock>& blocks, long n_parameters);

// SR for a log ψ that is holomorphic in the complex weights w_k = θ_re[k] + i θ_im[k] (the complex RBM): then
// O_im[k] = i O_re[k], S = XᵀX is the real form of the Hermitian S_c = ⟨ΔG† ΔG⟩ (G = O_re columns, K = P/2) and
// F of f = ⟨ΔG† ΔE⟩, so (S + λI) δ = F is (S_c + λI) z = f with δ_re = Re z, δ_im = Im z: one K×K complex herk and
// Cholesky (half the flops of the real 2M×P syrk and the P×P Cholesky). The same δ as sr_direction's pxp form up
// to rounding. Returns false, writing nothing, when it does not apply: pairs not covering every column, a Jacobian
// that is not holomorphic (|O_im[k] − i O_re[k]| above 1e-10 of max |O|), a non-host build, or a Cholesky that fails
// or does not solve the system (the caller then runs sr_direction, with its pseudo-inverse fallback).
template <class T>
bool sr_direction_holomorphic(const View2<const T>& o_re, const View2<const T>& o_im, const View1<const T>& e_re,
                              const View1<const T>& e_im, double diag_shift, const HolomorphicPairs& pairs,
                              const View1<T>& delta, SrInfo& info);

}  // namespace attnphys::vmc
