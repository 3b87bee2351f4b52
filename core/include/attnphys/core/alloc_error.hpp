#pragma once
// Recognising Kokkos' report of a failed allocation, so that the program and the Python module can say "not enough
// memory for this request" instead of an internal error.
#include <cstring>

namespace attnphys {

// True when a std::runtime_error's message is Kokkos saying an allocation failed: Kokkos 3 writes "Kokkos failed to
// allocate memory ... Allocation of size ...", Kokkos 4 "Kokkos ERROR: Host memory space failed to allocate 291 TiB
// (label=...)" (the Cuda memory space on a GPU).
inline bool is_kokkos_allocation_failure(const char* what) {
  return what != nullptr && (std::strstr(what, "Kokkos failed to allocate memory") != nullptr ||
                             (std::strstr(what, "Kokkos ERROR") != nullptr &&
                              std::strstr(what, "memory space failed to allocate") != nullptr));
}

}  // namespace attnphys
