#!/usr/bin/env bash
# Two builds of imagepack side by side, for a change that must not cost
# speed (a refactor, a compiler flag): the library-bound jobs of the other
# benchmarks, each run with build A then build B in the same round, rounds
# interleaved, medians and the ratio B/A printed. On this shared machine a
# ratio within a few percent of 1.00 is noise.
#
#   git worktree add /tmp/before <commit> && cmake -S /tmp/before -B /tmp/before/build \
#     -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/before/build
#   scripts/bench/bench_ab.sh /tmp/before/build build [--rounds 5] [--no-train]
#
# Data: the trees bench_pack.sh makes (20,000 resized JPEGs, 2000 photos),
# bench_resize.sh's 1000 photos and bench_loader.sh's JPEG LMDB; made
# first where missing.
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
[ $# -ge 2 ] || { echo "usage: $0 BUILD_A BUILD_B [--rounds N] [--no-train]" >&2; exit 2; }
A=$1 B=$2
shift 2
ROUNDS=5 TRAIN=1
bench_options "BUILD_A BUILD_B [--rounds N] [--no-train]" --rounds=ROUNDS --no-train=TRAIN=0 -- "$@"
for b in "$A" "$B"; do
  [ -x "$b/tools/pack_lmdb" ] || { echo "$0: no tools in $b (build it first)" >&2; exit 2; }
done
bench_work
PHOTOS=$WORK/photos-2000
RESIZED=$WORK/resized-20000
LOADER_DB=/dev/shm/imagepack-bench-loader/jpeg.lmdb
[ -d "$RESIZED" ] && [ -d "$PHOTOS" ] || IMAGEPACK_BUILD_DIR=$B scripts/bench/bench_pack.sh --rounds 1 >/dev/null
[ -f "$LOADER_DB" ] || IMAGEPACK_BUILD_DIR=$B scripts/bench/bench_loader.sh --rounds 1 >/dev/null
# The resize job's photos (bench_resize.sh's tree of 1000): without them
# it timed a run that failed at once.
[ -d "$WORK/photos-1000" ] || /usr/bin/python3 scripts/make_photo_tree.py "$WORK/photos-1000" --images 1000 --classes 10 --seed 1 >/dev/null
find "$RESIZED" "$PHOTOS" "$WORK/photos-1000" -type f -exec cat {} + >/dev/null
OUT=/dev/shm/imagepack-bench-ab
TMP=$(mktemp -d /tmp/imagepack-bench-ab-XXXXXX)
trap 'rm -rf "$OUT" "$TMP"' EXIT
declare -A T
# Seconds per step of `train` (steps 3.. of --max-steps), from its metrics.
train_step() {
  rm -rf "$TMP/r18"
  "$1/trainer/train" --data "$LOADER_DB" --val "$LOADER_DB" --arch resnet18 --batch-size 32 --threads "$(nproc)" \
    --loader-threads 1 --epochs 1 --max-steps 10 --print-freq 1 --output "$TMP/r18" --no-val >/dev/null 2>&1 || true
  /usr/bin/python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if "\"train\"" in l][2:]
print(sum(r["step_seconds"] for r in rows) / len(rows))' "$TMP/r18/metrics.jsonl"
}
loader_rate() { "$1/tools/bench_loader" "$LOADER_DB" --batches 40 | sed -n 's/.*: \([0-9.]*\) images\/s.*/\1/p' | head -1; }
# One round of every job with build $1, results under key suffix $2.
round() {
  local bin=$1/tools k=$2
  rm -rf "$OUT"; mkdir -p "$OUT"
  T[resize$k]+="$(secs_any "$bin/resize_imagenet" "$WORK/photos-1000" "$OUT/resized" --max-size 256 -q) "
  rm -rf "$OUT/resized"
  T[jl$k]+="$(secs_any "$bin/pack_lmdb" "$RESIZED" "$OUT/j.lmdb" -q) "
  T[jb$k]+="$(secs_any "$bin/pack_lmdb" "$RESIZED" "$OUT/j.blob" --format blob -q) "
  rm -f "$OUT/j.blob"
  T[rb$k]+="$(secs_any "$bin/pack_lmdb" "$RESIZED" "$OUT/r.blob" --encoding raw --format blob -q) "
  T[conv$k]+="$(secs_any "$bin/pack_lmdb" "$OUT/j.lmdb" "$OUT/c.blob" --format blob --max-size 128 -q) "
  rm -f "$OUT/c.blob"
  T[one$k]+="$(secs_any "$bin/pack_lmdb" "$PHOTOS" "$OUT/one.lmdb" --max-size 256 -q) "
  rm -f "$OUT/one.lmdb"
  T[v$k]+="$(secs_any "$bin/verify_db" "$OUT/j.lmdb" -q) "
  T[vd$k]+="$(secs_any "$bin/verify_db" "$OUT/j.lmdb" --decode --stats -q) "
  T[vr$k]+="$(secs_any "$bin/verify_db" "$OUT/r.blob" --stats -q) "
  rm -f "$OUT/r.blob"
  T[load$k]+="$(loader_rate "$1") "
  [ "$TRAIN" = 1 ] && T[train$k]+="$(train_step "$1") "
  rm -rf "$OUT"
}
for r in $(seq "$ROUNDS"); do
  round "$A" a
  round "$B" b
done
echo "A/B: A=$A, B=$B; $(nproc) cores; median of $ROUNDS interleaved rounds"
printf '%-58s %10s %10s %7s\n' job A B "B/A"
row() {  # name key unit: time jobs print B's speed relative to A (A time / B time)
  local a b
  a=$(median ${T[${2}a]}) b=$(median ${T[${2}b]})
  if [ "$3" = rate ]; then
    awk -v n="$1" -v a="$a" -v b="$b" 'BEGIN {printf "%-58s %10.1f %10.1f %6.3fx\n", n " (images/s)", a, b, b / a}'
  else
    awk -v n="$1" -v a="$a" -v b="$b" 'BEGIN {printf "%-58s %10.3f %10.3f %6.3fx\n", n " (s)", a, b, a / b}'
  fi
}
row "resize_imagenet, 1000 photos to 256 px" resize s
row "pack_lmdb jpeg -> lmdb, 20,000 files" jl s
row "pack_lmdb jpeg -> blob" jb s
row "pack_lmdb raw -> blob (tmpfs)" rb s
row "pack_lmdb jpeg.lmdb -> blob, --max-size 128 (conversion)" conv s
row "pack_lmdb one pass, 2000 photos --max-size 256" one s
row "verify_db jpeg.lmdb, checksums" v s
row "verify_db jpeg.lmdb --decode --stats" vd s
row "verify_db raw.blob --stats" vr s
row "bench_loader, JPEG LMDB" load rate
[ "$TRAIN" = 1 ] && row "train resnet18, batch 32, seconds per step" train s
echo "B/A > 1: B is faster (time jobs: A's time / B's; rates: B / A)"
