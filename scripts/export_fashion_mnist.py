#!/usr/bin/python3
"""Exports Fashion-MNIST (Debian package dataset-fashion-mnist) to an
ImageFolder tree of PNGs: OUT/train/<class>/<n>.png, OUT/test/<class>/<n>.png.
Class folders are named "<label>_<name>" so their sorted order is label order.

    export_fashion_mnist.py OUT [--limit-train N] [--limit-test N]

Re-running is cheap: a split whose folder is complete is left alone.
"""
import argparse
import gzip
import os
import struct
import sys

import numpy as np
from PIL import Image

SRC = "/usr/share/datasets/fashion-mnist"
CLASSES = ["0_tshirt", "1_trouser", "2_pullover", "3_dress", "4_coat",
           "5_sandal", "6_shirt", "7_sneaker", "8_bag", "9_ankle_boot"]


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack_from(">HBB", data, 0)
    if zero != 0 or dtype != 0x08:
        sys.exit("%s: not an unsigned-byte IDX file" % path)
    dims = struct.unpack_from(">" + "I" * ndim, data, 4)
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def export(split, prefix, out, limit):
    images = read_idx(os.path.join(SRC, prefix + "-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(SRC, prefix + "-labels-idx1-ubyte.gz"))
    n = min(limit or len(labels), len(labels))
    root = os.path.join(out, split)
    marker = os.path.join(root, ".complete-%d" % n)
    if os.path.exists(marker):
        print("export_fashion_mnist: %s already exported (%d images)" % (split, n))
        return
    for c in CLASSES:
        os.makedirs(os.path.join(root, c), exist_ok=True)
    for i in range(n):
        path = os.path.join(root, CLASSES[labels[i]], "%05d.png" % i)
        tmp = path + ".tmp"
        Image.fromarray(images[i], "L").save(tmp, "PNG")
        os.replace(tmp, path)
    open(marker, "w").close()
    print("export_fashion_mnist: %s: %d images in %d classes -> %s" % (split, n, len(CLASSES), root))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--limit-train", type=int, default=0)
    ap.add_argument("--limit-test", type=int, default=0)
    args = ap.parse_args()
    if not os.path.isdir(SRC):
        sys.exit("export_fashion_mnist: %s missing: apt-get install dataset-fashion-mnist "
                 "(scripts/setup.sh does)" % SRC)
    export("train", "train", args.out, args.limit_train)
    export("test", "t10k", args.out, args.limit_test)


if __name__ == "__main__":
    main()
