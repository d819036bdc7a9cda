#!/usr/bin/env bash
# Side-by-side loader benchmark on the same 256-px images (the tree that
# bench_pack.sh builds): bench_loader from JPEG records, raw records (blob
# and LMDB) and an in-RAM blob; PyTorch's DataLoader over ImageFolder and over an LMDB
# Dataset (Efficient-PyTorch style), 2 workers; and the ceiling
# (libjpeg-turbo full decodes per second x cores). Median of rounds.
#
#   scripts/bench/bench_loader.sh [--rounds 3] [--batches 20]
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
ROUNDS=3 BATCHES=60
bench_options "[--rounds R] [--batches B]" --rounds=ROUNDS --batches=BATCHES -- "$@"
bench_tools
bench_work
TREE=$WORK/resized-20000
[ -d "$TREE" ] || scripts/bench/bench_pack.sh --rounds 1 >/dev/null
DB=/dev/shm/imagepack-bench-loader
mkdir -p "$DB"
# Format 1 LMDBs cached by older runs are repacked (format 2 groups values).
grep -q records_per_value "$DB/jpeg.lmdb" 2>/dev/null || rm -f "$DB/jpeg.lmdb"
[ -f "$DB/jpeg.lmdb" ] || "$BIN/pack_lmdb" "$TREE" "$DB/jpeg.lmdb" --shuffle 1 -q >/dev/null
[ -f "$DB/jpeg.blob" ] || "$BIN/pack_lmdb" "$DB/jpeg.lmdb" "$DB/jpeg.blob" --format blob -q >/dev/null
[ -f "$DB/raw.blob" ] || "$BIN/pack_lmdb" "$DB/jpeg.lmdb" "$DB/raw.blob" --format blob --encoding raw -q >/dev/null
[ -f "$DB/raw.lmdb" ] || "$BIN/pack_lmdb" "$DB/jpeg.lmdb" "$DB/raw.lmdb" --encoding raw -q >/dev/null
[ -f "$DB/py.lmdb" ] || /usr/bin/python3 scripts/bench/folder2lmdb.py "$TREE" "$DB/py.lmdb" >/dev/null
cat "$DB"/* > /dev/null
CORES=$(nproc)
declare -A R
for r in $(seq "$ROUNDS"); do
  R[jl]+="$("$BIN/bench_loader" "$DB/jpeg.lmdb" --batches "$BATCHES" | rate) "
  R[jr]+="$("$BIN/bench_loader" "$DB/jpeg.blob" --in-ram --batches "$BATCHES" | rate) "
  R[raw]+="$("$BIN/bench_loader" "$DB/raw.blob" --batches "$BATCHES" | rate) "
  R[rawl]+="$("$BIN/bench_loader" "$DB/raw.lmdb" --batches "$BATCHES" | rate) "
  R[jc]+="$("$BIN/bench_loader" "$DB/jpeg.lmdb" --batches "$BATCHES" --copy | rate) "
  R[rc]+="$("$BIN/bench_loader" "$DB/raw.blob" --batches "$BATCHES" --copy | rate) "
  R[if]+="$(/usr/bin/python3 scripts/bench/loader_peers.py imagefolder "$TREE" --workers "$CORES" --batches "$BATCHES" | rate) "
  R[pl]+="$(/usr/bin/python3 scripts/bench/loader_peers.py lmdb "$DB/py.lmdb" --workers "$CORES" --batches "$BATCHES" | rate) "
  R[ceil]+="$("$BIN/bench_jpeg_ceiling" "$TREE" --decode-only | rate) "
done
base=$(median ${R[if]})
echo "loader benchmark: 256-px JPEGs, RandomResizedCrop(224) + flip, batch 256, $CORES cores, median of $ROUNDS rounds"
printf '%-62s %10s %12s\n' method images/s "vs DataLoader"
row() { awk -v n="$1" -v r="$2" -v b="$base" 'BEGIN {printf "%-62s %10.1f %11.2fx\n", n, r, r / b}'; }
row "PyTorch DataLoader + ImageFolder, $CORES workers" "$base"
row "PyTorch DataLoader + LMDB Dataset (pickle), $CORES workers" "$(median ${R[pl]})"
row "bench_loader, JPEG records, LMDB" "$(median ${R[jl]})"
row "bench_loader, JPEG records, blob in RAM" "$(median ${R[jr]})"
row "bench_loader, raw records, blob (streamed)" "$(median ${R[raw]})"
row "bench_loader, raw records, LMDB (streamed)" "$(median ${R[rawl]})"
row "bench_loader, JPEG records, LMDB, Next() (a copy per batch)" "$(median ${R[jc]})"
row "bench_loader, raw records, blob, Next() (a copy per batch)" "$(median ${R[rc]})"
row "ceiling: libjpeg-turbo full-size decodes x $CORES cores" "$(awk -v a="$(median ${R[ceil]})" -v c="$CORES" 'BEGIN {print a * c}')"
"$BIN/bench_loader" "$DB/jpeg.lmdb" --batches "$BATCHES" | tail -1
"$BIN/bench_loader" "$DB/raw.blob" --batches "$BATCHES" | tail -1
