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

# `import imagepack` for Debian's python3 with no path edits: a .pth file in
# its site folder (the user's, without root) names the built package's
# folder. The last build made this way is the one Python finds.
if [ -d "$BUILD/python/imagepack" ] && [ -x /usr/bin/python3 ]; then
  pydir=$(cd "$BUILD/python" && pwd)
  site=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
  if ! { mkdir -p "$site" && echo "$pydir" > "$site/imagepack.pth"; } 2>/dev/null; then
    site=$(/usr/bin/python3 -m site --user-site)
    mkdir -p "$site" && echo "$pydir" > "$site/imagepack.pth"
  fi
fi
