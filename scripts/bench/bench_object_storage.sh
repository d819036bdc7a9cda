#!/usr/bin/env bash
# Training data from S3 object storage, side by side in one run: imagepack's
# loader on a blob in the bucket (first epoch, then the second from the
# node-local cache), the same blob on local disk, and the peers a user would
# write (boto3 get_object per loose JPEG + DataLoader, 2 workers; an s3fs
# mount + ImageFolder). Also pack_lmdb to the bucket. Root only (tc).
#
#   scripts/bench/bench_object_storage.sh [--tree DIR] [--links "none 1gbit 200mbit rtt10 rtt50"]
#
# The gateway: a private Ceph RADOS Gateway on 127.0.0.1
# (scripts/ceph_gateway.sh). The link: an htb class on the loopback device
# for the gateway's port only (both directions), rate limited with tc; this
# kernel has no netem, so the rttN rows put a proxy between client and
# gateway that forwards every chunk N/2 ms late each way (delay_proxy.py,
# on the same 2 cores). Epoch 2 is read from the cache after its files were
# read once (warm, as the local blob is).
# Data: TREE (default: the 20,000 256-px JPEGs in 100 classes that
# bench_storage.sh makes). RandomResizedCrop 224 + flip, batch 256, 2 threads.
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
TREE=/tmp/imagepack-bench/resized-20000 LINKS="none 1gbit 200mbit rtt10 rtt50"
bench_options "[--tree DIR] [--links \"none 1gbit 200mbit\"]" --tree=TREE --links=LINKS -- "$@"
[ "$(id -u)" = 0 ] || { echo "$0: needs root (tc)" >&2; exit 2; }
[ -d "$TREE" ] || { echo "$0: $TREE missing: run scripts/bench/bench_storage.sh once (it makes it)" >&2; exit 2; }
bench_tools
WORK=$(mktemp -d /tmp/ipk-s3bench.XXXXXX)
PORT=19480
cleanup() {
  tc qdisc del dev lo root 2>/dev/null || true
  [ -n "${PROXY:-}" ] && kill "$PROXY" 2>/dev/null || true
  umount "$WORK/mnt" 2>/dev/null || true
  scripts/ceph_gateway.sh stop "$WORK/ceph" || true
  rm -rf "$WORK"
}
trap cleanup EXIT
scripts/ceph_gateway.sh start "$WORK/ceph" $PORT >/dev/null
# shellcheck disable=SC1091
source "$WORK/ceph/env"
/usr/bin/python3 -c "
import boto3, os
boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL']).create_bucket(Bucket='bench')"

DIRECT=$AWS_ENDPOINT_URL
link() {  # link RATE|none|rttN: limit the gateway's traffic on lo, or delay it
  tc qdisc del dev lo root 2>/dev/null || true
  if [ -n "${PROXY:-}" ]; then kill "$PROXY"; wait "$PROXY" 2>/dev/null || true; PROXY=; fi
  export AWS_ENDPOINT_URL=$DIRECT
  [ "$1" = none ] && return
  case $1 in rtt*)
    /usr/bin/python3 scripts/bench/delay_proxy.py $((PORT - 1)) $PORT "${1#rtt}" >/dev/null &
    PROXY=$!
    sleep 1
    export AWS_ENDPOINT_URL=http://127.0.0.1:$((PORT - 1))
    return;;
  esac
  tc qdisc add dev lo root handle 1: htb default 20 r2q 1000
  tc class add dev lo parent 1: classid 1:10 htb rate "$1" ceil "$1" burst 256k cburst 256k
  tc class add dev lo parent 1: classid 1:20 htb rate 100gbit
  tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip sport $PORT 0xffff flowid 1:10
  tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip dport $PORT 0xffff flowid 1:10
}
rate_mb() {  # what a plain whole-object GET (curl) gets on the current link
  curl -s -o /dev/null -w "%{speed_download}" --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
    "$AWS_ENDPOINT_URL/bench/jpeg.blob" | awk '{printf "%.1f", $1 / 1e6}'
}
small_ms() {  # one small ranged GET's time on the current link
  curl -s -o /dev/null -w "%{time_total}" --aws-sigv4 "aws:amz:us-east-1:s3" -r 0-100 \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
    "$AWS_ENDPOINT_URL/bench/jpeg.blob" | awk '{printf "%.1f", $1 * 1000}'
}
field() { sed -n "s/.*$1 \([0-9.]*\).*/\1/p" | head -1; }

echo "== packing ($TREE)"
"$BIN/pack_lmdb" "$TREE" "$WORK/jpeg.blob" -q --shuffle 0 --format blob
SIZE=$(stat -c %s "$WORK/jpeg.blob")
t0=$(date +%s.%N)
"$BIN/pack_lmdb" "$TREE" s3://bench/jpeg.blob -q --shuffle 0
t1=$(date +%s.%N)
echo "pack_lmdb to the bucket: $(echo "$SIZE $t0 $t1" | awk '{printf "%.1f MB in %.2f s: %.1f MB/s", $1/1e6, $3-$2, $1/1e6/($3-$2)}')"
/usr/bin/python3 scripts/bench/s3_peers.py upload "$TREE" bench loose >/dev/null
mkdir -p "$WORK/mnt"
echo "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" >"$WORK/passwd"
chmod 600 "$WORK/passwd"
mount_s3fs() {  # through the current endpoint (the proxy on rtt rows)
  s3fs bench:/loose "$WORK/mnt" -o passwd_file="$WORK/passwd" -o url="$AWS_ENDPOINT_URL" -o use_path_request_style \
    -o ro 2>/dev/null && [ -d "$WORK/mnt/$(ls "$TREE" | head -1)" ]
}

BENCH=(--batch 256 --size 224 --threads 2 --epochs 1)
printf "\n| link | small GET ms | curl GET MB/s | imagepack local (warm) img/s | imagepack S3 epoch 1 img/s | MB/s | %% of link | first batch s | epoch 2 (cache) img/s | peak RSS MiB | boto3 DataLoader img/s | s3fs ImageFolder img/s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n" >"$WORK/table"
for l in $LINKS; do
  link "$l"
  curl_mb=$(rate_mb)
  ms=$(small_ms)
  cat "$WORK/jpeg.blob" >/dev/null
  local_out=$("$BIN/bench_loader" "$WORK/jpeg.blob" "${BENCH[@]}" --order blocks)
  rm -rf "$WORK/cache"
  s3_out=$("$BIN/bench_loader" s3://bench/jpeg.blob "${BENCH[@]}" --cache-dir "$WORK/cache")
  find "$WORK/cache" -type f -exec cat {} + >/dev/null
  cached_out=$("$BIN/bench_loader" s3://bench/jpeg.blob "${BENCH[@]}" --cache-dir "$WORK/cache")
  boto=$(/usr/bin/python3 scripts/bench/s3_peers.py boto3 bench loose --batches 6 | field "s:")
  fuse=n/a
  if mount_s3fs; then
    fuse=$(/usr/bin/python3 scripts/bench/s3_peers.py imagefolder "$WORK/mnt" --batches 6 | field "s:")
    umount "$WORK/mnt"
  fi
  echo "--- link $l"; echo "$s3_out"; echo "$cached_out" | head -1
  li=$(echo "$local_out" | field "s:")
  si=$(echo "$s3_out" | field "s:")
  smb=$(echo "$s3_out" | sed -n 's/.*from the network [0-9.]* MB (\([0-9.]*\) MB\/s).*/\1/p')
  first=$(echo "$s3_out" | sed -n 's/.*first batch after \([0-9.]*\) s.*/\1/p')
  ci=$(echo "$cached_out" | field "s:")
  rss=$(echo "$s3_out" | sed -n 's/.*peak RSS \([0-9]*\) MiB.*/\1/p')
  pct=$(echo "$smb $curl_mb" | awk '{printf "%.0f", 100*$1/$2}')
  echo "| $l | $ms | $curl_mb | $li | $si | $smb | $pct | $first | $ci | $rss | $boto | $fuse |" >>"$WORK/table"
done
link none
echo
cat "$WORK/table"
