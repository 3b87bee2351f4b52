#!/usr/bin/env bash
# Installs the Debian packages attnphys needs, if any are missing. Sourced by scripts/run_main and scripts/test.
#   ensure_packages build   # compiler toolchain, Kokkos, Kokkos Kernels, OpenBLAS, Eigen, HDF5, pybind11, ...
#   ensure_packages test    # the above plus pytest, h5py, matplotlib, PyTorch (reference in tests), OpenMPI
# As root it runs apt-get; otherwise it stops and prints the exact command to run.

ATTNPHYS_BUILD_PACKAGES=(
  cmake ninja-build g++ git pkg-config
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev libopenblas-dev
  libeigen3-dev libhdf5-dev libtomlplusplus-dev libcli11-dev
  pybind11-dev python3-dev python3-numpy python3-matplotlib python3-h5py
  libopenmpi-dev openmpi-bin
  libgtest-dev libbenchmark-dev ccache
)
ATTNPHYS_TEST_PACKAGES=(python3-pytest python3-torch)

ensure_packages() {
  local want=("${ATTNPHYS_BUILD_PACKAGES[@]}")
  [ "${1:-build}" = test ] && want+=("${ATTNPHYS_TEST_PACKAGES[@]}")
  local missing=()
  for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "attnphys: installing missing Debian packages: ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "attnphys: not root; run this first, then try again:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null || { echo "attnphys: apt-get update failed" >&2; exit 1; }
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
    { echo "attnphys: apt-get install failed for: ${missing[*]}" >&2; exit 1; }
}

# The compiler cache: every build here (build/, pip's build-pip/) compiles through ccache, with paths inside the
# checkout rewritten relative to the build folder (CCACHE_BASEDIR), so that a second tree at the same depth with the
# same flags (CI's `pip install .` and then scripts/test) reuses the first one's objects instead of compiling them
# again. CMake reads the launcher when it first configures a tree. ATTNPHYS_CCACHE=0 turns it off; a launcher the
# caller already chose is kept.
use_ccache() {
  [ "${ATTNPHYS_CCACHE:-1}" = 0 ] && return 0
  command -v ccache >/dev/null || return 0
  local cache
  cache=$(ccache -k cache_dir 2>/dev/null) || return 0
  if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then  # ccache would fail every compile
    echo "attnphys: ccache's folder $cache is not writable (set CCACHE_DIR); building without the cache" >&2
    return 0
  fi
  export CMAKE_C_COMPILER_LAUNCHER="${CMAKE_C_COMPILER_LAUNCHER:-ccache}"
  export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
}

# Configures (once) and builds into ${ATTNPHYS_BUILD_DIR:-build}. Extra arguments go to CMake's configure step.
build_attnphys() {
  local dir="${ATTNPHYS_BUILD_DIR:-build}"
  use_ccache
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE=/usr/bin/python3 "$@" ||
      { echo "attnphys: CMake configure failed (see above)" >&2; exit 1; }
  fi
  cmake --build "$dir" -j "$(nproc)" || { echo "attnphys: build failed (see above)" >&2; exit 1; }
}
