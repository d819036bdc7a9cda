#!/usr/bin/env bash
# The node-local cache against the local file, interleaved: a blob in the
# Ceph gateway (scripts/ceph_gateway.sh, on 127.0.0.1, no link limit) is
# read once into a fresh cache folder (epoch 1), then N rounds each run
# bench_loader on the local blob (--order blocks, warm) and on the object
# through the filled cache (epoch 2), one after the other, so that the
# machine's drift hits both alike. Prints every round and the medians.
#
#   scripts/bench/bench_s3_cache.sh [--blob FILE] [--rounds N]
#
# FILE: a blob packed --shuffle (default: the 20,000 256-px JPEGs of
# bench_object_storage.sh, packed here when missing).
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
BLOB= ROUNDS=5
bench_options "[--blob FILE] [--rounds N]" --blob=BLOB --rounds=ROUNDS -- "$@"
bench_tools
WORK=$(mktemp -d /tmp/ipk-s3cache.XXXXXX)
PORT=19580
trap 'scripts/ceph_gateway.sh stop "$WORK/ceph" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
if [ -z "$BLOB" ]; then
  TREE=/tmp/imagepack-bench/resized-20000
  [ -d "$TREE" ] || { echo "$0: $TREE missing: run scripts/bench/bench_storage.sh once (it makes it)" >&2; exit 2; }
  BLOB=$WORK/jpeg.blob
  "$BIN/pack_lmdb" "$TREE" "$BLOB" -q --shuffle 0 --format blob
fi
scripts/ceph_gateway.sh start "$WORK/ceph" $PORT >/dev/null 2>&1
# shellcheck disable=SC1091
source "$WORK/ceph/env"
/usr/bin/python3 -c "
import boto3, os, sys
c = boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL'])
c.create_bucket(Bucket='bench')
c.upload_file(sys.argv[1], 'bench', 'jpeg.blob')" "$BLOB"
B=(--batch 256 --size 224 --threads 2 --epochs 1)
rate() { sed -n 's/.*s: \([0-9.]*\) images\/s.*/\1/p' | head -1; }
echo "epoch 1 (fills the cache): $("$BIN/bench_loader" s3://bench/jpeg.blob "${B[@]}" --cache-dir "$WORK/cache" | rate) images/s"
find "$WORK/cache" -type f -exec cat {} + >/dev/null
cat "$BLOB" >/dev/null
: >"$WORK/rounds"
for r in $(seq "$ROUNDS"); do
  l=$("$BIN/bench_loader" "$BLOB" "${B[@]}" --order blocks | rate)
  c=$("$BIN/bench_loader" s3://bench/jpeg.blob "${B[@]}" --cache-dir "$WORK/cache" | rate)
  echo "$l $c" >>"$WORK/rounds"
  echo "round $r: local $l, cached $c images/s ($(echo "$c $l" | awk '{printf "%.1f", 100*$1/$2}')%)"
done
sort -n -k1 "$WORK/rounds" | awk '{a[NR]=$1} END {printf "median local %s", a[int((NR+1)/2)]}'
sort -n -k2 "$WORK/rounds" | awk '{a[NR]=$2} END {printf ", cached %s images/s\n", a[int((NR+1)/2)]}'
