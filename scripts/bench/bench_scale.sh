#!/usr/bin/env bash
# Memory and time that must not grow with the number of records
# (docs/BENCHMARKS.md, "Scale"). For each count N:
#  - a blob of N tiny raw records (4x4 RGB, 1000 classes) written straight
#    by bench_scale (no pack pipeline): the dataset the loader and
#    verify_db are measured on;
#  - pack_lmdb of an image tree of N hard links to tiny JPEGs (counts up to
#    --tree-max): files/s and peak RSS;
#  - the loader (bench_loader, random order, batch 256, 32 px, warm cache):
#    open time, peak RSS, RssAnon, images/s; 4 ranks at once: each rank's RssAnon and
#    Pss, the node's Pss, and the blob mapping's (the index) Rss and Pss;
#    a restore in the middle of the epoch;
#  - verify_db: seconds and peak RSS;
#  - last (the longest step at 10^8), pack_lmdb converting the generated
#    blob to LMDB, and the loader on that LMDB.
# Then --shards S shards of 1,000 records as one dataset: open time.
# Everything is written under --dir and removed as it goes.
#
#   scripts/bench/bench_scale.sh [--counts "100000 1000000"] [--tree-max 10000000] [--shards 10000]
#                                [--dir /work/scale-bench]
set -euo pipefail
cd "$(dirname "$0")/../.."
COUNTS="100000 1000000 10000000" TREE_MAX=10000000 SHARDS=10000 DIR=/work/scale-bench
while [ $# -gt 0 ]; do
  case $1 in
    --counts) COUNTS=$2; shift 2;; --tree-max) TREE_MAX=$2; shift 2;;
    --shards) SHARDS=$2; shift 2;; --dir) DIR=$2; shift 2;; *) exit 2;;
  esac
done
BIN=$(cd "${IMAGEPACK_BUILD_DIR:-build}/tools" && pwd)
mkdir -p "$DIR"
WORK=$(mktemp -d "$DIR/run-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
T=(/usr/bin/time -f "%e %M")
field() { sed -n "s/.*$1 \([0-9.]*\).*/\1/p" | head -1; }
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(df -h "$DIR" | awk 'NR == 2 {print $4 " free on " $6}')"
for N in $COUNTS; do
  echo "== $N records"
  GEN=$WORK/gen.blob
  "$BIN/bench_scale" "$GEN" --records "$N"
  echo "   generated blob: $(du -h "$GEN" | cut -f1)"
  if [ "$N" -le "$TREE_MAX" ]; then
    "$BIN/bench_scale" "$WORK/tree" --records "$N" --tree >/dev/null
    cat "$WORK/tree.sources"/* > /dev/null
    out=$( { "${T[@]}" "$BIN/pack_lmdb" "$WORK/tree" "$WORK/tree.lmdb" -q --stats-sample 0 >/dev/null; } 2>&1 | tail -1)
    echo "   pack_lmdb tree -> lmdb: $(awk -v n="$N" -v s="${out% *}" 'BEGIN {printf "%.0f files/s (%.1f s)", n / s, s}'), peak RSS $(( ${out#* } / 1024 )) MiB"
    rm -rf "$WORK/tree" "$WORK/tree.sources" "$WORK/tree.lmdb"
  fi
  cat "$GEN" > /dev/null
  LOAD=(--batch 256 --size 32 --order random)
  "$BIN/bench_loader" "$GEN" "${LOAD[@]}" --threads 2 --batches 1 >/dev/null  # warm: the header and metadata
  out=$("$BIN/bench_loader" "$GEN" "${LOAD[@]}" --threads 2 --batches 400)
  echo "   loader, 1 rank: open $(echo "$out" | field "open") s, $(echo "$out" | field ":") images/s; $(echo "$out" | grep -o 'peak RSS [0-9]* MiB'), $(echo "$out" | grep -o 'RssAnon [0-9]* MiB')"
  for r in 0 1 2 3; do
    "$BIN/bench_loader" "$GEN" "${LOAD[@]}" --threads 1 --rank $r --world 4 --batches 100 --linger 4 > "$WORK/rank$r" &
  done
  wait
  anon="" pss=0 dbrss="" dbpss=0
  for r in 0 1 2 3; do
    line=$(grep 'memory:' "$WORK/rank$r")
    anon+=" $(echo "$line" | sed -n 's/.*RssAnon \([0-9]*\) MiB.*/\1/p')"
    pss=$((pss + $(echo "$line" | sed -n 's/.*, Pss \([0-9]*\) MiB;.*/\1/p')))
    dbrss+=" $(echo "$line" | sed -n 's/.*mappings Rss \([0-9.]*\) MiB.*/\1/p')"
    dbpss=$(awk -v a="$dbpss" -v b="$(echo "$line" | sed -n 's/.*mappings Rss [0-9.]* MiB, Pss \([0-9.]*\) MiB.*/\1/p')" 'BEGIN {print a + b}')
  done
  echo "   loader, 4 ranks: RssAnon per rank$anon MiB; node Pss $pss MiB; blob mapped per rank$dbrss MiB (Pss of the 4: $dbpss MiB); the file in the page cache once: $(fincore -n -o RES "$GEN" | tr -d ' ')"
  out=$("$BIN/bench_loader" "$GEN" "${LOAD[@]}" --resume-at $((N / 2)) --batches 1)
  echo "   resume at position $((N / 2)): $(echo "$out" | grep -o 'restored.*')"
  out=$( { "${T[@]}" "$BIN/verify_db" "$GEN" -q >/dev/null; } 2>&1 | tail -1)
  echo "   verify_db: ${out% *} s, peak RSS $(( ${out#* } / 1024 )) MiB"
  cat "$GEN" > /dev/null
  out=$( { "${T[@]}" "$BIN/pack_lmdb" "$GEN" "$WORK/conv.lmdb" -q >/dev/null; } 2>&1 | tail -1)
  echo "   pack_lmdb blob -> lmdb (conversion): $(awk -v n="$N" -v s="${out% *}" 'BEGIN {printf "%.0f records/s (%.1f s)", n / s, s}'), peak RSS $(( ${out#* } / 1024 )) MiB"
  # The loader over that LMDB (its tree mapped by liblmdb).
  "$BIN/bench_loader" "$WORK/conv.lmdb" --batch 256 --size 32 --order random --threads 2 --batches 1 >/dev/null
  out=$("$BIN/bench_loader" "$WORK/conv.lmdb" --batch 256 --size 32 --order random --threads 2 --batches 400)
  echo "   loader on the LMDB, 1 rank: open $(echo "$out" | field "open") s, $(echo "$out" | field ":") images/s; $(echo "$out" | grep -o 'RssAnon [0-9]* MiB')"
  rm -f "$WORK/conv.lmdb"
  rm -f "$GEN"
done
if [ "$SHARDS" -gt 0 ]; then
  echo "== $SHARDS shards of 1,000 records (1000 classes) as one dataset"
  "$BIN/bench_scale" "$WORK/shard" --records $((SHARDS * 1000)) --shards "$SHARDS" >/dev/null
  cat "$WORK"/shard-* > /dev/null
  for run in cold warm; do
    out=$("$BIN/bench_loader" "$WORK"/shard-* --batch 256 --size 32 --threads 2 --order random --batches 10)
    echo "   $run: open $(echo "$out" | field "open") s; $(echo "$out" | grep -o 'RssAnon [0-9]* MiB')"
  done
fi
