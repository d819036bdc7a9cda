#!/usr/bin/env bash
# The loader reading parquet shards in place from the Hugging Face Hub
# (hf://), beside the same shards on local disk, over plain https:// and
# packed into an LMDB, in one run. The Hub is the tests' emulator
# (tests/python/hub_emulator.py: the Hub's API answered by Python behind
# nginx with TLS, the shards' bytes redirected to a second nginx host that
# serves ranges, as the Hub's CDN does), all on the loopback: the figures
# are imagepack's cost of the protocol and the node cache, not a WAN's.
#
#   scripts/bench/bench_hub.sh [--tree DIR] [--rounds 3] [--threads 0] [--size 224]
#
# Data: the tree (default bench_pack.sh's 20,000 resized photos) written
# by DuckDB as 8 parquet shards in the Hub's layout
# (data/train-0000K-of-00008.parquet, labels as ClassLabel); the https://
# rows read the same files from the CDN host by a brace pattern. Each row
# is bench_loader's epoch of train batches (256) at --size, random order,
# median of --rounds; "first" rows start with an empty node cache
# (--cache-dir on tmpfs, made anew each round), "cached" rows with the
# cache the first run filled (warm: every block in it, in the page cache).
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
TREE= ROUNDS=3 THREADS=0 SIZE=224
bench_options "[--tree DIR] [--rounds R] [--threads N] [--size PX]" \
  --tree=TREE --rounds=ROUNDS --threads=THREADS --size=SIZE -- "$@"
bench_setup bench_loader
[ -n "$TREE" ] || bench_resized 20000
MODS=${IMAGEPACK_DUCKDB_NODE_MODULES:-$PWD/build/npm/node_modules}
[ -d "$MODS/@duckdb/node-api" ] || { echo "bench_hub: no @duckdb/node-api in $MODS (npm install --prefix build/npm @duckdb/node-api)" >&2; exit 1; }
bench_out hub
mkdir -p "$OUT/pq"
TREE=$(cd "$TREE" && pwd)
cat > "$OUT/pq/write.mjs" <<EOF
import { DuckDBInstance } from '@duckdb/node-api';
const c = await (await DuckDBInstance.create(':memory:')).connect();
await c.run(\`CREATE TABLE f AS SELECT content, split_part(filename, '/', -2) AS folder, split_part(filename, '/', -1) AS file
             FROM read_blob('$TREE/*/*')\`);
const names = (await c.runAndReadAll(\`SELECT DISTINCT folder FROM f ORDER BY folder\`)).getRows().map(r => r[0]);
const hf = JSON.stringify({info: {features: {image: {_type: 'Image'}, label: {names, _type: 'ClassLabel'}}}});
await c.run(\`CREATE TABLE t AS SELECT {'bytes': content, 'path': folder || '/' || file} AS image,
             (dense_rank() OVER (ORDER BY folder) - 1)::BIGINT AS label,
             (row_number() OVER (ORDER BY folder, file)) % 8 AS shard FROM f\`);
for (let s = 0; s < 8; ++s)
  await c.run(\`COPY (SELECT image, label FROM t WHERE shard = \${s} ORDER BY image.path)
               TO '$OUT/pq/train-0000\${s}-of-00008.parquet' (FORMAT parquet, KV_METADATA {huggingface: '\${hf}'})\`);
EOF
ln -s "$MODS" "$OUT/pq/node_modules"
node "$OUT/pq/write.mjs"
"$BIN/pack_lmdb" "$OUT/pq/train-{00000..00007}-of-00008.parquet" "$OUT/packed.lmdb" -q
find "$OUT" -type f -exec cat {} + >/dev/null
/usr/bin/python3 scripts/bench/hub_rows.py "$BIN" "$OUT" "$ROUNDS" "$THREADS" "$SIZE"
