#!/usr/bin/env bash
# Duplicate and leak finding (inspect_db --duplicates), timed and scored:
#   1. the planted corpus of the tests: 10,000 train + 1,000 val mosaics of
#      photo tiles with 600 planted copies (make_planted_duplicates.py)
#   2. the whole of Fashion-MNIST, train (60,000) against test (10,000)
#   3. 200,000 photo mosaics with 2,000 planted copies
# Inputs are packed first (not timed); each figure is one run, warm cache.
#
#   scripts/bench/bench_duplicates.sh [--large 200000]
set -euo pipefail
cd "$(dirname "$0")/../.."
LARGE=200000
[ "${1:-}" = --large ] && LARGE=$2
BIN=${IMAGEPACK_BUILD_DIR:-build}/tools
[ -x "$BIN/inspect_db" ] || scripts/build.sh >/dev/null
WORK=${BENCH_DIR:-/tmp/imagepack-bench}/duplicates
mkdir -p "$WORK"
corpus() {  # DIR BASES VAL PLANTED
  [ -f "$1/val.lmdb" ] && return
  /usr/bin/python3 scripts/make_planted_duplicates.py "$1" --bases "$2" --val "$3" --planted "$4" >/dev/null
  "$BIN/pack_lmdb" "$1/train" "$1/train.lmdb" -q >/dev/null
  "$BIN/pack_lmdb" "$1/val" "$1/val.lmdb" -q >/dev/null
}
run() {  # DIR DBS...
  local dir=$1; shift
  /usr/bin/time -f "bench_duplicates: peak RSS %M KB, %e s wall" "$BIN/inspect_db" "$@" --out "$dir/found" --duplicates -q
}
echo "== planted: 10,000 + 1,000 records, 600 copies"
corpus "$WORK/planted" 10000 1000 500
run "$WORK/planted" "$WORK/planted/train.lmdb" "$WORK/planted/val.lmdb"
/usr/bin/python3 scripts/bench/eval_duplicates.py "$WORK/planted" "$WORK/planted/found/duplicates.csv"

echo "== Fashion-MNIST: train 60,000 + test 10,000"
if [ ! -f "$WORK/fmnist/test.lmdb" ]; then
  /usr/bin/python3 scripts/export_fashion_mnist.py "$WORK/fmnist/tree" >/dev/null
  for s in train test; do "$BIN/pack_lmdb" "$WORK/fmnist/tree/$s" "$WORK/fmnist/$s.lmdb" --encoding raw --channels 1 -q >/dev/null; done
fi
run "$WORK/fmnist" "$WORK/fmnist/train.lmdb" "$WORK/fmnist/test.lmdb"
echo "== the same, near-identical only (--min-similarity 0.97 --min-detail 0.9)"
/usr/bin/time -f "bench_duplicates: peak RSS %M KB, %e s wall" "$BIN/inspect_db" "$WORK/fmnist/train.lmdb" \
  "$WORK/fmnist/test.lmdb" --out "$WORK/fmnist/strict" --duplicates -q --min-similarity 0.97 --min-detail 0.9

echo "== $LARGE photo mosaics, $((LARGE / 100)) copies"
corpus "$WORK/large-$LARGE" "$LARGE" 0 $((LARGE / 120))
run "$WORK/large-$LARGE" "$WORK/large-$LARGE/train.lmdb" "$WORK/large-$LARGE/val.lmdb"
/usr/bin/python3 scripts/bench/eval_duplicates.py "$WORK/large-$LARGE" "$WORK/large-$LARGE/found/duplicates.csv"
