#!/usr/bin/python3
"""Samples with a second spatial field (a mask, or a paired image), timed
the way python_loader.py times images alone.

    fields_peers.py make TREE OUT            masks/ and targets/ beside a copy of TREE's paths
    fields_peers.py loader imagepack DB [--batch 256] [--size 224] [--batches 20] [--threads 0]
    fields_peers.py loader torch IMAGES [--masks DIR | --targets DIR] [--workers 2] ...

`make` writes, for every JPEG of TREE (the images, e.g. 256 px): a PNG label
map of 6 classes (the luma of a blurred copy, cut at fixed levels: regions
follow the picture's content, as real masks do) under OUT/masks, and a
Gaussian-blurred copy (JPEG q90) under OUT/targets, both at the same
relative path (extension .png / .jpg).

`loader torch` is the PyTorch segmentation pipeline a user would write: a
Dataset that opens the image and its partner with Pillow,
RandomResizedCrop.get_params once, torchvision.transforms.functional
resized_crop for both (bilinear for images, NEAREST for a mask), the same
horizontal flip, PILToTensor; a DataLoader with `workers` processes.

Each prints "<what>: N samples in S s: R samples/s, peak RSS M MiB" (peak
of the process plus its largest worker); the first batch is not timed.
"""
import argparse
import os
import random
import resource
import time

import numpy as np
from PIL import Image, ImageFilter


def peak_rss_mib():
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (own + children) / 1024.0


def make(tree, out):
    n = 0
    for root, _, files in os.walk(tree):
        for name in sorted(files):
            if not name.lower().endswith((".jpeg", ".jpg")):
                continue
            rel = os.path.relpath(os.path.join(root, name), tree)
            stem = os.path.splitext(rel)[0]
            img = Image.open(os.path.join(root, name)).convert("RGB")
            blurred = img.filter(ImageFilter.GaussianBlur(2.0))
            luma = np.asarray(blurred.convert("L"), np.uint8)
            mask = np.digitize(luma, [40, 80, 120, 160, 200]).astype(np.uint8)
            for sub, image, ext, kw in (("masks", Image.fromarray(mask), ".png", {}),
                                        ("targets", blurred, ".jpg", {"quality": 90})):
                path = os.path.join(out, sub, stem + ext)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                image.save(path, **kw)
            n += 1
    print("made %d masks and %d targets under %s" % (n, n, out))


def time_batches(batches, count, what):
    it = iter(batches)
    next(it)  # warm-up: workers started, first batch made
    t0 = time.perf_counter()
    samples = 0
    for _ in range(count):
        b = next(it)
        samples += len(b[0] if isinstance(b, (tuple, list)) else b["image"])
    dt = time.perf_counter() - t0
    print("%s: %d samples in %.2f s: %.1f samples/s, peak RSS %.0f MiB" % (what, samples, dt, samples / dt,
                                                                          peak_rss_mib()))


def endless_imagepack(path, batch, size, threads):
    import imagepack
    loader = imagepack.Loader(path, batch_size=batch, size=size, threads=threads, seed=1)
    epoch = 0
    while True:
        loader.set_epoch(epoch)
        yield from loader
        epoch += 1


def joint_resized_crop(crop, image, partner, size, partner_is_mask):
    """torchvision's RandomResizedCrop drawn once for both pictures
    (bilinear for the image, NEAREST for a mask), then the same horizontal
    flip: what a hand-written paired pipeline does."""
    import torchvision.transforms.functional as F
    from torchvision.transforms import InterpolationMode
    top, left, h, w = crop.get_params(image, crop.scale, crop.ratio)
    image = F.resized_crop(image, top, left, h, w, [size, size], InterpolationMode.BILINEAR)
    partner = F.resized_crop(partner, top, left, h, w, [size, size],
                             InterpolationMode.NEAREST if partner_is_mask else InterpolationMode.BILINEAR)
    if random.random() < 0.5:
        image, partner = F.hflip(image), F.hflip(partner)
    return image, partner


class PairedDataset:
    """Image + partner (mask or target) from two trees, one random crop and
    flip for both: the usual hand-written segmentation Dataset."""

    def __init__(self, images, partner, is_mask, size):
        import torchvision.transforms as T
        self.items = []
        for root, _, files in os.walk(images):
            for name in sorted(files):
                rel = os.path.relpath(os.path.join(root, name), images)
                stem = os.path.splitext(rel)[0]
                self.items.append((os.path.join(images, rel),
                                   os.path.join(partner, stem + (".png" if is_mask else ".jpg"))))
        self.is_mask = is_mask
        self.size = size
        self.crop = T.RandomResizedCrop(size)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        import torchvision.transforms.functional as F
        image_path, partner_path = self.items[i]
        image = Image.open(image_path).convert("RGB")
        partner = Image.open(partner_path)
        partner = partner.convert("L") if self.is_mask else partner.convert("RGB")
        image, partner = joint_resized_crop(self.crop, image, partner, self.size, self.is_mask)
        image = F.pil_to_tensor(image)
        partner = F.pil_to_tensor(partner)
        return image, partner[0] if self.is_mask else partner


def endless_torch(images, partner, is_mask, batch, size, workers):
    import torch
    ds = PairedDataset(images, partner, is_mask, size)
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                     persistent_workers=workers > 0, drop_last=True)
    while True:
        yield from dl


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("tree")
    m.add_argument("out")
    lo = sub.add_parser("loader")
    lo.add_argument("kind", choices=["imagepack", "torch"])
    lo.add_argument("path")
    lo.add_argument("--masks")
    lo.add_argument("--targets")
    lo.add_argument("--batch", type=int, default=256)
    lo.add_argument("--size", type=int, default=224)
    lo.add_argument("--batches", type=int, default=20)
    lo.add_argument("--threads", type=int, default=0)
    lo.add_argument("--workers", type=int, default=os.cpu_count())
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.tree, a.out)
    elif a.kind == "imagepack":
        time_batches(endless_imagepack(a.path, a.batch, a.size, a.threads), a.batches,
                     "imagepack.Loader %s" % os.path.basename(a.path))
    else:
        import torch
        torch.set_num_threads(1)
        partner, is_mask = (a.masks, True) if a.masks else (a.targets, False)
        time_batches(endless_torch(a.path, partner, is_mask, a.batch, a.size, a.workers), a.batches,
                     "DataLoader + Pillow + torchvision, %s, %d workers" % ("mask" if is_mask else "target",
                                                                           a.workers))


if __name__ == "__main__":
    main()
