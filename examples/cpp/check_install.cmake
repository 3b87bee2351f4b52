# CI check of the installed package (ctest examples.cpp_find_package): installs a built attnphys tree into a
# prefix, configures this example project against it with find_package(attnphys), builds it and runs it.
#   cmake -DATTNPHYS_BUILD_DIR=build -DPREFIX=/tmp/attnphys-install -DWORK_DIR=/tmp/attnphys-example \
#         [-DGENERATOR=Ninja] [-DCXX_COMPILER=g++] -P examples/cpp/check_install.cmake
cmake_minimum_required(VERSION 3.18)
foreach(var ATTNPHYS_BUILD_DIR PREFIX WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_install.cmake: pass -D${var}=...")
  endif()
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_install.cmake: ${what} failed (exit ${rc}): ${ARGN}")
  endif()
endfunction()

file(REMOVE_RECURSE "${PREFIX}" "${WORK_DIR}")
run("cmake --install" "${CMAKE_COMMAND}" --install "${ATTNPHYS_BUILD_DIR}" --prefix "${PREFIX}")
if(NOT EXISTS "${PREFIX}/lib/cmake/attnphys/attnphysConfig.cmake" AND
   NOT EXISTS "${PREFIX}/lib64/cmake/attnphys/attnphysConfig.cmake")
  file(GLOB_RECURSE _configs "${PREFIX}/*/attnphysConfig.cmake")
  if(NOT _configs)
    message(FATAL_ERROR "check_install.cmake: the install tree ${PREFIX} has no attnphysConfig.cmake")
  endif()
endif()

set(_configure "${CMAKE_COMMAND}" -S "${CMAKE_CURRENT_LIST_DIR}" -B "${WORK_DIR}" -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_PREFIX_PATH=${PREFIX}")
if(GENERATOR)
  list(APPEND _configure -G "${GENERATOR}")
endif()
if(CXX_COMPILER)
  list(APPEND _configure "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
run("configuring examples/cpp against ${PREFIX}" ${_configure})
run("building examples/cpp" "${CMAKE_COMMAND}" --build "${WORK_DIR}")
run("running heat_and_ed" "${WORK_DIR}/heat_and_ed")
