#!/usr/bin/python3
"""The plain-PyTorch peer of `train --task segmentation|restoration`: what a
user would write without imagepack, with the same network
(imagepack.train's dense_models.py), recipe and data as the C++ trainer, for the
side-by-side figures in docs/BENCHMARKS.md.

    dense_peer.py segmentation MANIFEST_TRAIN MANIFEST_TEST [options]   (make_fmnist_scenes.py output)
    dense_peer.py restoration TRAIN_DIR TEST_DIR [options]              (make_photo_pairs.py SPLIT dirs:
                                                                          blurry/ and sharp/)
    options: --epochs 8 --batch-size 32 --lr 0.05 --wd 1e-4 --size 96 --workers 2 --seed 0 --output DIR

A Dataset opens image and partner with Pillow; training: segmentation
RandomResizedCrop(size, scale 0.35-1) on both (bilinear image, NEAREST
mask) + the same horizontal flip; restoration a random size x size crop
at the stored scale + the same flips both ways; evaluation on the whole
image (resized to size) or the centre crop. DataLoader with `workers`
processes; SGD with momentum 0.9, cosine schedule, per-epoch evaluation
(mIoU and pixel accuracy, or PSNR of output and input against the target),
metrics.jsonl and wall time.
"""
import argparse
import importlib.util
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.transforms as T
import torchvision.transforms.functional as TF
from PIL import Image
from torchvision.transforms import InterpolationMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The C++ trainer's dense models in PyTorch, as imagepack.train has them,
# read from the source tree's file: torch alone, not the imagepack package.
dense_models = importlib.util.module_from_spec(importlib.util.spec_from_file_location(
    "dense_models", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib", "python", "imagepack",
                                 "train", "dense_models.py")))
dense_models.__spec__.loader.exec_module(dense_models)
from fields_peers import joint_resized_crop  # noqa: E402


class Pairs(torch.utils.data.Dataset):
    def __init__(self, items, seg, size, train, ignore=255):
        self.items, self.seg, self.size, self.train, self.ignore = items, seg, size, train, ignore
        self.crop = T.RandomResizedCrop(size, scale=(0.35, 1.0))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        image_path, partner_path = self.items[i]
        image = Image.open(image_path).convert("RGB")
        partner = Image.open(partner_path)
        partner = partner if self.seg else partner.convert("RGB")
        s = self.size
        if self.seg and self.train:
            image, partner = joint_resized_crop(self.crop, image, partner, s, True)
        elif self.seg:
            image = TF.center_crop(TF.resize(image, s, InterpolationMode.BILINEAR), s)
            partner = TF.center_crop(TF.resize(partner, s, InterpolationMode.NEAREST), s)
        elif self.train:
            top, left = random.randint(0, image.height - s), random.randint(0, image.width - s)
            image, partner = TF.crop(image, top, left, s, s), TF.crop(partner, top, left, s, s)
            if random.random() < 0.5:
                image, partner = TF.hflip(image), TF.hflip(partner)
            if random.random() < 0.5:
                image, partner = TF.vflip(image), TF.vflip(partner)
        else:
            image, partner = TF.center_crop(image, s), TF.center_crop(partner, s)
        x = TF.pil_to_tensor(image)
        y = torch.from_numpy(np.array(partner, np.int64)) if self.seg else TF.pil_to_tensor(partner)
        return x, y


def manifest_items(path):
    base = os.path.dirname(path)
    rows = [json.loads(line) for line in open(path) if line.strip()]
    return [(os.path.join(base, r["image"]), os.path.join(base, r["mask"])) for r in rows]


def tree_items(split_dir):
    names = sorted(os.listdir(os.path.join(split_dir, "blurry")))
    return [(os.path.join(split_dir, "blurry", n), os.path.join(split_dir, "sharp", n)) for n in names]


def pixel_stats(items, limit=1024):
    """Per-channel mean/std in [0, 1] of up to `limit` training images, as
    pack_lmdb records them for the C++ trainer's normalisation."""
    acc = np.zeros((3, 2))
    n = 0
    for path, _ in items[:limit]:
        a = np.asarray(Image.open(path).convert("RGB"), np.float64) / 255
        acc[:, 0] += a.reshape(-1, 3).sum(0)
        acc[:, 1] += (a.reshape(-1, 3) ** 2).sum(0)
        n += a.shape[0] * a.shape[1]
    mean = acc[:, 0] / n
    return mean, np.sqrt(np.maximum(acc[:, 1] / n - mean ** 2, 1e-12))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("task", choices=["segmentation", "restoration"])
    ap.add_argument("train")
    ap.add_argument("test")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--wd", type=float, default=1e-4)
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--output", default="")
    a = ap.parse_args()
    t_start = time.time()
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    torch.set_num_threads(os.cpu_count() or 1)
    seg = a.task == "segmentation"
    train_items = manifest_items(a.train) if seg else tree_items(a.train)
    test_items = manifest_items(a.test) if seg else tree_items(a.test)
    classes = 11
    if seg:
        classes_file = os.path.join(os.path.dirname(a.train), "mask_classes.txt")
        classes = sum(1 for line in open(classes_file) if line.strip())
        mean, std = pixel_stats(train_items)
        mean = torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1) * 255
        std = torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1).clamp_min(1e-3) * 255
        model = dense_models.fcn_small(3, classes)
    else:
        model = dense_models.unet_small(3, 3)
    loader = lambda items, train: torch.utils.data.DataLoader(  # noqa: E731
        Pairs(items, seg, a.size, train), batch_size=a.batch_size, shuffle=train, num_workers=a.workers,
        persistent_workers=a.workers > 0)
    train_dl, test_dl = loader(train_items, True), loader(test_items, False)
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=a.wd)
    steps = len(train_dl)
    prepare = (lambda x: x.float().sub_(mean).div_(std)) if seg else (lambda x: x.float().div_(127.5).sub_(1))
    metrics = None
    if a.output:
        os.makedirs(a.output, exist_ok=True)
        metrics = open(os.path.join(a.output, "metrics.jsonl"), "a")
    print("=> dense_peer %s, %d parameters, %d train / %d test, batch %d, %d workers" % (
        a.task, sum(p.numel() for p in model.parameters()), len(train_items), len(test_items), a.batch_size,
        a.workers))
    for epoch in range(a.epochs):
        model.train()
        t0 = time.time()
        for step, (x, y) in enumerate(train_dl):
            lr = a.lr * 0.5 * (1 + math.cos(math.pi * (epoch + step / steps) / a.epochs))
            for g in optimizer.param_groups:
                g["lr"] = lr
            x = prepare(x)
            out = model(x)
            loss = F.cross_entropy(out, y, ignore_index=255) if seg else F.l1_loss(out, prepare(y))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        rate = len(train_items) / (time.time() - t0)
        model.eval()
        conf = dense_models.Confusion(classes)
        sums = np.zeros(3)
        with torch.no_grad():
            for x, y in test_dl:
                x = prepare(x)
                out = model(x)
                if seg:
                    conf.add(out, y)
                else:
                    y = prepare(y)
                    sums += [dense_models.psnr_sum(out, y), dense_models.psnr_sum(x, y), len(x)]
        if seg:
            f = conf.figures()
            row = {"type": "eval", "epoch": epoch, "miou": f["miou"], "pixel_acc": f["pixel_acc"]}
            print(" * Epoch %d  mIoU %.3f  PixAcc %.3f  %.1f images/s" % (epoch, f["miou"], f["pixel_acc"], rate))
        else:
            row = {"type": "eval", "epoch": epoch, "psnr": sums[0] / sums[2], "psnr_input": sums[1] / sums[2]}
            row["psnr_gain"] = row["psnr"] - row["psnr_input"]
            print(" * Epoch %d  PSNR %.3f  Input %.3f  Gain %.3f  %.1f images/s" % (
                epoch, row["psnr"], row["psnr_input"], row["psnr_gain"], rate))
        if metrics:
            metrics.write(json.dumps(dict(row, images_per_s=rate)) + "\n")
            metrics.flush()
    print("dense_peer: %s after %d epochs in %.1f s wall" % (
        "test mIoU %.2f%%" % row["miou"] if seg else "test PSNR gain %+.2f dB" % row["psnr_gain"], a.epochs,
        time.time() - t_start))


if __name__ == "__main__":
    main()
