#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <vector>

#include "attnphys/core/error.hpp"
#include "attnphys/solvers/entry/arrays.hpp"

namespace attnphys::python {

namespace py = pybind11;

template <class T>
using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;

// Counts live Python-owned objects that hold Kokkos memory; Kokkos is finalised at exit only when none is left
// (finalising earlier would free memory out from under them).
std::atomic<long>& live_objects();
struct LiveToken {
  LiveToken() { ++live_objects(); }
  LiveToken(const LiveToken&) { ++live_objects(); }
  ~LiveToken() { --live_objects(); }
};

inline std::vector<long> shape_of(const py::array& a) {
  return std::vector<long>(a.shape(), a.shape() + a.ndim());
}
// A shape as Python prints it: (8, 8), (5,) (the entry layer's formatter, so both print shapes alike).
inline std::string shape_str(const std::vector<long>& shape) { return entry::shape_str(shape); }
inline std::string shape_str(const py::array& a) { return shape_str(shape_of(a)); }

// A numpy argument for the array entry points (attnphys/solvers/entry/arrays.hpp, where the checks live): the
// float64 C-contiguous array (forcecast) and the HostArray that points into it, valid while this object lives.
inline entry::HostArray host_array(const Array<double>& a) { return {a.data(), shape_of(a)}; }
struct HeldArray {
  Array<double> array;
  entry::HostArray host;  // data == nullptr: None
  HeldArray() = default;
  explicit HeldArray(const py::object& o) {
    if (o.is_none()) return;
    array = o.cast<Array<double>>();
    host = host_array(array);
  }
};

void bind_core(py::module_& m);

// Each bind_*.cpp registers itself with a static BindRegistrar, so a component adds bindings by adding a file:
//   static attnphys::python::BindRegistrar reg("heat", bind_heat);   // bind_heat(py::module_& m)
// The module calls them in name order after bind_core; each usually makes its own submodule (m.def_submodule).
using BindFn = void (*)(py::module_&);
std::vector<std::pair<std::string, BindFn>>& bind_registry();
struct BindRegistrar {
  BindRegistrar(const std::string& name, BindFn fn) { bind_registry().emplace_back(name, fn); }
};

}  // namespace attnphys::python
