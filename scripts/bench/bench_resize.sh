#!/usr/bin/env bash
# Side-by-side benchmark of resize_imagenet against what a user would run
# instead, on one tree of real photos at ImageNet sizes (cut from Debian's
# wallpaper packages by scripts/make_photo_tree.py).
#
#   scripts/bench/bench_resize.sh [--images 1000] [--rounds 3] [--max-size 256]
#
# Every peer reads the same page-cached tree and writes to tmpfs (/dev/shm),
# so the figures compare the work, not the file system's inode allocator.
# Rounds are interleaved and each figure is the median. Prints a table of
# images/s with ratios, then peak RSS with a 6000x4000 photo in the tree.
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
IMAGES=1000 ROUNDS=3 MAX=256
bench_options "[--images N] [--rounds R] [--max-size N]" --images=IMAGES --rounds=ROUNDS --max-size=MAX -- "$@"
bench_setup resize_imagenet
OUT=/dev/shm/imagepack-bench-out
[ -d /dev/shm ] || OUT=$WORK/out
TREE=$WORK/photos-$IMAGES
[ -d "$TREE" ] || /usr/bin/python3 scripts/make_photo_tree.py "$TREE" --images "$IMAGES" --classes 10 --seed 1 >/dev/null
cat "$(find "$TREE" -type f)" >/dev/null 2>&1 || find "$TREE" -type f -exec cat {} + >/dev/null
CORES=$(nproc)
declare -A R
rate() { sed -n 's/.*[ ,:] \([0-9.]*\) images\/s.*/\1/p' | tail -1; }

for r in $(seq "$ROUNDS"); do
  rm -rf "$OUT"; R[ours]+="$("$BIN/resize_imagenet" "$TREE" "$OUT" --max-size "$MAX" -q | rate) "
  rm -rf "$OUT"; R[ours_disk]+="$(rm -rf "$WORK/out-disk"; "$BIN/resize_imagenet" "$TREE" "$WORK/out-disk" --max-size "$MAX" -q | rate) "
  for peer in pillow opencv vips; do
    rm -rf "$OUT"; R[$peer]+="$(/usr/bin/python3 scripts/bench/resize_peers.py $peer "$TREE" "$OUT" --max-size "$MAX" --procs "$CORES" | rate) "
  done
  R[ceil]+="$("$BIN/bench_jpeg_ceiling" "$TREE" --max-size "$MAX" | rate) "
  R[ceil_yuv]+="$("$BIN/bench_jpeg_ceiling" "$TREE" --max-size "$MAX" --yuv | rate) "
done
rm -rf "$OUT" "$WORK/out-disk"

ours=$(median ${R[ours]})
ceil=$(awk -v a="$(median ${R[ceil]})" -v c="$CORES" 'BEGIN {print a * c}')
ceil_yuv=$(awk -v a="$(median ${R[ceil_yuv]})" -v c="$CORES" 'BEGIN {print a * c}')
echo "resize benchmark: $IMAGES photos, shorter edge -> $MAX, $CORES cores, median of $ROUNDS rounds"
printf '%-58s %10s %14s\n' "method" "images/s" "resize_imagenet is"
row() { printf '%-58s %10.1f %13.2fx\n' "$1" "$2" "$(awk -v o="$ours" -v p="$2" 'BEGIN {print o / p}')"; }
row "resize_imagenet (output on tmpfs)" "$ours"
row "resize_imagenet (output on disk, $(df --output=fstype "$WORK" | tail -1))" "$(median ${R[ours_disk]})"
row "Pillow draft + bilinear + q90, $CORES-process pool" "$(median ${R[pillow]})"
row "OpenCV imread + INTER_AREA + q95, $CORES-process pool" "$(median ${R[opencv]})"
row "vipsthumbnail, batches of 100, $CORES at a time" "$(median ${R[vips]})"
row "ceiling: libjpeg-turbo RGB decode+encode x $CORES cores" "$ceil"
row "ceiling: libjpeg-turbo planar decode+encode x $CORES cores" "$ceil_yuv"

# Peak memory with a 6000x4000 photo in the tree.
BIG=$WORK/with-huge
if [ ! -d "$BIG" ]; then
  /usr/bin/python3 scripts/make_photo_tree.py "$BIG" --images 200 --classes 2 --seed 2 >/dev/null
  /usr/bin/python3 - "$BIG" <<'PY'
import sys
from PIL import Image
Image.effect_noise((6000, 4000), 50).convert("RGB").save(sys.argv[1] + "/huge_6000x4000.JPEG", quality=90)
PY
fi
rm -rf "$OUT"
rss=$( { /usr/bin/time -f "%M" "$BIN/resize_imagenet" "$BIG" "$OUT" --max-size "$MAX" -q >/dev/null; } 2>&1 | tail -1)
rm -rf "$OUT"
echo "peak RSS of resize_imagenet on 200 photos + one 6000x4000 JPEG: $((rss / 1024)) MiB"
