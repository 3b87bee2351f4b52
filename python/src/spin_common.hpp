#pragma once
// What the spin bindings share (bind_spin.cpp, bind_autoregressive.cpp): spin-array conversion, the Ansatz base
// holder, option dictionaries and VMC step dictionaries.
#include <map>
#include <memory>
#include <string>

#include "attnphys/solvers/vmc/driver.hpp"
#include "bindings.hpp"

namespace attnphys::python {

inline View2<double> spins_in(const Array<double>& s, int n) {
  require(s.ndim() == 2 && s.shape(1) == n, "sigma must be a [B, ", n, "] array of ±1, got shape ", shape_str(s));
  const long B = s.shape(0);
  for (long k = 0; k < B * n; ++k)
    require(s.data()[k] == 1.0 || s.data()[k] == -1.0, "sigma must hold only +1 and -1, found ", s.data()[k]);
  View2<double> v("attnphys::py_sigma", B, n);
  Kokkos::deep_copy(v, HostView2<const double>(s.data(), B, n));
  return v;
}

template <class V>
inline Array<double> out_array(const V& v, std::vector<long> shape) {
  Array<double> out(shape);
  auto h = to_host(v);
  std::copy(h.data(), h.data() + h.span(), out.mutable_data());
  return out;
}

// Every ansatz exposed to Python is a PyAnsatz (the common methods live on the Ansatz base class); Rbm, Transformer
// and Autoregressive only add constructors and their own extras.
struct PyAnsatz {
  std::unique_ptr<vmc::LogPsiModel<double>> model;
  LiveToken token;
};

inline void apply_options(OptionSet& set, const std::map<std::string, py::object>& options) {
  for (const auto& [k, v] : options) {
    std::string text = py::isinstance<py::bool_>(v) ? (v.cast<bool>() ? "true" : "false")
                                                     : py::str(v).cast<std::string>();
    set.set(k + "=" + text);
  }
}

inline py::dict step_dict(const vmc::VmcStep& s) {
  py::dict d;
  const auto cols = vmc::VmcDriver<double>::log_columns();
  const auto row = vmc::VmcDriver<double>::log_row(s);
  for (std::size_t k = 0; k < cols.size(); ++k) d[cols[k].c_str()] = row[k];
  d["iteration"] = s.iteration;
  d["used_pinv"] = s.used_pinv;
  d["rejected"] = s.rejected;
  return d;
}


}  // namespace attnphys::python
