#!/usr/bin/env bash
# Imports from TFRecord and parquet side by side with pack_lmdb of the same
# JPEGs as files, and the loader reading those files in place side by side
# with the same records in the tree's LMDB, in one run: an ImageFolder tree of JPEGs (class folders)
# is written out as 8 TFRecord files in the TF-slim / Inception layout
# (tests/python/tfrecord_writer.py: python3-protobuf and python3-crc32c),
# the same gzipped, and as Hugging Face parquet by DuckDB (snappy and zstd;
# @duckdb/node-api from build/npm/node_modules or
# IMAGEPACK_DUCKDB_NODE_MODULES: scripts/setup.sh installs it
# there). Every input is read once first (page cache warm), outputs on
# tmpfs; each row is the median of --rounds runs, and every import is
# checked to hold the tree's records (same paths, bytes and labels).
#
#   scripts/bench/bench_formats.sh [--tree DIR] [--rounds 3] [--threads 0] [--size 224]
#
# The loader rows: bench_loader, one epoch of train batches (256) at
# --size, random order, median of --rounds; its "open" is the listing
# (and parquet's copy of the image bytes) before the first batch.
#
# Without --tree: bench_pack.sh's tree of 20,000 resized photos (made by
# bench_pack.sh when missing).
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_parquet formats pack_lmdb "$@"
mkdir -p "$OUT/tf" "$OUT/tfgz" "$OUT/pq"

# TFRecords, plain and gzipped: label counted from 1, image/filename the tree's path.
/usr/bin/python3 - "$TREE" "$OUT" <<'EOF'
import os, sys, pathlib
sys.path.insert(0, "tests/python")
from tfrecord_writer import example, write
tree, out = sys.argv[1], pathlib.Path(sys.argv[2])
classes = sorted(d for d in os.listdir(tree) if os.path.isdir(os.path.join(tree, d)))
shards = [[] for _ in range(8)]
n = 0
for c, name in enumerate(classes):
    for f in sorted(os.listdir(os.path.join(tree, name))):
        data = open(os.path.join(tree, name, f), "rb").read()
        shards[n % 8].append(example({"image/encoded": data, "image/format": b"JPEG", "image/class/label": c + 1,
                                      "image/class/synset": name.encode(), "image/filename": (name + "/" + f).encode()}))
        n += 1
for s, recs in enumerate(shards):
    write(out / "tf" / ("train-%05d-of-00008" % s), recs)
    write(out / "tfgz" / ("train-%05d-of-00008" % s), recs, compress=True)
EOF
# Parquet by DuckDB: the HF layout, label the class folder's index, its names in the metadata.
cat > "$OUT/pq/write.mjs" <<EOF
import { DuckDBInstance } from '@duckdb/node-api';
const c = await (await DuckDBInstance.create(':memory:')).connect();
$(duckdb_tree_js)
for (const codec of ['snappy', 'zstd'])
  await c.run(\`COPY (SELECT image, label FROM t) TO '$OUT/pq/train-\${codec}.parquet' (FORMAT parquet, COMPRESSION \${codec},
               KV_METADATA {huggingface: '\${hf}'})\`);
EOF
ln -s "$MODS" "$OUT/pq/node_modules"
node "$OUT/pq/write.mjs"
find "$TREE" "$OUT" -type f -exec cat {} + >/dev/null

declare -A T
pack() {  # NAME SRC: median seconds of ROUNDS packs of SRC into $OUT/NAME.lmdb
  timed "$1" "$OUT/$1.lmdb" "$BIN/pack_lmdb" "$2" "$OUT/$1.lmdb" -q --threads "$THREADS"
}
pack tree "$TREE"
pack tfrecord "$OUT/tf/train-{00000..00007}-of-00008"
pack tfrecord_gz "$OUT/tfgz/train-{00000..00007}-of-00008"
pack parquet_snappy "$OUT/pq/train-snappy.parquet"
pack parquet_zstd "$OUT/pq/train-zstd.parquet"
# Every import holds the tree's records: paths, bytes, labels.
/usr/bin/python3 - "$OUT" <<'EOF'
import sys
sys.path.insert(0, "scripts")
import read_db
def recs(p):
    d = read_db.open_db(p)
    return d.meta["classes"], sorted((r["path"], bytes(r["payload"]), r["label"])
                                     for r in (read_db.read_record(d, i) for i in range(d.meta["count"])))
want = recs(sys.argv[1] + "/tree.lmdb")
for n in ("tfrecord", "tfrecord_gz", "parquet_snappy", "parquet_zstd"):
    assert recs("%s/%s.lmdb" % (sys.argv[1], n)) == want, n + " differs from the tree's pack"
EOF
COUNT=$(find "$TREE" -type f | wc -l)
BYTES=$(du -sb "$TREE" | cut -f1)
echo "bench_formats: $COUNT files ($((BYTES / 1000000)) MB) from $TREE; $(nproc) cores; --threads $THREADS; median of $ROUNDS; warm cache, outputs on $OUT; every import equal to the tree's pack"
printf '%-52s %8s %10s %9s\n' "pack_lmdb from" "seconds" "files/s" "vs tree"
row() { awk -v n="$COUNT" -v s="${T[$2]}" -v t="${T[tree]}" -v name="$1" \
  'BEGIN {printf "%-52s %8.2f %10.0f %8.2fx\n", name, s, n / s, t / s}'; }
row "the JPEGs as files (ImageFolder tree)" tree
row "TFRecords (8 files, TF-slim layout)" tfrecord
row "TFRecords, gzipped" tfrecord_gz
row "parquet, HF layout (DuckDB, snappy)" parquet_snappy
row "parquet, HF layout (DuckDB, zstd)" parquet_zstd

# The loader: each format read in place against the tree's LMDB (the same
# records: checked above), one epoch each, median images/s and open time;
# the sources take turns within every round, so a load that comes and goes
# falls on all of them alike.
declare -A RATES OPENS R O
SOURCES=(lmdb "$OUT/tree.lmdb" tfrecord "$OUT/tf/train-{00000..00007}-of-00008"
         tfrecord_gz "$OUT/tfgz/train-{00000..00007}-of-00008" parquet_snappy "$OUT/pq/train-snappy.parquet"
         parquet_zstd "$OUT/pq/train-zstd.parquet")
for _ in $(seq "$ROUNDS"); do
  for ((k = 0; k < ${#SOURCES[@]}; k += 2)); do
    name=${SOURCES[k]} src=${SOURCES[k + 1]}
    out=$("$BIN/bench_loader" "$src" --size "$SIZE" --batch 256 --threads "$THREADS" --order random -q 2>&1) ||
      { echo "bench_formats: bench_loader $src failed: $out" >&2; exit 1; }
    RATES[$name]+=" $(sed -n 's/.* s: \([0-9.]*\) images\/s.*/\1/p' <<<"$out" | head -1)"
    OPENS[$name]+=" $(sed -n 's/.*; open \([0-9.]*\) s;.*/\1/p' <<<"$out" | head -1)"
  done
done
for ((k = 0; k < ${#SOURCES[@]}; k += 2)); do
  name=${SOURCES[k]}
  # shellcheck disable=SC2086
  R[$name]=$(median ${RATES[$name]})
  # shellcheck disable=SC2086
  O[$name]=$(median ${OPENS[$name]})
done
echo
echo "bench_formats: the loader, one epoch of train batches at $SIZE px, random order, median of $ROUNDS rounds (sources in turn)"
printf '%-52s %10s %8s %9s\n' "bench_loader reading" "images/s" "open s" "vs LMDB"
lrow() { awk -v r="${R[$2]}" -v o="${O[$2]}" -v t="${R[lmdb]}" -v name="$1" \
  'BEGIN {printf "%-52s %10.0f %8.2f %8.2fx\n", name, r, o, r / t}'; }
lrow "the tree's LMDB (pack_lmdb)" lmdb
lrow "TFRecords in place (8 files)" tfrecord
lrow "TFRecords in place, gzipped" tfrecord_gz
lrow "parquet in place (DuckDB, snappy)" parquet_snappy
lrow "parquet in place (DuckDB, zstd)" parquet_zstd
