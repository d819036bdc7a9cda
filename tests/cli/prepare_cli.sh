#!/usr/bin/env bash
# scripts/prepare_imagenet.sh on a small ImageNet-shaped tree, as 2 shards.
# Usage: prepare_cli.sh BINDIR DATADIR SCRIPTSDIR
SCRIPTS=$3
source "$(dirname "$0")/lib.sh"
S=$WORK/imagenet
$PY - "$S" <<'PYEOF'
import sys, os
from PIL import Image
root = sys.argv[1]
base = Image.effect_noise((500, 375), 40).convert("RGB")
for c, wnid in enumerate(["n01440764", "n01443537", "n01484850"]):
    os.makedirs(f"{root}/train/{wnid}")
    for i in range(8):
        base.rotate(11 * i + c).save(f"{root}/train/{wnid}/{wnid}_{i}.JPEG", quality=90)
os.makedirs(f"{root}/val")
with open(f"{root}/LOC_val_solution.csv", "w") as f:
    f.write("ImageId,PredictionString\n")
    for i in range(9):
        name = "ILSVRC2012_val_%08d" % (i + 1)
        base.rotate(5 * i).save(f"{root}/val/{name}.JPEG", quality=90)
        f.write("%s,%s 1 2 3 4\n" % (name, ["n01440764", "n01443537", "n01484850"][i % 3]))
PYEOF
run bad "$SCRIPTS/prepare_imagenet.sh" "$WORK/nope" "$WORK/out"
expect_rc 1 "missing SRC" bad; expect_in bad.err "$WORK/nope/train does not exist"
for i in 0 1; do
  run p$i "$SCRIPTS/prepare_imagenet.sh" "$S" "$WORK/out" --shard $i/2 --max-size 64
  expect_rc 0 "prepare shard $i" p$i
  expect_in p$i.out "== done"
done
expect_true "[ -s $WORK/out/train-0-of-2.lmdb ] && [ -s $WORK/out/val-1-of-2.lmdb ]" "shard databases exist"
run v "$(dirname "$SCRIPTS")/${IMAGEPACK_BUILD_DIR:-build}/tools/verify_db" "$WORK/out/train-0-of-2.lmdb" "$WORK/out/train-1-of-2.lmdb" \
  --against "$WORK/out/resized/train" -q
expect_rc 0 "train shards together are the whole tree" v
run vv "$(dirname "$SCRIPTS")/${IMAGEPACK_BUILD_DIR:-build}/tools/verify_db" "$WORK/out/val-0-of-2.lmdb" "$WORK/out/val-1-of-2.lmdb" --stats -q
expect_rc 0 "val shards" vv
expect_in vv.out "9 of 9 records checked"
expect_in vv.out "n01443537            3"
run again "$SCRIPTS/prepare_imagenet.sh" "$S" "$WORK/out" --shard 0/2 --max-size 64
expect_rc 0 "re-run" again
expect_in again.out "already complete"
finish
