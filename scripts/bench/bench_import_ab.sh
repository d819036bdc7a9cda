#!/usr/bin/env bash
# Import speed of two builds side by side (bench_ab.sh's method for the
# importers), in interleaved rounds on the same
# inputs (bench_interop.sh's tree of resized photos, made when missing):
# a folder2lmdb pickled LMDB, plain WebDataset shards and gzipped shards,
# each imported by build A's pack_lmdb and build B's, A and B alternating,
# page cache warm, outputs on tmpfs. Prints the median seconds of each and
# B's speed relative to A's.
#
#   scripts/bench/bench_import_ab.sh BUILD_A BUILD_B [--files 20000] [--rounds 5]
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
[ $# -ge 2 ] || { echo "usage: $0 BUILD_A BUILD_B [--files N] [--rounds R]" >&2; exit 2; }
A=$1/tools B=$2/tools
shift 2
FILES=20000 ROUNDS=5
bench_options "BUILD_A BUILD_B [--files N] [--rounds R]" --files=FILES --rounds=ROUNDS -- "$@"
bench_work
bench_resized "$FILES"
bench_out import-ab
/usr/bin/python3 scripts/bench/folder2lmdb.py "$TREE" "$OUT/f2l.lmdb" >/dev/null
/usr/bin/python3 scripts/bench/wds_writer.py "$TREE" "$OUT/shards" >/dev/null
"$B/export_db" "$OUT/f2l.lmdb" "$OUT/gz" --gzip -q 2>/dev/null || {
  "$B/pack_lmdb" "$OUT/f2l.lmdb" "$OUT/x.lmdb" -q && "$B/export_db" "$OUT/x.lmdb" "$OUT/gz" --gzip -q; }
find "$TREE" "$OUT" -type f -exec cat {} + >/dev/null
echo "bench_import_ab: $FILES files from $TREE; A=$A B=$B; $(nproc) cores; median of $ROUNDS interleaved rounds"
printf '%-34s %9s %9s %9s\n' "import" "A s" "B s" "B vs A"
for src in f2l.lmdb shards gz; do
  ta=() tb=()
  for _ in $(seq "$ROUNDS"); do
    rm -f "$OUT/a.lmdb"; ta+=("$(secs "$A/pack_lmdb" "$OUT/$src" "$OUT/a.lmdb" -q)")
    rm -f "$OUT/b.lmdb"; tb+=("$(secs "$B/pack_lmdb" "$OUT/$src" "$OUT/b.lmdb" -q)")
  done
  ma=$(median "${ta[@]}") mb=$(median "${tb[@]}")
  awk -v n="$src" -v a="$ma" -v b="$mb" 'BEGIN {printf "%-34s %9.3f %9.3f %8.2fx\n", n, a, b, a / b}'
done
