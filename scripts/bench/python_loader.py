#!/usr/bin/python3
"""The Python package's loader timed the way bench_loader and
loader_peers.py time theirs, and a short training run with either input.

    python_loader.py loader imagepack DB [--batch 256] [--size 224] [--batches 60] [--threads 0]
    python_loader.py loader imagefolder TREE [--workers 2] ...   (DataLoader + ImageFolder)
    python_loader.py train imagepack DB [--arch mobilenet_v3_small] [--batch 64] [--steps 30]
    python_loader.py train imagefolder TREE [--workers 2] ...

Both print "<what>: N images in S s: R images/s, peak RSS M MiB" (the
process's peak plus its DataLoader workers' largest, where there are any).
Training: torchvision's model, SGD, uint8 batches normalised in the loop,
torch threads = cores; the first 3 steps are warm-up and not timed.
"""
import argparse
import resource
import time

import torch


def peak_rss_mib():
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (own + children) / 1024.0


def batches_imagepack(path, batch, size, threads):
    import imagepack
    loader = imagepack.Loader(path, batch_size=batch, size=size, threads=threads, seed=1)
    epoch = 0
    while True:
        loader.set_epoch(epoch)
        for images, labels in loader:
            yield images, labels
        epoch += 1


def batches_imagefolder(tree, batch, size, workers):
    import torchvision.datasets
    import torchvision.transforms as T
    tf = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.PILToTensor()])
    ds = torchvision.datasets.ImageFolder(tree, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                     persistent_workers=True, drop_last=True)
    while True:
        for images, labels in dl:
            yield images, labels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["loader", "train"])
    ap.add_argument("args", nargs="+")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batches", type=int, default=60)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--arch", default="mobilenet_v3_small")
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()
    pipeline, path = a.args[0], a.args[1]
    if a.mode == "loader":
        batch = a.batch or 256
        it = (batches_imagepack(path, batch, a.size, a.threads) if pipeline == "imagepack"
              else batches_imagefolder(path, batch, a.size, a.workers))
        next(it)  # warm-up: threads or workers started, first batch made
        t0, n = time.time(), 0
        for _ in range(a.batches):
            images, _ = next(it)
            n += len(images)
        secs = time.time() - t0
        print("%s: %d images in %.2f s: %.1f images/s, peak RSS %.0f MiB" % (
            "imagepack.Loader (Python)" if pipeline == "imagepack" else "DataLoader + ImageFolder",
            n, secs, n / secs, peak_rss_mib()))
        return
    import torchvision
    batch = a.batch or 64
    it = (batches_imagepack(path, batch, a.size, a.threads) if pipeline == "imagepack"
          else batches_imagefolder(path, batch, a.size, a.workers))
    torch.set_num_threads(torch.get_num_threads())  # every core, shared with the input
    model = getattr(torchvision.models, a.arch)(num_classes=1000)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1).mul(255)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1).mul(255)
    n, t0 = 0, None
    for step in range(a.steps + 3):
        if step == 3:
            t0 = time.time()
        images, labels = next(it)
        x = images.float().sub_(mean).div_(std)
        loss = torch.nn.functional.cross_entropy(model(x), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= 3:
            n += len(labels)
    secs = time.time() - t0
    print("train %s from %s: %d images in %.2f s: %.1f images/s, peak RSS %.0f MiB" % (
        a.arch, pipeline, n, secs, n / secs, peak_rss_mib()))


if __name__ == "__main__":
    main()
