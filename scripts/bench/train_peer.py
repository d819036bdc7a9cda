#!/usr/bin/python3
"""Python PyTorch (python3-torch 1.13) training speed for the side-by-side
with `train`: torchvision's resnet18, SGD momentum, cross-entropy, batches of
uint8 images normalised like ours, from memory (no data loading).

    train_peer.py [--arch resnet18] [--batch 32] [--size 224] [--threads 2] [--steps 12] [--classes 10]

Prints "python <arch>: N images in S s: R images/s" over the steps after the
first two (warm-up).
"""
import argparse
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="resnet18")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--classes", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = getattr(torchvision.models, args.arch)(num_classes=args.classes)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x8 = torch.randint(0, 256, (args.batch, 3, args.size, args.size), dtype=torch.uint8)
    y = torch.randint(0, args.classes, (args.batch,))
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255
    model.train()
    t0, n = None, 0
    for step in range(args.steps):
        if step == 2:
            t0 = time.perf_counter()
        x = (x8.float() - mean) / std
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= 2:
            n += args.batch
    secs = time.perf_counter() - t0
    print("python %s: %d images in %.2f s: %.1f images/s" % (args.arch, n, secs, n / secs))


if __name__ == "__main__":
    main()
