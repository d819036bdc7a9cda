# shellcheck shell=bash
# Sourced by the Slurm and two-node tests.
# tiny_classes DIR BINDIR: DIR/tiny.lmdb, a classification dataset that
# small_cnn trains on in seconds (4 classes x 128 gray 8x8 images, raw
# records, shuffled), packed by the project's own pack_lmdb.
tiny_classes() {
  /usr/bin/python3 - "$1/tree" <<'PYEOF'
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(7)
for c in range(4):
    os.makedirs(f"{sys.argv[1]}/class{c}", exist_ok=True)
    base = np.zeros((8, 8), np.float64)
    base[:, 2 * c:2 * c + 2] = 160  # a bar per class, in noise
    for i in range(128):
        img = np.clip(base + rng.normal(60, 30, (8, 8)), 0, 255).astype(np.uint8)
        Image.fromarray(img, "L").save(f"{sys.argv[1]}/class{c}/{i:03d}.png")
PYEOF
  "$2/pack_lmdb" "$1/tree" "$1/tiny.lmdb" --encoding raw --channels 1 --shuffle 1 -q >"$1/pack.out"
}

# tiny_imagenet DIR: an ImageNet-shaped source for prepare_imagenet.sh:
# DIR/train/<wnid>/*.JPEG (3 classes x 8), DIR/val/*.JPEG (9) and
# DIR/LOC_val_solution.csv.
tiny_imagenet() {
  /usr/bin/python3 - "$1" <<'PYEOF'
import sys, os
from PIL import Image
root = sys.argv[1]
base = Image.effect_noise((120, 90), 40).convert("RGB")
wnids = ["n01440764", "n01443537", "n01484850"]
for c, wnid in enumerate(wnids):
    os.makedirs(f"{root}/train/{wnid}")
    for i in range(8):
        base.rotate(11 * i + c).save(f"{root}/train/{wnid}/{wnid}_{i}.JPEG", quality=90)
os.makedirs(f"{root}/val")
with open(f"{root}/LOC_val_solution.csv", "w") as f:
    f.write("ImageId,PredictionString\n")
    for i in range(9):
        name = "ILSVRC2012_val_%08d" % (i + 1)
        base.rotate(5 * i).save(f"{root}/val/{name}.JPEG", quality=90)
        f.write("%s,%s 1 2 3 4\n" % (name, wnids[i % 3]))
PYEOF
}
