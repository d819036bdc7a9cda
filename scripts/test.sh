#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs the suite,
# then runs it again under AddressSanitizer + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
# The shared-machine attacks (tests/python/test_shared_machine.py) need
# root to become a second user: here they fail rather than skip without it.
export IMAGEPACK_REQUIRE_ATTACKS=1
# The parquet tests' writers (DuckDB, arrow-rs: npm packages setup.sh
# installs): here they fail rather than skip without them.
export IMAGEPACK_REQUIRE_DUCKDB=1
cd "${IMAGEPACK_BUILD_DIR:-build}"
rc=0
ctest --output-on-failure -j "$(nproc)" --timeout 600 || rc=$?
# Every Python test skipped, with its reason (pytest's -rs lines from every
# entry's output, passed or not; ctest's summary above names skipped
# GoogleTest and CLI entries).
skips=$(grep -h '^SKIPPED \[' Testing/Temporary/LastTest.log 2>/dev/null || true)
echo "pytest skips: $(printf '%s' "$skips" | grep -c . || true)"
[ -z "$skips" ] || printf '%s\n' "$skips"
[ "$rc" -eq 0 ] || exit "$rc"
cd - >/dev/null
# The same suite (without the trainer) under AddressSanitizer + UBSan, with
# a short run of every fuzz target (docs/RELIABILITY.md). About 3 minutes on
# 2 cores; IMAGEPACK_SKIP_SANITIZERS=1 leaves it out.
if [ "${IMAGEPACK_SKIP_SANITIZERS:-0}" != 1 ]; then
  scripts/sanitize.sh asan
fi
