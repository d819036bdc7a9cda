#!/usr/bin/python3
"""What a user would pick instead of imagepack's loader, timed on the same
256-px images: RandomResizedCrop(224) + RandomHorizontalFlip + PILToTensor
through torch's DataLoader (uint8 out, like ours).

    loader_peers.py imagefolder TREE [--workers 2] [--batch 256] [--batches N]
    loader_peers.py lmdb DB.lmdb ...   (a folder2lmdb.py database: pickled (bytes, label))

Prints "<peer>: N images in S s: R images/s".
"""
import argparse
import io
import pickle
import time

import torch
import torch.utils.data
import torchvision.datasets
import torchvision.transforms as T
from PIL import Image


class LmdbPickleDataset(torch.utils.data.Dataset):
    """Efficient-PyTorch's LMDB Dataset: one txn.get per item, unpickle,
    decode with Pillow."""

    def __init__(self, path, transform):
        import lmdb
        env = lmdb.open(path, subdir=False, readonly=True, lock=False, readahead=False, meminit=False)
        with env.begin() as txn:
            self.length = pickle.loads(txn.get(b"__len__"))
        env.close()
        self.path, self.transform, self.env = path, transform, None

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        import lmdb
        if self.env is None:
            self.env = lmdb.open(self.path, subdir=False, readonly=True, lock=False, readahead=False, meminit=False)
        with self.env.begin() as txn:
            data, label = pickle.loads(txn.get(b"%d" % i))
        return self.transform(Image.open(io.BytesIO(data)).convert("RGB")), label


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("peer", choices=["imagefolder", "lmdb"])
    ap.add_argument("path")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--batches", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])
    ds = (torchvision.datasets.ImageFolder(args.path, tf) if args.peer == "imagefolder"
          else LmdbPickleDataset(args.path, tf))
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                                         persistent_workers=False)
    it = iter(loader)
    next(it)  # workers started, first batch: not timed
    n, t0 = 0, time.perf_counter()
    for b, (x, y) in enumerate(it):
        n += x.shape[0]
        if b + 1 >= args.batches:
            break
    secs = time.perf_counter() - t0
    print("%s: %d images in %.2f s: %.1f images/s" % (args.peer, n, secs, n / secs))


if __name__ == "__main__":
    main()
