#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS (default 300) from its corpus in
# tests/data/fuzz/<target>, in the asan build (rebuilt first if out of date).
#   scripts/fuzz.sh [SECONDS] [TARGET...]
# New coverage is kept in build-asan/fuzz-corpus/<target> (not in git);
# crashes land in build-asan/fuzz-artifacts/. A crash input that matters is
# minimised (fuzzer -minimize_crash=1) and committed to the target's corpus
# folder as regress-<what>, with the fix: the smoke tests replay it forever.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-300}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_record fuzz_meta fuzz_decode fuzz_verify)
# Always brought up to date: a stale binary re-finds fixed crashes.
cmake --preset asan >/dev/null && cmake --build --preset asan -j "$(nproc)" >/dev/null
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/sanitizers/lsan.supp}
mkdir -p build-asan/fuzz-artifacts
# A target that crashes cannot remove its scratch folder: remove those of
# processes that are gone.
clean_scratch() {
  for d in /dev/shm/imagepack-fuzz-*; do
    [ -d "$d" ] && ! kill -0 "${d##*-}" 2>/dev/null && rm -rf "$d"
  done
  return 0
}
status=0
for t in "${targets[@]}"; do
  corpus=build-asan/fuzz-corpus/$t
  mkdir -p "$corpus"
  log=build-asan/fuzz-artifacts/$t.log
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=("-dict=tests/fuzz/$t.dict")
  if build-asan/tests/fuzz/$t -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
       -print_final_stats=1 "${dict[@]}" -artifact_prefix=build-asan/fuzz-artifacts/$t- \
       "$corpus" "tests/data/fuzz/$t" >"$log" 2>&1; then
    result=clean
  else
    result="FAILED (see $log)"
    status=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  printf '%-12s %6ss  %10s inputs  %6s execs/s  coverage %s  %s\n' "$t" "$seconds" "$execs" "$rate" "$cov" "$result"
done
clean_scratch
exit $status
