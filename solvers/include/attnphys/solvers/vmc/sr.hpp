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

#include "attnphys/core/options.hpp"
#include "attnphys/core/views.hpp"

namespace attnphys::vmc {

// pxp: solve in parameter space (P x P); minsr: in sample space (2M x 2M); auto: minsr when P > 2M.
enum class SrForm { Auto, Pxp, Minsr };

}  // namespace attnphys::vmc

namespace attnphys {
template <>
struct EnumNames<vmc::SrForm> {
  static constexpr EnumName<vmc::SrForm> values[] = {
      {vmc::SrForm::Auto, "auto"}, {vmc::SrForm::Pxp, "pxp"}, {vmc::SrForm::Minsr, "minsr"}};
};
}  // namespace attnphys

namespace attnphys::vmc {

struct SrInfo {
  SrForm form = SrForm::Pxp;  // the form solved: pxp or minsr
  bool used_pinv = false;
  double grad_norm = 0;   // ‖2F‖
};

// form: pxp, minsr or auto (minsr when P > 2M). o_re/o_im [M, P], e_re/e_im [M]; delta [P] receives δ,
// gradient (if non-empty) [P] receives 2F.
template <class T>
SrInfo sr_direction(const View2<const T>& o_re, const View2<const T>& o_im, const View1<const T>& e_re,
                    const View1<const T>& e_im, double diag_shift, SrForm form, double rcond,
                    const View1<T>& delta, const View1<T>& gradient = View1<T>());

}  // namespace attnphys::vmc
