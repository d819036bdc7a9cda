#!/usr/bin/env bash
# Samples with a second spatial field, side by side in one run: the loader
# on image + mask and image + paired target against itself on the same
# images alone, and against the PyTorch pipeline a user would write
# (fields_peers.py: Pillow + torchvision functional crop/flip/resize, NEAREST
# for masks, DataLoader with one worker per core). 256-px photos cut from
# Debian's wallpaper packages, 6-class PNG masks, blurred JPEG targets,
# RandomResizedCrop(224) + flip, batch 256. Interleaved rounds, medians,
# peak RSS per method. Databases in /dev/shm, read once before timing. The
# 16-bit row packs the same masks as uint16 (--mask-dtype uint16: twice the
# bytes, the uint16 crop). --before BUILD times the image-only and 8-bit
# mask rows with another build's Python package in the same rounds (a
# change's effect on them, side by side).
#
#   scripts/bench/bench_fields.sh [--images 4000] [--rounds 3] [--batches 12] [--before BUILD]
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
IMAGES=4000 ROUNDS=3 BATCHES=12 BEFORE=
bench_options "[--images N] [--rounds R] [--batches B] [--before BUILD]" \
  --images=IMAGES --rounds=ROUNDS --batches=BATCHES --before=BEFORE -- "$@"
[ -z "$BEFORE" ] || BEFORE=$(cd "$BEFORE/python" && pwd)
bench_tools
export PYTHONPATH=$(cd "${IMAGEPACK_BUILD_DIR:-build}/python" && pwd)
WORK=${BENCH_DIR:-/tmp/imagepack-bench}/fields-$IMAGES
DB=/dev/shm/imagepack-bench-fields-$IMAGES
PY="/usr/bin/python3 scripts/bench/fields_peers.py"
if [ ! -d "$WORK/images" ]; then
  rm -rf "$WORK" && mkdir -p "$WORK"
  /usr/bin/python3 scripts/make_photo_tree.py "$WORK/photos" --images "$IMAGES" --classes 10 >/dev/null
  "$BIN/resize_imagenet" "$WORK/photos" "$WORK/images" --max-size 256 -q >/dev/null
  rm -rf "$WORK/photos"
  $PY make "$WORK/images" "$WORK" >/dev/null
fi
mkdir -p "$DB"
[ -f "$DB/image.lmdb" ] || "$BIN/pack_lmdb" "$WORK/images" "$DB/image.lmdb" --shuffle 1 -q >/dev/null
[ -f "$DB/mask.lmdb" ] || "$BIN/pack_lmdb" "$WORK/images" "$DB/mask.lmdb" --shuffle 1 -q \
  --field "mask=$WORK/masks" --mask-classes 6 >/dev/null
[ -f "$DB/mask16.lmdb" ] || "$BIN/pack_lmdb" "$WORK/images" "$DB/mask16.lmdb" --shuffle 1 -q \
  --field "mask=$WORK/masks" --mask-classes 6 --mask-dtype uint16 >/dev/null
[ -f "$DB/target.lmdb" ] || "$BIN/pack_lmdb" "$WORK/images" "$DB/target.lmdb" --shuffle 1 -q \
  --field "target=$WORK/targets" >/dev/null
cat "$DB"/* > /dev/null
CORES=$(nproc)
declare -A R M
rate() { sed -n 's/.*: \([0-9.]*\) samples\/s.*/\1/p' | head -1; }  # samples/s, not images/s
for r in $(seq "$ROUNDS"); do
  take img $PY loader imagepack "$DB/image.lmdb" --batches "$BATCHES"
  take msk $PY loader imagepack "$DB/mask.lmdb" --batches "$BATCHES"
  take m16 $PY loader imagepack "$DB/mask16.lmdb" --batches "$BATCHES"
  if [ -n "$BEFORE" ]; then
    take bimg env PYTHONPATH="$BEFORE" $PY loader imagepack "$DB/image.lmdb" --batches "$BATCHES"
    take bmsk env PYTHONPATH="$BEFORE" $PY loader imagepack "$DB/mask.lmdb" --batches "$BATCHES"
  fi
  take tgt $PY loader imagepack "$DB/target.lmdb" --batches "$BATCHES"
  take tm $PY loader torch "$WORK/images" --masks "$WORK/masks" --workers "$CORES" --batches "$BATCHES"
  take tt $PY loader torch "$WORK/images" --targets "$WORK/targets" --workers "$CORES" --batches "$BATCHES"
done
img=$(median ${R[img]})
echo "fields benchmark: $IMAGES photos at 256 px (+ 6-class PNG masks / blurred JPEG targets),"
echo "RandomResizedCrop(224) + flip, batch 256, $CORES cores, median of $ROUNDS rounds"
printf '%-58s %10s %10s %12s %9s\n' method samples/s "vs image" "vs PyTorch" "peak RSS"
row() { awk -v n="$1" -v r="$2" -v i="$img" -v p="$3" -v m="$4" 'BEGIN {
  vs = ""; if (p > 0) vs = sprintf("%.2fx", r / p)
  printf "%-58s %10.1f %9.0f%% %11s %5s MiB\n", n, r, 100 * r / i, vs, m }'; }
row "imagepack.Loader, image only (JPEG, LMDB)" "$img" 0 "${M[img]}"
row "imagepack.Loader, image + mask" "$(median ${R[msk]})" "$(median ${R[tm]})" "${M[msk]}"
row "imagepack.Loader, image + uint16 mask (same masks)" "$(median ${R[m16]})" 0 "${M[m16]}"
row "imagepack.Loader, image + target image" "$(median ${R[tgt]})" "$(median ${R[tt]})" "${M[tgt]}"
row "DataLoader + Pillow + torchvision, image + mask, $CORES workers" "$(median ${R[tm]})" 0 "${M[tm]}"
row "DataLoader + Pillow + torchvision, image + target, $CORES workers" "$(median ${R[tt]})" 0 "${M[tt]}"
if [ -n "$BEFORE" ]; then
  row "build before ($BEFORE), image only" "$(median ${R[bimg]})" 0 "${M[bimg]}"
  row "build before, image + mask" "$(median ${R[bmsk]})" 0 "${M[bmsk]}"
  echo "per round, this build / the build before: image only ${R[img]}/ ${R[bimg]}; image + mask ${R[msk]}/ ${R[bmsk]}"
fi
