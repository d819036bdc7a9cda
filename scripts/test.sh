#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs the suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd "${IMAGEPACK_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 600
