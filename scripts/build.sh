#!/usr/bin/env bash
# Configures and builds imagepack in build/ (Release). Extra arguments go to
# CMake, e.g. scripts/build.sh -DIMAGEPACK_BUILD_TRAINER=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${IMAGEPACK_BUILD_DIR:-build}
GEN=()
command -v ninja >/dev/null && [ ! -f "$BUILD/Makefile" ] && GEN=(-G Ninja)
cmake -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$BUILD" -j "$(nproc)"
