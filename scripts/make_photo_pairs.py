#!/usr/bin/python3
"""Makes an image-restoration dataset of real photo pairs from Debian's
plasma-workspace-wallpapers and mate-backgrounds: crops of the photos as
sharp targets, each with a degraded input.

    make_photo_pairs.py OUT [--size 96] [--train 2000] [--test 300] [--seed 0]

Layout (the blurry/sharp folders of deblurring datasets such as GoPro):

    OUT/SPLIT/blurry/NNNNNN.png   degraded input
    OUT/SPLIT/sharp/NNNNNN.png    target
    OUT/SPLIT.jsonl               one row per pair: image (blurry), target
                                  (sharp), and the degradation's parameters

Each crop is a random square of a random photo scaled so that the crop's
side is SIZE (Lanczos, from a region of 1-3 x SIZE: detail at several
scales), drawn again (up to 20 times) while its grey levels are nearly flat
(standard deviation below 24). The degradation, recorded per pair: a motion blur (a line kernel
of 5-13 px at a random angle) or a Gaussian blur (sigma 1-2.5), then
Gaussian noise (sigma 2-12 grey levels), then JPEG at quality 30-80 (the
input is stored as PNG after that, so the JPEG damage is kept exactly).
Train and test take crops of different pictures (every seventh picture
is test; a wallpaper shipped at several resolutions is one picture). Deterministic for a seed. Pack with:

    pack_lmdb OUT/train/blurry train.lmdb --field target=OUT/train/sharp --no-class --encoding raw
"""
import argparse
import glob
import io
import json
import os

import numpy as np
from PIL import Image, ImageFilter

SOURCES = ["/usr/share/wallpapers", "/usr/share/backgrounds/mate"]


def photos():
    paths = []
    for root in SOURCES:
        for ext in ("jpg", "jpeg", "png"):
            paths += glob.glob(os.path.join(root, "**", "*." + ext), recursive=True)
    # A KDE wallpaper ships one picture at several resolutions
    # (wallpapers/NAME/contents/images/WxH.jpg): one picture, its largest
    # file, so that train and test never share a picture.
    best = {}
    for p in sorted(set(paths)):
        parts = p.split(os.sep)
        key = parts[4] if p.startswith("/usr/share/wallpapers/") and len(parts) > 5 else p
        try:
            with Image.open(p) as im:
                area = im.size[0] * im.size[1] if min(im.size) >= 400 else 0
        except OSError:
            continue
        if area and area > best.get(key, ("", 0))[1]:
            best[key] = (p, area)
    out = sorted(p for p, _ in best.values())
    if len(out) < 14:
        raise SystemExit("make_photo_pairs: fewer than 14 photos under %s (install plasma-workspace-wallpapers "
                         "and mate-backgrounds)" % " ".join(SOURCES))
    return out


def motion_blur(a, length, angle):
    """The mean of the image shifted along a line: a line kernel."""
    pad = length
    p = np.pad(a.astype(np.float64), ((pad, pad), (pad, pad), (0, 0)), mode="reflect")
    acc = np.zeros_like(a, dtype=np.float64)
    h, w = a.shape[:2]
    for t in np.linspace(-(length - 1) / 2, (length - 1) / 2, length):
        dx, dy = int(round(t * np.cos(angle))), int(round(t * np.sin(angle)))
        acc += p[pad + dy:pad + dy + h, pad + dx:pad + dx + w]
    return acc / length


def degrade(sharp, rng):
    params = {}
    if rng.random() < 0.5:
        params["blur"] = "motion"
        params["length"] = int(rng.integers(5, 14))
        params["angle_deg"] = round(float(rng.uniform(0, 180)), 1)
        a = motion_blur(np.asarray(sharp), params["length"], np.deg2rad(params["angle_deg"]))
    else:
        params["blur"] = "gaussian"
        params["sigma"] = round(float(rng.uniform(1.0, 2.5)), 2)
        a = np.asarray(sharp.filter(ImageFilter.GaussianBlur(params["sigma"]))).astype(np.float64)
    params["noise_sigma"] = round(float(rng.uniform(2, 12)), 2)
    a = a + rng.normal(0, params["noise_sigma"], a.shape)
    img = Image.fromarray(np.clip(np.rint(a), 0, 255).astype(np.uint8))
    params["jpeg_quality"] = int(rng.integers(30, 81))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=params["jpeg_quality"])
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB"), params


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--train", type=int, default=2000)
    ap.add_argument("--test", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    sources = photos()
    splits = {"train": [p for i, p in enumerate(sources) if i % 7], "test": sources[::7]}
    for split, count, seed in (("train", a.train, a.seed), ("test", a.test, a.seed + 1)):
        manifest = os.path.join(a.out, split + ".jsonl")
        if os.path.exists(manifest):
            print("make_photo_pairs: %s already made" % manifest)
            continue
        rng = np.random.default_rng(seed)
        for d in ("blurry", "sharp"):
            os.makedirs(os.path.join(a.out, split, d), exist_ok=True)
        rows, cache = [None] * count, {}
        chosen = rng.integers(len(splits[split]), size=count)
        for i in sorted(range(count), key=lambda k: (chosen[k], k)):  # each photo decoded once
            rng = np.random.default_rng([seed, i])
            path = splits[split][int(chosen[i])]
            if path not in cache:
                cache.clear()  # one decoded photo at a time keeps memory small
                cache[path] = Image.open(path).convert("RGB")
            photo = cache[path]
            # Wallpapers hold much flat sky and gradient, where a blur
            # changes nothing: up to 20 draws for a crop with detail (the
            # standard deviation of its grey levels at least 24).
            for _ in range(20):
                side = int(min(min(photo.size), a.size * rng.uniform(1, 3)))
                x, y = int(rng.integers(0, photo.width - side + 1)), int(rng.integers(0, photo.height - side + 1))
                sharp = photo.crop((x, y, x + side, y + side)).resize((a.size, a.size), Image.LANCZOS)
                if np.asarray(sharp.convert("L"), np.float64).std() >= 24:
                    break
            blurry, params = degrade(sharp, rng)
            name = "%06d.png" % i
            sharp.save(os.path.join(a.out, split, "sharp", name))
            blurry.save(os.path.join(a.out, split, "blurry", name))
            rows[i] = {"image": split + "/blurry/" + name, "target": split + "/sharp/" + name,
                       "source": os.path.relpath(path, "/usr/share"), "crop": [x, y, side],
                       "degradation": json.dumps(params)}
        tmp = manifest + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        os.replace(tmp, manifest)  # the manifest last: present means complete
        print("make_photo_pairs: %s: %d pairs of %dx%d from %d photos -> %s" % (
            split, count, a.size, a.size, len(splits[split]), manifest))


if __name__ == "__main__":
    main()
