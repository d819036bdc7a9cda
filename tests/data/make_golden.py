#!/usr/bin/python3
"""Regenerates the small golden inputs in tests/data/ (run from anywhere).

Every file shows the same 64x48 picture: four flat quadrants, red (top
left), green (top right), blue (bottom left) and white (bottom right), so a
test can check size, orientation and colour of whatever decoder output.
"""
import io
import os

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
QUADS = [(220, 30, 30), (30, 200, 40), (30, 40, 210), (245, 245, 245)]


def picture(w=64, h=48):
    im = Image.new("RGB", (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = QUADS[(y >= h // 2) * 2 + (x >= w // 2)]
    return im


def save(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def jpeg(im, **kw):
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=95, **kw)
    return buf.getvalue()


def png(im):
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def main():
    pic = picture()
    save("rgb.jpg", jpeg(pic, subsampling="4:2:0"))
    save("progressive.jpg", jpeg(pic, progressive=True))
    save("gray.jpg", jpeg(pic.convert("L")))
    # Pillow writes CMYK JPEGs with an Adobe APP14 marker and inverted samples,
    # as Photoshop does (the kind real ImageNet holds).
    save("cmyk_adobe.jpg", jpeg(pic.convert("CMYK")))
    save("png_named.JPEG", png(pic))
    rgba = pic.convert("RGBA")
    rgba.putalpha(0)  # fully transparent: composited over white
    px = rgba.load()
    for y in range(24):
        for x in range(32):
            px[x, y] = QUADS[0] + (255,)  # top-left quadrant opaque red
    save("rgba.png", png(rgba))
    # Big and busy enough that the cut falls inside the entropy-coded data.
    busy = Image.effect_noise((128, 96), 60).convert("RGB")
    good = jpeg(busy)
    save("truncated.jpg", good[: len(good) * 2 // 3])
    save("empty.jpg", b"")
    save("garbage.jpg", bytes((i * 73 + 41) % 256 for i in range(3000)))


if __name__ == "__main__":
    main()
