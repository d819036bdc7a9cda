#!/usr/bin/env bash
# Smoke run of one fuzz target: replays every seed and regression input
# (each must pass), then runs RUNS mutated inputs from a copy of the corpus
# with a fixed seed. The fixed seed does not make that run repeatable: the
# same commit reached coverage 947, 988 and 987 in three runs of
# fuzz_decode (libFuzzer's feedback sees addresses under ASLR, libvips'
# threads and caches, and inputs of equal size in directory order). So
# this step can find a new input that earlier runs missed, and CI then
# fails with that input printed: a real defect, to be fixed and kept as a
# regress-* input. Open-ended fuzzing is scripts/fuzz.sh.
# The mutation run stops after RUNS inputs or IMAGEPACK_FUZZ_SMOKE_S
# seconds (default 90), whichever comes first: on a busy machine it tries
# fewer inputs rather than overrun the test's timeout (the parquet
# target's seeds expand to its 256 MiB budget, seconds each under ASan).
# One input may take 30 s (-timeout) before it counts as a hang: the
# heaviest seed takes 3.5 s alone under ASan, and a machine with CPU hogs
# beside the suite runs it several times slower.
# Usage: smoke.sh FUZZER CORPUS_DIR RUNS [DICT]
# DICT: a libFuzzer dictionary (tokens the mutations insert).
set -euo pipefail
fuzzer=$1 corpus=$2 runs=$3
dict=()
[ $# -ge 4 ] && [ -n "$4" ] && dict=("-dict=$4")
[ -d "$corpus" ] && [ -n "$(ls -A "$corpus")" ] || { echo "no corpus in $corpus" >&2; exit 1; }
# A target that crashes cannot remove its scratch folder: remove those of
# processes that are gone.
clean_scratch() {
  for d in /dev/shm/imagepack-fuzz-*; do
    [ -d "$d" ] && ! kill -0 "${d##*-}" 2>/dev/null && rm -rf "$d"
  done
  return 0
}
work=$(mktemp -d /tmp/imagepack-fuzz-XXXXXX)
trap 'rm -rf "$work"; clean_scratch' EXIT
cp -r "$corpus"/. "$work/corpus"
# 1. Every kept input runs clean (a fixed crash stays fixed).
"$fuzzer" -runs=0 "$work/corpus" 2>"$work/replay.log" || { tail -40 "$work/replay.log" >&2; exit 1; }
# 2. A short, deterministic fuzzing run; a crash leaves its input in $work.
if ! "$fuzzer" -seed=1 -runs="$runs" -rss_limit_mb=2048 -timeout=30 \
     -max_total_time="${IMAGEPACK_FUZZ_SMOKE_S:-90}" -print_final_stats=1 "${dict[@]}" \
     -artifact_prefix="$work/" "$work/corpus" 2>"$work/fuzz.log"; then
  tail -60 "$work/fuzz.log" >&2
  for f in "$work"/crash-* "$work"/timeout-* "$work"/oom-* "$work"/leak-*; do
    [ -e "$f" ] && echo "input: $(base64 -w0 "$f")" >&2
  done
  exit 1
fi
grep -E "stat::number_of_executed_units|stat::new_units_added" "$work/fuzz.log" || true
