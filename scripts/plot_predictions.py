#!/usr/bin/python3
"""Draws a few validation samples side by side: input, the model's output,
the ground truth; label maps in colour. Reads what `train
--save-predictions N` writes.

    plot_predictions.py RUN_DIR OUT.png [--rows 8] [--scale 3]

Segmentation (outputs are label maps): masks are coloured with a fixed
palette (class 0 black), the ignore value white. Restoration (outputs are
images): input, output, target, and the output's and the input's PSNR
against the target under each row's picture name.
"""
import argparse
import os

import numpy as np
from PIL import Image, ImageDraw

PALETTE = np.array([[0, 0, 0], [230, 25, 75], [60, 180, 75], [255, 225, 25], [0, 130, 200], [245, 130, 48],
                    [145, 30, 180], [70, 240, 240], [240, 50, 230], [210, 245, 60], [250, 190, 212],
                    [0, 128, 128], [220, 190, 255], [170, 110, 40], [255, 250, 200], [128, 0, 0],
                    [170, 255, 195], [128, 128, 0], [255, 215, 180], [0, 0, 128], [128, 128, 128]], np.uint8)


def colour(mask):
    out = PALETTE[mask % len(PALETTE)]
    out[mask == 255] = 255
    return out


def rgb(chw):
    hwc = np.transpose(chw, (1, 2, 0))
    return np.repeat(hwc, 3, 2) if hwc.shape[2] == 1 else hwc


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * np.log10(255.0 ** 2 / max(mse, 1e-10))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run")
    ap.add_argument("out")
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--scale", type=int, default=3)
    a = ap.parse_args()
    x, y, t = (np.load(os.path.join(a.run, "predictions_%s.npy" % k)) for k in ("input", "output", "target"))
    n = min(a.rows, len(x))
    dense_labels = y.ndim == 3
    tiles, notes = [], []
    for i in range(n):
        if dense_labels:
            row = [rgb(x[i]), colour(y[i]), colour(t[i])]
            notes.append("")
        else:
            row = [rgb(x[i]), rgb(y[i]), rgb(t[i])]
            notes.append("output %.2f dB, input %.2f dB" % (psnr(y[i], t[i]), psnr(x[i], t[i])))
        tiles.append(np.concatenate(row, 1))
    grid = Image.fromarray(np.concatenate(tiles, 0))
    grid = grid.resize((grid.width * a.scale, grid.height * a.scale), Image.NEAREST)
    header = 18
    canvas = Image.new("RGB", (grid.width, grid.height + header), "white")
    canvas.paste(grid, (0, header))
    draw = ImageDraw.Draw(canvas)
    third = grid.width // 3
    for k, name in enumerate(("input", "prediction", "ground truth")):
        draw.text((k * third + 4, 3), name, fill="black")
    row_h = grid.height // n
    for i, note in enumerate(notes):
        if note:
            draw.text((third + 4, header + i * row_h + 2), note, fill="yellow")
    canvas.save(a.out)
    print("plot_predictions: %d samples -> %s" % (n, a.out))


if __name__ == "__main__":
    main()
