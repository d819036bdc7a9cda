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
bench_parquet hub bench_loader "$@"
mkdir -p "$OUT/pq"
cat > "$OUT/pq/write.mjs" <<EOF
import { DuckDBInstance } from '@duckdb/node-api';
const c = await (await DuckDBInstance.create(':memory:')).connect();
$(duckdb_tree_js)
for (let s = 0; s < 8; ++s)
  await c.run(\`COPY (SELECT image, label FROM t WHERE shard = \${s} ORDER BY image.path)
               TO '$OUT/pq/train-0000\${s}-of-00008.parquet' (FORMAT parquet, KV_METADATA {huggingface: '\${hf}'})\`);
EOF
ln -s "$MODS" "$OUT/pq/node_modules"
node "$OUT/pq/write.mjs"
"$BIN/pack_lmdb" "$OUT/pq/train-{00000..00007}-of-00008.parquet" "$OUT/packed.lmdb" -q
find "$OUT" -type f -exec cat {} + >/dev/null
/usr/bin/python3 scripts/bench/hub_rows.py "$BIN" "$OUT" "$ROUNDS" "$THREADS" "$SIZE"
