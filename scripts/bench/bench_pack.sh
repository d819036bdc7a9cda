#!/usr/bin/env bash
# Side-by-side packing benchmark on one resized tree (page-cached):
# pack_lmdb (jpeg/raw, lmdb/blob), one-pass resize+pack from the original
# photos, `tar cf` (the sequential-copy ceiling), a Python LMDB packer
# (folder2lmdb style), and verify_db with and without --decode. Raw packs
# are also written to a disk ($BENCH_DIR, /tmp by default): a blob with
# O_DIRECT (the default there) and through the page cache, an LMDB, and
# `dd oflag=direct` of the same size (what the disk takes).
#
#   scripts/bench/bench_pack.sh [--files 20000] [--rounds 3] [--only jpeg]
#
# --only jpeg: tar, the Python packer and the JPEG packs alone, each output
# removed after its run (for trees of 100,000s of files, where the default
# mean/std sample's fixed cost is spread as on a real dataset).
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
FILES=20000 ROUNDS=3 ONLY=
bench_options "[--files N] [--rounds R] [--only jpeg]" --files=FILES --rounds=ROUNDS --only=ONLY -- "$@"
[ -z "$ONLY" ] || [ "$ONLY" = jpeg ] || { echo "$0: --only takes jpeg" >&2; exit 2; }
bench_setup pack_lmdb
OUT=/dev/shm/imagepack-bench-packs  # tmpfs: the figures compare work, not disk flushes
[ -d /dev/shm ] || OUT=$WORK/packs
DISK=$WORK/packs-disk  # raw packs to a disk, as users write 100 GB ones
PHOTOS=$WORK/photos-2000
RESIZED=$WORK/resized-$FILES
mkdir -p "$WORK"
[ -d "$PHOTOS" ] || /usr/bin/python3 scripts/make_photo_tree.py "$PHOTOS" --images 2000 --classes 10 --seed 3 >/dev/null
if [ ! -d "$RESIZED" ]; then
  # 2000 distinct resized photos, copied (not linked: tar would store a
  # link once) up to FILES files, FILES/10 per class.
  [ -d "$WORK/resized-base" ] || "$BIN/resize_imagenet" "$PHOTOS" "$WORK/resized-base" --max-size 256 -q >/dev/null
  /usr/bin/python3 - "$WORK/resized-base" "$RESIZED" "$FILES" <<'PY'
import os, shutil, sys
base, out, files = sys.argv[1], sys.argv[2], int(sys.argv[3])
for c in sorted(os.listdir(base)):
    srcs = sorted(os.listdir(os.path.join(base, c)))
    os.makedirs(os.path.join(out, c))
    for n in range(files // 10):
        shutil.copyfile(os.path.join(base, c, srcs[n % len(srcs)]), os.path.join(out, c, f"{n}.JPEG"))
PY
fi
find "$RESIZED" "$PHOTOS" -type f -exec cat {} + >/dev/null
BYTES=$(du -sb "$RESIZED" | cut -f1)
COUNT=$(find "$RESIZED" -type f | wc -l)
CORES=$(nproc)
declare -A T
row() {
  awk -v n="$2" -v s="$3" -v t="$tar_s" -v p="$py_s" -v name="$1" \
    'BEGIN {printf "%-50s %8.2f %10.0f %8.2fx %8.2fx\n", name, s, n / s, t / s, p / s}'
}
# tar, the Python packer and the JPEG packs (the peers' work only with
# --stats-sample 0). $1 = keep: leave the outputs for verify_db.
jpeg_round() {
  T[tar]+="$(secs_any tar cf "$OUT/tree.tar" -C "$RESIZED" .) "
  rm -f "$OUT/tree.tar"
  T[py]+="$(secs_any /usr/bin/python3 scripts/bench/folder2lmdb.py "$RESIZED" "$OUT/py.lmdb") "
  [ "${1:-}" = keep ] || rm -f "$OUT/py.lmdb"
  T[jl]+="$(secs_any "$BIN/pack_lmdb" "$RESIZED" "$OUT/j.lmdb" -q) "
  [ "${1:-}" = keep ] || rm -f "$OUT/j.lmdb"
  T[jb]+="$(secs_any "$BIN/pack_lmdb" "$RESIZED" "$OUT/j.blob" --format blob -q) "
  [ "${1:-}" = keep ] || rm -f "$OUT/j.blob"
  T[jl0]+="$(secs_any "$BIN/pack_lmdb" "$RESIZED" "$OUT/j0.lmdb" --stats-sample 0 -q) "
  rm -f "$OUT/j0.lmdb"
  T[jb0]+="$(secs_any "$BIN/pack_lmdb" "$RESIZED" "$OUT/j0.blob" --format blob --stats-sample 0 -q) "
  rm -f "$OUT/j0.blob"
}
# The table's header and its JPEG rows; sets tar_s and py_s, which row() reads.
# $1: words after "pack benchmark" in the header.
jpeg_table() {
  tar_s=$(median ${T[tar]})
  py_s=$(median ${T[py]})
  echo "pack benchmark$1: $COUNT resized JPEGs ($((BYTES / 1000000)) MB) from page cache, $CORES cores, median of $ROUNDS rounds"
  printf '%-50s %8s %10s %9s %9s\n' method seconds files/s "vs tar" "vs python"
  row "tar cf" "$COUNT" "$tar_s"
  row "Python folder2lmdb (pickle, python3-lmdb)" "$COUNT" "$py_s"
  row "pack_lmdb jpeg -> lmdb" "$COUNT" "$(median ${T[jl]})"
  row "pack_lmdb jpeg -> blob" "$COUNT" "$(median ${T[jb]})"
  row "pack_lmdb jpeg -> lmdb, --stats-sample 0" "$COUNT" "$(median ${T[jl0]})"
  row "pack_lmdb jpeg -> blob, --stats-sample 0" "$COUNT" "$(median ${T[jb0]})"
}
if [ "$ONLY" = jpeg ]; then
  for r in $(seq "$ROUNDS"); do
    rm -rf "$OUT"; mkdir -p "$OUT"
    jpeg_round
  done
  jpeg_table ", JPEG only"
  rm -rf "$OUT"
  exit 0
fi
for r in $(seq "$ROUNDS"); do
  rm -rf "$OUT"; mkdir -p "$OUT"
  jpeg_round keep
  # Format 1's layout.
  T[jl1]+="$(secs_any "$BIN/pack_lmdb" "$RESIZED" "$OUT/j1.lmdb" --records-per-value 1 -q) "
  T[rl]+="$(secs_any "$BIN/pack_lmdb" "$RESIZED" "$OUT/r.lmdb" --encoding raw -q) "
  # 5.5 GB each on tmpfs: keep one raw database at a time, or the second
  # one is written under memory pressure (it ran at half speed that way).
  RAW_LMDB_SIZE=$(stat -c %s "$OUT/r.lmdb")
  rm -f "$OUT/r.lmdb"
  T[rb]+="$(secs_any "$BIN/pack_lmdb" "$RESIZED" "$OUT/r.blob" --encoding raw --format blob -q) "
  T[one]+="$(secs_any "$BIN/pack_lmdb" "$PHOTOS" "$OUT/one.lmdb" --max-size 256 -q) "
  T[one0]+="$(secs_any "$BIN/pack_lmdb" "$PHOTOS" "$OUT/one0.lmdb" --max-size 256 --stats-sample 0 -q) "
  T[v]+="$(secs_any "$BIN/verify_db" "$OUT/j.lmdb" -q) "
  T[vb]+="$(secs_any "$BIN/verify_db" "$OUT/r.blob" -q) "
  T[vd]+="$(secs_any "$BIN/verify_db" "$OUT/j.lmdb" --decode -q) "
  T[vs]+="$(secs_any "$BIN/verify_db" "$OUT/r.blob" --stats -q) "
  # Ceilings, one core each, times the cores: raw packing is a full decode
  # per file; one-pass resize+pack is a decode at the best DCT scale plus an
  # encode of the 256-px result (what bench_resize.sh calls the ceiling).
  T[ceil]+="$( "$BIN/bench_jpeg_ceiling" "$RESIZED" --decode-only | sed -n 's/.*: \([0-9.]*\) images\/s/\1/p') "
  T[ceil1]+="$( "$BIN/bench_jpeg_ceiling" "$PHOTOS" --max-size 256 | sed -n 's/.*: \([0-9.]*\) images\/s/\1/p') "
done
# Raw packs to the disk, after the rest: writing 5 GB through the page
# cache leaves the kernel flushing for seconds, which would slow whatever
# ran next. Each run starts from a synced disk.
RAW_BLOB_SIZE=$(stat -c %s "$OUT/r.blob")
for r in $(seq "$ROUNDS"); do
  rm -rf "$DISK"; mkdir -p "$DISK"; sync
  T[rbd]+="$(secs_any "$BIN/pack_lmdb" "$RESIZED" "$DISK/r.blob" --encoding raw --format blob -q) "
  rm -f "$DISK/r.blob"; sync
  T[rbb]+="$(secs_any "$BIN/pack_lmdb" "$RESIZED" "$DISK/r.blob" --encoding raw --format blob --direct-io off -q) "
  rm -f "$DISK/r.blob"; sync
  T[rld]+="$(secs_any "$BIN/pack_lmdb" "$RESIZED" "$DISK/r.lmdb" --encoding raw -q) "
  rm -f "$DISK/r.lmdb"; sync
  T[dd]+="$(secs_any dd if=/dev/zero of="$DISK/dd" bs=8M count=$((RAW_BLOB_SIZE / 8388608)) oflag=direct) "
  rm -rf "$DISK"
done
ceil=$(awk -v a="$(median ${T[ceil]})" -v c="$CORES" 'BEGIN {print a * c}')
ceil1=$(awk -v a="$(median ${T[ceil1]})" -v c="$CORES" 'BEGIN {print a * c}')
jpeg_table ""
row "pack_lmdb jpeg -> lmdb, --records-per-value 1" "$COUNT" "$(median ${T[jl1]})"
row "pack_lmdb raw -> lmdb" "$COUNT" "$(median ${T[rl]})"
row "pack_lmdb raw -> blob" "$COUNT" "$(median ${T[rb]})"
row "pack_lmdb raw -> blob, disk, O_DIRECT (default)" "$COUNT" "$(median ${T[rbd]})"
row "pack_lmdb raw -> blob, disk, --direct-io off" "$COUNT" "$(median ${T[rbb]})"
row "pack_lmdb raw -> lmdb, disk" "$COUNT" "$(median ${T[rld]})"
row "pack_lmdb resize+pack, 2000 photos (one pass)" 2000 "$(median ${T[one]})"
row "  the same, --stats-sample 0" 2000 "$(median ${T[one0]})"
vs_ceil() { awk -v n="$2" -v s="$3" -v c="$4" -v name="$1" 'BEGIN {printf "%-50s %5.0f%% of %.0f images/s\n", name, 100 * n / s / c, c}'; }
echo "raw-pack ceiling (libjpeg-turbo full decodes of the resized files, $CORES cores): $ceil images/s"
echo "one-pass ceiling (decode at the best DCT scale + encode at 256 px, the 2000 photos, $CORES cores): $ceil1 images/s"
vs_ceil "pack_lmdb raw -> lmdb" "$COUNT" "$(median ${T[rl]})" "$ceil"
vs_ceil "pack_lmdb raw -> blob" "$COUNT" "$(median ${T[rb]})" "$ceil"
vs_ceil "pack_lmdb raw -> blob, disk, O_DIRECT" "$COUNT" "$(median ${T[rbd]})" "$ceil"
vs_ceil "pack_lmdb raw -> blob, disk, --direct-io off" "$COUNT" "$(median ${T[rbb]})" "$ceil"
vs_ceil "pack_lmdb raw -> lmdb, disk" "$COUNT" "$(median ${T[rld]})" "$ceil"
vs_ceil "dd oflag=direct bs=8M of the raw blob's size" "$COUNT" "$(median ${T[dd]})" "$ceil"
echo "disk: $(stat -f -c %T "$WORK") at $WORK ($(df --output=source "$WORK" | tail -1))"
vs_ceil "pack_lmdb resize+pack (one pass)" 2000 "$(median ${T[one]})" "$ceil1"
vs_ceil "pack_lmdb resize+pack, --stats-sample 0" 2000 "$(median ${T[one0]})" "$ceil1"
for k in v vb vd vs; do
  case $k in v) name="verify_db jpeg.lmdb (checksums)"; db=j.lmdb;; vb) name="verify_db raw.blob (checksums)"; db=r.blob;;
             vd) name="verify_db jpeg.lmdb --decode"; db=j.lmdb;;
             vs) name="verify_db raw.blob --stats (mean/std of every pixel)"; db=r.blob;; esac
  s=$(median ${T[$k]})
  awk -v s="$s" -v b="$(stat -c %s "$OUT/$db")" -v n="$COUNT" -v name="$name" \
    'BEGIN {printf "%-50s %8.2f %10.0f rec/s %8.0f MB/s\n", name, s, n / s, b / s / 1e6}'
done
for f in j.lmdb j1.lmdb j.blob r.lmdb r.blob py.lmdb; do
  if [ "$f" = r.lmdb ]; then bytes=$RAW_LMDB_SIZE; else bytes=$(stat -c %s "$OUT/$f"); fi
  printf 'size %-8s %8.1f MB\n' "$f" "$(awk -v b="$bytes" 'BEGIN {print b / 1e6}')"
done
echo "payload (sum of JPEG files): $((BYTES / 1000000)) MB"
rm -rf "$OUT"
