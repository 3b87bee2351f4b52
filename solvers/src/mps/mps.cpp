#include "attnphys/solvers/mps/mps.hpp"

#include <Eigen/QR>
#include <algorithm>
#include <cmath>

#include "attnphys/core/error.hpp"
#include "attnphys/core/hdf5_io.hpp"

namespace attnphys::mps {

Mps Mps::product_state(const std::vector<int>& states, int d) {
  require(!states.empty(), "a product state needs at least one site");
  Mps psi;
  for (int s : states) {
    require(s >= 0 && s < d, "product state: local state ", s, " outside 0..", d - 1);
    SiteTensor t(1, d, 1);
    t(0, s, 0) = 1.0;
    psi.sites_.push_back(std::move(t));
  }
  psi.center_ = 0;
  return psi;
}

Mps Mps::uniform_product(int n, const Eigen::VectorXd& local) {
  require(n >= 1 && local.size() >= 1 && local.norm() > 0, "uniform_product needs n >= 1 and a nonzero local state");
  Mps psi;
  for (int i = 0; i < n; ++i) {
    SiteTensor t(1, int(local.size()), 1);
    t.data.col(0) = local / local.norm();
    psi.sites_.push_back(std::move(t));
  }
  psi.center_ = 0;
  return psi;
}

Mps Mps::neel(int n) {
  std::vector<int> s(n);
  for (int i = 0; i < n; ++i) s[i] = i % 2;
  return product_state(s, 2);
}

Mps Mps::random(int n, int d, int chi, unsigned long seed) {
  require(n >= 1 && d >= 1 && chi >= 1, "Mps::random needs n, d, chi >= 1");
  Mps psi;
  // A small linear congruential stream keeps the state reproducible on every platform.
  unsigned long long x = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  auto uniform = [&x]() {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return double(x >> 11) * (1.0 / 9007199254740992.0) - 0.5;
  };
  long dl = 1;
  for (int i = 0; i < n; ++i) {
    // Bond dimensions capped by the Hilbert-space dimension on either side.
    long dr = 1;
    if (i < n - 1) {
      double left = std::pow(double(d), i + 1), right = std::pow(double(d), n - 1 - i);
      dr = long(std::min<double>({double(chi), left, right}));
    }
    SiteTensor t(int(dl), d, int(dr));
    for (long k = 0; k < t.data.size(); ++k) t.data.data()[k] = uniform();
    psi.sites_.push_back(std::move(t));
    dl = dr;
  }
  psi.canonicalize(0);
  psi.normalize();
  return psi;
}

int Mps::max_bond_dimension() const {
  int m = 1;
  for (const auto& s : sites_) m = std::max(m, s.dr);
  return m;
}

std::vector<int> Mps::bond_dimensions() const {
  std::vector<int> b;
  for (int i = 0; i + 1 < size(); ++i) b.push_back(sites_[i].dr);
  return b;
}

void Mps::move_center_right(int i) {
  auto& a = sites_[i];
  auto& b = sites_[i + 1];
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(a.left());
  const int k = int(std::min<long>(a.left().rows(), a.dr));
  Eigen::MatrixXd q = qr.householderQ() * Eigen::MatrixXd::Identity(a.left().rows(), k);
  Eigen::MatrixXd r = qr.matrixQR().topRows(k).triangularView<Eigen::Upper>();
  Eigen::MatrixXd nb = r * b.right();
  a.dr = k;
  a.data = q;
  b.dl = k;
  b.data = Eigen::Map<Eigen::MatrixXd>(nb.data(), k * b.d, b.dr);
}

void Mps::move_center_left(int i) {
  auto& a = sites_[i - 1];
  auto& b = sites_[i];
  Eigen::MatrixXd bt = b.right().transpose();  // (d dr) x dl
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(bt);
  const int k = int(std::min<long>(bt.rows(), b.dl));
  Eigen::MatrixXd q = qr.householderQ() * Eigen::MatrixXd::Identity(bt.rows(), k);
  Eigen::MatrixXd r = qr.matrixQR().topRows(k).triangularView<Eigen::Upper>();
  Eigen::MatrixXd qt = q.transpose();  // k x (d dr): right-orthonormal rows
  Eigen::MatrixXd na = a.left() * r.transpose();
  b.dl = k;
  b.data = Eigen::Map<Eigen::MatrixXd>(qt.data(), k * b.d, b.dr);
  a.dr = k;
  a.data = na;
}

void Mps::canonicalize(int center) {
  require(center >= 0 && center < size(), "canonicalize: center ", center, " outside 0..", size() - 1);
  for (int i = 0; i < center; ++i) move_center_right(i);
  for (int i = size() - 1; i > center; --i) move_center_left(i);
  center_ = center;
}

void Mps::shift_center(int to) {
  require(center_ >= 0, "shift_center needs a canonical state; call canonicalize first");
  require(to >= 0 && to < size(), "shift_center: site ", to, " outside 0..", size() - 1);
  for (; center_ < to; ++center_) move_center_right(center_);
  for (; center_ > to; --center_) move_center_left(center_);
}

double Mps::norm() const {
  if (center_ >= 0) return sites_[center_].data.norm();
  return std::sqrt(std::max(0.0, overlap(*this, *this)));
}

void Mps::normalize() {
  if (center_ < 0) canonicalize(0);
  const double nrm = sites_[center_].data.norm();
  require(nrm > 0, "cannot normalise a zero MPS");
  sites_[center_].data /= nrm;
}

Eigen::VectorXd Mps::to_dense() const {
  require(size() <= 20, "Mps::to_dense is for small chains (n <= 20), got n = ", size());
  Eigen::MatrixXd v = Eigen::MatrixXd::Ones(1, 1);  // rows: basis states so far, cols: right bond
  for (const auto& t : sites_) {
    Eigen::MatrixXd next = Eigen::MatrixXd::Zero(v.rows() * t.d, t.dr);
    for (long sig = 0; sig < v.rows(); ++sig)
      for (int s = 0; s < t.d; ++s)
        for (int r = 0; r < t.dr; ++r) {
          double acc = 0;
          for (int l = 0; l < t.dl; ++l) acc += v(sig, l) * t(l, s, r);
          next(sig * t.d + s, r) = acc;
        }
    v = std::move(next);
  }
  return v.col(0);
}

double overlap(const Mps& a, const Mps& b) {
  require(a.size() == b.size(), "overlap: MPS of different lengths ", a.size(), " and ", b.size());
  Eigen::MatrixXd e = Eigen::MatrixXd::Ones(1, 1);  // (bond of a) x (bond of b)
  for (int i = 0; i < a.size(); ++i) {
    const auto &x = a[i], &y = b[i];
    Eigen::MatrixXd t = e * y.right();  // dla x (d drb), layout (la, s, rb)
    Eigen::Map<const Eigen::MatrixXd> tl(t.data(), x.dl * x.d, y.dr);
    e = x.left().transpose() * tl;
  }
  return e(0, 0);
}

double left_orthonormality_error(const SiteTensor& a) {
  Eigen::MatrixXd g = a.left().transpose() * a.left();
  return (g - Eigen::MatrixXd::Identity(g.rows(), g.cols())).cwiseAbs().maxCoeff();
}

double right_orthonormality_error(const SiteTensor& a) {
  Eigen::MatrixXd g = a.right() * a.right().transpose();
  return (g - Eigen::MatrixXd::Identity(g.rows(), g.cols())).cwiseAbs().maxCoeff();
}

void save_mps(const Mps& psi, const std::string& path, const std::string& config_toml) {
  h5::Writer w(path, "mps", 1);
  w.set_attr("/", "n", long(psi.size()));
  w.set_attr("/", "d", long(psi.local_dim()));
  w.set_attr("/", "center", long(psi.center()));
  if (!config_toml.empty()) w.set_attr("/", "config", config_toml);
  for (int i = 0; i < psi.size(); ++i) {
    const auto& t = psi[i];
    std::vector<double> buf(std::size_t(t.dl) * t.d * t.dr);
    std::size_t k = 0;
    for (int l = 0; l < t.dl; ++l)
      for (int s = 0; s < t.d; ++s)
        for (int r = 0; r < t.dr; ++r) buf[k++] = t(l, s, r);
    w.write<double>("site_" + std::to_string(i), buf.data(),
                    {std::uint64_t(t.dl), std::uint64_t(t.d), std::uint64_t(t.dr)});
  }
  w.commit();
}

Mps load_mps(const std::string& path) {
  h5::Reader r(path, "mps", 1);
  const long n = r.attr_long("/", "n"), d = r.attr_long("/", "d");
  require(n >= 1 && d >= 1, path, ": an MPS needs n >= 1 and d >= 1, found n = ", n, ", d = ", d);
  std::vector<SiteTensor> sites;
  long prev = 1;
  for (long i = 0; i < n; ++i) {
    h5::Shape sh;
    const std::string name = "site_" + std::to_string(i);
    require(r.has(name), path, ": dataset ", name, " is missing");
    std::vector<double> buf = r.read<double>(name, &sh);
    require(sh.size() == 3 && long(sh[1]) == d && long(sh[0]) == prev && (i + 1 < n || sh[2] == 1), path, ": ",
            name, " has an inconsistent shape");
    SiteTensor t{int(sh[0]), int(d), int(sh[2])};
    std::size_t k = 0;
    for (int l = 0; l < t.dl; ++l)
      for (int s = 0; s < t.d; ++s)
        for (int q = 0; q < t.dr; ++q) t(l, s, q) = buf[k++];
    prev = t.dr;
    sites.push_back(std::move(t));
  }
  Mps psi;
  psi.sites() = std::move(sites);
  psi.set_center(int(r.attr_long("/", "center")));
  return psi;
}

}  // namespace attnphys::mps
