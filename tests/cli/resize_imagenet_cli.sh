#!/usr/bin/env bash
# resize_imagenet as a user runs it. Usage: resize_imagenet_cli.sh BINDIR DATADIR
BIN=$1/resize_imagenet
DATA=$2
source "$(dirname "$0")/lib.sh"

# Conventions shared by every tool.
run help "$BIN" --help;          expect_rc 0 "--help" help; expect_in help.out "Usage: resize_imagenet"
run version "$BIN" --version;    expect_rc 0 "--version" version; expect_in version.out "imagepack"
run badopt "$BIN" --bogus a b;   expect_rc 2 "unknown option" badopt; expect_in badopt.err "Usage:"
run nolimit "$BIN" a b;          expect_rc 2 "no --max-size" nolimit; expect_in nolimit.err "--max-size"
run both "$BIN" a b --max-size 1 --max-edge 2; expect_rc 2 "both limits" both
run badshard "$BIN" a b --max-size 9 --shard 3/3; expect_rc 2 "bad shard" badshard; expect_in badshard.err "'3/3'"
run nosrc "$BIN" "$WORK/missing" "$WORK/o" --max-size 9; expect_rc 1 "missing source" nosrc
expect_in nosrc.err "$WORK/missing"

# A tree of quirks and broken files: finished, some skipped (exit 3).
Q=$WORK/quirks
mkdir -p "$Q/a" "$Q/b"
for f in rgb.jpg progressive.jpg gray.jpg cmyk_adobe.jpg rgba.png; do cp "$DATA/$f" "$Q/a/"; done
cp "$DATA/png_named.JPEG" "$DATA/truncated.jpg" "$DATA/empty.jpg" "$DATA/garbage.jpg" "$Q/b/"
echo hello > "$Q/notes.txt"
run quirks "$BIN" "$Q" "$WORK/qout" --max-size 32 --errors "$WORK/errors.tsv" -q
expect_rc 3 "tree with bad files" quirks
expect_in quirks.out "9 images in shard 0/1: 6 written"
expect_in quirks.out "3 skipped, 1 non-image files ignored"
expect_in quirks.err "skipped b/truncated.jpg: truncated JPEG"
expect_in quirks.err "skipped b/empty.jpg: empty file"
expect_true "[ \$(grep -c . $WORK/errors.tsv) -eq 4 ]" "errors file has 3 errors + 1 ignored"
expect_in errors.tsv "b/garbage.jpg"
expect_in errors.tsv "notes.txt"
expect_true "[ -f $WORK/qout/b/png_named.JPEG ] && [ ! -e $WORK/qout/b/empty.jpg ]" "outputs mirror the tree"
expect_true "[ \"\$(head -c 3 $WORK/qout/b/png_named.JPEG | od -An -tx1 | tr -d ' ')\" = ffd8ff ]" \
  "PNG named .JPEG is now a JPEG"

# A clean tree of photos big enough to interrupt: 1200 JPEGs of 640x480.
T=$WORK/tree
$PY - "$T" <<'PYEOF'
import sys, os, random
from PIL import Image
root = sys.argv[1]
rng = random.Random(1)
base = Image.effect_noise((640, 480), 40).convert("RGB")
for c in range(4):
    os.makedirs(f"{root}/n{c:08d}")
    for i in range(60):
        im = base.rotate(rng.uniform(0, 360)).resize((640 - i, 480))
        im.save(f"{root}/n{c:08d}/{i}.JPEG", quality=rng.randint(75, 95))
PYEOF
# Five copies of each (cheap to make): enough work that a Ctrl-C lands
# mid-run even when the machine is busy with other tests.
for d in "$T"/n*; do for f in "$d"/*.JPEG; do for k in 1 2 3 4; do cp "$f" "${f%.JPEG}_$k.JPEG"; done; done; done
run clean "$BIN" "$T" "$WORK/clean" --max-size 128 -q
expect_rc 0 "clean tree" clean
expect_in clean.out "1200 images in shard 0/1: 1200 written"
expect_not_in clean.err "skipped"

# Ctrl-C: exit 130, only complete files under final names, a re-run resumes.
"$BIN" "$T" "$WORK/int" --max-size 128 --threads 1 -q >"$WORK/int.out" 2>"$WORK/int.err" &
pid=$!
end=$((SECONDS + 120))  # generous: a loaded machine
while [ $SECONDS -lt $end ] && kill -0 $pid 2>/dev/null; do
  n=$(find "$WORK/int" -name '*.JPEG' 2>/dev/null | wc -l)
  [ "$n" -ge 20 ] && break
  sleep 0.02
done
kill -INT $pid; wait $pid; RC=$?
expect_rc 130 "interrupted run" int
expect_in int.out "interrupted: re-run to resume"
expect_true "[ \$(find $WORK/int -name '.*ipk-tmp*' | wc -l) -eq 0 ]" "no temporary files after Ctrl-C"
done_before=$(find "$WORK/int" -name '*.JPEG' | wc -l)
expect_true "[ $done_before -gt 0 ] && [ $done_before -lt 1200 ]" "interrupted part way ($done_before)"
run resume "$BIN" "$T" "$WORK/int" --max-size 128 -q
expect_rc 0 "resumed run" resume
expect_in resume.out "$done_before already done"
expect_true "diff -r $WORK/clean $WORK/int >/dev/null" "resumed result equals an uninterrupted run"

# SIGKILL: temporaries may be left; the re-run removes them and completes.
"$BIN" "$T" "$WORK/kill" --max-size 128 --threads 2 -q >/dev/null 2>&1 &
pid=$!
end=$((SECONDS + 120))
while [ $SECONDS -lt $end ] && kill -0 $pid 2>/dev/null; do
  [ "$(find "$WORK/kill" -name '*.JPEG' 2>/dev/null | wc -l)" -ge 30 ] && break
  sleep 0.02
done
kill -KILL $pid; wait $pid 2>/dev/null
# Leave a temporary as a killed run would have (a dead pid of this user,
# host and boot), and one of another host (alive, for all we know).
fake=$(find "$WORK/kill" -name '*.JPEG' | head -1)
touch "$(temp_name "$(dirname "$fake")/x.JPEG" 4194305)"
other=$(temp_name "$(dirname "$fake")/y.JPEG" 4194305 | sed "s/\.$(hostname | tr . _)\./.otherhost./")
touch "$other"
run rekill "$BIN" "$T" "$WORK/kill" --max-size 128 -q
expect_rc 0 "run after SIGKILL" rekill
expect_true "[ \$(find $WORK/kill -name '.*ipk-tmp*' | wc -l) -eq 1 ] && [ -e '$other' ]" "stale temporaries removed, another host's kept"
rm -f "$other"
expect_true "diff -r $WORK/clean $WORK/kill >/dev/null" "result after SIGKILL equals an uninterrupted run"

# Shards: three runs into one DST make the whole tree, with no overlap.
total=0
for i in 0 1 2; do
  run shard$i "$BIN" "$T" "$WORK/shards" --max-size 128 --shard $i/3 -q
  expect_rc 0 "shard $i" shard$i
  expect_in shard$i.out " 0 already done"
  n=$(sed -n 's/.*: \([0-9]*\) images in shard.*/\1/p' "$WORK/shard$i.out")
  total=$((total + n))
done
expect_true "[ $total -eq 1200 ]" "shard sizes add up to the tree ($total)"
expect_true "diff -r $WORK/clean $WORK/shards >/dev/null" "union of shards equals the whole run"

# --max-edge caps the longer edge; --overwrite redoes.
run edge "$BIN" "$T" "$WORK/edge" --max-edge 100 -q
expect_rc 0 "--max-edge" edge
dims=$($PY -c "from PIL import Image; print(Image.open('$WORK/edge/n00000000/0.JPEG').size)")
expect_true "[ '$dims' = '(100, 75)' ]" "--max-edge 100 on 640x480 gives 100x75 (got $dims)"
run over "$BIN" "$T" "$WORK/edge" --max-edge 100 --overwrite -q
expect_in over.out "1200 written"

finish
