#!/usr/bin/python3
"""Makes a segmentation and detection dataset from Fashion-MNIST (Debian
package dataset-fashion-mnist): canvases holding several garments at
random places and scales, possibly overlapping, with a label map and boxes.

    make_fmnist_scenes.py OUT [--size 96] [--train 6000] [--test 1000] [--seed 0]

For each split (train from the package's train images, test from its test
images) it writes, as a user's dataset would be laid out:

    OUT/SPLIT/images/NNNNNN.png   the canvas, 8-bit gray
    OUT/SPLIT/masks/NNNNNN.png    label map: 0 background, 1 + class where a
                                  garment's pixel is foreground (> 40 of 255)
                                  and not hidden by a later garment
    OUT/SPLIT.jsonl               one row per canvas: image, mask, and boxes
                                  [x0, y0, x1, y1, class] of each garment's
                                  foreground as placed (pixel edges)
    OUT/mask_classes.txt          background + the 10 class names
    OUT/box_classes.txt           the 10 class names

2 to 4 garments per canvas, each scaled to 24-56 px (bilinear), drawn in
order with later ones on top. Deterministic for a seed. Pack with:

    pack_lmdb --manifest OUT/train.jsonl train.lmdb --mask-classes OUT/mask_classes.txt \\
        --box-classes OUT/box_classes.txt
"""
import argparse
import gzip
import json
import os

import numpy as np
from PIL import Image

SRC = "/usr/share/datasets/fashion-mnist"
CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
           "Ankle_boot"]
FOREGROUND = 40


def load(split):
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(SRC, prefix + "-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(os.path.join(SRC, prefix + "-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return images, labels


def scene(rng, images, labels, size):
    canvas = np.zeros((size, size), np.uint8)
    mask = np.zeros((size, size), np.uint8)
    boxes = []
    for _ in range(int(rng.integers(2, 5))):
        k = int(rng.integers(len(images)))
        side = int(rng.integers(24, 57))
        g = np.asarray(Image.fromarray(images[k]).resize((side, side), Image.BILINEAR))
        x, y = int(rng.integers(0, size - side + 1)), int(rng.integers(0, size - side + 1))
        fg = g > FOREGROUND
        if not fg.any():
            continue
        region = canvas[y:y + side, x:x + side]
        region[fg] = g[fg]
        mask[y:y + side, x:x + side][fg] = 1 + labels[k]
        ys, xs = np.nonzero(fg)
        boxes.append([x + int(xs.min()), y + int(ys.min()), x + int(xs.max()) + 1, y + int(ys.max()) + 1,
                      int(labels[k])])
    return canvas, mask, boxes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--train", type=int, default=6000)
    ap.add_argument("--test", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.size < 56:
        ap.error("--size must be at least 56 (the largest garment)")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "mask_classes.txt"), "w") as f:
        f.write("background\n" + "".join(c + "\n" for c in CLASSES))
    with open(os.path.join(a.out, "box_classes.txt"), "w") as f:
        f.write("".join(c + "\n" for c in CLASSES))
    for split, count, seed in (("train", a.train, a.seed), ("test", a.test, a.seed + 1)):
        manifest = os.path.join(a.out, split + ".jsonl")
        if os.path.exists(manifest):
            print("make_fmnist_scenes: %s already made" % manifest)
            continue
        images, labels = load(split)
        rng = np.random.default_rng(seed)
        for d in ("images", "masks"):
            os.makedirs(os.path.join(a.out, split, d), exist_ok=True)
        rows = []
        for i in range(count):
            canvas, mask, boxes = scene(rng, images, labels, a.size)
            name = "%06d.png" % i
            Image.fromarray(canvas).save(os.path.join(a.out, split, "images", name))
            Image.fromarray(mask).save(os.path.join(a.out, split, "masks", name))
            rows.append({"image": split + "/images/" + name, "mask": split + "/masks/" + name, "boxes": boxes})
        tmp = manifest + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        os.replace(tmp, manifest)  # the manifest last: present means complete
        print("make_fmnist_scenes: %s: %d canvases of %dx%d -> %s" % (split, count, a.size, a.size, manifest))


if __name__ == "__main__":
    main()
