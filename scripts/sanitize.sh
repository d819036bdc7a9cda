#!/usr/bin/env bash
# Builds and runs the test suite under a sanitizer preset (CMakePresets.json).
#   scripts/sanitize.sh asan   clang, AddressSanitizer + UBSan, libFuzzer smoke
#                              runs; every library, tool and CLI test
#   scripts/sanitize.sh tsan   clang, ThreadSanitizer; the pipeline, loader,
#                              pack and verify tests (the threaded code)
# The trainer is not built in these presets: LibTorch is not instrumented.
# Results and findings: docs/RELIABILITY.md.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-asan}
case "$preset" in asan|tsan) ;; *) echo "usage: $0 asan|tsan" >&2; exit 2 ;; esac
scripts/setup.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
rc=0
ctest --preset "$preset" -j "$(nproc)" || rc=$?
# Every Python test skipped, with its reason (pytest's -rs lines).
skips=$(grep -h '^SKIPPED \[' "build-$preset/Testing/Temporary/LastTest.log" 2>/dev/null || true)
echo "pytest skips: $(printf '%s' "$skips" | grep -c . || true)"
[ -z "$skips" ] || printf '%s\n' "$skips"
exit "$rc"
