#!/usr/bin/env bash
# Fault injection (issue: hardening): SIGKILL at random points, a full disk,
# a read-only destination, unreadable and vanishing sources, a symlink loop,
# a second writer, a reader beside verify_db. Real processes, real files.
# Usage: faults_cli.sh BINDIR DATADIR SCRIPTSDIR
# IMAGEPACK_FAULT_TRIALS (default 8) sets the SIGKILL trials per tool.
BIN=$1
DATA=$2
SCRIPTS=$3
source "$(dirname "$0")/lib.sh"
TRIALS=${IMAGEPACK_FAULT_TRIALS:-8}
chmod 755 "$WORK"

# A tree of 480 JPEGs (4 classes), sizes varied so work per file varies.
T=$WORK/tree
$PY - "$T" <<'PYEOF'
import sys, os, random
from PIL import Image
root = sys.argv[1]
rng = random.Random(7)
base = Image.effect_noise((400, 300), 50).convert("RGB")
for c in range(4):
    os.makedirs(f"{root}/n{c:08d}")
    for i in range(120):
        im = base.rotate(rng.uniform(0, 360)).resize((200 + rng.randint(0, 200), 150 + rng.randint(0, 150)))
        im.save(f"{root}/n{c:08d}/img{i:03d}.JPEG", quality=rng.randint(70, 95))
PYEOF

# Records and metadata of a database, minus what differs between runs
# (creation time, absolute source): equal digests = the same database.
db_digest() {
  $PY - "$1" "$SCRIPTS" <<'PYEOF'
import hashlib, json, sys
sys.path.insert(0, sys.argv[2])
import read_db
db = read_db.open_db(sys.argv[1])
h = hashlib.sha256()
meta = dict(db.meta)
for k in ("created", "source", "meta_checksum"):
    meta.pop(k, None)
h.update(json.dumps(meta, sort_keys=True).encode())
for i in range(db.meta["count"]):
    read_db.read_record(db, i)          # checksum verified
    h.update(db.raw(i))
print(h.hexdigest())
PYEOF
}
no_temps() { [ -z "$(find "$1" -name '*.ipk-tmp.*' 2>/dev/null)" ]; }
ms_now() { date +%s%3N; }

# ---- SIGKILL trials: resize_imagenet -----------------------------------------
t0=$(ms_now)
run ref_resize "$BIN/resize_imagenet" "$T" "$WORK/ref_resize" --max-size 96 -q
expect_rc 0 "reference resize" ref_resize
span=$(( $(ms_now) - t0 ))
killed=0
for trial in $(seq "$TRIALS"); do
  out=$WORK/kr$trial
  # One or two kills at random points, then a run that completes.
  for k in 1 2; do
    "$BIN/resize_imagenet" "$T" "$out" --max-size 96 -q >/dev/null 2>&1 &
    pid=$!
    sleep "$(awk -v r=$RANDOM -v s="$span" 'BEGIN { printf "%.3f", r / 32768 * s / 1000 }')"
    kill -9 $pid 2>/dev/null && killed=$((killed + 1))
    wait $pid 2>/dev/null
  done
  run "kr$trial" "$BIN/resize_imagenet" "$T" "$out" --max-size 96 -q
  expect_rc 0 "resize re-run after SIGKILL (trial $trial)" "kr$trial"
  expect_true "diff -r -q $WORK/ref_resize $out >/dev/null" "trial $trial: resumed tree differs from an uninterrupted run"
  expect_true "no_temps $out" "trial $trial: temporaries left after the re-run"
  rm -rf "$out"
done
echo "resize_imagenet: $TRIALS trials, $killed kills landed mid-run"

# ---- SIGKILL trials: pack_lmdb (LMDB and blob, one-pass resize) --------------
for fmt in lmdb blob; do
  t0=$(ms_now)
  run "ref_$fmt" "$BIN/pack_lmdb" "$T" "$WORK/ref.$fmt" --format "$fmt" --max-size 64 --shuffle 3 -q
  expect_rc 0 "reference pack $fmt" "ref_$fmt"
  span=$(( $(ms_now) - t0 ))
  ref=$(db_digest "$WORK/ref.$fmt")
  killed=0
  for trial in $(seq "$TRIALS"); do
    db=$WORK/kp$trial.$fmt
    "$BIN/pack_lmdb" "$T" "$db" --format "$fmt" --max-size 64 --shuffle 3 -q >/dev/null 2>&1 &
    pid=$!
    sleep "$(awk -v r=$RANDOM -v s="$span" 'BEGIN { printf "%.3f", r / 32768 * s / 1000 }')"
    if kill -9 $pid 2>/dev/null; then
      killed=$((killed + 1))
      wait $pid 2>/dev/null
      # Killed before the rename: nothing under DST. After it: complete.
      if [ -e "$db" ]; then
        expect_true "[ \"\$(db_digest $db)\" = $ref ]" "$fmt trial $trial: DST exists after SIGKILL but differs"
        rm -f "$db"
      fi
    else
      wait $pid 2>/dev/null
      rm -f "$db"
    fi
    run "kp$trial" "$BIN/pack_lmdb" "$T" "$db" --format "$fmt" --max-size 64 --shuffle 3 -q
    expect_rc 0 "pack re-run after SIGKILL ($fmt trial $trial)" "kp$trial"
    expect_true "[ \"\$(db_digest $db)\" = $ref ]" "$fmt trial $trial: re-run differs from an uninterrupted pack"
    expect_true "no_temps $WORK" "$fmt trial $trial: temporaries left after the re-run"
    rm -f "$db"
  done
  echo "pack_lmdb $fmt: $TRIALS trials, $killed kills landed mid-run"
done

# ---- Full disk: a 1 MiB tmpfs -------------------------------------------------
FULL=$WORK/full
mkdir -p "$FULL"
if mount -t tmpfs -o size=1m tmpfs "$FULL" 2>/dev/null; then
  trap 'umount "$FULL" 2>/dev/null; umount "$WORK/ro" 2>/dev/null; rm -rf "$WORK"' EXIT
  run full_resize "$BIN/resize_imagenet" "$T" "$FULL/out" --max-size 160 -q
  expect_rc 1 "resize onto a full disk" full_resize
  expect_in full_resize.err "No space left on device"
  expect_in full_resize.err "re-run to resume"
  expect_true "[ \$(grep -c 'skipped' $WORK/full_resize.err) -eq 0 ]" "a full disk is one error, not one per file"
  expect_true "no_temps $FULL" "temporaries left on the full disk"
  # Every file under a final name is a complete JPEG.
  run full_check $PY -c "
import sys, glob
from PIL import Image
files = glob.glob('$FULL/out/**/*.JPEG', recursive=True)
for f in files:
    Image.open(f).load()
print(len(files), 'complete')"
  expect_rc 0 "outputs on the full disk decode" full_check
  rm -rf "${FULL:?}"/*
  for fmt in lmdb blob; do
    run "full_$fmt" "$BIN/pack_lmdb" "$T" "$FULL/x.$fmt" --format "$fmt" --encoding raw -q
    expect_rc 1 "pack $fmt onto a full disk" "full_$fmt"
    expect_in "full_$fmt.err" "No space left on device"
    expect_in "full_$fmt.err" "$FULL"
    expect_true "[ -z \"\$(ls -A $FULL)\" ]" "pack $fmt left files on the full disk: $(ls -A $FULL)"
  done
  umount "$FULL"

  # ---- Read-only destination ---------------------------------------------------
  RO=$WORK/ro
  mkdir -p "$RO"
  mount -t tmpfs -o size=8m tmpfs "$RO" && mkdir -p "$RO/out" && mount -o remount,ro "$RO"
  run ro_resize "$BIN/resize_imagenet" "$T" "$RO/out" --max-size 64 -q
  expect_rc 1 "resize into a read-only destination" ro_resize
  expect_in ro_resize.err "Read-only file system"
  expect_in ro_resize.err "$RO/out"
  run ro_pack "$BIN/pack_lmdb" "$T" "$RO/x.lmdb" -q
  expect_rc 1 "pack into a read-only destination" ro_pack
  expect_in ro_pack.err "Read-only file system"
  expect_in ro_pack.err "$RO/"
  expect_in ro_pack.err "x.lmdb"
  umount "$RO"
else
  echo "faults: cannot mount tmpfs here (not root?): full-disk and read-only checks not run"
fi

# ---- Full disk under O_DIRECT: a loop-mounted 16 MiB ext4 --------------------
# A blob on a disk is written with O_DIRECT by StagedFile's background
# threads (tmpfs above never takes that path): their failure must end the
# pack the same way, and a pack that fits must hold the same records as one
# through the page cache.
EXT=$WORK/ext4
mkdir -p "$EXT/mnt"
if truncate -s 16M "$EXT/img" && mkfs.ext4 -q -F "$EXT/img" >/dev/null 2>&1 &&
   mount -o loop "$EXT/img" "$EXT/mnt" 2>/dev/null; then
  trap 'umount "$FULL" 2>/dev/null; umount "$WORK/ro" 2>/dev/null; umount "$EXT/mnt" 2>/dev/null; rm -rf "$WORK"' EXIT
  M=$EXT/mnt
  used_before=$(df --output=used "$M" | tail -1)
  run ext_fits "$BIN/pack_lmdb" "$T" "$M/small.blob" --format blob --encoding raw --max-size 32 --shuffle 1
  expect_rc 0 "raw blob that fits on the ext4" ext_fits
  expect_in ext_fits.out "O_DIRECT"
  run ext_ref "$BIN/pack_lmdb" "$T" "$WORK/small_ref.blob" --format blob --encoding raw --max-size 32 --shuffle 1 \
    --direct-io off -q
  expect_rc 0 "the same pack through the page cache" ext_ref
  expect_true "[ \"\$(db_digest $M/small.blob)\" = \"\$(db_digest $WORK/small_ref.blob)\" ]" \
    "the O_DIRECT blob holds other records than the page-cache one"
  run ext_verify "$BIN/verify_db" "$M/small.blob" -q
  expect_rc 0 "verify_db of the O_DIRECT blob" ext_verify
  rm -f "$M/small.blob"
  run ext_full "$BIN/pack_lmdb" "$T" "$M/x.blob" --format blob --encoding raw -q
  expect_rc 1 "O_DIRECT pack onto a full ext4" ext_full
  expect_in ext_full.err "No space left on device"
  expect_in ext_full.err "$M/"
  expect_true "[ -z \"\$(ls -A $M | grep -v '^lost+found\$')\" ]" "the O_DIRECT pack left files on the full disk: $(ls -A "$M")"
  used_after=$(df --output=used "$M" | tail -1)
  expect_true "[ $used_after -le $((used_before + 64)) ]" "the full pack's space was not given back: $used_before KiB used before, $used_after after"
  umount "$M"
else
  echo "faults: cannot loop-mount an ext4 here (not root, or no loop devices): the O_DIRECT full-disk check not run"
fi

# ---- Unreadable sources (as an unprivileged user: root reads everything) ------
U=$WORK/unreadable
UO=$WORK/unreadable_out
mkdir -p "$U" "$UO"
cp -r "$T/n00000000" "$U/a"
mkdir -p "$U/b"
cp "$T"/n00000001/img00[0-4].JPEG "$U/b/"
chmod 000 "$U/a/img005.JPEG" "$U/b"
chmod 777 "$UO"
AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
# nobody must be able to run the tools (a checkout under a private folder
# would not let it): otherwise this part cannot be tested here.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null &&
   "${AS_NOBODY[@]}" "$BIN/resize_imagenet" --version >/dev/null 2>&1 &&
   "${AS_NOBODY[@]}" test -r "$DATA/rgb.jpg"; then
  run unread "${AS_NOBODY[@]}" "$BIN/resize_imagenet" "$U" "$UO/r" --max-size 64 -q
  expect_rc 3 "unreadable file and folder are skipped" unread
  expect_in unread.err "a/img005.JPEG"
  expect_in unread.err "Permission denied"
  expect_in unread.err "b"
  expect_in unread.out "119 written"
  run unread_pack "${AS_NOBODY[@]}" "$BIN/pack_lmdb" "$U" "$UO/x.lmdb" --max-size 64 -q
  expect_rc 3 "pack skips the unreadable file" unread_pack
  expect_in unread_pack.err "img005.JPEG"
  expect_in unread_pack.err "Permission denied"
else
  echo "faults: cannot run the tools as nobody here (not root, or a private checkout): unreadable-file checks not run"
fi
chmod -R u+rwX "$U"

# ---- Symlink loop in SRC ---------------------------------------------------------
L=$WORK/loop
mkdir -p "$L/a/b"
cp "$T"/n00000000/img00[0-9].JPEG "$L/a/b/"
ln -s ../.. "$L/a/b/up"
ln -s "$L/a" "$L/a/b/self"
run loop timeout 60 "$BIN/resize_imagenet" "$L" "$WORK/loop_out" --max-size 64 -q
expect_true "[ $RC -eq 0 ] || [ $RC -eq 3 ]" "symlink loop: exit $RC ($(head -c 300 $WORK/loop.err))"
expect_in loop.err "symlink loop"
expect_in loop.out "written"
expect_true "[ \$(find $WORK/loop_out -name '*.JPEG' | wc -l) -eq 10 ]" "each real image written once despite the loop"
run loop_pack timeout 60 "$BIN/pack_lmdb" "$L" "$WORK/loop.lmdb" -q
expect_true "[ $RC -eq 0 ] || [ $RC -eq 3 ]" "pack with a symlink loop: exit $RC"
expect_in loop_pack.err "symlink loop"

# ---- Sources that vanish or shrink during the run ----------------------------
V=$WORK/vanish
for i in $(seq 0 3); do cp -r "$T" "$V$i"; done
mkdir -p "$V"
for i in 0 1 2 3; do mv "$V$i" "$V/part$i"; done
last=$(cd "$V" && find . -name '*.JPEG' | sort | tail -20)
vanish_during() {  # vanish_during NAME READY_GLOB CMD...: strikes once READY_GLOB exists
  local name=$1 ready=$2; shift 2
  "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  local pid=$! n=0 end=$((SECONDS + 120))
  # READY_GLOB appears once the tool has listed SRC and started writing
  # (waited for with a deadline a loaded machine does not reach).
  while [ $SECONDS -lt $end ] && kill -0 $pid 2>/dev/null; do
    compgen -G "$ready" >/dev/null && break
    sleep 0.01
  done
  sleep 0.1
  for f in $last; do
    n=$((n + 1))
    if [ $n -le 10 ]; then rm -f "$V/$f"; else truncate -s 500 "$V/$f"; fi
  done
  wait $pid
  RC=$?
}
vanish_during vr "$WORK/vr_dst/part0/*/*" "$BIN/resize_imagenet" "$V" "$WORK/vr_dst" --max-size 64 --threads 1 -q \
  --errors "$WORK/vr_errors.tsv"
expect_rc 3 "files vanishing and shrinking mid-run are skipped" vr
expect_in vr.out "1900 written"
expect_in vr_errors.tsv "No such file or directory"
expect_in vr_errors.tsv "truncated"
expect_in vr_errors.tsv "$(echo "$last" | tail -1 | sed 's|^\./||')"
rm -rf "$V"; mkdir -p "$V"  # fresh copies for the pack run
for i in 0 1 2 3; do cp -r "$T" "$V/part$i"; done
last=$(cd "$V" && find . -name '*.JPEG' | sort | tail -20)
vanish_during vp "$WORK/.vp_dst.lmdb.ipk-tmp.*" "$BIN/pack_lmdb" "$V" "$WORK/vp_dst.lmdb" --threads 1 --encoding raw -q \
  --errors "$WORK/vp_errors.tsv"
expect_rc 3 "pack: vanishing sources skipped" vp
expect_in vp.out "1900 records"
expect_in vp_errors.tsv "No such file or directory"
expect_in vp_errors.tsv "truncated"
run vp_verify "$BIN/verify_db" "$WORK/vp_dst.lmdb" -q
expect_rc 0 "the database packed around vanished files verifies" vp_verify

# ---- Two writers, one DST; a reader beside verify_db --------------------------
BIGT=$WORK/big
mkdir -p "$BIGT"
for i in $(seq 6); do cp -r "$T" "$BIGT/copy$i"; done
"$BIN/pack_lmdb" "$BIGT" "$WORK/shared.lmdb" --encoding raw --threads 1 -q >"$WORK/w1.out" 2>"$WORK/w1.err" &
w1=$!
end=$((SECONDS + 120))
while [ $SECONDS -lt $end ] && kill -0 $w1 2>/dev/null && [ ! -e "$WORK/.shared.lmdb.ipk-lock" ]; do sleep 0.02; done
run w2 "$BIN/pack_lmdb" "$T" "$WORK/shared.lmdb" --overwrite -q
expect_rc 1 "second writer refused" w2
expect_in w2.err "another process is writing"
wait $w1; RC=$?
expect_rc 0 "first writer unaffected by the second" w1
run shared_verify "$BIN/verify_db" "$WORK/shared.lmdb" -q
expect_rc 0 "database of the first writer verifies" shared_verify
if [ -x "$BIN/bench_loader" ]; then
  for db in "$WORK/shared.lmdb" "$WORK/ref.blob"; do
    "$BIN/bench_loader" "$db" --epochs 3 --batch 32 --size 64 >"$WORK/reader.out" 2>&1 &
    reader=$!
    run concurrent_verify "$BIN/verify_db" "$db" --decode -q
    expect_rc 0 "verify_db beside a reader ($db)" concurrent_verify
    wait $reader; RC=$?
    expect_rc 0 "loader beside verify_db ($db)" reader
  done
fi

finish
