#pragma once
// Measurements on an MPS: energy and variance of an MPO, entanglement entropy per bond, local expectation values
// and two-point correlations. Results are normalised by <psi|psi>.
#include <string>
#include <vector>

#include "attnphys/solvers/mps/mpo.hpp"
#include "attnphys/solvers/mps/mps.hpp"

namespace attnphys::mps {

// <psi|W|psi> / <psi|psi>
double expectation(const Mpo& w, const Mps& psi);
// <H^2> - <H>^2, with <H^2> contracted through the product MPO H*H (two layers, never H|psi> explicitly).
double variance(const Mpo& h, const Mps& psi);
// von Neumann entropy -sum s^2 ln s^2 of the Schmidt values on each of the n-1 bonds.
std::vector<double> entanglement_entropies(const Mps& psi);
// <O_i> for every site (O a local operator name: Sz, X, Z, ...), e.g. the magnetisation profile.
std::vector<double> local_expectations(const Mps& psi, const std::string& op);
// <O1_i O2_j> (i != j).
double correlation(const Mps& psi, const std::string& op1, int i, const std::string& op2, int j);

// The same for any d x d operator matrices <s'|O|s>: <O_i> on every site, and the whole matrix C(i, j) =
// <A_i B_j> (C(i, i) = <(A B)_i>) in O(n^2 chi^3) -- one transfer sweep from each site, in mixed canonical form.
std::vector<double> local_expectations(const Mps& psi, const Eigen::MatrixXd& op);
Eigen::MatrixXd correlation_matrix(const Mps& psi, const Eigen::MatrixXd& a, const Eigen::MatrixXd& b);

}  // namespace attnphys::mps
