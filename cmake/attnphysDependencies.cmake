# The one place that finds Kokkos and Kokkos Kernels, whichever flavour is installed, and exposes them as
# attnphys_kokkos (an interface target). Included by the build and by the installed attnphysConfig.cmake, so a
# downstream project gets exactly the same resolution.
#
# Two flavours are handled:
#   * Debian's Trilinos packaging (Kokkos 3.4.1, Serial): Kokkos::kokkos names a non-existent include directory
#     (/usr/lib/include) and Kokkos Kernels is exported as the plain target trilinos_kokkoskernels.
#   * A standalone Kokkos 4.x / Kokkos Kernels 4.x install (OpenMP, CUDA, HIP): Kokkos::kokkos and
#     Kokkos::kokkoskernels. Point CMake at it with -DKokkos_ROOT=... or CMAKE_PREFIX_PATH.
include_guard(GLOBAL)

find_package(Kokkos REQUIRED)
find_package(KokkosKernels REQUIRED)

if(TARGET trilinos_kokkoscore)
  # Debian/Trilinos flavour: repair the include directory of the exported interface target.
  set(_attnphys_kokkos_inc "${Kokkos_INCLUDE_DIRS}")
  if(NOT _attnphys_kokkos_inc)
    set(_attnphys_kokkos_inc "${KokkosKernels_INCLUDE_DIRS}")
  endif()
  get_filename_component(_attnphys_kokkos_inc "${_attnphys_kokkos_inc}" REALPATH)
  set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_attnphys_kokkos_inc}")
endif()

if(TARGET Kokkos::kokkoskernels)
  set(ATTNPHYS_KOKKOSKERNELS_TARGET Kokkos::kokkoskernels)
elseif(TARGET trilinos_kokkoskernels)
  set(ATTNPHYS_KOKKOSKERNELS_TARGET trilinos_kokkoskernels)
else()
  message(FATAL_ERROR "attnphys: found KokkosKernels but neither Kokkos::kokkoskernels nor trilinos_kokkoskernels "
                      "is defined; point KokkosKernels_ROOT at a Kokkos Kernels 3.4+ installation.")
endif()

if(NOT TARGET attnphys_kokkos)
  add_library(attnphys_kokkos INTERFACE IMPORTED GLOBAL)
  target_link_libraries(attnphys_kokkos INTERFACE Kokkos::kokkos ${ATTNPHYS_KOKKOSKERNELS_TARGET})
endif()

set(ATTNPHYS_KOKKOS_VERSION "${Kokkos_VERSION}")
if(NOT ATTNPHYS_KOKKOS_VERSION)
  set(ATTNPHYS_KOKKOS_VERSION "${KokkosCore_VERSION}")
endif()
message(STATUS "attnphys: Kokkos ${ATTNPHYS_KOKKOS_VERSION} (devices: ${Kokkos_DEVICES}), kernels target ${ATTNPHYS_KOKKOSKERNELS_TARGET}")

# GCC 12 workaround (kokkos/kokkos#8187, #7464; fixed upstream by kokkos/kokkos#8223 in Kokkos 4.7.00).
# With the mdspan-based Kokkos::View of Kokkos develop before 4.7.00, GCC 12.2-12.4 constant-folds the constexpr
# default constructor of Kokkos::Impl::SharedAllocationTracker to zero: every default-constructed View on the stack
# or in an array (`View2<double> v;`, std::array<View3<double>, 3>) gets a null record that is still marked
# "tracked", and its first assignment or its destructor dereferences it (segfault in
# SharedAllocationRecord::decrement). A small program checks whether the Kokkos found here has the problem with this
# compiler; if so, the build puts a copy of impl/Kokkos_SharedAlloc.hpp without that one `constexpr` (upstream's
# fix) in front of the Kokkos headers. Only the inline constructor changes, not the layout of any type.
# nvcc_wrapper counts as GNU here (its host compiler), so CUDA builds get the check too; nvcc compiles attnphys with
# the patched header (verified with CUDA 13.0, docs/building_kokkos4.md).
option(ATTNPHYS_KOKKOS_GCC12_WORKAROUND "Work around GCC 12's miscompiled default Kokkos::View when detected" ON)
if(ATTNPHYS_KOKKOS_GCC12_WORKAROUND AND NOT DEFINED ATTNPHYS_KOKKOS_GCC12_BUG
   AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13 AND ATTNPHYS_KOKKOS_VERSION VERSION_GREATER_EQUAL 4
   AND NOT CMAKE_CROSSCOMPILING)
  set(_probe_dir "${CMAKE_BINARY_DIR}${CMAKE_FILES_DIRECTORY}/attnphys_kokkos_probe")
  file(WRITE "${_probe_dir}/default_view.cpp" [=[
#include <Kokkos_Core.hpp>
// A default-constructed View holds no allocation: empty label, no owner. With the GCC 12 problem the label lookup
// (or the destructor) dereferences a null allocation record and the program crashes.
int main() {
  Kokkos::View<double*, Kokkos::HostSpace> v;
  Kokkos::View<double*, Kokkos::HostSpace> arr[2];
  return (v.label().empty() && arr[1].label().empty() && v.use_count() == 0) ? 0 : 1;
}
]=])
  try_run(_probe_run _probe_compile "${_probe_dir}/build" "${_probe_dir}/default_view.cpp"
          CMAKE_FLAGS "-DCMAKE_CXX_STANDARD=17" "-DCMAKE_CXX_STANDARD_REQUIRED=ON"
          LINK_LIBRARIES Kokkos::kokkos
          COMPILE_OUTPUT_VARIABLE _probe_out)
  if(NOT _probe_compile)
    message(WARNING "attnphys: could not build the default-View probe against Kokkos; no GCC 12 workaround.\n"
                    "${_probe_out}")
    set(ATTNPHYS_KOKKOS_GCC12_BUG OFF CACHE INTERNAL "")
  elseif(_probe_run EQUAL 0)
    set(ATTNPHYS_KOKKOS_GCC12_BUG OFF CACHE INTERNAL "")
  else()
    set(ATTNPHYS_KOKKOS_GCC12_BUG ON CACHE INTERNAL "")
  endif()
endif()
if(ATTNPHYS_KOKKOS_GCC12_WORKAROUND AND ATTNPHYS_KOKKOS_GCC12_BUG)
  find_file(ATTNPHYS_KOKKOS_SHAREDALLOC_HPP impl/Kokkos_SharedAlloc.hpp
            HINTS ${Kokkos_INCLUDE_DIRS} ${Kokkos_ROOT}/include ${Kokkos_DIR}/../../../include
            NO_DEFAULT_PATH)
  if(NOT ATTNPHYS_KOKKOS_SHAREDALLOC_HPP)
    get_target_property(_kokkos_incs Kokkos::kokkoscore INTERFACE_INCLUDE_DIRECTORIES)
    find_file(ATTNPHYS_KOKKOS_SHAREDALLOC_HPP impl/Kokkos_SharedAlloc.hpp HINTS ${_kokkos_incs} NO_DEFAULT_PATH)
  endif()
  set(_fix_dir "${CMAKE_BINARY_DIR}/attnphys_kokkos_gcc12_fix")
  if(ATTNPHYS_KOKKOS_SHAREDALLOC_HPP)
    file(READ "${ATTNPHYS_KOKKOS_SHAREDALLOC_HPP}" _sa)
    string(REPLACE "KOKKOS_FORCEINLINE_FUNCTION constexpr SharedAllocationTracker()"
                   "KOKKOS_FORCEINLINE_FUNCTION SharedAllocationTracker()" _sa_fixed "${_sa}")
  endif()
  if(ATTNPHYS_KOKKOS_SHAREDALLOC_HPP AND NOT _sa_fixed STREQUAL _sa)
    file(WRITE "${_fix_dir}/impl/Kokkos_SharedAlloc.hpp.tmp"
         "// Generated by attnphys (cmake/attnphysDependencies.cmake) from\n"
         "// ${ATTNPHYS_KOKKOS_SHAREDALLOC_HPP}\n"
         "// with the SharedAllocationTracker default constructor made non-constexpr (GCC 12, kokkos/kokkos#8223).\n"
         "${_sa_fixed}")
    configure_file("${_fix_dir}/impl/Kokkos_SharedAlloc.hpp.tmp" "${_fix_dir}/impl/Kokkos_SharedAlloc.hpp" COPYONLY)
    # Kokkos includes the header as <impl/Kokkos_SharedAlloc.hpp>: attnphys_kokkos' own include directory comes
    # before those of Kokkos::kokkos (which it links) on every compile line, so this copy wins.
    set_property(TARGET attnphys_kokkos APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${_fix_dir}")
    message(STATUS "attnphys: GCC ${CMAKE_CXX_COMPILER_VERSION} miscompiles default-constructed Kokkos::Views of "
                   "this Kokkos (kokkos/kokkos#8187); using ${_fix_dir}/impl/Kokkos_SharedAlloc.hpp "
                   "(non-constexpr SharedAllocationTracker(), the Kokkos 4.7.00 fix). Kokkos >= 4.7.00 or "
                   "GCC >= 13 needs no workaround.")
  else()
    message(WARNING "attnphys: GCC ${CMAKE_CXX_COMPILER_VERSION} miscompiles default-constructed Kokkos::Views of "
                    "this Kokkos (kokkos/kokkos#8187) and impl/Kokkos_SharedAlloc.hpp could not be patched: expect "
                    "segfaults in SharedAllocationRecord::decrement. Use Kokkos >= 4.7.00 or GCC >= 13.")
  endif()
endif()

find_package(Eigen3 3.3 REQUIRED NO_MODULE)
# Eigen serves host-only code (DMRG, ED, SR solves). Under nvcc it would mark its functions __host__ __device__ and
# draw hundreds of warnings (#20012, #20014, #20015) from code that never runs on the device; EIGEN_NO_CUDA keeps
# it a host library.
if(CMAKE_CXX_COMPILER MATCHES "nvcc_wrapper" AND TARGET Eigen3::Eigen)
  set_property(TARGET Eigen3::Eigen APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS EIGEN_NO_CUDA)
endif()
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT TARGET attnphys_hdf5)
  add_library(attnphys_hdf5 INTERFACE IMPORTED GLOBAL)
  if(TARGET hdf5::hdf5)
    target_link_libraries(attnphys_hdf5 INTERFACE hdf5::hdf5)
  else()
    target_include_directories(attnphys_hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
    target_link_libraries(attnphys_hdf5 INTERFACE ${HDF5_C_LIBRARIES})
    target_compile_definitions(attnphys_hdf5 INTERFACE ${HDF5_C_DEFINITIONS} ${HDF5_DEFINITIONS})
  endif()
endif()
find_package(tomlplusplus REQUIRED)
