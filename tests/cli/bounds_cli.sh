#!/usr/bin/env bash
# Resource bounds (issue: hardening): decompression bombs refused quickly in
# bounded memory; peak RSS of every tool and open file descriptors stay
# bounded on a tree of 100k files. Usage: bounds_cli.sh BINDIR DATADIR
# IMAGEPACK_BOUNDS_FILES (default 100000) sets the tree size.
BIN=$1
DATA=$2
source "$(dirname "$0")/lib.sh"
N=${IMAGEPACK_BOUNDS_FILES:-100000}
TIME=/usr/bin/time

# measure NAME CMD...: runs CMD (exit code in RC) under /usr/bin/time for
# its peak RSS (RSS, MiB) while sampling its open file descriptors every
# 50 ms (FDS, the most seen).
measure() {
  local name=$1; shift
  $TIME -f "%M" -o "$WORK/$name.rss" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  local tpid=$! pid="" n
  FDS=0
  while kill -0 $tpid 2>/dev/null; do
    [ -z "$pid" ] && pid=$(pgrep -P $tpid | head -1)
    if [ -n "$pid" ]; then
      n=$(ls /proc/$pid/fd 2>/dev/null | wc -l)
      [ "$n" -gt "$FDS" ] && FDS=$n
    fi
    sleep 0.05
  done
  wait $tpid
  RC=$?
  RSS=$(( $(tail -1 "$WORK/$name.rss") / 1024 ))
}

# ---- Decompression bombs ---------------------------------------------------------
B=$WORK/bombs
mkdir -p "$B/a"
$PY - "$DATA/rgb.jpg" "$B/a" <<'PYEOF'
import sys
src, out = sys.argv[1], sys.argv[2]
data = bytearray(open(src, "rb").read())
i = data.index(b"\xff\xc0")
def with_size(w, h):
    d = bytearray(data)
    d[i + 5:i + 7] = h.to_bytes(2, "big")
    d[i + 7:i + 9] = w.to_bytes(2, "big")
    return d
# 65500 x 65500 = 4.3 gigapixels claimed by an 800-byte file.
open(out + "/claims_65500x65500.jpg", "wb").write(with_size(65500, 65500))
# 14000 x 14000 = 196 Mpx: under the default limit, so it is decoded (at a
# reduced DCT scale) until the data runs out.
open(out + "/claims_14000x14000.jpg", "wb").write(with_size(14000, 14000))
PYEOF
cp "$DATA/rgb.jpg" "$B/a/fine.jpg"
t0=$(date +%s%N)
measure bomb_resize "$BIN/resize_imagenet" "$B" "$WORK/bomb_out" --max-size 256 -q --errors "$WORK/bomb_errors.tsv"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
expect_rc 3 "bombs skipped, the fine image written" bomb_resize
expect_in bomb_errors.tsv "claims_65500x65500.jpg"
expect_in bomb_errors.tsv "65500x65500"
expect_in bomb_errors.tsv "--max-pixels"
expect_true "[ $RSS -lt 200 ]" "resize_imagenet peak RSS with bombs: $RSS MiB"
expect_true "[ $ms -lt 10000 ]" "bombs took $ms ms"
echo "bombs: resize_imagenet refused 65500x65500 and handled 14000x14000 in $ms ms, peak RSS $RSS MiB"
measure bomb_pack "$BIN/pack_lmdb" "$B" "$WORK/bomb.lmdb" -q --errors "$WORK/bomb_pack_errors.tsv"
expect_rc 3 "pack skips the bombs" bomb_pack
expect_in bomb_pack_errors.tsv "65500x65500"
expect_true "[ $RSS -lt 300 ]" "pack_lmdb peak RSS with bombs: $RSS MiB"
echo "bombs: pack_lmdb peak RSS $RSS MiB"

# ---- 100k files ---------------------------------------------------------------------
T=$WORK/tree
$PY - "$DATA/gray.jpg" "$DATA/rgb.jpg" "$T" "$N" <<'PYEOF'
import os, sys
gray, rgb, root, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
classes = 100
for c in range(classes):
    d = f"{root}/n{c:08d}"
    os.makedirs(d)
    for i in range(n // classes):
        os.link(gray if (i + c) % 2 else rgb, f"{d}/{c}_{i}.JPEG")  # hard links: cheap
PYEOF
expect_true "[ \$(find $T -type f | wc -l) -eq $N ]" "tree of $N files"

measure resize "$BIN/resize_imagenet" "$T" "$WORK/out" --max-size 32 -q
expect_rc 0 "resize of $N files" resize
expect_true "[ $FDS -lt 64 ]" "resize_imagenet had $FDS files open"
expect_true "[ $RSS -lt 300 ]" "resize_imagenet peak RSS on $N files: $RSS MiB"
echo "$N files: resize_imagenet peak RSS $RSS MiB, at most $FDS descriptors open ($(grep -o '[0-9.]* images/s' $WORK/resize.out))"

measure pack "$BIN/pack_lmdb" "$T" "$WORK/t.lmdb" -q
expect_rc 0 "pack of $N files" pack
expect_true "[ $FDS -lt 64 ]" "pack_lmdb had $FDS files open"
expect_true "[ $RSS -lt 400 ]" "pack_lmdb peak RSS on $N files: $RSS MiB"
echo "$N files: pack_lmdb peak RSS $RSS MiB, at most $FDS descriptors open"
measure blob "$BIN/pack_lmdb" "$WORK/t.lmdb" "$WORK/t.blob" -q
expect_rc 0 "convert $N records to blob" blob
expect_true "[ $RSS -lt 400 ]" "pack_lmdb (to blob) peak RSS on $N records: $RSS MiB"
echo "$N records: LMDB -> blob conversion peak RSS $RSS MiB, at most $FDS descriptors open"

for db in t.lmdb t.blob; do
  measure "verify_$db" "$BIN/verify_db" "$WORK/$db" --decode --against "$T" -q
  expect_rc 0 "verify_db --decode --against on $N records ($db)" "verify_$db"
  expect_true "[ $FDS -lt 64 ]" "verify_db had $FDS files open"
  expect_true "[ $RSS -lt 400 ]" "verify_db peak RSS on $N records ($db): $RSS MiB"
  echo "$N records: verify_db --decode --against ($db) peak RSS $RSS MiB, at most $FDS descriptors open"
done
if [ -x "$BIN/bench_loader" ]; then
  measure loader "$BIN/bench_loader" "$WORK/t.lmdb" --batch 256 --size 32
  expect_rc 0 "loader over $N records" loader
  expect_true "[ $RSS -lt 400 ]" "loader peak RSS on $N records: $RSS MiB"
  echo "$N records: loader (1 epoch, batch 256, 32 px) peak RSS $RSS MiB, at most $FDS descriptors open"
fi

finish
