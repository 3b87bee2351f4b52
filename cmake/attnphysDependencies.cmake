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

find_package(Eigen3 3.3 REQUIRED NO_MODULE)
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
