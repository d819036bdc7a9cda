#!/usr/bin/env bash
# Import and export side by side with the converters a user would run
# instead, on bench_pack.sh's tree of resized photos (20,000 JPEGs by
# default; made by bench_pack.sh when missing), every
# input just written or read (page cache warm), outputs on tmpfs:
#   folder2lmdb.py (Python: tree -> pickled LMDB) | pack_lmdb of that LMDB
#   wds_writer.py (Python tarfile: tree -> shards) | pack_lmdb of shards
#   export_db -> WebDataset shards (plain, gzip) | export_db -> ImageFolder
# Each row is the median of --rounds runs, in files/s, with its ratio to
# the Python converter that makes the same kind of output.
#
#   scripts/bench/bench_interop.sh [--files 20000] [--rounds 3]
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
FILES=20000 ROUNDS=3
bench_options "[--files N] [--rounds R]" --files=FILES --rounds=ROUNDS -- "$@"
bench_setup export_db
bench_resized "$FILES"
find "$TREE" -type f -exec cat {} + >/dev/null
COUNT=$(find "$TREE" -type f | wc -l)
bench_out interop
declare -A T
timed f2l "$OUT/f2l.lmdb" /usr/bin/python3 scripts/bench/folder2lmdb.py "$TREE" "$OUT/f2l.lmdb"
timed import_f2l "$OUT/a.lmdb" "$BIN/pack_lmdb" "$OUT/f2l.lmdb" "$OUT/a.lmdb" -q
timed tarpy "$OUT/pyshards" /usr/bin/python3 scripts/bench/wds_writer.py "$TREE" "$OUT/pyshards"
timed import_wds "$OUT/b.lmdb" "$BIN/pack_lmdb" "$OUT/pyshards" "$OUT/b.lmdb" -q
timed export_wds "$OUT/shards" "$BIN/export_db" "$OUT/a.lmdb" "$OUT/shards" -q
timed export_gz "$OUT/gzshards" "$BIN/export_db" "$OUT/a.lmdb" "$OUT/gzshards" --gzip -q
timed import_gz "$OUT/c.lmdb" "$BIN/pack_lmdb" "$OUT/gzshards" "$OUT/c.lmdb" -q
timed export_if "$OUT/folder" "$BIN/export_db" "$OUT/a.lmdb" "$OUT/folder" --to imagefolder -q
BYTES=$(du -sb "$TREE" | cut -f1)
echo "bench_interop: $COUNT files ($((BYTES / 1000000)) MB) from $TREE; $(nproc) cores; median of $ROUNDS; warm cache, outputs on $OUT"
printf '%-58s %8s %10s %8s\n' "run" "seconds" "files/s" "vs peer"
row() { awk -v n="$COUNT" -v s="${T[$2]}" -v p="${3:+${T[$3]}}" -v name="$1" \
  'BEGIN {printf "%-58s %8.2f %10.0f %8s\n", name, s, n / s, p == "" ? "-" : sprintf("%.2fx", p / s)}'; }
row "folder2lmdb.py: tree -> pickled LMDB (peer)" f2l
row "pack_lmdb: pickled LMDB -> imagepack LMDB (import)" import_f2l f2l
row "wds_writer.py: tree -> WebDataset shards (peer)" tarpy
row "pack_lmdb: WebDataset shards -> imagepack LMDB (import)" import_wds tarpy
row "export_db: imagepack LMDB -> WebDataset shards" export_wds tarpy
row "export_db --gzip: -> gzipped shards" export_gz tarpy
row "pack_lmdb: gzipped shards -> imagepack LMDB (import)" import_gz tarpy
row "export_db --to imagefolder" export_if
