# ATTNPHYS_FUZZ=ON: libFuzzer targets (tests/fuzz) with AddressSanitizer and UndefinedBehaviorSanitizer, for clang
# only. Every library is compiled with coverage instrumentation (-fsanitize=fuzzer-no-link) and the sanitizers; the
# fuzz targets link libFuzzer's main. Off by default: the normal build and CI are unchanged. scripts/fuzz configures
# its own build directory (build-fuzz) with clang and runs each target for a fixed time.
include_guard(GLOBAL)

if(ATTNPHYS_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "attnphys: ATTNPHYS_FUZZ=ON needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}: configure "
                        "with -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang, or run scripts/fuzz")
  endif()
  if(ATTNPHYS_SANITIZE)
    message(FATAL_ERROR "attnphys: ATTNPHYS_FUZZ already builds with ASan + UBSan; leave ATTNPHYS_SANITIZE off")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined -g)
  add_link_options(-fsanitize=address,undefined)
  message(STATUS "attnphys: libFuzzer targets with ASan + UBSan (ATTNPHYS_FUZZ=ON)")
endif()
