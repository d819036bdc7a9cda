#!/usr/bin/python3
"""A corpus for measuring duplicate and leak finding: distinct images with
planted copies, from the real photos of Debian's wallpaper packages.

    make_planted_duplicates.py OUT [--bases 10000] [--planted 500] [--val 1000]
                               [--tile 48] [--seed 0]

The packages hold about 60 distinct pictures (one file per wallpaper: they
ship several sizes of each, which are themselves duplicates), many of them
abstract: their tiles repeat textures and edges, so that many pairs of
tiles are as alike as a cropped copy and no one could say whether they are
duplicates. A base is therefore a 2x2 mosaic of four non-overlapping
TILE x TILE tiles with detail (gray standard deviation >= 16 and mean
absolute Laplacian >= 6) drawn at random from all photos: two bases agree
in at most a quarter, by construction. OUT/train/cK/ holds the bases; OUT/val/cK/ holds --val
other tiles plus --planted copies of random train tiles; train also gets
--planted // 5 copies of its own tiles. A copy is re-encoded (quality
40-85), resized (0.5-0.8x or 1.2-1.5x), slightly cropped (3-8% off each
edge it cuts), colour-jittered (brightness, contrast +-20%, saturation
+-30%), or all of these. OUT/truth.csv lists every planted pair as
SET/PATH of the copy and of its original, with the transform.
"""
import argparse
import glob
import io
import os
import random
import sys

import numpy as np
from PIL import Image, ImageEnhance

SOURCES = ["/usr/share/wallpapers", "/usr/share/backgrounds/mate"]


def photos():
    """One file per wallpaper (its largest), distinct photos only."""
    best = {}
    for root in SOURCES:
        for ext in ("jpg", "jpeg", "png"):
            for p in glob.glob(os.path.join(root, "**", "*." + ext), recursive=True):
                if "screenshot" in p:
                    continue
                key = p.split("/contents/")[0] if "/contents/" in p else p
                size = os.path.getsize(p)
                if key not in best or size > best[key][0]:
                    best[key] = (size, p)
    paths = sorted(p for _, p in best.values())
    if not paths:
        sys.exit("make_planted_duplicates: no photos; install plasma-workspace-wallpapers and mate-backgrounds")
    return paths


def tiles(paths, tile, rng):
    out = []
    for k, p in enumerate(paths):
        im = Image.open(p).convert("RGB")
        a = np.asarray(im)
        g = np.asarray(im.convert("L"), np.float32)
        for y in range(0, im.height - tile + 1, tile):
            for x in range(0, im.width - tile + 1, tile):
                t = g[y:y + tile, x:x + tile]
                lap = np.abs(4 * t[1:-1, 1:-1] - t[:-2, 1:-1] - t[2:, 1:-1] - t[1:-1, :-2] - t[1:-1, 2:]).mean()
                if t.std() >= 16 and lap >= 6:
                    out.append((k, a[y:y + tile, x:x + tile]))
    rng.shuffle(out)
    return out


def jpeg(im, q):
    b = io.BytesIO()
    im.save(b, "JPEG", quality=q)
    return b.getvalue()


def variant(im, kind, rng):
    if kind in ("crop", "all"):
        w, h = im.size
        l, t = int(w * rng.uniform(0, 0.08)), int(h * rng.uniform(0, 0.08))
        r, b = w - int(w * rng.uniform(0, 0.08)), h - int(h * rng.uniform(0, 0.08))
        im = im.crop((l, t, r, b))
    if kind in ("resize", "all"):
        s = rng.choice([rng.uniform(0.5, 0.8), rng.uniform(1.2, 1.5)])
        im = im.resize((max(8, round(im.width * s)), max(8, round(im.height * s))), Image.BICUBIC)
    if kind in ("jitter", "all"):
        im = ImageEnhance.Brightness(im).enhance(rng.uniform(0.8, 1.2))
        im = ImageEnhance.Contrast(im).enhance(rng.uniform(0.8, 1.2))
        im = ImageEnhance.Color(im).enhance(rng.uniform(0.7, 1.3))
    q = rng.randint(40, 85) if kind in ("reencode", "all") else 92
    return jpeg(im, q)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--bases", type=int, default=10000)
    ap.add_argument("--planted", type=int, default=500)
    ap.add_argument("--val", type=int, default=1000)
    ap.add_argument("--tile", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tiles_ = tiles(photos(), a.tile, rng)
    if len(tiles_) < 64:
        sys.exit("make_planted_duplicates: only %d tiles with detail" % len(tiles_))
    pool, seen = [], set()
    while len(pool) < a.bases + a.val:
        pick = tuple(rng.randrange(len(tiles_)) for _ in range(4))
        if pick in seen or len(set(pick)) < 4:
            continue
        seen.add(pick)
        q = [tiles_[i][1] for i in pick]
        pool.append((tiles_[pick[0]][0], np.concatenate([np.concatenate(q[:2], 1), np.concatenate(q[2:], 1)], 0)))
    truth = []

    def save(rel, data):
        path = os.path.join(a.out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    train = []
    for i, (k, t) in enumerate(pool[:a.bases]):
        rel = "train/c%d/t%06d.jpg" % (k % 10, i)
        save(rel, jpeg(Image.fromarray(t), 92))
        train.append((rel, k, t))
    for i, (k, t) in enumerate(pool[a.bases:a.bases + a.val]):
        save("val/c%d/v%06d.jpg" % (k % 10, i), jpeg(Image.fromarray(t), 92))
    kinds = ["reencode", "resize", "crop", "jitter", "all"]
    for i in range(a.planted + a.planted // 5):
        rel, k, t = rng.choice(train)
        kind = kinds[i % len(kinds)]
        dst = ("val/c%d/p%06d.jpg" if i < a.planted else "train/c%d/p%06d.jpg") % (k % 10, i)
        save(dst, variant(Image.fromarray(t), kind, rng))
        truth.append((dst, rel, kind))
    with open(os.path.join(a.out, "truth.csv"), "w") as f:
        f.write("copy,original,transform\n")
        for row in truth:
            f.write(",".join(row) + "\n")
    print("make_planted_duplicates: %d train + %d val tiles, %d planted copies -> %s"
          % (a.bases, a.val, len(truth), a.out))


if __name__ == "__main__":
    main()
