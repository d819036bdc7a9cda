#!/usr/bin/python3
"""Cuts an ImageNet-like tree of JPEGs out of the real photos that Debian's
plasma-workspace-wallpapers and mate-backgrounds packages ship.

    make_photo_tree.py OUT --images 1000 --classes 10 [--seed 0] [--quirks]

Each image is a random crop of a random photo, resized so that its shorter
edge is 300-500 px (ImageNet's typical 500x375), saved at JPEG quality 75-95
with 4:2:0 subsampling, as OUT/nXXXXXXXX/nXXXXXXXX_N.JPEG. With --quirks the
tree also gets what real ImageNet holds: a CMYK JPEG, a PNG named .JPEG, a
grayscale JPEG, a progressive JPEG, an EXIF-rotated JPEG, an RGBA PNG, a
6000x4000 photo, plus inputs that must be reported (truncated, empty,
garbage) and a non-image file.
"""
import argparse
import glob
import io
import os
import random
import sys

from PIL import Image

SOURCES = ["/usr/share/wallpapers", "/usr/share/backgrounds/mate"]


def load_sources(max_side):
    paths = []
    for root in SOURCES:
        for ext in ("jpg", "jpeg", "png"):
            paths += glob.glob(os.path.join(root, "**", "*." + ext), recursive=True)
    paths = sorted(p for p in paths if "screenshot" not in p)
    if not paths:
        sys.exit("make_photo_tree: no photos found; install plasma-workspace-wallpapers "
                 "and mate-backgrounds (scripts/setup.sh does)")
    photos = []
    for p in paths:
        im = Image.open(p)
        if im.width * im.height < 600 * 400:
            continue
        im.draft("RGB", (max_side, max_side))
        im = im.convert("RGB")
        im.thumbnail((max_side, max_side))
        photos.append(im)
    return photos


def crop(rng, photo, short_edge):
    aspect = rng.choice([4 / 3, 3 / 4, 1.0, 3 / 2, 16 / 9])
    w = int(min(photo.width, photo.height * aspect) * rng.uniform(0.5, 1.0))
    h = max(1, int(w / aspect))
    x = rng.randint(0, photo.width - w)
    y = rng.randint(0, photo.height - h)
    im = photo.crop((x, y, x + w, y + h))
    scale = short_edge / min(w, h)
    return im.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.BICUBIC)


def jpeg_bytes(im, quality, **kw):
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=quality, subsampling="4:2:0", **kw)
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-edge", type=int, default=300)
    ap.add_argument("--max-edge", type=int, default=500)
    ap.add_argument("--quirks", action="store_true")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    photos = load_sources(1600)
    wnids = ["n%08d" % (1440000 + 7919 * i) for i in range(args.classes)]
    for wnid in wnids:
        os.makedirs(os.path.join(args.out, wnid), exist_ok=True)

    def path(i):
        wnid = wnids[i % args.classes]
        return os.path.join(args.out, wnid, "%s_%d.JPEG" % (wnid, i))

    for i in range(args.images):
        im = crop(rng, rng.choice(photos), rng.randint(args.min_edge, args.max_edge))
        with open(path(i), "wb") as f:
            f.write(jpeg_bytes(im, rng.randint(75, 95)))

    if args.quirks:
        q = os.path.join(args.out, wnids[0])
        base = crop(rng, photos[0], 400)
        base.convert("CMYK").save(os.path.join(q, "quirk_cmyk.JPEG"), "JPEG", quality=90)
        base.save(os.path.join(q, "quirk_png.JPEG"), "PNG")
        base.convert("L").save(os.path.join(q, "quirk_gray.JPEG"), "JPEG", quality=90)
        base.save(os.path.join(q, "quirk_progressive.JPEG"), "JPEG", quality=90, progressive=True)
        exif = Image.Exif()
        exif[0x0112] = 6
        base.transpose(Image.ROTATE_90).save(os.path.join(q, "quirk_exif6.JPEG"), "JPEG",
                                            quality=90, exif=exif.tobytes())
        rgba = base.convert("RGBA")
        rgba.putalpha(128)
        rgba.save(os.path.join(q, "quirk_rgba.png"), "PNG")
        big = photos[1].resize((6000, 4000), Image.BILINEAR)
        big.save(os.path.join(q, "quirk_huge.JPEG"), "JPEG", quality=85)
        good = jpeg_bytes(base, 90)
        with open(os.path.join(q, "bad_truncated.JPEG"), "wb") as f:
            f.write(good[: len(good) // 2])
        open(os.path.join(q, "bad_empty.JPEG"), "wb").close()
        with open(os.path.join(q, "bad_garbage.JPEG"), "wb") as f:
            f.write(bytes(rng.randrange(256) for _ in range(5000)))
        with open(os.path.join(args.out, "README.txt"), "w") as f:
            f.write("not an image\n")
    print("make_photo_tree: %d images in %d classes under %s%s" %
          (args.images, args.classes, args.out, " (+ quirks)" if args.quirks else ""))


if __name__ == "__main__":
    main()
