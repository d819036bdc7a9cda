#!/usr/bin/python3
"""resize_imagenet on images in every mode Pillow and ImageMagick write,
compared with Pillow's own decode + resize (the independent reference).

    formats_reference.py BINDIR WORKDIR

Each source is a crop of one of Debian's wallpaper photos (a synthetic
picture when none is installed), written in one mode. The tool resizes the
tree to a shorter edge of 96; every output is compared with the reference
at a quarter of its size (4x4 box means), where filter differences and
JPEG noise stay under 3 grey levels of mean absolute error and wrong
colours, orientation or alpha give 10-100. Prints one line per file and
'N passed, N failed'; exits 1 on any failure.

Reference rules, the same as docs/USAGE.md states for the tool: alpha and
transparency over white; EXIF/TIFF orientation applied; CMYK by the plain
formula (Pillow's); gray stays gray.
"""
import glob
import io
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
from PIL import Image, ImageOps

BOUND = 4.0  # mean absolute error at quarter size, grey levels
N = 96
CONVERT = "/usr/bin/convert"  # ImageMagick, for modes Pillow cannot write


def photo():
    paths = sorted(glob.glob("/usr/share/wallpapers/**/*.jpg", recursive=True) +
                   glob.glob("/usr/share/backgrounds/mate/**/*.jpg", recursive=True))
    if paths:
        im = Image.open(paths[len(paths) // 3])
        im.draft("RGB", (640, 640))
        im = im.convert("RGB")
        w, h = im.size
        return im.crop((w // 8, h // 8, w // 8 + min(w, h) * 4 // 5, h // 8 + min(w, h) * 3 // 5)).resize(
            (320, 240), Image.LANCZOS)
    y, x = np.mgrid[0:240, 0:320]
    a = np.stack([x * 255 // 319, y * 255 // 239, (x + y) * 255 // 558], -1).astype(np.uint8)
    a[40:120, 30:110] = (220, 30, 30)
    return Image.fromarray(a)


def magick(src, dst, *args):
    subprocess.run([CONVERT, src, *args, dst], check=True)


def exif_orientation(o):
    ex = Image.Exif()
    ex[0x0112] = o
    return ex.tobytes()


def bmp_bgrx(im, path):
    """32-bit BI_RGB, BITMAPINFOHEADER, fourth byte 0 (unused, not alpha)."""
    a = np.asarray(im.convert("RGB"))
    h, w = a.shape[:2]
    px = np.zeros((h, w, 4), np.uint8)
    px[..., 0], px[..., 1], px[..., 2] = a[..., 2], a[..., 1], a[..., 0]
    pix = px[::-1].tobytes()
    hdr = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 32, 0, len(pix), 2835, 2835, 0, 0)
    with open(path, "wb") as f:
        f.write(b"BM" + struct.pack("<IHHI", 54 + len(pix), 0, 0, 54) + hdr + pix)


def bmp_os2_v2(im, path):
    """OS/2 2.x bitmap (64-byte header), 8-bit palette."""
    p = im.quantize(64)
    pal = p.getpalette()[:64 * 3]
    idx = np.asarray(p)
    h, w = idx.shape
    stride = (w + 3) & ~3
    pix = b"".join(idx[y].tobytes() + b"\0" * (stride - w) for y in range(h - 1, -1, -1))
    palb = b"".join(bytes([pal[i * 3 + 2], pal[i * 3 + 1], pal[i * 3], 0]) for i in range(64))
    hdr = struct.pack("<IIIHHIIIIII", 64, w, h, 1, 8, 0, len(pix), 2835, 2835, 64, 0) + b"\0" * 24
    off = 14 + 64 + len(palb)
    with open(path, "wb") as f:
        f.write(b"BM" + struct.pack("<IHHI", off + len(pix), 0, 0, off) + hdr + palb + pix)


# Upright (X, Y) <- stored pixel, EXIF 2.3 tag 0x0112, as PIL transposes.
ORIENT = {2: [Image.FLIP_LEFT_RIGHT], 3: [Image.ROTATE_180], 4: [Image.FLIP_TOP_BOTTOM],
          5: [Image.TRANSPOSE], 6: [Image.ROTATE_270], 7: [Image.TRANSVERSE], 8: [Image.ROTATE_90]}


def over_white(im):
    im = im.convert("RGBA")
    bg = Image.new("RGBA", im.size, (255, 255, 255, 255))
    return Image.alpha_composite(bg, im)


def make_sources(root):
    """-> {relative path: (reference image, note)}; None as reference: must be skipped."""
    base = photo()
    gray = base.convert("L")
    alpha = Image.linear_gradient("L").resize(base.size).rotate(30)
    rgba = base.copy()
    rgba.putalpha(alpha)
    src = {}

    def put(rel, save, ref):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        save(path)
        src[rel] = ref

    # JPEG
    put("jpeg/rgb.jpg", lambda p: base.save(p, quality=92), base)
    put("jpeg/gray.jpg", lambda p: gray.save(p, quality=92), gray)
    put("jpeg/cmyk.jpg", lambda p: base.convert("CMYK").save(p, quality=95), base.convert("CMYK").convert("RGB"))
    put("jpeg/progressive444.jpg", lambda p: base.save(p, quality=90, progressive=True, subsampling=0), base)
    for o in (3, 6, 8):
        put("jpeg/exif%d.jpg" % o, lambda p, o=o: base.save(p, quality=92, exif=exif_orientation(o)), None)
    # PNG
    put("png/rgb.png", lambda p: base.save(p), base)
    put("png/gray.png", lambda p: gray.save(p), gray)
    put("png/bilevel.png", lambda p: gray.convert("1").save(p), gray.convert("1"))
    put("png/rgba.png", lambda p: rgba.save(p), over_white(rgba))
    put("png/gray_alpha.png", lambda p: Image.merge("LA", (gray, alpha)).save(p),
        over_white(Image.merge("LA", (gray, alpha))).convert("L"))
    pal = base.quantize(64)
    put("png/palette.png", lambda p: pal.save(p), pal.convert("RGB"))
    palt = pal.copy()
    palt.info["transparency"] = 0
    put("png/palette_transparent.png", lambda p: palt.save(p, transparency=0), over_white(palt))
    # 16-bit: Pillow's I;16 -> L conversion clips instead of scaling, so the
    # reference takes the high byte itself.
    g16 = (np.asarray(gray).astype(np.uint16) * 257)
    put("png/gray16.png", lambda p: Image.fromarray(g16, "I;16").save(p), gray)
    put("png/rgb48.png", lambda p: magick(os.path.join(root, "png/rgb.png"), "PNG48:" + p, "-depth", "16"), base)
    put("png/rgba64.png", lambda p: magick(os.path.join(root, "png/rgba.png"), "PNG64:" + p, "-depth", "16"),
        over_white(rgba))
    # GIF
    put("gif/palette.gif", lambda p: base.save(p), base.quantize(256).convert("RGB"))
    put("gif/transparent.gif", lambda p: palt.save(p, transparency=0), over_white(palt))
    # A frame of 200x150 at (60, 50) on a 320x240 screen: the rest is
    # transparent, so white. Pillow 9.4 paints it with the background
    # colour's index, so the reference pastes the frame on white itself.
    small = base.resize((200, 150))
    canvas = Image.new("RGB", base.size, (255, 255, 255))
    canvas.paste(small.quantize(256).convert("RGB"), (60, 50))
    put("gif/partial_frame.gif",
        lambda p: magick(os.path.join(root, "png/rgb.png"), p, "-resize", "200x150!", "-page", "320x240+60+50"),
        canvas)
    # TIFF. Pillow 9.4's exif_transpose leaves TIFFs as stored, so the
    # reference applies the orientation tag itself.
    for o, name in enumerate(["TopLeft", "TopRight", "BottomRight", "BottomLeft", "LeftTop", "RightTop",
                              "RightBottom", "LeftBottom"], start=1):
        ref = base
        for t in ORIENT.get(o, []):
            ref = ref.transpose(t)
        put("tiff/orient%d.tif" % o, lambda p, name=name: magick(os.path.join(root, "png/rgb.png"), p, "-orient", name),
            ref)
    put("tiff/cmyk.tif", lambda p: base.convert("CMYK").save(p), base.convert("CMYK").convert("RGB"))
    put("tiff/lab.tif", lambda p: magick(os.path.join(root, "png/rgb.png"), p, "-colorspace", "Lab"), base)
    put("tiff/bigtiff.tif", lambda p: subprocess.run(
        ["vips", "tiffsave", os.path.join(root, "png/rgb.png"), p, "--bigtiff"], check=True), base)
    put("tiff/rgba.tif", lambda p: rgba.save(p), over_white(rgba))
    fax = gray.point(lambda v: 255 if v > 110 else 0).convert("1")
    put("tiff/fax_rotated.tif", lambda p: magick(os.path.join(root, "png/bilevel_src.png"), p, "-compress", "Group4",
                                                 "-orient", "RightTop"), fax.transpose(Image.ROTATE_270))
    # BMP
    put("bmp/rgb24.bmp", lambda p: base.save(p), base)
    put("bmp/bgrx32.bmp", lambda p: bmp_bgrx(base, p), base)
    put("bmp/palette8.bmp", lambda p: pal.save(p), pal.convert("RGB"))
    put("bmp/os2_v1.bmp", lambda p: magick(os.path.join(root, "png/palette.png"), "BMP2:" + p), pal.convert("RGB"))
    put("bmp/os2_v2.bmp", lambda p: bmp_os2_v2(base, p), None)
    # WebP
    put("webp/lossy.webp", lambda p: base.save(p, quality=95), base)
    put("webp/lossless_rgba.webp", lambda p: rgba.save(p, lossless=True), over_white(rgba))
    return src


def quarter(a):
    h, w = a.shape[:2]
    qh, qw = max(1, h // 4), max(1, w // 4)
    a = a[:qh * 4, :qw * 4].astype(np.float64)
    return a.reshape(qh, 4, qw, 4, -1).mean(axis=(1, 3))


def main():
    bindir, work = sys.argv[1], sys.argv[2]
    root, out = os.path.join(work, "src"), os.path.join(work, "out")
    os.makedirs(os.path.join(root, "png"), exist_ok=True)
    base = photo()
    base.convert("L").point(lambda v: 255 if v > 110 else 0).convert("1").save(os.path.join(root, "png/bilevel_src.png"))
    sources = make_sources(root)
    os.remove(os.path.join(root, "png/bilevel_src.png"))
    errors = os.path.join(work, "errors.tsv")
    rc = subprocess.run([os.path.join(bindir, "resize_imagenet"), root, out, "--max-size", str(N), "-q",
                         "--errors", errors]).returncode
    passed = failed = 0

    def check(cond, msg):
        nonlocal passed, failed
        if cond:
            passed += 1
        else:
            failed += 1
            print("FAIL: " + msg)

    check(rc == 3, "exit code %d, expected 3 (one file refused)" % rc)
    skipped = dict(line.rstrip("\n").split("\t", 1) for line in open(errors) if "\t" in line)
    for rel, ref in sorted(sources.items()):
        dst = os.path.join(out, rel)
        if ref is None and rel.startswith("bmp/os2_v2"):
            check(rel in skipped and "OS/2" in skipped[rel] and not os.path.exists(dst),
                  "%s: expected a skip with a reason, got %r" % (rel, skipped.get(rel)))
            continue
        if not os.path.exists(dst):
            check(False, "%s: not written (%s)" % (rel, skipped.get(rel, "no reason")))
            continue
        if ref is None:  # EXIF JPEGs: Pillow applies EXIF orientation to JPEGs itself
            ref = ImageOps.exif_transpose(Image.open(os.path.join(root, rel))).convert("RGB")
        got = Image.open(dst)
        w, h = ref.size
        want_size = (N, round(h * N / w)) if w <= h else (round(w * N / h), N)
        check(got.size == want_size, "%s: size %s, expected %s" % (rel, got.size, want_size))
        mode = "L" if got.mode == "L" else "RGB"
        want = np.asarray(ref.convert(mode).resize(got.size, Image.BILINEAR))
        e = np.abs(quarter(np.asarray(got.convert(mode))) - quarter(want)).mean()
        print("%-28s %-4s -> %dx%d  quarter-size error %.2f" % (rel, Image.open(os.path.join(root, rel)).mode,
                                                             got.size[0], got.size[1], e))
        check(e < BOUND, "%s: error %.2f over %.1f" % (rel, e, BOUND))
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
