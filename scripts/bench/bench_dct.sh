#!/usr/bin/env bash
# The accurate IDCT (Pillow's pixels) against the fast one, side by side in
# one run, on the resized photo tree (2000 256-px JPEGs from the
# wallpapers, page-cached; outputs on tmpfs, so the figures are CPU work):
#   - pack_lmdb --encoding raw --format blob (every JPEG decoded, stored);
#   - verify_db --decode on the JPEG pack (every JPEG decoded, checked);
#   - bench_loader on the JPEG pack, train transform (random crops, DCT
#     scaling, 224 px) and eval transform (shorter edge 256, centre 224).
# ROUNDS rounds, accurate and fast alternated; medians and accurate/fast.
#
#   scripts/bench/bench_dct.sh [--rounds 3] [--threads 2]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=3 THREADS=2
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2;;
    --threads) THREADS=$2; shift 2;;
    *) echo "usage: $0 [--rounds R] [--threads T]" >&2; exit 2;;
  esac
done
BIN=${IMAGEPACK_BUILD_DIR:-build}/tools
[ -x "$BIN/pack_lmdb" ] || scripts/build.sh >/dev/null
WORK=${BENCH_DIR:-/tmp/imagepack-bench}
OUT=/dev/shm/imagepack-bench-dct
mkdir -p "$WORK" "$OUT"
trap 'rm -rf "$OUT"' EXIT
[ -d "$WORK/photos-2000" ] ||
  /usr/bin/python3 scripts/make_photo_tree.py "$WORK/photos-2000" --images 2000 --classes 10 --seed 3 >/dev/null
TREE=$WORK/resized-base
[ -d "$TREE" ] || "$BIN/resize_imagenet" "$WORK/photos-2000" "$TREE" --max-size 256 -q >/dev/null
"$BIN/pack_lmdb" "$TREE" "$OUT/jpeg.lmdb" -q --overwrite >/dev/null
cat "$OUT/jpeg.lmdb" > /dev/null
find "$TREE" -type f -exec cat {} + > /dev/null  # warm: the tree in the page cache

secs() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
rate() { sed -n 's/.*: \([0-9.]*\) images\/s.*/\1/p' | head -1; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
n=$(find "$TREE" -type f | wc -l)
declare -A res
for r in $(seq "$ROUNDS"); do
  for dct in accurate fast; do
    s=$(secs "$BIN/pack_lmdb" "$TREE" "$OUT/raw.blob" -q --overwrite --encoding raw --format blob --threads "$THREADS" --dct "$dct")
    res[pack_$dct]+="$(echo "$n / $s" | bc -l) "
    s=$(secs "$BIN/verify_db" "$OUT/jpeg.lmdb" -q --decode --threads "$THREADS" --dct "$dct")
    res[verify_$dct]+="$(echo "$n / $s" | bc -l) "
    for t in train eval; do
      v=$("$BIN/bench_loader" "$OUT/jpeg.lmdb" --transform "$t" --threads "$THREADS" --batch 64 --epochs 2 --dct "$dct" | rate)
      res[loader_${t}_$dct]+="$v "
    done
  done
done
echo "## accurate against fast IDCT: $n JPEGs of $TREE, $THREADS threads, $ROUNDS rounds (medians, images/s)"
echo
echo "| step | accurate | fast | accurate / fast |"
echo "|---|---:|---:|---:|"
for k in pack verify loader_train loader_eval; do
  # shellcheck disable=SC2086
  a=$(median ${res[${k}_accurate]}) f=$(median ${res[${k}_fast]})
  case $k in
    pack) what="pack_lmdb --encoding raw (blob)";;
    verify) what="verify_db --decode";;
    loader_train) what="bench_loader, train transform";;
    loader_eval) what="bench_loader, eval transform";;
  esac
  awk -v w="$what" -v a="$a" -v f="$f" 'BEGIN {printf "| %s | %.0f | %.0f | %.3f |\n", w, a, f, a / f}'
done
