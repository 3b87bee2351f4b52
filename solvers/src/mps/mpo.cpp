#include "attnphys/solvers/mps/mpo.hpp"

#include <algorithm>
#include <map>

#include "attnphys/core/error.hpp"

namespace attnphys::mps {

LocalOp parse_local_operator(const std::string& name) {
  if (const auto op = find_enum<LocalOp>(name)) return *op;
  fail("unknown local operator '", name, "': use Id, Sz, S+, S-, Sx, X or Z");
}

Eigen::Matrix2d local_operator(LocalOp op) {
  Eigen::Matrix2d m = Eigen::Matrix2d::Zero();
  switch (op) {
    case LocalOp::Id: m.setIdentity(); break;
    case LocalOp::Sz: m(0, 0) = 0.5, m(1, 1) = -0.5; break;
    case LocalOp::SPlus: m(0, 1) = 1.0; break;  // |up><down|
    case LocalOp::SMinus: m(1, 0) = 1.0; break;
    case LocalOp::Sx: m(0, 1) = m(1, 0) = 0.5; break;
    case LocalOp::X: m(0, 1) = m(1, 0) = 1.0; break;
    case LocalOp::Z: m(0, 0) = 1.0, m(1, 1) = -1.0; break;
  }
  return m;
}

Eigen::Matrix2d local_operator(const std::string& name) { return local_operator(parse_local_operator(name)); }

int Mpo::max_bond_dimension() const {
  int w = 1;
  for (const auto& s : sites) w = std::max(w, s.wr);
  return w;
}

AutoMpo& AutoMpo::add(double coef, const std::vector<std::pair<std::string, int>>& ops) {
  require(!ops.empty(), "AutoMpo::add needs at least one operator");
  std::vector<std::pair<std::string, int>> sorted = ops;
  std::sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
  OpTerm t{coef, {}};
  for (std::size_t k = 0; k < sorted.size(); ++k) {
    require(sorted[k].second >= 0 && sorted[k].second < n_, "AutoMpo: site ", sorted[k].second, " outside 0..",
            n_ - 1);
    require(k == 0 || sorted[k].second != sorted[k - 1].second, "AutoMpo: site ", sorted[k].second,
            " appears twice in one term; multiply the operators first");
    t.ops.emplace_back(parse_local_operator(sorted[k].first), sorted[k].second);  // parsed once, here
  }
  terms_.push_back(std::move(t));
  return *this;
}

namespace {
// The operator string of a term restricted to sites <= k: the state it occupies on bond k.
std::string prefix_key(const OpTerm& t, int k) {
  std::string key;
  for (const auto& [op, site] : t.ops)
    if (site <= k) key += enum_name(op) + ("@" + std::to_string(site)) + ";";
  return key;
}
}  // namespace

Mpo AutoMpo::to_mpo() const {
  require(n_ >= 1, "AutoMpo needs at least one site");
  const int kStart = 0, kFinal = 1;
  // State numbering per bond k (between sites k and k+1): 0 start, 1 final, 2.. prefixes.
  std::vector<std::map<std::string, int>> states(std::max(n_ - 1, 0));
  auto state_of = [&](int bond, const std::string& key) {
    auto& m = states[bond];
    auto it = m.find(key);
    if (it != m.end()) return it->second;
    const int id = 2 + int(m.size());
    m.emplace(key, id);
    return id;
  };
  // Left/right index on site i of a bond state: the boundaries hold only start (left end) or final (right end).
  auto left_index = [&](int i, int st) { return i == 0 ? 0 : st; };
  auto right_index = [&](int i, int st) { return i == n_ - 1 ? 0 : st; };

  using Key = std::pair<int, int>;
  std::vector<std::map<Key, Eigen::MatrixXd>> blocks(n_);
  const Eigen::MatrixXd id = Eigen::Matrix2d::Identity();
  for (const auto& t : terms_) {
    const int first = t.ops.front().second, last = t.ops.back().second;
    std::size_t k = 0;
    int prev = kStart;
    for (int j = first; j <= last; ++j) {
      Eigen::MatrixXd op = id;
      if (k < t.ops.size() && t.ops[k].second == j) op = local_operator(t.ops[k++].first);
      const int a = left_index(j, prev);
      if (j == last) {
        auto& blk = blocks[j][{a, right_index(j, kFinal)}];
        if (blk.size() == 0) blk = Eigen::MatrixXd::Zero(2, 2);
        blk += t.coef * op;  // final transitions of different terms add up
      } else {
        const int next = state_of(j, prefix_key(t, j));
        blocks[j][{a, right_index(j, next)}] = op;  // shared prefixes: the same transition, set once
        prev = next;
      }
    }
  }
  Mpo w;
  w.d = 2;
  w.sites.resize(n_);
  for (int i = 0; i < n_; ++i) {
    auto& s = w.sites[i];
    s.wl = i == 0 ? 1 : 2 + int(states[i - 1].size());
    s.wr = i == n_ - 1 ? 1 : 2 + int(states[i].size());
    if (i < n_ - 1) blocks[i][{left_index(i, kStart), kStart}] = id;
    if (i > 0) blocks[i][{kFinal, right_index(i, kFinal)}] = id;
    for (auto& [key, op] : blocks[i])
      if (op.cwiseAbs().maxCoeff() > 0) s.entries.push_back({key.first, key.second, op});
  }
  return w;
}

AutoMpo chain_terms(const spin::ChainModel& m) {
  m.validate();
  AutoMpo a(m.n);
  const int n = m.n;
  auto bonds = [&](int dist, auto&& f) {
    const int last = m.periodic() ? n : n - dist;
    for (int i = 0; i < last; ++i) {
      const int j = (i + dist) % n;
      if (j != i) f(i, j);
    }
  };
  auto heisenberg = [&](double J, double delta) {
    return [&a, J, delta](int i, int j) {
      a.add(0.5 * J, "S+", i, "S-", j);
      a.add(0.5 * J, "S-", i, "S+", j);
      if (delta != 0.0) a.add(J * delta, "Sz", i, "Sz", j);
    };
  };
  if (m.model == spin::ModelKind::Tfim) {
    bonds(1, [&](int i, int j) { a.add(-m.J, "Z", i, "Z", j); });
    for (int i = 0; i < n; ++i) a.add(-m.h, "X", i);
  } else if (m.model == spin::ModelKind::Xxz || m.model == spin::ModelKind::Heisenberg) {
    bonds(1, heisenberg(m.J, m.anisotropy()));
  } else {  // j1j2
    bonds(1, heisenberg(m.J, 1.0));
    bonds(2, heisenberg(m.j2, 1.0));
  }
  return a;
}

Mpo chain_mpo(const spin::ChainModel& m) { return chain_terms(m).to_mpo(); }

Mpo mpo_product(const Mpo& x, const Mpo& y) {
  require(x.size() == y.size() && x.d == y.d, "mpo_product: the MPOs differ in length or local dimension");
  Mpo p;
  p.d = x.d;
  p.sites.resize(x.size());
  for (int i = 0; i < x.size(); ++i) {
    const auto &a = x.sites[i], &b = y.sites[i];
    auto& s = p.sites[i];
    s.wl = a.wl * b.wl;
    s.wr = a.wr * b.wr;
    std::map<std::pair<int, int>, Eigen::MatrixXd> acc;
    for (const auto& ea : a.entries)
      for (const auto& eb : b.entries) {
        Eigen::MatrixXd op = ea.op * eb.op;
        if (op.cwiseAbs().maxCoeff() == 0) continue;
        auto& blk = acc[{ea.a * b.wl + eb.a, ea.b * b.wr + eb.b}];
        if (blk.size() == 0) blk = Eigen::MatrixXd::Zero(p.d, p.d);
        blk += op;
      }
    for (auto& [key, op] : acc) s.entries.push_back({key.first, key.second, op});
  }
  return p;
}

Eigen::MatrixXd mpo_to_dense(const Mpo& w) {
  require(w.size() <= 14, "mpo_to_dense is for small chains (n <= 14), got n = ", w.size());
  std::vector<Eigen::MatrixXd> m(1, Eigen::MatrixXd::Ones(1, 1));
  for (const auto& s : w.sites) {
    const long dim = m[0].rows() * w.d;
    std::vector<Eigen::MatrixXd> next(s.wr, Eigen::MatrixXd::Zero(dim, dim));
    for (const auto& e : s.entries) {
      const auto& prev = m[e.a];
      auto& out = next[e.b];
      for (long r = 0; r < prev.rows(); ++r)
        for (long c = 0; c < prev.cols(); ++c)
          if (prev(r, c) != 0.0) out.block(r * w.d, c * w.d, w.d, w.d) += prev(r, c) * e.op;
    }
    m = std::move(next);
  }
  return m[0];
}

}  // namespace attnphys::mps
