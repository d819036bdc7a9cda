#!/usr/bin/env bash
# pack_lmdb and verify_db as a user runs them, and the Python reader.
# Usage: pack_verify_cli.sh BINDIR DATADIR SCRIPTSDIR
BIN=$1
DATA=$2
SCRIPTS=$3
source "$(dirname "$0")/lib.sh"

run help "$BIN/pack_lmdb" --help;   expect_rc 0 "pack --help" help; expect_in help.out "--encoding"
run vhelp "$BIN/verify_db" --help;  expect_rc 0 "verify --help" vhelp
run bad "$BIN/pack_lmdb" a b --format zip; expect_rc 2 "bad format" bad; expect_in bad.err "unknown format 'zip'"
run noarg "$BIN/verify_db";          expect_rc 2 "verify without DB" noarg

# A tree with 3 classes of real JPEGs plus a broken file.
T=$WORK/tree
$PY - "$T" <<'PYEOF'
import sys, os
from PIL import Image
root = sys.argv[1]
base = Image.effect_noise((400, 300), 50).convert("RGB")
for c, wnid in enumerate(["n02", "n01", "n03"]):
    os.makedirs(f"{root}/{wnid}")
    for i in range(20):
        base.rotate(7 * i + c).save(f"{root}/{wnid}/{i}.JPEG", quality=85)
PYEOF
cp "$DATA/truncated.jpg" "$T/n01/broken.JPEG"

run pack "$BIN/pack_lmdb" "$T" "$WORK/train.lmdb" --max-size 128 --shuffle 7 --errors "$WORK/err.tsv" -q
expect_rc 3 "pack with a broken input" pack
expect_in pack.out "60 records in 3 classes"
expect_in pack.err "skipped n01/broken.JPEG: truncated JPEG"
expect_in err.tsv "n01/broken.JPEG"
run exists "$BIN/pack_lmdb" "$T" "$WORK/train.lmdb" -q
expect_rc 1 "existing DST" exists; expect_in exists.err "already exists"

run verify "$BIN/verify_db" "$WORK/train.lmdb" --decode --against "$T" --stats -q
expect_rc 1 "verify against a tree holding an unpackable file" verify
expect_in verify.out "n01/broken.JPEG): source image is not in the database"
rm "$T/n01/broken.JPEG"
run verify2 "$BIN/verify_db" "$WORK/train.lmdb" --decode --against "$T" --stats -q
expect_rc 0 "verify intact" verify2
expect_in verify2.out "verify_db: OK: 60 of 60 records checked"
expect_in verify2.out "n01                  20"

# Python reads what C++ wrote, checksums included.
run py "$PY" "$SCRIPTS/read_db.py" "$WORK/train.lmdb" --check
expect_rc 0 "python reader" py; expect_in py.out "checked 60 records: OK"
# Seven records per LMDB value (the last holds four): the same records.
run g7 "$BIN/pack_lmdb" "$T" "$WORK/g7.lmdb" --max-size 128 --shuffle 7 --records-per-value 7 -q
expect_rc 0 "pack, 7 records per value" g7
run g7verify "$BIN/verify_db" "$WORK/g7.lmdb" --decode -q
expect_rc 0 "verify, 7 records per value" g7verify
run pyg7 "$PY" "$SCRIPTS/read_db.py" "$WORK/g7.lmdb" --check
expect_rc 0 "python reader, 7 records per value" pyg7; expect_in pyg7.out "checked 60 records: OK"
run pyg7r "$PY" "$SCRIPTS/read_db.py" "$WORK/g7.lmdb" 0 27 59
run g1 "$BIN/pack_lmdb" "$T" "$WORK/g1.lmdb" --max-size 128 --shuffle 7 --records-per-value 1 -q
run pyg1r "$PY" "$SCRIPTS/read_db.py" "$WORK/g1.lmdb" 0 27 59
expect_true "cmp -s $WORK/pyg7r.out $WORK/pyg1r.out" "python reads the same records whatever the grouping"

# Blob and raw, converted from the LMDB.
run blob "$BIN/pack_lmdb" "$WORK/train.lmdb" "$WORK/train.blob" --format blob --encoding raw -q
expect_rc 0 "convert to raw blob" blob
run pyblob "$PY" "$SCRIPTS/read_db.py" "$WORK/train.blob" 0
expect_in pyblob.out "128x171x3 raw (128, 171, 3)"
# The same blob through the page cache and, where /tmp is a disk, with
# O_DIRECT: the same records (the metadata differs only in its time).
run blob_off "$BIN/pack_lmdb" "$WORK/train.lmdb" "$WORK/off.blob" --format blob --encoding raw --direct-io off
expect_rc 0 "blob --direct-io off" blob_off
expect_not_in blob_off.out "O_DIRECT"
run blob_on "$BIN/pack_lmdb" "$WORK/train.lmdb" "$WORK/on.blob" --format blob --encoding raw --direct-io on
if [ "$RC" -eq 0 ]; then
  expect_in blob_on.out "(blob, raw, shard 0/1, O_DIRECT)"
  index_end=$(od -An -t u8 -j 32 -N 8 "$WORK/off.blob" | tr -d ' ')  # the metadata's offset
  expect_true "cmp -s -n $index_end $WORK/off.blob $WORK/on.blob" "O_DIRECT blob differs before its metadata"
  run pyon "$PY" "$SCRIPTS/read_db.py" "$WORK/on.blob" 0
  expect_true "cmp -s $WORK/pyblob.out $WORK/pyon.out" "python reads the O_DIRECT blob differently"
else
  expect_in blob_on.err "does not support O_DIRECT"  # tmpfs before Linux 6.6
fi
run bad_direct "$BIN/pack_lmdb" "$WORK/train.lmdb" "$WORK/x.blob" --format blob --direct-io sometimes
expect_rc 2 "--direct-io sometimes" bad_direct
expect_in bad_direct.err "--direct-io must be auto, on or off"
# O_DIRECT asked for where it cannot be had is refused, not ignored.
run lmdb_direct "$BIN/pack_lmdb" "$WORK/train.lmdb" "$WORK/direct.lmdb" --direct-io on
expect_rc 2 "lmdb with --direct-io on" lmdb_direct
expect_in lmdb_direct.err "--direct-io on applies to --format blob"
expect_true "[ ! -e $WORK/direct.lmdb ]" "a refused pack wrote $WORK/direct.lmdb"

# Damage one byte in the middle of the blob: verify names the record.
size=$(stat -c %s "$WORK/train.blob")
printf '\xff' | dd of="$WORK/train.blob" bs=1 seek=$((size / 2)) conv=notrunc status=none
run damaged "$BIN/verify_db" "$WORK/train.blob" -q
expect_rc 1 "damaged blob" damaged
expect_in damaged.out "checksum mismatch"
expect_in damaged.out "FAILED"

# Ctrl-C during a pack: exit 130 and nothing at DST.
for i in $(seq 120); do cp -r "$T/n01" "$T/n01_$i"; done
"$BIN/pack_lmdb" "$T" "$WORK/int.lmdb" --encoding raw --threads 1 -q >"$WORK/int.out" 2>&1 &
pid=$!
# Ctrl-C once it writes (its temporary exists), not after a fixed sleep: a
# loaded machine may not have started it by then (a SIGINT before its
# handler is installed also ends with 130, and tests nothing).
end=$((SECONDS + 120))
while [ $SECONDS -lt $end ] && kill -0 $pid 2>/dev/null && ! compgen -G "$WORK/.int.lmdb.ipk-tmp.*" >/dev/null; do
  sleep 0.01
done
expect_true "compgen -G '$WORK/.int.lmdb.ipk-tmp.*' >/dev/null" "the pack was writing when interrupted"
kill -INT $pid; wait $pid; RC=$?
expect_rc 130 "interrupted pack" int
expect_in int.out "interrupted"
expect_true "[ ! -e $WORK/int.lmdb ] && [ -z \"\$(ls -A $WORK | grep ipk-tmp)\" ]" "no database or temporary after Ctrl-C"

finish
