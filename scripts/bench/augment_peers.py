#!/usr/bin/python3
"""One timing of torchvision's reference training transforms (bench_augment.sh runs it):

    augment_peers.py imagepack DB --policy P [--erase 0.25] [--batches N] [--size 224] [--threads 0]
                     [--dtype float32|float16|bfloat16|uint8] [--channels-last] [--torch-normalise]
    augment_peers.py dataloader TREE --policy P [--erase 0.25] [--workers 2] ...

POLICY: none, ta_wide, ra, imagenet (AutoAugment), augmix. Both make what
torchvision's ClassificationPresetTrain makes for --auto-augment P
--random-erase E: RandomResizedCrop(size), horizontal flip, the policy
(both bilinear: the reference's --interpolation default, which its
presets.py passes to each), float32 normalised with ImageNet's mean and
std, then RandomErasing(E). imagepack.Loader does it on its decode threads from a
pack of TREE; the reference does it with torchvision's own transforms on
PIL images in a DataLoader over ImageFolder(TREE). Prints "<what>: N
images in S s: R images/s" over N images after one warm-up batch.
"""
import argparse
import time

import torch

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def imagepack_batches(db, a):
    import imagepack
    if a.dtype == "uint8" or a.torch_normalise:
        kw = dict(batch_size=a.batch, size=a.size, threads=a.threads, seed=1)
    else:
        kw = dict(batch_size=a.batch, size=a.size, threads=a.threads, seed=1, dtype=a.dtype, mean="imagenet",
                  std="imagenet")
    if a.channels_last:
        kw["memory_format"] = "channels_last"
    if a.policy != "none":
        kw["auto_augment"] = a.policy
    if a.erase > 0:
        kw["random_erase"] = a.erase
    loader = imagepack.Loader(db, **kw)
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    while True:
        for images, labels in loader:  # each pass a new epoch (no set_epoch needed)
            if a.torch_normalise:  # what a uint8 loader's user does on the training thread
                images = images.float().div_(255).sub_(mean).div_(std)
            yield images, labels


def dataloader_batches(tree, a):
    import torchvision.datasets
    import torchvision.transforms as T
    # As the reference's presets.py builds them: its --interpolation (bilinear)
    # goes to the crop and to every policy (whose own default is nearest).
    bilinear = T.InterpolationMode.BILINEAR
    policy = {"none": [], "ta_wide": [T.TrivialAugmentWide(interpolation=bilinear)],
              "ra": [T.RandAugment(magnitude=9, interpolation=bilinear)],
              "imagenet": [T.AutoAugment(T.AutoAugmentPolicy.IMAGENET, interpolation=bilinear)],
              "augmix": [T.AugMix(severity=3, interpolation=bilinear)]}[a.policy]
    tf = T.Compose([T.RandomResizedCrop(a.size, interpolation=bilinear), T.RandomHorizontalFlip(), *policy,
                    T.PILToTensor(),
                    T.ConvertImageDtype(torch.float), T.Normalize(MEAN, STD)] +
                   ([T.RandomErasing(p=a.erase)] if a.erase > 0 else []))
    ds = torchvision.datasets.ImageFolder(tree, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                                     persistent_workers=True, drop_last=True)
    while True:
        for images, labels in dl:
            yield images, labels


def main():
    p = argparse.ArgumentParser()
    p.add_argument("pipeline", choices=["imagepack", "dataloader"])
    p.add_argument("path")
    p.add_argument("--policy", default="none", choices=["none", "ta_wide", "ra", "imagenet", "augmix"])
    p.add_argument("--erase", type=float, default=0.0)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--batches", type=int, default=15)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16", "uint8"],
                   help="imagepack's output (ImageNet-normalised unless uint8)")
    p.add_argument("--channels-last", action="store_true", help="imagepack: memory_format=channels_last")
    p.add_argument("--torch-normalise", action="store_true",
                   help="imagepack: uint8 batches normalised by torch on this thread (float32)")
    a = p.parse_args()
    torch.set_num_threads(1)
    it = imagepack_batches(a.path, a) if a.pipeline == "imagepack" else dataloader_batches(a.path, a)
    images, _ = next(it)  # warm-up: threads or workers running
    want = torch.float32 if a.pipeline == "dataloader" or a.torch_normalise else getattr(torch, a.dtype)
    assert images.dtype == want and tuple(images.shape[1:]) == (3, a.size, a.size), (images.dtype, images.shape)
    t0, n = time.time(), 0
    for _ in range(a.batches):
        images, _ = next(it)
        n += len(images)
    secs = time.time() - t0
    print("%s: %d images in %.2f s: %.1f images/s" % (a.pipeline, n, secs, n / secs))


if __name__ == "__main__":
    main()
