#!/usr/bin/python3
"""What a user would run instead of resize_imagenet, timed on the same tree.

    resize_peers.py pillow|opencv|vips SRC DST [--max-size 256] [--procs 2]

pillow: Pillow with draft() (libjpeg DCT scaling) + antialiased bilinear
        resize + save at quality 90, in a process pool.
opencv: the classic resize script: cv2.imread + INTER_AREA + imwrite at
        quality 95, in a process pool.
vips:   vipsthumbnail on batches of 100 files, --procs batches at a time
        (landscape files get -s 100000xN, portrait Nx100000, so the shorter
        edge is N as for the others; batching is prepared before timing).
Prints one line: "<peer>: N images in S s: R images/s".
"""
import argparse
import os
import sys
import time
from multiprocessing import Pool

ARGS = None


def target(w, h, n):
    if min(w, h) <= n:
        return w, h
    if w <= h:
        return n, max(1, (h * n * 2 + w) // (w * 2))
    return max(1, (w * n * 2 + h) // (h * 2)), n


def pillow_one(rel):
    from PIL import Image
    src = os.path.join(ARGS.src, rel)
    dst = os.path.join(ARGS.dst, rel)
    im = Image.open(src)
    tw, th = target(im.width, im.height, ARGS.max_size)
    im.draft("RGB", (tw, th))
    im = im.convert("RGB")
    if im.size != (tw, th):
        im = im.resize((tw, th), Image.BILINEAR)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    im.save(dst, "JPEG", quality=90)


def opencv_one(rel):
    import cv2
    src = os.path.join(ARGS.src, rel)
    dst = os.path.join(ARGS.dst, rel)
    im = cv2.imread(src, cv2.IMREAD_COLOR)
    h, w = im.shape[:2]
    tw, th = target(w, h, ARGS.max_size)
    if (tw, th) != (w, h):
        im = cv2.resize(im, (tw, th), interpolation=cv2.INTER_AREA)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    cv2.imwrite(dst, im, [cv2.IMWRITE_JPEG_QUALITY, 95])


def run_vips_batch(batch):
    import subprocess
    size, outdir, paths = batch
    os.makedirs(outdir, exist_ok=True)
    subprocess.run(["vipsthumbnail", "-s", size, "-o", os.path.join(outdir, "%s.JPEG[Q=90]")]
                   + paths, check=True)


def vips_batches(args, files):
    from PIL import Image
    groups = {}
    for rel in files:
        w, h = Image.open(os.path.join(args.src, rel)).size
        size = ("100000x%d" % args.max_size) if w >= h else ("%dx100000" % args.max_size)
        outdir = os.path.join(args.dst, os.path.dirname(rel))
        groups.setdefault((size, outdir), []).append(os.path.join(args.src, rel))
    batches = []
    for (size, outdir), paths in sorted(groups.items()):
        for i in range(0, len(paths), 100):
            batches.append((size, outdir, paths[i:i + 100]))
    return batches


def init(args):
    global ARGS
    ARGS = args
    try:
        import cv2
        cv2.setNumThreads(1)
    except ImportError:
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("peer", choices=["pillow", "opencv", "vips"])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--max-size", type=int, default=256)
    ap.add_argument("--procs", type=int, default=os.cpu_count())
    args = ap.parse_args()
    files = []
    for root, _, names in os.walk(args.src):
        for n in names:
            if n.lower().endswith((".jpeg", ".jpg", ".png")):
                files.append(os.path.relpath(os.path.join(root, n), args.src))
    files.sort()
    if args.peer == "vips":
        work, fn, chunk = vips_batches(args, files), run_vips_batch, 1
    else:
        work, fn, chunk = files, (pillow_one if args.peer == "pillow" else opencv_one), 16
    t0 = time.perf_counter()
    with Pool(args.procs, initializer=init, initargs=(args,)) as pool:
        for _ in pool.imap_unordered(fn, work, chunksize=chunk):
            pass
    secs = time.perf_counter() - t0
    print("%s: %d images in %.2f s: %.1f images/s" % (args.peer, len(files), secs, len(files) / secs))


if __name__ == "__main__":
    sys.exit(main())
