// attnphys._core: the compiled half of the Python package. Each component adds its bindings through a
// bind_* function defined in its own file.
#include "bindings.hpp"

#include "attnphys/core/alloc_error.hpp"
#include "attnphys/core/runtime.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>

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
    } catch (const std::bad_alloc& e) {
      error((std::string("not enough memory for this request (") + e.what() + "); ask for fewer samples, a "
             "smaller grid or a smaller model").c_str());
    } catch (const std::runtime_error& e) {
      // Kokkos reports a failed allocation as a runtime_error: the same attnphys.Error as above, with its size.
      if (!attnphys::is_kokkos_allocation_failure(e.what())) throw;
      error((std::string("not enough memory for this request: ") + e.what()).c_str());
    }
  });
  attnphys::python::bind_core(m);
  auto binders = attnphys::python::bind_registry();
  std::sort(binders.begin(), binders.end());
  for (const auto& [name, fn] : binders) fn(m);
}
