// attnphys._core: the compiled half of the Python package. Each component adds its bindings through a
// bind_* function defined in its own file.
#include "bindings.hpp"

#include "attnphys/core/runtime.hpp"

#include <algorithm>

namespace py = pybind11;

namespace attnphys::python {
std::vector<std::pair<std::string, BindFn>>& bind_registry() {
  static std::vector<std::pair<std::string, BindFn>> r;
  return r;
}
}  // namespace attnphys::python

PYBIND11_MODULE(_core, m) {
  m.doc() = "attnphys compiled core (use the attnphys package, not this module directly)";
  attnphys::ensure_initialized();
  // C++ errors become attnphys.Error (a RuntimeError), never a crash.
  static py::exception<attnphys::Error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const attnphys::Error& e) {
      error(e.what());
    }
  });
  attnphys::python::bind_core(m);
  auto binders = attnphys::python::bind_registry();
  std::sort(binders.begin(), binders.end());
  for (const auto& [name, fn] : binders) fn(m);
}
